import { requireHolder } from '../authority/keys.js';
import { ackKey, isForCoo } from '../authority/rules/intents/ack.js';
import type { PrivateKey } from '../crypto/keys.js';
import { CooError } from '../errors.js';
import { appendRequest, type EnvelopeAppendResult } from '../ledger/append-envelope.js';
import { planEnvelope } from '../ledger/envelope-plan.js';
import { readMessage } from '../lane/envelope.js';
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
  if (about.ackedBy !== undefined) {
    // The same acknowledgement again is the one already there; another (another key, another note) is
    // a second acknowledgement, refused as such rather than as an idempotency key reused.
    const acked = state.messages.get(about.ackedBy);
    const same = acked !== undefined && acked.idempotencyKey === ackKey(about.id) && (await readMessage(ledger, acked) as AckMessage).note === (request.note ?? '');
    if (!same) throw new CooError('MESSAGE_DUPLICATE', `${about.id} was acknowledged by ${about.ackedBy}, once for all: an item is acknowledged once (the same note again returns that acknowledgement)`);
  } else if (!isForCoo(registry, about)) {
    throw new CooError('POLICY_INTENT_NOT_ALLOWED', `${about.id} is not in the COO's inbox (coo inbox lists it): a message addressed to the COO, or the answer to a consult it asked`);
  }
  const plan = planEnvelope(state, key, ceo, { idempotencyKey: ackKey(about.id), correlationId: about.correlation, maxRuntimeSeconds: 1, ...(request.submittedVia === undefined ? {} : { submittedVia: request.submittedVia }) }, now, 'ack');
  return appendRequest<AckMessage>(
    ledger,
    (head) => parseDocument('coo_message.v0', { ...plan.headerAt(head), intent: 'ack', authority_class: 'evidence', budget: { max_cost_usd: 0, max_runtime_seconds: 1 }, about_message_id: about.id, note: request.note ?? '', expected_receipt_schema: null }, 'envelope') as AckMessage,
    new Map(),
    key,
    now,
  );
}
