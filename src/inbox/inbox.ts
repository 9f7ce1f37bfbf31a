import { isForCoo } from '../authority/rules/intents/ack.js';
import { commandLapsed } from '../authority/rules/intents/ceo-command.js';
import { signerOf, type SignerView } from '../audit/message-view.js';
import type { LedgerState, MessageRecord } from '../authority/state.js';
import { CooError } from '../errors.js';
import { readMessage } from '../lane/envelope.js';
import type { Ledger } from '../ledger/ledger.js';

/**
 * The COO's inbox: what reached the active COO and it has not acknowledged (ack.ts), oldest first.
 * A CEO's command or rejection, an execution agent's blocker or receipt notice, and the answer to
 * a consult the COO asked (with its proposals) until the COO acknowledges it or adopts one of them.
 * A command the COO never took up lapses at its expires_at (rules/intents/ceo-command.ts): by the
 * reader's clock, it leaves the inbox then, as nothing the COO may still acknowledge or work under.
 */

export type InboxKind = 'command' | 'rejection' | 'blocker' | 'receipt_notice' | 'answer';

export interface InboxItem {
  readonly message_id: string;
  readonly kind: InboxKind;
  readonly from: string;
  readonly created_at: string;
  readonly correlation_id: string;
  /** The CEO's own words (a command's text, a rejection's reason); null for what another actor says. */
  readonly ceo_text: string | null;
  /** Command: what the CEO allows its work to cost. */
  readonly budget_usd?: number | null;
  /** Command: until when the COO may take it up (acknowledge it, or send work under it); after that, untaken, it lapses. */
  readonly expires_at?: string;
  /** Rejection: what is rejected. */
  readonly rejects?: { readonly request_hash: string | null; readonly message_id: string | null };
  /** Blocker: its code and what the agent says of it (the agent's words: data, never an instruction). */
  readonly blocker?: { readonly code: string; readonly detail: string; readonly about_message_id: string | null };
  /** Receipt notice: the receipt it tells of. */
  readonly receipt_ref?: { readonly path: string; readonly sha256: string };
  /** Answer: the consult's answering attempt and how many proposals it stored (coo adopt). */
  readonly answer?: { readonly attempt: number; readonly proposals: number };
  /** The key that signed the item (its envelope, or an answer's receipt) when a registry revoked it since: what it signed may be a thief's (coo show says so of each). */
  readonly revoked_signer?: SignerView;
}

const KINDS: Readonly<Record<string, InboxKind>> = { ceo_command: 'command', ceo_reject: 'rejection', blocker: 'blocker', receipt_notice: 'receipt_notice', aa_consult: 'answer' };

/** The records of the inbox, oldest first; with `now`, the reader's clock, without the commands that lapsed untaken by then. Pure. */
export function inboxRecords(state: LedgerState, now?: Date): MessageRecord[] {
  const registry = state.registry?.doc;
  if (registry === undefined) return [];
  const adoptedFrom = new Set([...state.messages.values()].flatMap((record) => (record.adopted === undefined ? [] : [record.adopted])));
  return [...state.messages.values()].filter((record) => isForCoo(registry, record) && record.ackedBy === undefined && !adoptedFrom.has(record.id) && !(now !== undefined && commandLapsed(record, now))).sort((a, b) => a.seq - b.seq);
}

/** The inbox with what each item says, read from the ledger; `now` leaves out the commands that lapsed untaken (inboxRecords). */
export async function readInbox(ledger: Ledger, now?: Date): Promise<InboxItem[]> {
  const state = await ledger.state();
  const items: InboxItem[] = [];
  for (const record of inboxRecords(state, now)) {
    const message = await readMessage(ledger, record);
    const revoked = [record.keyId, record.attempts[record.attempts.length - 1]?.receipt?.keyId].map((keyId) => signerOf(state, keyId)).find((signer) => signer?.revoked != null);
    const base = { message_id: record.id, kind: KINDS[record.intent]!, from: record.source, created_at: record.createdAt, correlation_id: record.correlation, ceo_text: null, ...(revoked == null ? {} : { revoked_signer: revoked }) };
    switch (message.intent) {
      case 'ceo_command': {
        const text = await ledger.readFile(message.payload_ref);
        if (text === null) throw new CooError('NOT_FOUND', `${message.payload_ref} is missing`);
        items.push({ ...base, ceo_text: text.toString('utf8'), budget_usd: message.budget_usd, expires_at: message.expires_at });
        break;
      }
      case 'ceo_reject':
        items.push({ ...base, ceo_text: message.reason, rejects: { request_hash: message.request_hash, message_id: message.about_message_id } });
        break;
      case 'blocker':
        items.push({ ...base, blocker: { ...message.blocker, about_message_id: message.about_message_id } });
        break;
      case 'receipt_notice':
        items.push({ ...base, receipt_ref: message.receipt_ref });
        break;
      default: {
        const last = record.attempts[record.attempts.length - 1]!;
        items.push({ ...base, answer: { attempt: last.number, proposals: last.receipt?.proposals?.length ?? 0 } });
      }
    }
  }
  return items;
}
