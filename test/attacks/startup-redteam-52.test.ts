import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { enqueuePanel } from '../../src/consult/enqueue.js';
import type { Problem } from '../../src/lane/runner-lane.js';
import type { Runner, RunnerEvent } from '../../src/runner/runner.js';
import { receiptsOf, worlds, type World } from '../helpers/lane.js';
import { tempDir } from '../helpers/tmp.js';
import { isoSeconds } from '../../src/util/time.js';

/**
 * A careless operator, round 52: a model server on this machine that answers only after the runner
 * started (or restarted while it ran). What the runner found there is an answer for a few seconds on
 * its monotonic clock, not for a whole pass: a long pass, and the consults a dispatch's agent asks,
 * look again.
 */

const dir = tempDir('startup-redteam-52-');
const fresh = worlds(join(dir, 'worlds'));

/** A look at aa.chatgpt's endpoint on this machine: nothing answers until `answer()`; counted. */
function silentUntilAnswered(): { looks: ReadonlyMap<string, () => Promise<Problem | null>>; answer: () => void; count: () => number } {
  let up = false;
  let count = 0;
  const look = async (): Promise<Problem | null> => {
    count += 1;
    return up ? null : { code: 'ORACLE_CONFIG', message: 'nothing answers at http://127.0.0.1:9/v1 on this machine (connection refused)' };
  };
  return { looks: new Map([['aa.chatgpt', look]]), answer: () => (up = true), count: () => count };
}

describe('a target whose model server on this machine answers while a pass runs', { timeout: 120_000 }, () => {
  it('its held consult is looked at again in the same pass once the answer is old, and claimed and run there', async () => {
    const world = await fresh();
    const endpoint = silentUntilAnswered();
    let monotonic = 0;
    const events: RunnerEvent[] = [];
    const held = (await world.consult({ idempotencyKey: 'held' })).messageId;
    const other = (await world.consult({ target: 'aa.gemini', idempotencyKey: 'other' })).messageId;
    const runner = world.runner({
      transport: world.fakeOracle('ok'),
      looks: endpoint.looks,
      monotonic: () => monotonic,
      onEvent: (event) => {
        events.push(event);
        // While the other consult runs, the model server comes up and the pass's first answer grows old.
        if (event.type === 'claimed' && event.messageId === other) {
          endpoint.answer();
          monotonic += 6_000;
        }
      },
    });
    const summary = await runner.runOnce();
    expect(events.filter((event) => event.type === 'claimed').map((event) => event.type === 'claimed' && event.messageId)).toEqual([other, held]);
    expect(summary.held).toEqual([]);
    expect((await receiptsOf(world, held)).map((receipt) => receipt['status'])).toEqual(['succeeded']);
    expect(endpoint.count()).toBe(2);
  });

  it('a guard: an answer younger than the look period is not asked again within the pass', async () => {
    const world = await fresh();
    const endpoint = silentUntilAnswered();
    const events: RunnerEvent[] = [];
    const held = (await world.consult({ idempotencyKey: 'held' })).messageId;
    const other = (await world.consult({ target: 'aa.gemini', idempotencyKey: 'other' })).messageId;
    const runner = world.runner({ transport: world.fakeOracle('ok'), looks: endpoint.looks, monotonic: () => 1_000, onEvent: (event) => events.push(event) });
    const summary = await runner.runOnce();
    expect(events.filter((event) => event.type === 'claimed').map((event) => event.type === 'claimed' && event.messageId)).toEqual([other]);
    expect(summary.held).toEqual([held]);
    expect(endpoint.count()).toBe(1);
  });
});

/** The white box: the wait a dispatch attempt's consult tool runs, with the consult lane it lends. */
function asker(runner: Runner): (messageId: string) => Promise<void> {
  const internals = runner as unknown as { runAsked(lane: unknown, id: string): Promise<void>; lanes: ReadonlyMap<string, unknown> };
  return (messageId) => internals.runAsked(internals.lanes.get('aa_consult'), messageId);
}

