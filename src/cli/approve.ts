import type { Command } from 'commander';
import { approve } from '../dispatch/approve.js';
import { ceoKeyOption, durationFlag, emit, jsonOption, ledgerOption, loadPrivateKey, now, required } from './common.js';
import { remoteJson, remoteOption, remoteText, writeLedger } from './remote-option.js';

export function approveVerb(program: Command): void {
  program
    .command('approve')
    .description("the CEO's signed approval of governed work: a new dispatch the policy gives to the CEO (--request, the hash `coo dispatch` printed), or the retry of a dispatch that ended without success (MESSAGE_ID)")
    .argument('[message-id]', 'a dispatch whose last attempt failed, timed out or was blocked: approve its next attempt')
    .addOption(ledgerOption())
    .addOption(ceoKeyOption('the CEO private key (a trust-root authority)'))
    .option('--request <sha256>', 'approve a new dispatch by its request hash')
    .option('--reason <text>', 'why, for the record')
    .option('--ttl <duration>', 'how long the approval may wait to be used (default 1d, at most the policy time-to-live)')
    .addOption(remoteOption())
    .addOption(jsonOption())
    .action(async (messageId: string | undefined, opts: { ledger?: string; ceoKey?: string; request?: string; reason?: string; ttl?: string; json?: boolean; remote?: string }) => {
      const reason = required(opts.reason, '--reason', 'why the work is approved, for the record');
      const key = loadPrivateKey(required(opts.ceoKey, '--ceo-key', 'the CEO private key or $COO_CEO_KEY'));
      const ttl = durationFlag(opts.ttl, '--ttl');
      const { result, remote } = await writeLedger(required(opts.ledger, '--ledger', 'the ledger path or $COO_LEDGER'), opts.remote, (ledger) =>
        approve({
          ledger,
          key,
          now: now(),
          reason,
          ...(messageId === undefined ? {} : { messageId }),
          ...(opts.request === undefined ? {} : { requestHash: opts.request }),
          ...(ttl === undefined ? {} : { ttlSeconds: ttl }),
        }),
      );
      const what = result.approval.approves === 'retry' ? `attempt ${result.approval.attempt_number} of ${result.approval.message_id}` : `dispatch request ${result.approval.request_hash}`;
      emit(opts.json, { approval_id: result.approval.approval_id, path: result.path, commit: result.commit, approval: result.approval, ...remoteJson(remote) }, () => `${result.approval.approval_id} approves ${what} until ${result.approval.expires_at}${remoteText(remote)}`);
    });
}
