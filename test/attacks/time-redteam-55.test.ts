import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { verifyLedger } from '../../src/audit/verify.js';
import { LIMITS } from '../../src/limits.js';
import { assignWork } from '../../src/runner/assignment.js';
import type { Runner } from '../../src/runner/runner.js';
import { watchRemote } from '../../src/runner/watch.js';
import { isoSeconds } from '../../src/util/time.js';
import { makeWorld, type World } from '../helpers/lane.js';
import { makeCase, remoteReceipts } from '../helpers/remote-runners.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * Machines whose clocks differ, on one ledger: what each reads from a time another machine wrote.
 */

const dir = tempDir('time-redteam-55');
const closers: Array<() => Promise<void> | void> = [];
afterAll(async () => {
  for (const close of closers.reverse()) await close();
});

async function world(name: string): Promise<World> {
  const made = await makeWorld(join(dir, name));
  closers.push(() => made.close());
  return made;
}

const YEAR_MS = 365 * 86_400_000;
const SKEW_MS = LIMITS.clockSkewSeconds * 1000;

describe('the freshness of a ledger judged by a heartbeat a clock that runs ahead dated', () => {
  it('a runner a year fast beats (no hook judged its date), then the ledger is withheld: coo verify on a machine with the right clock says the heartbeat tells nothing of when the ledger was live, never that it is fresh for a year', async () => {
    const w = await world('year-ahead-beat');
    const now = new Date();
    await w.runner({ clock: () => new Date(now.getTime() + YEAR_MS) }).heartbeat();
    const report = await verifyLedger(w.gitdir, { now });
    expect(report.findings.map((finding) => finding.code)).toEqual(['HEARTBEAT_EXPIRED']);
    expect(report.findings[0]!.message).toContain('ahead of this clock');
  });

  it('a runner with the right clock beats, then one a year fast: the ledger is fresh by the first, whose beat reads live, not called frozen because the newest beat says nothing', async () => {
    const w = await world('year-ahead-after-right');
    const now = new Date();
    await w.runner({ clock: () => now }).heartbeat();
    await w.runner({ clock: () => new Date(now.getTime() + YEAR_MS) }).heartbeat();
    expect((await verifyLedger(w.gitdir, { now })).findings).toEqual([]);
    const ttl = (await w.ledger.state()).policy!.doc.heartbeat.ttl_seconds;
    const later = await verifyLedger(w.gitdir, { now: new Date(now.getTime() + ttl * 1000 + SKEW_MS) });
    expect(later.findings.map((finding) => finding.code)).toEqual(['HEARTBEAT_EXPIRED']);
    expect(later.findings[0]!.message).toContain('ahead of this clock');
  });

  it('a runner a little fast (within the skew allowed between machines) beats: its heartbeat is fresh, as machines within the skew still work', async () => {
    const w = await world('skew-ahead-beat');
    const now = new Date();
    await w.runner({ clock: () => new Date(now.getTime() + SKEW_MS - 60_000) }).heartbeat();
    const report = await verifyLedger(w.gitdir, { now });
    expect(report.findings).toEqual([]);
  });

  it('a runner four minutes slow (within the skew) beats, under a policy whose heartbeats live two minutes: its live ledger is fresh by the right clock, not called frozen', async () => {
    const w = await makeWorld(join(dir, 'behind-beat'), { policy: (policy) => ({ ...policy, heartbeat: { interval_seconds: 60, ttl_seconds: 120 } }) });
    closers.push(() => w.close());
    const now = new Date();
    await w.runner({ clock: () => new Date(now.getTime() - 240_000) }).heartbeat();
    expect((await verifyLedger(w.gitdir, { now })).findings).toEqual([]);
  });

  it('the heartbeat of a runner with the right clock is fresh until the skew has passed its expiry too, and expired after', async () => {
    const w = await world('right-beat');
    const now = new Date();
    await w.runner({ clock: () => now }).heartbeat();
    expect((await verifyLedger(w.gitdir, { now })).findings).toEqual([]);
    const ttl = (await w.ledger.state()).policy!.doc.heartbeat.ttl_seconds;
    expect((await verifyLedger(w.gitdir, { now: new Date(now.getTime() + ttl * 1000 + SKEW_MS - 1000) })).findings).toEqual([]);
    const later = await verifyLedger(w.gitdir, { now: new Date(now.getTime() + ttl * 1000 + SKEW_MS) });
    expect(later.findings.map((finding) => finding.code)).toEqual(['HEARTBEAT_EXPIRED']);
  });
});

