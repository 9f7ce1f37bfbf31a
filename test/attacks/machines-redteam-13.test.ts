import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { loadPrivateKey } from '../../src/cli/common.js';
import { attemptIdOf } from '../../src/authority/runnable.js';
import { folderOf } from '../../src/authority/state.js';
import { allowanceBoundsUsd } from '../../src/lane/budget.js';
import { claimPath } from '../../src/ledger/layout.js';
import { toYaml } from '../../src/schema/strict-yaml.js';
import { sessionSlugFor } from '../../src/util/ids.js';
import { isoSeconds } from '../../src/util/time.js';
import { blockersOf, receiptsOf, worlds, type World } from '../helpers/lane.js';
import { makeCase, remoteReceipts, types } from '../helpers/remote-runners.js';
import { removeHook } from '../helpers/remote-ledger.js';
import { claimedByAGoneRunner } from '../helpers/gone-runner.js';
import { git, tempDir } from '../helpers/tmp.js';

/**
 * Machines whose clocks disagree, or jump, around the times the ledger's rules read: a clock is
 * never a way to pay more than the ledger allows.
 */

const dir = tempDir('machines-redteam-13');
const run = promisify(execFile);
const made: World[] = [];
const fresh = worlds(dir);
const closers: Array<() => Promise<void> | void> = [];

afterAll(async () => {
  for (const world of made) await world.close();
  for (const close of closers.reverse()) await close();
});

/** The first UTC midnight at least ten minutes from now: every time a case dates around it lies ahead of the ledger's first entries. */
function nextMidnight(): Date {
  const day = 86_400_000;
  return new Date(Math.ceil((Date.now() + 600_000) / day) * day);
}

const at = (midnight: Date, seconds: number): Date => new Date(midnight.getTime() + seconds * 1000);

describe("an attempt that straddles a day's midnight on two machines' clocks", () => {
  it("is charged to the day of its claim when its receipt's clock reads the day before: the next day's cap still counts what it spent", async () => {
    const w = await fresh({ policy: (policy) => ({ ...policy, budgets: { ...policy.budgets, daily_cost_cap_usd: 1 } }) });
    made.push(w);
    const midnight = nextMidnight();
    const { messageId } = await w.consult({ idempotencyKey: 'straddles-midnight', maxCostUsd: 1, now: at(midnight, -60) });
    const state = await w.ledger.state();
    const record = state.messages.get(messageId)!;
    const { ceilingUsd } = allowanceBoundsUsd(record, 1, state.policy!.doc, state.registry!.doc);
    // A runner whose clock read 00:00:30 claims the whole budget, and then goes quiet.
    const claimedAt = at(midnight, 30);
    await claimedByAGoneRunner(w, messageId, ceilingUsd, claimedAt);

    // Another machine, its clock 50 s behind (within the skew allowed between machines), takes it over: by its clock, before midnight.
    let tick = 0;
    const taker = w.runner({ monotonic: () => tick, clock: () => at(midnight, -20), leaseGraceSeconds: 600 });
    await taker.runOnce();
    tick = 2_000_000;
    await taker.runOnce();
    expect(w.events.map((event) => event.type)).toContain('takeover');
    const [receipt] = await receiptsOf(w, messageId);
    expect(blockersOf(receipt!)).toEqual(['interrupted']);
    const charged = receipt!.actual_cost_usd as number;
    expect(charged).toBeGreaterThan(0.9);

    // The spend happened after 00:00:30 by the claim's clock: the new day holds it, not the one before.
    const after = await w.ledger.state();
    const today = isoSeconds(midnight).slice(0, 10);
    expect(after.spendByDay.get(today)).toBeCloseTo(charged, 9);
    expect(after.spendByDay.get(isoSeconds(at(midnight, -60)).slice(0, 10))).toBeUndefined();

    // So the new day's cap has nothing left for another consult: it is blocked, never paid.
    const { messageId: next } = await w.consult({ idempotencyKey: 'after-midnight', maxCostUsd: 1, now: at(midnight, 60) });
    const requests = w.server.requests.length;
    await w.runner({ clock: () => at(midnight, 90) }).runOnce();
    const [blocked] = await receiptsOf(w, next);
    expect(blockersOf(blocked!)).toEqual(['daily_cap_reached']);
    expect(w.server.requests.length).toBe(requests);
  }, 120_000);
});

