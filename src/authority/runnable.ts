import { CooError } from '../errors.js';
import { isRunnerIntent, type Intent } from '../schema/common.js';
import type { KillSwitch } from '../schema/control.js';
import type { CooMessage } from '../schema/message.js';
import type { ActorPolicy } from '../schema/policy.js';
import type { BlockerCode, ReceiptStatus } from '../schema/receipt.js';
import type { ActorRegistry } from '../schema/registry.js';
import { attemptIdFor } from '../util/ids.js';
import { checkEdge, isCommandIntent } from './policy-check.js';
import { retryApproved, type LedgerState, type MessageRecord, type Revocation } from './state.js';
import { revokedChallengeOf } from './rules/intents/cross-check.js';

/**
 * What the runner executes. The validator holds claims, hops and attempt ids to these rules at
 * write time, so nothing lands that the runner would never run or that would wedge a message.
 */

/** Intents the runner executes (the one list lives beside the intents, so the lane state can ask it too). */
export { RUNNER_INTENTS, isRunnerIntent } from '../schema/common.js';

/**
 * Whether a message may still run at its place in a chain: `hop_count` counts the hops already
 * taken from the chain's first message, and the runner blocks a message once they reach `max_hops`
 * (consult/lane.ts). The validator refuses such a message of a runner intent when it is written.
 */
export function withinHopLimit(message: { readonly hop_count: number; readonly max_hops: number }): boolean {
  return message.hop_count < message.max_hops;
}

/** The one attempt id attempt `attempt` of a message can have: its lane's prefix, the message id, the number. */
export function attemptIdOf(record: { readonly id: string; readonly intent: Intent }, attempt: number): string {
  return attemptIdFor(record.id, attempt, record.intent === 'ea_dispatch' ? 'ea' : 'aa');
}

export interface GateFacts {
  readonly now: Date;
  readonly message: CooMessage;
  /** 1 for the first attempt: only it is bound by expires_at; every attempt is bound by deadline_at. */
  readonly attempt: number;
  readonly killSwitch: KillSwitch | null;
  readonly registry: ActorRegistry;
  readonly policy: ActorPolicy;
  /** A key whose word the attempt stands on, revoked since (revokedWord). */
  readonly signerRevoked: RevokedWord | null;
}

/** A revoked key whose word an attempt would stand on: what it signed, and its revocation. */
export interface RevokedWord {
  readonly what: string;
  readonly revocation: Revocation;
}

/**
 * The revoked key whose word the next attempt of a message would stand on, or null. A revocation
 * says the key may be in other hands, and ends what it said that nothing had used yet: a consult or
 * a dispatch its key queued starts no attempt, first or retry, and a dispatch whose first attempt
 * only a revoked key's approval allowed starts none (rules/approval.ts voidApprovalsOf voids that
 * approval), nor does a cross-check of an answer whose receipt it signed (rules/intents/cross-check.ts
 * revokedChallengeOf). A key only rotated out is not revoked; what already ran stands. The runner's
 * gate asks it, and the claim rule (rules/claim.ts checkUnrunClaims).
 */
export function revokedWord(state: Pick<LedgerState, 'revocations' | 'approvals' | 'messages'>, record: Pick<MessageRecord, 'id' | 'keyId' | 'attempts' | 'chain' | 'challenges'>): RevokedWord | null {
  // No key revoked, no word to stand on (the usual ledger: the claim rule asks for every claim it judges).
  if (state.revocations.size === 0) return null;
  const own = record.keyId === undefined ? undefined : state.revocations.get(record.keyId);
  if (own !== undefined) return { what: "its envelope's key", revocation: own };
  const challenged = revokedChallengeOf(state, record);
  if (challenged !== null) return challenged;
  if (record.attempts.length > 0) return null;
  for (const approval of state.approvals.values()) {
    const revocation = approval.usedBy === record.id && approval.revoked === true ? state.revocations.get(approval.keyId) : undefined;
    if (revocation !== undefined) return { what: `the key of the CEO's approval ${approval.id}`, revocation };
  }
  return null;
}

export interface Stop {
  readonly status: ReceiptStatus;
  readonly blocker: BlockerCode;
  readonly detail: string;
}

