import * as fs from 'node:fs';
import type { Command } from 'commander';
import { allowedSigners, revocationList, TrustHistoryRecorder, type TrustEpoch } from '../audit/allowed-signers.js';
import { emptyState, type LedgerState } from '../authority/state.js';
import { CooError } from '../errors.js';
import { Ledger } from '../ledger/ledger.js';
import { ledgerOption, required } from './common.js';

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
    .action(async (opts: { ledger?: string; revocations?: string }) => {
      const ledger = Ledger.open(required(opts.ledger, '--ledger', 'the ledger path or $COO_LEDGER'));
      try {
        const { state, history } = await signerHistory(ledger);
        if (opts.revocations !== undefined) {
          const temp = `${opts.revocations}.tmp`;
          try {
            fs.writeFileSync(temp, revocationList(history));
            fs.renameSync(temp, opts.revocations);
          } catch (error) {
            fs.rmSync(temp, { force: true });
            throw new CooError('IO_ERROR', `cannot write ${opts.revocations}: ${error instanceof Error ? error.message : String(error)}`);
          }
        }
        process.stdout.write(allowedSigners(state, history));
      } finally {
        ledger.close();
      }
    });
}