describe('a hookless remote and a holder of the COO key who dates a claim a year ahead', { timeout: 180_000 }, () => {
  it('runners on two machines, one clock right and one ten minutes behind: the claim is taken over once, the next attempt is said blocked by its date (CLOCK_SKEW, once each) and never claimed, and nothing is paid', async () => {
    const world = await makeCase(dir, closers);
    const messageId = await world.consult();
    removeHook(world.served);
    const hostile = await world.machine('hostile');
    const key = loadPrivateKey(world.served.keys.coo);
    const record = (await hostile.ledger.state()).messages.get(messageId)!;
    const year = new Date(Date.now() + 365 * 86_400_000);
    const doc = { schema_version: 'claim.v0', message_id: messageId, attempt_id: attemptIdOf(record, 1), attempt_number: 1, runner_id: 'run-never', transport_session_id: sessionSlugFor(messageId, 1), claimed_at: isoSeconds(year) };
    // Its own clock reads a year on, so its own check passes; no hook judges it on the remote.
    await hostile.remote.append({ files: [{ path: claimPath(folderOf(record), 1), bytes: Buffer.from(toYaml(doc)) }], key, now: year, summary: `claim ${messageId} attempt 1` });

    // Both machines' clocks move together, the wall clocks with the monotonic ones: a retry's wait passes on both.
    let tick = 0;
    const start = Date.now();
    const right = await world.machine('right');
    const behind = await world.machine('behind');
    const runners = [right.runner({ monotonic: () => tick, clock: () => new Date(start + tick) }), behind.runner({ monotonic: () => tick, clock: () => new Date(start + tick - 600_000) })];
    for (const runner of runners) await runner.runOnce();
    expect(right.events).toContainEqual(expect.objectContaining({ type: 'clock_skew', messageId, runner: 'run-never' }));
    for (let pass = 0; pass < 3; pass += 1) {
      tick += 1_000_000;
      for (const runner of runners) await runner.runOnce();
    }

    expect([...right.events, ...behind.events].filter((event) => event.type === 'takeover')).toHaveLength(1);
    expect(await remoteReceipts(world.served, messageId)).toEqual([{ attempt: 1, status: 'failed', blockers: ['interrupted'] }]);
    for (const machine of [right, behind]) {
      expect(machine.events.filter((event) => event.type === 'error')).toEqual([expect.objectContaining({ messageId, code: 'CLOCK_SKEW', message: expect.stringContaining('the claim of attempt 1 is dated') })]);
      expect(types(machine.events)).not.toContain('claimed');
    }
    expect(world.model.requests).toHaveLength(0);
  });
});

describe('a hookless remote that drops a paid call\'s claim and receipt after taking them', { timeout: 180_000 }, () => {
  it("the runner that wrote them refuses it as rolled back, and its advice, followed as written, puts them back from its clone: the answer is not lost and no runner pays again", async () => {
    const world = await makeCase(dir, closers);
    const messageId = await world.consult();
    removeHook(world.served);
    const queued = world.served.head();
    const first = await world.machine('runner-1');
    await first.runner().runOnce();
    expect(await remoteReceipts(world.served, messageId)).toEqual([{ attempt: 1, status: 'succeeded', blockers: [] }]);

    // The forge moves main back to before the claim: the claim and the receipt are in runner-1's clone alone.
    git(['--git-dir', world.served.gitdir, 'update-ref', 'refs/heads/main', queued]);
    const refused = (await first.runner().runOnce().catch((error: unknown) => error)) as { code: string; message: string };
    expect(refused).toMatchObject({ code: 'REMOTE_UNVERIFIED', message: expect.stringMatching(/rolled back/) });
    const advice = /\(git --git-dir (\S+) push origin ([0-9a-f]{40}):(refs\/heads\/main),/.exec(refused.message);
    expect(advice).not.toBeNull();
    // Asynchronously: the remote's git server answers from this process.
    await run('git', ['--git-dir', advice![1]!, 'push', '-q', 'origin', `${advice![2]}:${advice![3]}`]);

    expect(await remoteReceipts(world.served, messageId)).toEqual([{ attempt: 1, status: 'succeeded', blockers: [] }]);
    await first.runner().runOnce();
    const second = await world.machine('runner-2');
    await second.runner().runOnce();
    expect(types(second.events)).not.toContain('claimed');
    expect(world.model.requests).toHaveLength(1);
  });
});
