import { randomBytes } from 'node:crypto';
import { requireHolder } from '../authority/keys.js';
import { checkGivenKey, panelMemberKey } from '../authority/idempotency.js';
import { commandBudgetLeftUsd, correlationRemainingUsd, idempotencySlot, type LedgerState } from '../authority/state.js';
import type { PrivateKey } from '../crypto/keys.js';
import type { Ledger } from './ledger.js';
import { CooError } from '../errors.js';
import type { ActorPolicy } from '../schema/policy.js';
import { newCorrelationId, newMessageId } from '../util/ids.js';
import { addSeconds, isoSeconds } from '../util/time.js';
import { messageFolder } from './layout.js';
import { LIBRARY_ARGUMENTS, type ArgumentNames } from '../util/argument-names.js';
import type { KeyOrigin } from './append-envelope.js';

/** What a COO request says about its place in the ledger; everything else has a default. */
export interface EnvelopeRequest {
  readonly maxCostUsd?: number;
  readonly maxRuntimeSeconds?: number;
  readonly ttlSeconds?: number;
  readonly idempotencyKey?: string;
  /** Default: the parent's, else the correlation of the first request under this idempotency key, else a new one. */
  readonly correlationId?: string;
  readonly parentMessageId?: string;
  /** How many hops a chain through this message may take: at most what the parent leaves (its own max_hops) and the policy's; that by default. */
  readonly maxHops?: number;
  /** How the request reached the ledger when not typed at the CLI; recorded as the envelope's submitted_via. */
  readonly submittedVia?: 'mcp';
  /**
   * The key the caller derived from this request (an MCP tool's, lane/request-key.ts): `idempotencyKey`
   * may be it though the ledger holds no such key. Any other key of the derived form must be one the
   * ledger holds (derivedKeyRule).
   */
  readonly derivedKey?: string;
  /** How the caller names the request's arguments in errors: the CLI's flags (the verbs pass them), an MCP tool's arguments, or by default a library caller's fields. */
  readonly names?: ArgumentNames;
}

/** What the writer is told of a request's idempotency key: the key derived from it, and the caller's words. */
export function keyOrigin(request: EnvelopeRequest): KeyOrigin {
  return { ...(request.derivedKey === undefined ? {} : { derivedKey: request.derivedKey }), words: request.names ?? LIBRARY_ARGUMENTS };
}

/** What every lane's writer is given: where, by whom, when, to whom, and the repository and commit it pins. */
export interface LaneRequest extends EnvelopeRequest {
  readonly ledger: Ledger;
  readonly key: PrivateKey;
  readonly now: Date;
  readonly target: string;
  readonly repo: string;
  readonly rev?: string;
}

/** The header fields every lane's envelope shares, decided once for the writers of both lanes. */
export interface EnvelopePlan {
  readonly actor: string;
  readonly policy: ActorPolicy;
  readonly messageId: string;
  readonly createdAt: string;
  readonly folder: string;
  /** The envelope's header, but for the correlation's remaining budget, which depends on the head it lands on. */
  readonly header: Record<string, unknown>;
  /** The correlation as decided at the plan's state; `headerAt` decides it again at the head the envelope lands on. */
  readonly correlation: string;
  readonly correlationAt: (head: LedgerState) => string;
  /** The header as it is written at `head`. */
  readonly headerAt: (head: LedgerState) => Record<string, unknown>;
  readonly runtimeSeconds: number;
}

/** Defaults when the caller gives none: the policy's caps, an hour to start, a runtime of ten minutes at most. */
const DEFAULT_TTL_SECONDS = 3600;
export const DEFAULT_RUNTIME_SECONDS = 600;

/**
 * Plans the shared header of a new envelope from `key`'s holder to `target`, refusing what cannot be
 * sent. `panelKey`: the envelope is the member `target` of the panel under that key, and its own key
 * is derived from it (the request's key is the panel's).
 */