describe('a watch through a remote whose machine clock is stepped back while it waits to be woken, main never moving', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  // The runner asks to be woken 20 s on (a lease that lapses then, a look again at a model server on this machine);
  // then NTP sets the wall clock back an hour (it ran an hour fast, or a virtual machine was restored).
  async function passesAfterStepBack(step: number): Promise<number[]> {
    vi.useFakeTimers({ now: new Date('2026-01-01T12:00:00Z') });
    const passes: number[] = [];
    const start = Date.now();
    let ticks = 0;
    const runner = {
      cutOffAt: null,
      runOnce: () => {
        passes.push(ticks);
        return Promise.resolve({ receipts: 0, waiting: passes.length === 1 ? [isoSeconds(new Date(start + 20_000))] : [], held: [], kept: [], retries: [] });
      },
    } as unknown as Runner;
    const controller = new AbortController();
    const watching = watchRemote(runner, { remote: { remoteHead: () => Promise.resolve('a'.repeat(40)) }, signal: controller.signal, pollSeconds: 1, maxPollSeconds: 30 });
    await vi.advanceTimersByTimeAsync(1_000);
    vi.setSystemTime(Date.now() + step);
    for (ticks = 1; ticks <= 120; ticks += 1) await vi.advanceTimersByTimeAsync(1_000);
    controller.abort();
    await vi.advanceTimersByTimeAsync(0);
    await watching;
    return passes;
  }

  it('set back an hour: the pass the runner asked for runs when its 20 s have passed on the monotonic clock, not an hour later when the wall clock reads the time again', async () => {
    const passes = await passesAfterStepBack(-3_600_000);
    expect(passes.length).toBe(2);
    expect(passes[1]).toBeGreaterThanOrEqual(20);
    expect(passes[1]).toBeLessThanOrEqual(22);
  });

  it('set forward an hour: the pass runs at once, as the wall clock reads its time as passed', async () => {
    const passes = await passesAfterStepBack(3_600_000);
    expect(passes.length).toBe(2);
    expect(passes[1]).toBeLessThanOrEqual(2);
  });
});

describe('runners sharing a hookless remote queue, one of them gone after beating a year fast', () => {
  it('a heartbeat dated a year ahead does not count its runner live: the message the assignment would give it is taken at once, not left to a runner that is gone', { timeout: 120_000 }, async () => {
    const world = await makeCase(dir, closers);
    // No hook: the remote takes what each writer's own clock took.
    rmSync(join(world.served.gitdir, 'hooks', 'pre-receive'));
    const fast = await world.machine('fast');
    const right = await world.machine('right');
    const message = await world.consult();
    const mine = right.runner({ share: { handoffMs: 600_000, staggerMs: 0 }, monotonic: () => 0 });
    const yearAhead = (): Date => new Date(Date.now() + YEAR_MS);
    // Runner ids are random: one the assignment gives the message to (a few tries).
    let gone = fast.runner({ clock: yearAhead });
    for (let tries = 0; tries < 64 && assignWork([message], [mine.runnerId, gone.runnerId]).get(message) !== gone.runnerId; tries += 1) {
      gone.close();
      gone = fast.runner({ clock: yearAhead });
    }
    expect(assignWork([message], [mine.runnerId, gone.runnerId]).get(message)).toBe(gone.runnerId);
    await gone.heartbeat();
    gone.close();
    await mine.heartbeat();
    expect((await mine.runOnce()).receipts).toBe(1);
    expect((await remoteReceipts(world.served, message)).map((receipt) => receipt.status)).toEqual(['succeeded']);
    expect(world.model.requests).toHaveLength(1);
  });
});
