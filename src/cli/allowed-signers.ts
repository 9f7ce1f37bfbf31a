import type { Command } from 'commander';
import { allowedSigners, revocationList, TrustHistoryRecorder, type TrustEpoch } from '../audit/allowed-signers.js';
import { emptyState, type LedgerState } from '../authority/state.js';
import { CooError } from '../errors.js';
import { Ledger } from '../ledger/ledger.js';
import { jsonOption, ledgerOption, required, writeOutput } from './common.js';
import { inertJson } from '../util/invisible.js';

/** One signer of the allowed-signers file, for --json: the actor, its key and the lifetime git is given. */
interface SignerEntry {
  readonly actor: string;
  readonly public_key: string;
  readonly valid_after: string | null;
  readonly valid_before: string | null;
}

/** The file's signer lines, read back into entries (the comment lines are for people). */
function signerEntries(text: string): SignerEntry[] {
  return text
    .split('\n')
    .filter((line) => line !== '' && !line.startsWith('#'))
    .map((line) => {
      const [actor, options, ...key] = line.split(' ');
      const option = (name: string): string | null => new RegExp(`${name}="([^"]*)"`).exec(options ?? '')?.[1] ?? null;
      return { actor: actor!, public_key: key.join(' '), valid_after: option('valid-after'), valid_before: option('valid-before') };
    });
}

/** The lifetimes need the whole chain: a replay from genesis, recording each trust change. */
export async function signerHistory(ledger: Ledger): Promise<{ state: LedgerState; history: readonly TrustEpoch[] }> {
  const recorder = new TrustHistoryRecorder();
  const head = ledger.head();
  const commits = head === null ? [] : await ledger.rangeToReplay(head, null, 0);
  if (commits === null) throw new CooError('INTERNAL', `cannot walk the history of ${head}`);
  const { state } = await ledger.replay({ state: emptyState(), tree: null }, commits, { onCommit: (facts, verdict, next) => recorder.record(facts, verdict, next) });
  return { state, history: recorder.history() };
}

export function allowedSignersVerb(program: Command): void {
  program
    .command('allowed-signers')
    .description('print the allowed-signers file for git verify-commit / git log --show-signature / ssh-keygen -Y verify, with each key\'s lifetime from the trust chain')
    .addOption(ledgerOption())
    .option('--revocations <file>', "also write the revoked keys, one per line, for git's gpg.ssh.revocationFile")
    .addOption(jsonOption())
    .action(async (opts: { ledger?: string; revocations?: string; json?: boolean }) => {
      const ledger = Ledger.open(required(opts.ledger, '--ledger', 'the ledger path or $COO_LEDGER'));
      try {
        const { state, history } = await signerHistory(ledger);
        if (opts.revocations !== undefined) {
          writeOutput(opts.revocations, revocationList(history), '--revocations', 'the revocation list');
        }
        const text = allowedSigners(state, history);
        if (opts.json === true) process.stdout.write(`${inertJson({ allowed_signers: text, signers: signerEntries(text), revocations: opts.revocations ?? null, revoked: revocationList(history).split('\n').filter((line) => line !== '') }, 2)}\n`);
        else process.stdout.write(text);
      } finally {
        ledger.close();
      }
    });
}
