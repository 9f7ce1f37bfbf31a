import { afterEach, describe, expect, it, vi } from 'vitest';
import type { Runner } from '../../../src/runner/runner.js';
import { watchRemote } from '../../../src/runner/watch.js';
import { isoSeconds } from '../../../src/util/time.js';

describe('a watch through a remote whose runner asks to be woken (a look again at a model server on this machine), main never moving', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('the pass that wake runs leaves the idle back-off growing: the looks at the remote come no more often after it than before', async () => {
    vi.useFakeTimers({ now: new Date('2026-01-01T00:00:00Z') });
    const polls: number[] = [];
    let passes = 0;
    const start = Date.now();
    const runner = {
      cutOffAt: null,
      // The first pass asks to be woken 20 s later; none after it asks again.
      runOnce: () => {
        passes += 1;
        return Promise.resolve({ receipts: 0, waiting: passes === 1 ? [isoSeconds(new Date(start + 20_000))] : [], held: [], kept: [], retries: [] });
      },
    } as unknown as Runner;
    const controller = new AbortController();
    const remoteHead = (): Promise<string> => {
      polls.push(Date.now() - start);
      return Promise.resolve('a'.repeat(40));
    };
    const watching = watchRemote(runner, { remote: { remoteHead }, signal: controller.signal, pollSeconds: 1, maxPollSeconds: 30 });
    await vi.advanceTimersByTimeAsync(120_000);
    controller.abort();
    await vi.advanceTimersByTimeAsync(0);
    await watching;
    expect(passes).toBe(2);
    const gaps = polls.slice(1).map((at, index) => at - polls[index]!);
    // Each wait at least as long as the one before, but the one the due time cut short.
    const due = polls.findIndex((at) => at >= 20_000);
    const before = gaps[due - 2]!;
    const after = gaps.slice(due);
    expect(after.length).toBeGreaterThan(0);
    for (const gap of after) expect(gap).toBeGreaterThanOrEqual(before);
  });

  it('a pass a due time woke that wrote a receipt (a retry run) sets the back-off back: the next look at the remote comes one poll later', async () => {
    vi.useFakeTimers({ now: new Date('2026-01-01T00:00:00Z') });
    const polls: number[] = [];
    let passes = 0;
    const start = Date.now();
    const runner = {
      cutOffAt: null,
      // The first pass asks to be woken 20 s later, for a retry; the pass that wake runs writes its receipt.
      runOnce: () => {
        passes += 1;
        return Promise.resolve({ receipts: passes === 2 ? 1 : 0, waiting: passes === 1 ? [isoSeconds(new Date(start + 20_000))] : [], held: [], kept: [], retries: [] });
      },
    } as unknown as Runner;
    const controller = new AbortController();
    const remoteHead = (): Promise<string> => {
      polls.push(Date.now() - start);
      return Promise.resolve('a'.repeat(40));
    };
    const watching = watchRemote(runner, { remote: { remoteHead }, signal: controller.signal, pollSeconds: 1, maxPollSeconds: 30 });
    await vi.advanceTimersByTimeAsync(60_000);
    controller.abort();
    await vi.advanceTimersByTimeAsync(0);
    await watching;
    expect(passes).toBe(2);
    const due = polls.findIndex((at) => at >= 20_000);
    expect(polls[due + 1]! - polls[due]!, 'one poll interval after the pass that did work').toBe(1_000);
  });
});
