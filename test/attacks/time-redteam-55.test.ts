import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { verifyLedger } from '../../src/audit/verify.js';
import { LIMITS } from '../../src/limits.js';
import { makeWorld, type World } from '../helpers/lane.js';
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

  it('a runner a little fast (within the skew allowed between machines) beats: its heartbeat is fresh, as machines within the skew still work', async () => {
    const w = await world('skew-ahead-beat');
    const now = new Date();
    await w.runner({ clock: () => new Date(now.getTime() + SKEW_MS - 60_000) }).heartbeat();
    const report = await verifyLedger(w.gitdir, { now });
    expect(report.findings).toEqual([]);
  });

  it('the heartbeat of a runner with the right clock is fresh until it expires, and expired after', async () => {
    const w = await world('right-beat');
    const now = new Date();
    await w.runner({ clock: () => now }).heartbeat();
    expect((await verifyLedger(w.gitdir, { now })).findings).toEqual([]);
    const ttl = (await w.ledger.state()).policy!.doc.heartbeat.ttl_seconds;
    const later = await verifyLedger(w.gitdir, { now: new Date(now.getTime() + ttl * 1000) });
    expect(later.findings.map((finding) => finding.code)).toEqual(['HEARTBEAT_EXPIRED']);
  });
});
