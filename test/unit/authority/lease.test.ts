import { describe, expect, it } from 'vitest';
import { leaseDecision, runtimeBoundSeconds, type LeaseFacts } from '../../../src/authority/lease.js';

const claimedAt = '2026-11-30T08:00:00Z';
const at = (seconds: number): Date => new Date(Date.parse(claimedAt) + seconds * 1000);

function facts(overrides: Partial<LeaseFacts> = {}): LeaseFacts {
  return {
    claim: { path: 'p', session: 's', runner: 'far-p1', at: claimedAt, seq: 7 },
    message: { budget: { max_runtime_seconds: 120 } as LeaseFacts['message']['budget'], deadline_at: '2026-12-01T08:00:00Z' },
    heartbeat: undefined,
    heartbeatTtlSeconds: 300,
    graceSeconds: 30,
    ...overrides,
  };
}

describe('leases', () => {
  it('holds a claim until its lease runs out when the runtime budget and grace end first', () => {
    expect(leaseDecision(facts(), at(299))).toMatchObject({ kind: 'held', until: at(300).toISOString() });
    expect(leaseDecision(facts(), at(300)).kind).toBe('expired');
  });

  it('holds a claim until its runtime budget and grace run out when the lease ends first', () => {
    const long = facts({ message: { budget: { max_runtime_seconds: 600 } as LeaseFacts['message']['budget'], deadline_at: '2026-12-01T08:00:00Z' } });
    expect(leaseDecision(long, at(629))).toMatchObject({ kind: 'held', until: at(630).toISOString() });
    expect(leaseDecision(long, at(630)).kind).toBe('expired');
  });

  it("renews the lease with the claiming runner's newest heartbeat", () => {
    const beat = facts({ heartbeat: { expiresAt: at(1000).toISOString() } });
    expect(leaseDecision(beat, at(999))).toMatchObject({ kind: 'held', until: at(1000).toISOString() });
    expect(leaseDecision(beat, at(1000)).kind).toBe('expired');
  });

  it('bounds the runtime by the deadline and a dispatch by its timeout, never below one second', () => {
    expect(runtimeBoundSeconds({ budget: { max_runtime_seconds: 120 } as LeaseFacts['message']['budget'], deadline_at: '2026-11-30T08:00:50Z' }, claimedAt)).toBe(50);
    expect(runtimeBoundSeconds({ budget: { max_runtime_seconds: 120 } as LeaseFacts['message']['budget'], deadline_at: '2026-12-01T08:00:00Z', dispatch: { timeout_seconds: 90 } }, claimedAt)).toBe(90);
    expect(runtimeBoundSeconds({ budget: { max_runtime_seconds: 120 } as LeaseFacts['message']['budget'], deadline_at: '2026-11-30T07:00:00Z' }, claimedAt)).toBe(1);
  });
});
