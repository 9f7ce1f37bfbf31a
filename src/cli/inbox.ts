import type { Command } from 'commander';
import { acknowledge } from '../inbox/ack.js';
import { readInbox, type InboxItem } from '../inbox/inbox.js';
import { Ledger } from '../ledger/ledger.js';
import { emit, emitMessage, jsonOption, keyOption, ledgerOption, loadPrivateKey, now, required } from './common.js';
import { remoteJson, remoteOption, remoteText, writeLedger } from './remote-option.js';
import { printable, revokedLine } from './show.js';

/** The COO's side of CEO -> COO: `coo inbox` lists what reached it and is not acknowledged; `coo ack` acknowledges one. */
export function inboxVerb(program: Command): void {
  program
    .command('inbox')
    .description("what reached the active COO and it has not acknowledged, oldest first: the CEO's commands and rejections, execution agents' blockers and receipt notices, and answers to its consults with their proposals (until acknowledged or adopted). A command shows until when the COO may take it up (acknowledge it, or send work with it as --parent); one never taken up leaves the inbox at that time, lapsed: the CEO sends it again")
    .addOption(ledgerOption())
    .addOption(jsonOption())
    .action(async (opts: { ledger?: string; json?: boolean }) => {
      const ledger = Ledger.open(required(opts.ledger, '--ledger', 'the ledger path or $COO_LEDGER'));
      try {
        const items = await readInbox(ledger, now());
        emit(opts.json, { items }, () => (items.length === 0 ? 'the inbox is empty' : items.map(itemLine).join('\n')));
      } finally {
        ledger.close();
      }
    });
}

function itemLine(item: InboxItem): string {
  const head = `${item.message_id} ${item.created_at} ${item.kind} from ${item.from}${item.revoked_signer === undefined ? '' : ` (${revokedLine(item.revoked_signer)})`}`;
  switch (item.kind) {
    case 'command':
      return `${head} (take up by ${item.expires_at ?? ''}${item.budget_usd == null ? '' : `; budget $${item.budget_usd}`}): ${printable(item.ceo_text ?? '')}`;
    case 'rejection':
      return `${head}: rejects ${item.rejects?.message_id === null ? `request ${item.rejects.request_hash ?? ''}` : `the next attempt of ${item.rejects?.message_id ?? ''}`}; reason: ${printable(item.ceo_text ?? '')}`;
    case 'blocker':
      return `${head}: ${item.blocker?.code ?? ''}${item.blocker?.about_message_id == null ? '' : ` about ${item.blocker.about_message_id}`} (the agent's words: ${printable(item.blocker?.detail ?? '')})`;
    case 'receipt_notice':
      return `${head}: receipt ${item.receipt_ref?.path ?? ''}`;
    default:
      return `${head}: answered in attempt ${item.answer?.attempt ?? ''}, ${item.answer?.proposals ?? 0} proposal(s) (coo show ${item.message_id}; coo adopt)`;
  }
}

export function ackVerb(program: Command): void {
  program
    .command('ack')
    .description('the COO acknowledges an item of its inbox: a signed entry to the CEO naming it, once per message; it leaves the inbox')
    .argument('<message-id>', 'the inbox item (coo inbox lists them)')
    .addOption(ledgerOption())
    .addOption(keyOption('the COO private key; default $COO_KEY'))
    .option('--note <text>', 'what the COO makes of it, for the CEO')
    .addOption(remoteOption())
    .addOption(jsonOption())
    .action(async (messageId: string, opts: { ledger?: string; key?: string; note?: string; json?: boolean; remote?: string }) => {
      const key = loadPrivateKey(required(opts.key, '--key', 'the COO private key or $COO_KEY'));
      const { result, remote } = await writeLedger(required(opts.ledger, '--ledger', 'the ledger path or $COO_LEDGER'), opts.remote, (ledger) =>
        acknowledge({ ledger, key, now: now(), messageId, ...(opts.note === undefined ? {} : { note: opts.note }) }),
      );
      emitMessage('ack', opts.json, { message_id: result.messageId, existing: result.existing, commit: result.commit, envelope: result.envelope, ...remoteJson(remote) }, ` acknowledges ${messageId}${remoteText(remote)}`);
    });
}