export function planEnvelope(state: LedgerState, key: PrivateKey, target: string, request: EnvelopeRequest, now: Date, keyPrefix: string, panelKey?: string): EnvelopePlan {
  const registry = state.registry?.doc;
  const policy = state.policy?.doc;
  if (registry === undefined || policy === undefined) throw new CooError('TRUST_VERSION', 'the ledger has no registry and policy');
  const holder = requireHolder(state, key.publicKey.keyId, `the sender's key (requests are sent by the active COO ${registry.active_coo})`);
  const parent = request.parentMessageId === undefined ? undefined : state.messages.get(request.parentMessageId);
  if (request.parentMessageId !== undefined && parent === undefined) throw new CooError('MESSAGE_UNKNOWN', `parent ${request.parentMessageId} is not in the ledger`);
  // A key the caller gave is named in its words when refused; a panel's, before its members' keys are made from it.
  checkGivenKey(request.idempotencyKey, 'envelope', keyOrigin(request).words?.idempotencyKey);
  const idempotencyKey = panelKey !== undefined ? panelMemberKey(panelKey, target) : (request.idempotencyKey ?? `${keyPrefix}-${randomBytes(8).toString('hex')}`);
  // A retry under the same key names the same request in the same correlation: reuse the original's.
  // Which message is the original is decided at the head the envelope lands on, under the ledger's
  // lock: two identical requests written at once both find the first, and neither is refused for
  // naming a correlation of its own.
  const given = parent?.correlation ?? request.correlationId;
  const fresh = newCorrelationId();
  const slot = idempotencySlot(holder.actor, idempotencyKey);
  const correlationAt = (head: LedgerState): string => given ?? head.messages.get(head.idempotency.get(slot) ?? '')?.correlation ?? fresh;
  const correlation = correlationAt(state);
  const chain = parent === undefined ? [] : [...parent.chain, parent.id];
  const maxHops = request.maxHops ?? Math.min(parent?.maxHops ?? policy.limits.max_hops, policy.limits.max_hops);
  const messageId = newMessageId(now.getTime());
  const createdAt = isoSeconds(now);
  const ttl = request.ttlSeconds ?? Math.min(DEFAULT_TTL_SECONDS, policy.limits.max_ttl_seconds);
  const runtime = request.maxRuntimeSeconds ?? Math.min(DEFAULT_RUNTIME_SECONDS, policy.budgets.max_runtime_seconds);
  const expires = addSeconds(now, ttl);
  // A time to live or a runtime so long that the deadline is past every date a timestamp can name
  // (a library caller's, or a flag's unbounded number) would throw as an invalid date: refused here
  // for every caller in the policy's terms, which allow far less.
  if (!writableMillis(expires.getTime()) || !writableMillis(expires.getTime() + runtime * 1000)) {
    throw new CooError('POLICY_LIMIT', `a time to live of ${ttl} s and a runtime of ${runtime} s end past the last date an envelope can name: the policy allows a time to live of at most ${policy.limits.max_ttl_seconds} s and a runtime of at most ${policy.budgets.max_runtime_seconds} s`);
  }
  const header = {
    schema_version: 'coo_message.v0',
    message_id: messageId,
    correlation_id: correlation,
    parent_message_id: parent?.id ?? null,
    causality_chain: chain,
    hop_count: chain.length,
    max_hops: maxHops,
    expires_at: isoSeconds(expires),
    deadline_at: isoSeconds(addSeconds(expires, runtime)),
    principal: holder.actor,
    source_actor: holder.actor,
    target_actor: target,
    idempotency_key: idempotencyKey,
    status: 'queued',
    created_at: createdAt,
    ...(request.submittedVia === undefined ? {} : { submitted_via: request.submittedVia }),
  };
  return {
    actor: holder.actor,
    policy,
    messageId,
    createdAt,
    folder: messageFolder(messageId, createdAt),
    correlation,
    correlationAt,
    headerAt: (head) => ({ ...header, correlation_id: correlationAt(head) }),
    runtimeSeconds: runtime,
    header,
  };
}

/** The first and last moments a timestamp's four-digit year names: outside them no envelope's time can be written. */
const FIRST_TIMESTAMP_MS = Date.parse('0000-01-01T00:00:00Z');
const LAST_TIMESTAMP_MS = Date.parse('9999-12-31T23:59:59Z');

function writableMillis(ms: number): boolean {
  return Number.isFinite(ms) && ms >= FIRST_TIMESTAMP_MS && ms <= LAST_TIMESTAMP_MS;
}

/** The envelope's budget as the ledger stands at `head`: the correlation's remaining budget is the ledger's own figure. */
export function budgetAt(plan: EnvelopePlan, head: LedgerState, maxCostUsd: number | undefined): Record<string, unknown> {
  // By default the policy's cap, or less: what a CEO command the chain starts at has left of its budget.
  const command = commandBudgetLeftUsd(head, (id) => head.messages.get(id), plan.header['causality_chain'] as string[]);
  return {
    max_cost_usd: maxCostUsd ?? Math.min(plan.policy.budgets.max_cost_usd_per_message, command?.left ?? Number.POSITIVE_INFINITY),
    max_runtime_seconds: plan.runtimeSeconds,
    correlation_budget_remaining_usd: correlationRemainingUsd(head.policy?.doc ?? plan.policy, head.spendByCorrelation.get(plan.correlationAt(head)) ?? 0),
  };
}
