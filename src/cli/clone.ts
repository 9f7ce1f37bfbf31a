import type { Command } from 'commander';
import { CooError } from '../errors.js';
import { cloneLedger } from '../remote/clone.js';
import { displayUrl } from '../util/display-url.js';
import { emit, GENESIS_HELP, genesisFlag, jsonOption, MAX_FETCH_HELP, maxFetchFlag, now, pinnedKeyId, required, timerSeconds } from './common.js';
import { writeErr } from './terminal.js';

export function cloneVerb(program: Command): void {
  program
    .command('clone')
    .description("make a local working ledger of a remote one; its whole history must verify from the trust root you pin, or nothing is cloned")
    .argument('<url>', 'the remote ledger (ssh://, https://, or a path)')
    .argument('<dir>', 'where the local ledger goes (a new folder)')
    .option('--trust-root <pub-or-fingerprint>', "the CEO public key file, or its SHA256:... fingerprint (coo init prints it), that the ledger's first trust root must name")
    .option('--genesis <commit>', GENESIS_HELP)
    .option('--timeout <seconds>', 'give up when git has not finished cloning in this long (a remote that accepts the connection and never answers); default 120')
    .option('--max-fetch <MiB>', MAX_FETCH_HELP)
    .addOption(jsonOption())
    .action(async (url: string, dir: string, opts: { trustRoot?: string; genesis?: string; timeout?: string; maxFetch?: string; json?: boolean }) => {
      const trustRoot = pinnedKeyId(required(opts.trustRoot, '--trust-root', 'the CEO key you trust, as a .pub file or its SHA256:... fingerprint'));
      if (url.startsWith('-')) throw new CooError('USAGE', `${url} is not a remote`);
      const genesis = genesisFlag(opts.genesis);
      const seconds = timerSeconds('--timeout', opts.timeout);
      const maxFetchBytes = maxFetchFlag(opts.maxFetch);
      const result = await cloneLedger({ url, gitdir: dir, trustRoot, ...(genesis === undefined ? {} : { genesis }), now: now(), ...(seconds === undefined ? {} : { timeoutMs: seconds * 1000, limitName: '--timeout' }), ...(maxFetchBytes === undefined ? {} : { maxFetchBytes }) });
      for (const note of result.notes) writeErr(`coo clone: note: ${note.code}: ${note.message}\n`);
      if (result.trustRootNote !== null) writeErr(`coo clone: note: ${result.trustRootNote}\n`);
      emit(opts.json, { ok: true, url: displayUrl(url), ledger: result.gitdir, genesis: result.genesis, genesis_pinned: genesis !== undefined, head: result.head, seq: result.seq, commits: result.commits, trust_root: trustRoot.keyId, trust_root_note: result.trustRootNote, notes: result.notes }, () =>
        `cloned ${displayUrl(url)} into ${result.gitdir}: ${result.commits} commits verified from the trust root ${trustRoot.keyId}, head ${result.head ?? '(none)'} at Ledger-Seq ${result.seq}; genesis ${result.genesis ?? '(none)'}${genesis === undefined ? ' (not pinned: compare with the ledger you expect, or pass --genesis)' : ' (pinned)'}`,
      );
    });
}
