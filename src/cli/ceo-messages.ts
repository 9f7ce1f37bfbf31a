import type { Command } from 'commander';
import { CooError } from '../errors.js';
import { rejectRequest, sendCommand } from '../inbox/ceo-messages.js';
import { readTaskFile } from './dispatch.js';
import { ceoKeyOption, durationFlag, emitMessage, jsonOption, ledgerOption, loadPrivateKey, now, positiveNumber, required, idempotencyKeyFlag } from './common.js';
import { remoteJson, remoteOption, remoteText, writeLedger } from './remote-option.js';

/** CEO -> COO: `coo command` and `coo reject`, signed with the CEO's key; both wait in the COO's inbox until it acknowledges them. */
export function commandVerb(program: Command): void {
  program
    .command('command')
    .description("the CEO's signed command to the active COO: its text and, optionally, what the work it asks for may cost; it waits in the COO's inbox (coo inbox) until the COO acknowledges it (coo ack)")
    .addOption(ledgerOption())
    .addOption(ceoKeyOption('the CEO private key (a trust-root authority)'))
    .option('--text <text>', 'what the COO is to do')
    .option('--text-file <file>', 'read the text from a regular file, or - for standard input')
    .option('--budget <usd>', 'what the work this command asks for may cost, in USD (at most the policy cap for a correlation)')
    .option('--ttl <duration>', 'how long the COO has to take it up, by an ack or work with it as --parent; untaken by then, the command lapses (default 1d, at most the policy time-to-live)')
    .option('--idempotency-key <key>', 'the same key with the same command returns the message already there')
    .addOption(remoteOption())
    .addOption(jsonOption())
    .action(async (opts: { ledger?: string; ceoKey?: string; text?: string; textFile?: string; budget?: string; ttl?: string; idempotencyKey?: string; json?: boolean; remote?: string }) => {
      if ((opts.text === undefined) === (opts.textFile === undefined)) throw new CooError('USAGE', 'give the command as --text or --text-file, one of them');
      const text = opts.text ?? readTaskFile(opts.textFile!, 'text file');
      const key = loadPrivateKey(required(opts.ceoKey, '--ceo-key', 'the CEO private key or $COO_CEO_KEY'));
      const idempotency = idempotencyKeyFlag(opts.idempotencyKey);
      const budget = opts.budget === undefined ? undefined : positiveNumber(opts.budget, '--budget');
      const ttl = durationFlag(opts.ttl, '--ttl');
      const { result, remote } = await writeLedger(required(opts.ledger, '--ledger', 'the ledger path or $COO_LEDGER'), opts.remote, async (ledger) =>
        sendCommand({ ledger, key, now: now(), text, ...(budget === undefined ? {} : { budgetUsd: budget }), ...(ttl === undefined ? {} : { ttlSeconds: ttl }), ...idempotency }),
      );
      emitMessage('command', opts.json, { message_id: result.messageId, existing: result.existing, commit: result.commit, envelope: result.envelope, ...remoteJson(remote) }, `${result.existing ? ' (already sent with this idempotency key)' : ` to ${result.envelope.target_actor}`}${remoteText(remote)}`);
    });
}

export function rejectVerb(program: Command): void {
  program
    .command('reject')
    .description("the CEO's signed refusal, with the reason, of a request that waits for its approval: a new dispatch or adoption (--request, the hash it was refused with) or the next attempt of a dispatch that ended without success (MESSAGE_ID); the COO reads it in its inbox. A rejection is final: no approval of what it names is accepted afterwards (APPROVAL_REJECTED). A request waiting for approval is never written to the ledger, so --request takes any well-formed hash, even one the ledger has never seen: a standing refusal of that exact request")
    .argument('[message-id]', 'a dispatch whose last attempt ended without success: reject its next attempt')
    .addOption(ledgerOption())
    .addOption(ceoKeyOption('the CEO private key (a trust-root authority)'))
    .option('--request <sha256>', 'reject a new dispatch or adoption by its request hash (the one `coo dispatch` or `coo adopt` was refused with); not checked against the ledger, which holds no pending request')
    .option('--reason <text>', 'why, for the COO and the record')
    .addOption(remoteOption())
    .addOption(jsonOption())
    .action(async (messageId: string | undefined, opts: { ledger?: string; ceoKey?: string; request?: string; reason?: string; json?: boolean; remote?: string }) => {
      const reason = required(opts.reason, '--reason', 'why the request is rejected');
      const key = loadPrivateKey(required(opts.ceoKey, '--ceo-key', 'the CEO private key or $COO_CEO_KEY'));
      const { result, remote } = await writeLedger(required(opts.ledger, '--ledger', 'the ledger path or $COO_LEDGER'), opts.remote, (ledger) =>
        rejectRequest({ ledger, key, now: now(), reason, ...(messageId === undefined ? {} : { messageId }), ...(opts.request === undefined ? {} : { requestHash: opts.request }) }),
      );
      emitMessage('reject', opts.json, { message_id: result.messageId, existing: result.existing, commit: result.commit, envelope: result.envelope, ...remoteJson(remote) }, ` rejects ${messageId === undefined ? `request ${opts.request ?? ''}` : `the next attempt of ${messageId}`}${remoteText(remote)}`);
    });
}