describe("a consult a dispatch's agent asks, to a target whose model server on this machine does not answer", { timeout: 120_000 }, () => {
  it('is looked at before it is claimed: refused with the coded reason, unclaimed; once the server answers and the answer is old, it runs', async () => {
    const world: World = await fresh();
    const endpoint = silentUntilAnswered();
    let monotonic = 0;
    const events: RunnerEvent[] = [];
    const { messageId } = await world.consult({ idempotencyKey: 'asked' });
    const runner = world.runner({ transport: world.fakeOracle('ok'), looks: endpoint.looks, monotonic: () => monotonic, onEvent: (event) => events.push(event) });
    const ask = asker(runner);
    await expect(ask(messageId)).rejects.toMatchObject({ code: 'ORACLE_CONFIG', message: expect.stringContaining('nothing answers at http://127.0.0.1:9/v1') });
    expect(endpoint.count()).toBe(1);
    expect(events.filter((event) => event.type === 'claimed')).toEqual([]);
    expect(await receiptsOf(world, messageId)).toEqual([]);
    endpoint.answer();
    monotonic += 6_000;
    await ask(messageId);
    expect(endpoint.count()).toBe(2);
    expect(events.filter((event) => event.type === 'claimed')).toHaveLength(1);
    expect((await receiptsOf(world, messageId)).map((receipt) => receipt['status'])).toEqual(['succeeded']);
  });
});

describe('a message left unclaimed for the same reason pass after pass (a watch waking every 5 s while another is held)', { timeout: 120_000 }, () => {
  it('is said skipped once, not once a pass', async () => {
    const world = await fresh({ policy: (policy) => ({ ...policy, panels: [{ name: 'review', from: 'coo.*', members: ['aa.chatgpt', 'aa.gemini', 'aa.claude'] }] }) });
    // A panel whose Gemini member has no provider key here: each pass leaves its members unclaimed, for the same reason.
    const panel = await enqueuePanel({ ledger: world.ledger, key: world.actors.coo, now: new Date(), repo: world.target, patterns: ['src/add.ts'], question: 'Is add() correct for NaN?', maxRuntimeSeconds: 60 });
    const runner = world.runner({ transport: world.transport({ env: { OPENAI_API_KEY: 'sk-test-key', ANTHROPIC_API_KEY: 'sk-ant-test-key' } }) });
    await runner.runOnce();
    await runner.runOnce();
    const said = panel.members.map((member) => world.events.filter((event) => event.type === 'skipped' && event.messageId === member.messageId).length);
    expect(said).toEqual(panel.members.map(() => 1));
    expect(world.server.requests).toHaveLength(0);
  });

  it("forgets what it said of a message a pass no longer leaves unclaimed: said again if left so again, and a long watch keeps no line for every message its fleet ran", async () => {
    const world = await fresh();
    const runner = world.runner({ transport: world.fakeOracle('ok') });
    const internals = runner as unknown as { saidSkipped: Map<string, string>; passSkipped: Set<string> };
    // A message another runner held open, said skipped in an earlier pass, since receipted by that runner.
    internals.saidSkipped.set('msg_01GONE0000000000000000000', 'attempt 1 is being run by runner-b');
    internals.passSkipped = new Set();
    await runner.runOnce();
    expect([...internals.saidSkipped.keys()]).toEqual([]);
  });
});

describe('a target whose model server on this machine stays silent pass after pass', { timeout: 120_000 }, () => {
  it('is looked at again 5 s after the first pass, then 10, 20 and at most 30 s after each next: a watch through a remote does not fetch every 5 s for an hour', async () => {
    const world = await fresh();
    const endpoint = silentUntilAnswered();
    const now = new Date();
    await world.consult({ idempotencyKey: 'held' });
    const runner = world.runner({ transport: world.fakeOracle('ok'), looks: endpoint.looks, clock: () => now });
    const wakes: number[] = [];
    for (let pass = 0; pass < 5; pass += 1) {
      const summary = await runner.runOnce();
      expect(summary.held).toHaveLength(1);
      wakes.push((Date.parse(summary.waiting[0]!) - Date.parse(isoSeconds(now))) / 1000);
    }
    expect(wakes).toEqual([5, 10, 20, 30, 30]);
    expect(endpoint.count()).toBe(5);
  });
});
