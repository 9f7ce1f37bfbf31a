import { toMillis } from '../schema/common.js';
import type { CooMessage } from '../schema/message.js';
import type { AttemptRecord } from './state.js';

/**
 * Leases: when a runner on another machine may take over a claimed attempt whose receipt never
 * came. The claim names its runner (`runner_id`); that runner's signed heartbeats renew its lease.
 *
 * - The lease of a claim runs to the later of `claimed_at` + the policy's heartbeat TTL and the
 *   `expires_at` of the newest heartbeat its runner committed (any heartbeat of that runner renews
 *   every open claim it holds).
 * - The attempt's runtime budget is an upper bound fixed by the envelope and the claim alone, so a
 *   later policy change cannot shorten it: for a consult min(budget.max_runtime_seconds, deadline_at
 *   - claimed_at), for a dispatch the same with the dispatch's timeout_seconds. The runner's own kill
 *   timer ends its call within the runtime it computed at claim time, never more than this.
 * - A takeover needs BOTH: the lease ran out, AND claimed_at + runtime budget + grace has passed. By
 *   then the original call cannot still be paying, whatever the original runner's state; the grace
 *   covers clock skew between machines and the time a kill takes.
 *
 * Pure: the caller gives the clock.
 */

export interface LeaseFacts {
  readonly claim: NonNullable<AttemptRecord['claim']>;
  readonly message: Pick<CooMessage, 'budget' | 'deadline_at'> & { readonly dispatch?: { readonly timeout_seconds: number } };
  /** The newest heartbeat of the claim's runner, if it ever sent one. */
  readonly heartbeat: { readonly expiresAt: string } | undefined;
  readonly heartbeatTtlSeconds: number;
  readonly graceSeconds: number;
}

export type LeaseDecision =
  | { readonly kind: 'held'; readonly until: string; readonly detail: string }
  | { readonly kind: 'expired'; readonly detail: string };

/** The longest an attempt claimed at `claimedAt` may run, from the envelope alone. */
export function runtimeBoundSeconds(message: LeaseFacts['message'], claimedAt: string): number {
  const untilDeadline = Math.floor((toMillis(message.deadline_at) - toMillis(claimedAt)) / 1000);
  return Math.max(1, Math.min(message.budget.max_runtime_seconds, message.dispatch?.timeout_seconds ?? Number.MAX_SAFE_INTEGER, untilDeadline));
}

/** Whether another runner may take over the claimed attempt at `now`. */
export function leaseDecision(facts: LeaseFacts, now: Date): LeaseDecision {
  const claimedAt = toMillis(facts.claim.at);
  const leaseEnd = Math.max(claimedAt + facts.heartbeatTtlSeconds * 1000, facts.heartbeat === undefined ? 0 : toMillis(facts.heartbeat.expiresAt));
  const runtime = runtimeBoundSeconds(facts.message, facts.claim.at);
  const runtimeEnd = claimedAt + (runtime + facts.graceSeconds) * 1000;
  const until = Math.max(leaseEnd, runtimeEnd);
  const detail = `the lease of ${facts.claim.runner} ran to ${new Date(leaseEnd).toISOString()}, its runtime budget (${runtime} s) and grace (${facts.graceSeconds} s) to ${new Date(runtimeEnd).toISOString()}`;
  return now.getTime() < until ? { kind: 'held', until: new Date(until).toISOString(), detail } : { kind: 'expired', detail };
}
