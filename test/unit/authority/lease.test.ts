import { describe, expect, it } from 'vitest';
import { aheadOfClock, leaseDecision, observeClaim, runtimeBoundSeconds, type LeaseFacts } from '../../../src/authority/lease.js';

const claimedAt = '2026-11-30T08:00:00Z';
const s = (seconds: number): number => seconds * 1000;

function facts(overrides: Partial<LeaseFacts> = {}): LeaseFacts {
  return {
    claim: { path: 'p', session: 's', runner: 'run-far', at: claimedAt, seq: 7 },
    message: { budget: { max_runtime_seconds: 120 } as LeaseFacts['message']['budget'], deadline_at: '2026-12-01T08:00:00Z' },
    heartbeatTtlSeconds: 300,
    graceSeconds: 30,
    observed: observeClaim(undefined, null, 0),
    ...overrides,
  };
}

describe('leases, measured on the observer’s own clock', () => {
  it('holds a claim until it has been quiet for the lease when the runtime budget and grace end first', () => {
    expect(leaseDecision(facts(), s(299))).toMatchObject({ kind: 'held', remainingMs: s(1) });
    expect(leaseDecision(facts(), s(300)).kind).toBe('expired');
  });

  it('holds a claim until its runtime budget and grace have passed since it was first seen when the lease ends first', () => {
    const long = facts({ message: { budget: { max_runtime_seconds: 600 } as LeaseFacts['message']['budget'], deadline_at: '2026-12-01T08:00:00Z' } });
    expect(leaseDecision(long, s(629))).toMatchObject({ kind: 'held', remainingMs: s(1) });
    expect(leaseDecision(long, s(630)).kind).toBe('expired');
  });

  it('renews the lease whenever the holder shows a heartbeat the observer had not seen, and only then', () => {
    let observed = observeClaim(undefined, 3, 0);
    observed = observeClaim(observed, 3, s(200));
    expect(observed.lastProgress).toBe(0);
    observed = observeClaim(observed, 9, s(250));
    expect(observed).toEqual({ firstSeen: 0, lastProgress: s(250), heartbeatSeq: 9 });
    // A holder pruned from the state's heartbeats (null) made no progress, and a later beat is progress again.
    expect(observeClaim(observed, null, s(300))).toBe(observed);
    expect(leaseDecision(facts({ observed }), s(549)).kind).toBe('held');
    expect(leaseDecision(facts({ observed }), s(550)).kind).toBe('expired');
  });

  it('never reads the times the claim or a heartbeat carry: a claim dated a day ahead or behind decides the same', () => {
    for (const at of ['2026-12-01T08:00:00Z', '2026-11-29T08:00:00Z']) {
      const dated = facts({ claim: { path: 'p', session: 's', runner: 'run-far', at, seq: 7 }, message: { budget: { max_runtime_seconds: 120 } as LeaseFacts['message']['budget'], deadline_at: '2026-12-03T08:00:00Z' } });
      expect(leaseDecision(dated, s(299)).kind).toBe('held');
      expect(leaseDecision(dated, s(300)).kind).toBe('expired');
    }
  });

  it('bounds the runtime by the deadline and a dispatch by its timeout, never below one second', () => {
    expect(runtimeBoundSeconds({ budget: { max_runtime_seconds: 120 } as LeaseFacts['message']['budget'], deadline_at: '2026-11-30T08:00:50Z' }, claimedAt)).toBe(50);
    expect(runtimeBoundSeconds({ budget: { max_runtime_seconds: 120 } as LeaseFacts['message']['budget'], deadline_at: '2026-12-01T08:00:00Z', dispatch: { timeout_seconds: 90 } }, claimedAt)).toBe(90);
    expect(runtimeBoundSeconds({ budget: { max_runtime_seconds: 120 } as LeaseFacts['message']['budget'], deadline_at: '2026-11-30T07:00:00Z' }, claimedAt)).toBe(1);
  });

  it('flags an entry dated ahead of the observer’s clock by more than the stated skew, and nothing within it', () => {
    const now = new Date(claimedAt);
    expect(aheadOfClock('2026-11-30T09:00:00Z', now, 300)).toBe(3600);
    expect(aheadOfClock('2026-11-30T08:05:00Z', now, 300)).toBeNull();
    expect(aheadOfClock('2026-11-30T07:00:00Z', now, 300)).toBeNull();
  });
});
