import { requireHolder } from '../authority/keys.js';
import type { PrivateKey } from '../crypto/keys.js';
import { CooError } from '../errors.js';
import { appendRequest, type EnvelopeAppendResult } from '../ledger/append-envelope.js';
import { keyOrigin, planEnvelope } from '../ledger/envelope-plan.js';
import type { Ledger } from '../ledger/ledger.js';
import { promptPath } from '../ledger/layout.js';
import { parseDocument } from '../schema/documents.js';
import type { CeoCommandMessage, CeoRejectMessage, CooMessage } from '../schema/message.js';
import { sha256Ref } from '../util/hash.js';
import type { ArgumentNames } from '../util/argument-names.js';

/**
 * CEO -> COO: the CEO's signed command to the active COO, and its rejection of a request that waits
 * for its approval. Both land in the COO's inbox (inbox.ts) until the COO acknowledges them
 * (ack.ts); nothing runs them. The validator holds them to the rules (rules/intents/ceo-*.ts).
 */

interface CeoRequest {
  readonly ledger: Ledger;
  /** A trust-root authority's key: the CEO's. */
  readonly key: PrivateKey;
  readonly now: Date;
  /** How long the COO has to take it up; one day by default, the policy's time-to-live at most. */
  readonly ttlSeconds?: number;
  readonly idempotencyKey?: string;
  /** The key the caller derived from this request, which it may write as `idempotencyKey` (EnvelopeRequest's). */
  readonly derivedKey?: string;
  /** How the caller names the key in a refusal (EnvelopeRequest's): a library caller's field by default. */
  readonly names?: ArgumentNames;
}

export interface CommandRequest extends CeoRequest {
  readonly text: string;
  /** What the CEO allows the work it asks for to cost, in USD. */
  readonly budgetUsd?: number;
}

export interface RejectRequest extends CeoRequest {
  readonly reason: string;
  /** A new dispatch or adoption, by the request hash it was refused with. */
  readonly requestHash?: string;
  /** A dispatch whose next attempt waits for the CEO's approval. */
  readonly messageId?: string;
}

const DEFAULT_TTL_SECONDS = 86_400;

async function sendToCoo<M extends CooMessage>(request: CeoRequest, prefix: string, fields: (folder: string) => Record<string, unknown>, artifacts: ReadonlyMap<string, Buffer>): Promise<EnvelopeAppendResult & { readonly envelope: M }> {
  const { ledger, key, now } = request;
  const state = await ledger.state();
  const registry = state.registry?.doc;
  const policy = state.policy?.doc;
  if (registry === undefined || policy === undefined) throw new CooError('TRUST_VERSION', 'the ledger has no registry and policy');
  const holder = requireHolder(state, key.publicKey.keyId, "the CEO's key");
  if (!holder.rootAuthority) throw new CooError('TRUST_AUTHORITY', `key ${key.publicKey.keyId} is not a trust-root authority: commands and rejections are the CEO's`);
  const plan = planEnvelope(state, key, registry.active_coo, { ttlSeconds: Math.min(request.ttlSeconds ?? DEFAULT_TTL_SECONDS, policy.limits.max_ttl_seconds), maxCostUsd: 0, maxRuntimeSeconds: 1, ...(request.idempotencyKey === undefined ? {} : { idempotencyKey: request.idempotencyKey }) }, now, prefix);
  return appendRequest<M>(
    ledger,
    (head) => parseDocument('coo_message.v0', { ...plan.headerAt(head), budget: { max_cost_usd: 0, max_runtime_seconds: 1 }, ...fields(plan.folder) }, 'envelope') as M,
    artifacts,
    key,
    now,
    keyOrigin(request),
  );
}

/** The CEO's command: its text beside the envelope by hash, its budget when the CEO gives one. A command costs nothing itself: its envelope's budget is zero. */
export async function sendCommand(request: CommandRequest): Promise<EnvelopeAppendResult & { readonly envelope: CeoCommandMessage }> {
  if (request.text.trim() === '') throw new CooError('USAGE', 'the command text is empty');
  const text = Buffer.from(request.text.endsWith('\n') ? request.text : `${request.text}\n`);
  return sendToCoo<CeoCommandMessage>(
    request,
    'command',
    (folder) => ({ intent: 'ceo_command', authority_class: 'directive', payload_ref: promptPath(folder), payload_hash: sha256Ref(text), budget_usd: request.budgetUsd ?? null, expected_receipt_schema: null }),
    new Map([['prompt.md', text]]),
  );
}

/** The CEO's rejection of a request that waits for its approval, with the reason. */
export async function rejectRequest(request: RejectRequest): Promise<EnvelopeAppendResult & { readonly envelope: CeoRejectMessage }> {
  if ((request.requestHash === undefined) === (request.messageId === undefined)) throw new CooError('USAGE', 'reject either a dispatch message id (its next attempt) or --request HASH (a new dispatch or adoption)');
  if (request.reason.trim() === '') throw new CooError('USAGE', '--reason is empty');
  return sendToCoo<CeoRejectMessage>(
    request,
    'reject',
    () => ({ intent: 'ceo_reject', authority_class: 'directive', request_hash: request.requestHash ?? null, about_message_id: request.messageId ?? null, reason: request.reason, expected_receipt_schema: null }),
    new Map(),
  );
}