/**
 * The gate's first two steps, which the claim rule holds a claim to as well (rules/claim.ts
 * checkUnrunClaims): the kill switch in force, then a revoked key's word the attempt would stand on.
 */
export function stopBeforeAll(killSwitch: GateFacts['killSwitch'], signerRevoked: RevokedWord | null): Stop | null {
  if (killSwitch?.state === 'on') return { status: 'blocked', blocker: 'kill_switch', detail: `kill switch set by ${killSwitch.set_by}: ${killSwitch.reason}` };
  if (signerRevoked !== null) {
    const { what, revocation } = signerRevoked;
    return { status: 'blocked', blocker: 'policy_denied', detail: `${what} was revoked at Ledger-Seq ${revocation.seq} by ${revocation.by} (${JSON.stringify(revocation.reason)}): a revoked key's word starts no attempt` };
  }
  return null;
}

/**
 * What must hold before any attempt of any lane may start, in the order it is checked: the kill
 * switch, the envelope's key not revoked, a command's sender still the active COO, the message's times, its hop limit and the policy in force. Null when it may start; each
 * lane then checks what is its own (consult/lane.ts, dispatch/lane.ts).
 */
export function gateAttempt(facts: GateFacts): Stop | null {
  const { now, message, policy, registry } = facts;
  const first = stopBeforeAll(facts.killSwitch, facts.signerRevoked);
  if (first !== null) return first;
  // A command speaks for the active COO that sent it: once the registry hands the role to another, the former COO's word starts nothing (a key rotation keeps the actor).
  if (isCommandIntent(message.intent) && message.principal !== registry.active_coo) {
    return { status: 'blocked', blocker: 'policy_denied', detail: `sent by ${message.principal}, no longer the active COO (the registry in force, v${registry.version}, names ${registry.active_coo}): a former COO's command starts no attempt` };
  }
  // expires_at bounds when a message may first start; deadline_at bounds every attempt, retries included.
  if (facts.attempt === 1 && now.getTime() >= Date.parse(message.expires_at)) return { status: 'blocked', blocker: 'expired', detail: `not started before it expired at ${message.expires_at}` };
  if (now.getTime() >= Date.parse(message.deadline_at)) return { status: 'blocked', blocker: 'deadline_passed', detail: `deadline ${message.deadline_at} has passed` };
  // The envelope's hop limit, or a lower one the policy in force has set since it was written.
  const maxHops = Math.min(message.max_hops, policy.limits.max_hops);
  if (!withinHopLimit({ hop_count: message.hop_count, max_hops: maxHops })) {
    return { status: 'blocked', blocker: 'hop_limit', detail: `hop ${message.hop_count} of at most ${maxHops}${maxHops < message.max_hops ? ` (the policy in force, v${policy.version}, allows ${maxHops} of the ${message.max_hops} the envelope states)` : ''}` };
  }
  try {
    checkEdge(registry, policy, message.source_actor, message.target_actor, message.intent, 'attempt');
  } catch (error) {
    if (!(error instanceof CooError)) throw error;
    return { status: 'blocked', blocker: 'policy_denied', detail: `the policy in force (v${policy.version}) no longer allows it: ${error.code}` };
  }
  return null;
}

/** What the runner should do with one message now. */
export type Work =
  | { readonly kind: 'attempt'; readonly number: number }
  | { readonly kind: 'recover'; readonly number: number }
  | { readonly kind: 'wait'; readonly until: string }
  | { readonly kind: 'none' };

/**
 * From a message's attempts: start the next attempt, recover an open one, wait for a retry time, or
 * nothing. A dispatch that ended starts again only when the CEO approved the retry.
 */
export function nextWork(record: MessageRecord, now: Date): Work {
  if (record.duplicateOf !== null || !isRunnerIntent(record.intent)) return { kind: 'none' };
  const last = record.attempts[record.attempts.length - 1];
  if (last === undefined) return { kind: 'attempt', number: 1 };
  if (last.receipt === null) return { kind: 'recover', number: last.number };
  const at = last.receipt.nextAttemptAt;
  if (at === null) return retryApproved(record) ? { kind: 'attempt', number: last.number + 1 } : { kind: 'none' };
  if (Date.parse(at) > now.getTime()) return { kind: 'wait', until: at };
  return { kind: 'attempt', number: last.number + 1 };
}
