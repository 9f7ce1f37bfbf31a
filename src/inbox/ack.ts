import { requestFingerprint } from '../authority/idempotency.js';
import { requireHolder } from '../authority/keys.js';
import type { LedgerState } from '../authority/state.js';
import { ackKey, isForCoo } from '../authority/rules/intents/ack.js';
import type { PrivateKey } from '../crypto/keys.js';
import { CooError } from '../errors.js';
import { appendRequest, type EnvelopeAppendResult } from '../ledger/append-envelope.js';
import { planEnvelope } from '../ledger/envelope-plan.js';
import type { Ledger } from '../ledger/ledger.js';
import { parseDocument } from '../schema/documents.js';
import type { AckMessage } from '../schema/message.js';

export interface AckRequest {
  readonly ledger: Ledger;
  /** The active COO's key. */
  readonly key: PrivateKey;
  readonly now: Date;
  /** What is acknowledged: an item of the inbox (inbox.ts). */
  readonly messageId: string;
  /** What the COO makes of it, for the CEO. */
  readonly note?: string;
  readonly submittedVia?: 'mcp';
}

/**
 * The COO acknowledges what reached it: an ack envelope, signed by the COO, addressed to the CEO
 * whose root it answers to, naming the message. Once per message: the idempotency key derives from
 * it, so acknowledging again with the same note returns the ack already there.
 */
export async function acknowledge(request: AckRequest): Promise<EnvelopeAppendResult & { readonly envelope: AckMessage }> {
  const { ledger, key, now } = request;
  const state = await ledger.state();
  const registry = state.registry?.doc;
  const ceo = state.root?.doc.authorities[0]?.actor;
  if (registry === undefined || ceo === undefined) throw new CooError('TRUST_VERSION', 'the ledger has no trust root and registry');
  const holder = requireHolder(state, key.publicKey.keyId, "the COO's key");
  if (holder.actor !== registry.active_coo) throw new CooError('NOT_ACTIVE_COO', `acknowledgements are the active COO's (${registry.active_coo}); key ${key.publicKey.keyId} is ${holder.actor}'s`);
  const about = state.messages.get(request.messageId);
  if (about === undefined) throw new CooError('MESSAGE_UNKNOWN', `${request.messageId} is not in the ledger`);
  if (about.ackedBy === undefined && !isForCoo(registry, about)) {
    throw new CooError('POLICY_INTENT_NOT_ALLOWED', `${about.id} is not in the COO's inbox (coo inbox lists it): a message addressed to the COO, or the answer to a consult it asked`);
  }
  const plan = planEnvelope(state, key, ceo, { idempotencyKey: ackKey(about.id), correlationId: about.correlation, maxRuntimeSeconds: 1, ...(request.submittedVia === undefined ? {} : { submittedVia: request.submittedVia }) }, now, 'ack');
  return appendRequest<AckMessage>(
    ledger,
    (head) => refuseSecondAck(head, parseDocument('coo_message.v0', { ...plan.headerAt(head), intent: 'ack', authority_class: 'evidence', budget: { max_cost_usd: 0, max_runtime_seconds: 1 }, about_message_id: about.id, note: request.note ?? '', expected_receipt_schema: null }, 'envelope') as AckMessage),
    new Map(),
    key,
    now,
  );
}

/**
 * The acknowledgement as it lands on `state`, unless the item was acknowledged there by another:
 * the same acknowledgement again (the same request under the same key) is the one already there;
 * another (another note, another COO's) is a second one, refused as such. Asked before the lock
 * and again at the head the lock holds: two acks of one item with different notes sent at once
 * both passed the first look, and the second was refused as a key reused, whose next step (give a
 * new idempotency key) the ack tool and verb, which take no key, cannot follow.
 */
function refuseSecondAck(state: LedgerState, envelope: AckMessage): AckMessage {
  const ackedBy = state.messages.get(envelope.about_message_id)?.ackedBy;
  if (ackedBy === undefined) return envelope;
  const acked = state.messages.get(ackedBy);
  if (acked !== undefined && acked.idempotencyKey === envelope.idempotency_key && acked.fingerprint === requestFingerprint(envelope)) return envelope;
  throw new CooError('MESSAGE_DUPLICATE', `${envelope.about_message_id} was acknowledged by ${ackedBy}, once for all: an item is acknowledged once (the same note again returns that acknowledgement)`);
}
