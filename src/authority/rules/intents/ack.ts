import { CooError } from '../../../errors.js';
import type { CooMessage } from '../../../schema/message.js';
import type { ActorRegistry } from '../../../schema/registry.js';
import type { MessageRecord } from '../../state.js';
import { classOf } from '../../policy-check.js';
import type { IntentRules } from '../intent.js';
import { checkCommandStands, takeUp } from './ceo-command.js';

/** Intents that reach the COO as news: what the CEO, an execution agent or the ledger tells it. */
export const INBOX_INTENTS = new Set(['ceo_command', 'ceo_reject', 'blocker', 'receipt_notice']);

/**
 * Whether a message is the active COO's to acknowledge: one addressed to it (or to the COO it
 * replaced, when it was written) that tells it something (a CEO's command or rejection, an agent's
 * blocker or receipt notice), or a consult it (or that COO) asked whose answer has landed. Pure; the inbox (inbox/inbox.ts) and the validator ask it.
 */
export function isForCoo(registry: ActorRegistry, record: MessageRecord): boolean {
  // A command or rejection whose key was revoked before the COO read it is no longer the CEO's word (ceo-authority.ts voidCeoMessagesOf).
  if (record.duplicateOf !== null || record.revoked === true) return false;
  // Addressed to the COO of its day: a COO the CEO has since replaced leaves what it never read to its successor, never to no one.
  if (record.target === registry.active_coo || record.toCoo === true) return INBOX_INTENTS.has(record.intent);
  return record.intent === 'aa_consult' && (record.source === registry.active_coo || record.fromCoo === true) && record.attempts[record.attempts.length - 1]?.receipt?.status === 'succeeded';
}

/** The idempotency key of the COO's acknowledgement of `messageId`: one per item, so the same call again finds it. */
export function ackKey(messageId: string): string {
  return `ack-${messageId}`;
}

const ACK_KEY = /^ack-(msg_[0-9A-HJKMNP-TV-Z]{26})$/;

/**
 * A key of an acknowledgement's form is that acknowledgement's alone. The ack writers take no key
 * (the tool and the verb derive it from the item), and the COO has one slot of keys for all its
 * envelopes: a consult or dispatch the COO wrote under `ack-<id>` (an agent COO can choose its
 * keys) left every acknowledgement of that item refused as a key reused, and the item in the inbox.
 * `name`: the key as the writer's caller gave it (a flag, a tool's argument), named alone; else the
 * envelope's field.
 */
export function checkAckKey(doc: CooMessage, where: string, name?: string): void {
  const named = ACK_KEY.exec(doc.idempotency_key)?.[1];
  if (named === undefined || (doc.intent === 'ack' && doc.about_message_id === named)) return;
  const said = name ?? `${where}: idempotency_key`;
  throw new CooError('IDEMPOTENCY_CONFLICT', `${said} "${doc.idempotency_key}" is the key of the acknowledgement of ${named}, which no other envelope may take`, { where: name ?? `${where}:idempotency_key` });
}

/**
 * ack: the active COO has read a message that reached it, and tells the CEO, once per message. A
 * command the COO never acknowledged stays in its inbox; what the COO made of it is its `note`.
 */
export const ackRules: IntentRules<'ack'> = {
  target(check, doc, registry, where) {
    if (doc.source_actor !== registry.active_coo) throw new CooError('NOT_ACTIVE_COO', `${where}: acknowledgements are the active COO's (${registry.active_coo}), not ${doc.source_actor}'s`, { where });
    if (classOf(registry, doc.target_actor) !== 'human_authority') {
      throw new CooError('POLICY_INTENT_NOT_ALLOWED', `${where}: an acknowledgement is addressed to the CEO (a human authority), not ${doc.target_actor}`, { where });
    }
    const about = check.message(doc.about_message_id);
    if (about === undefined) throw new CooError('MESSAGE_UNKNOWN', `${where}: about_message_id ${doc.about_message_id} does not exist`, { where });
    if (!isForCoo(registry, about)) {
      throw new CooError('POLICY_INTENT_NOT_ALLOWED', `${where}: ${about.id} (${about.intent} ${about.source} -> ${about.target}) is nothing the COO acknowledges: a message addressed to it, or the answer to a consult it asked`, { where: `${where}:about_message_id` });
    }
    if (about.ackedBy !== undefined) throw new CooError('MESSAGE_DUPLICATE', `${where}: ${about.id} was acknowledged by ${about.ackedBy}`, { where: `${where}:about_message_id` });
    checkCommandStands(check, about, doc.created_at, 'its acknowledgement is', where);
  },
  record(doc) {
    return { about: doc.about_message_id };
  },
  accepted(check, doc, _record, _where) {
    const about = check.message(doc.about_message_id)!;
    check.messages.set(about.id, { ...about, ackedBy: doc.message_id });
    takeUp(check, check.message(about.id)!);
  },
};
