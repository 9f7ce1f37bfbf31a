import { LIMITS } from '../limits.js';
import { toMillis } from '../schema/common.js';
import type { CooMessage } from '../schema/message.js';
import type { AttemptRecord } from './state.js';

/**
 * Leases: when a runner may take over an attempt another runner claimed and never receipted.
 *
 * Liveness is judged by the observer's own clock, never by comparing it with a time another machine
 * wrote: a runner whose clock ran an hour ahead read a live claim's `claimed_at` and its holder's
 * heartbeats as an hour old, took the attempt over and paid for it again. So the observer measures,
 * on its own monotonic clock:
 *
 * - how long the claim has been quiet: since it first saw the claim, or since it last saw the
 *   holder make progress (a heartbeat newer than the last one it saw; any heartbeat of the holder
 *   renews every open claim it holds). A holder that makes none for the lease period (the policy's
 *   heartbeat TTL) has lost its lease.
 * - how long ago it first saw the claim. The attempt's runtime budget is an upper bound fixed by
 *   the envelope and the claim alone (a later policy change cannot shorten it): for a consult
 *   min(budget.max_runtime_seconds, deadline_at - claimed_at), for a dispatch the same with its
 *   timeout_seconds; the holder's own kill timer ends its call within it.
 *
 * A takeover needs both: the lease ran out AND the runtime budget plus the grace has passed since
 * the claim was first seen. By then the original call cannot still be paying, whatever the holder's
 * state or clock. A claim is seen only after it was made, so measuring from first sight only ever
 * waits longer than needed; the runner keeps first sightings in its state folder for the machine's
 * boot (runner/retry-sightings.ts CLAIMS), so the next process goes on from them.
 *
 * Pure: the caller gives its own clock's readings and what it observed.
 */

export interface LeaseFacts {
  readonly claim: NonNullable<AttemptRecord['claim']>;
  readonly message: Pick<CooMessage, 'budget' | 'deadline_at'> & { readonly dispatch?: { readonly timeout_seconds: number } };
  readonly heartbeatTtlSeconds: number;
  readonly graceSeconds: number;
  readonly observed: LeaseObservation;
}

/** What one runner saw of one claim, on its own monotonic clock (milliseconds). */
export interface LeaseObservation {
  /** When it first saw the claim. */
  readonly firstSeen: number;
  /** When it last saw the holder make progress (first sight counts as such). */
  readonly lastProgress: number;
  /** The sequence of the holder's newest heartbeat it saw then; null: none. */
  readonly heartbeatSeq: number | null;
}

export type LeaseDecision =
  | { readonly kind: 'held'; readonly remainingMs: number; readonly detail: string }
  | { readonly kind: 'expired'; readonly detail: string };

/** The longest an attempt claimed at `claimedAt` may run, from the envelope alone. */
export function runtimeBoundSeconds(message: LeaseFacts['message'], claimedAt: string): number {
  const untilDeadline = Math.floor((toMillis(message.deadline_at) - toMillis(claimedAt)) / 1000);
  return Math.max(1, Math.min(message.budget.max_runtime_seconds, message.dispatch?.timeout_seconds ?? Number.MAX_SAFE_INTEGER, untilDeadline));
}

/**
 * The observation after one more look at a claim at `now`: the holder made progress when its
 * newest heartbeat is one this observer has not seen before.
 */
export function observeClaim(previous: LeaseObservation | undefined, heartbeatSeq: number | null, now: number): LeaseObservation {
  if (previous === undefined) return { firstSeen: now, lastProgress: now, heartbeatSeq };
  if (heartbeatSeq !== null && heartbeatSeq !== previous.heartbeatSeq) return { ...previous, lastProgress: now, heartbeatSeq };
  return previous;
}

/** Whether another runner may take over the claimed attempt at `now` (the observer's monotonic clock, ms). */
export function leaseDecision(facts: LeaseFacts, now: number): LeaseDecision {
  const { observed } = facts;
  const quietMs = now - observed.lastProgress;
  const seenMs = now - observed.firstSeen;
  const runtime = runtimeBoundSeconds(facts.message, facts.claim.at);
  const leaseLeft = facts.heartbeatTtlSeconds * 1000 - quietMs;
  const runtimeLeft = (runtime + facts.graceSeconds) * 1000 - seenMs;
  const remainingMs = Math.max(leaseLeft, runtimeLeft);
  const detail = `${facts.claim.runner} made no progress for ${Math.floor(quietMs / 1000)} s of its ${facts.heartbeatTtlSeconds} s lease, and its claim was first seen ${Math.floor(seenMs / 1000)} s ago against a runtime budget of ${runtime} s and a grace of ${facts.graceSeconds} s (measured on this runner's own clock)`;
  return remainingMs > 0 ? { kind: 'held', remainingMs, detail } : { kind: 'expired', detail };
}

/**
 * How much longer, on the observer's monotonic clock (ms), a retry a receipt set waits before it may
 * start. The wait a receipt sets (`next_attempt_at` less its `created_at`) is a difference of two
 * readings of its writer's clock, so it holds whatever that clock's offset; measured from when the
 * observer first saw the receipt (after it was written), it only ever waits longer than needed. A
 * runner whose wall clock runs ahead reads `next_attempt_at` as passed early; this wait it cannot
 * cut short. The runner keeps first sightings in its state folder for the machine's boot
 * (runner/retry-sightings.ts): the next process goes on from them.
 */
export function retryWaitMs(receipt: { readonly createdAt: string; readonly nextAttemptAt: string }, firstSeen: number, now: number): number {
  return Math.max(0, toMillis(receipt.nextAttemptAt) - toMillis(receipt.createdAt) - (now - firstSeen));
}

/**
 * How far an entry's time (`at`, written by another machine) lies ahead of the observer's wall
 * clock, in seconds, when that is more than `skewSeconds`; else null. Such an entry says its writer's
 * clock runs ahead: flagged, and never a reason for a decision (leases do not read it).
 */
export function aheadOfClock(at: string, wallNow: Date, skewSeconds: number): number | null {
  const ahead = Math.floor((toMillis(at) - wallNow.getTime()) / 1000);
  return ahead > skewSeconds ? ahead : null;
}

/**
 * How a heartbeat another machine wrote reads by this observer's wall clock, within the skew allowed
 * between machines (LIMITS.clockSkewSeconds): `ahead` when it is dated ahead of this clock by more
 * than that skew (its writer's clock runs ahead, and it says nothing of when it was really written:
 * no decision reads it, aheadOfClock; a `createdAt` not known is not judged so), `expired` once that skew has passed its `expires_at` too (a
 * writer whose clock runs behind by less dates it to expire that much early), else `live`. Who is
 * live in the queue's assignment (runner.ts pick) and whether a ledger looks live to `coo verify`,
 * the forge check and the MCP tool (audit/verify.ts staleHeartbeat) are judged by this alone.
 */
export function heartbeatReading(beat: { readonly createdAt: string | null; readonly expiresAt: string }, wallNow: Date): { readonly kind: 'live' | 'expired' } | { readonly kind: 'ahead'; readonly seconds: number } {
  const ahead = beat.createdAt === null ? null : aheadOfClock(beat.createdAt, wallNow, LIMITS.clockSkewSeconds);
  if (ahead !== null) return { kind: 'ahead', seconds: ahead };
  return toMillis(beat.expiresAt) + LIMITS.clockSkewSeconds * 1000 > wallNow.getTime() ? { kind: 'live' } : { kind: 'expired' };
}
