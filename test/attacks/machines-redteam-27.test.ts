import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { OracleCli } from '../../src/consult/oracle.js';
import type { RunnerEvent } from '../../src/runner/runner.js';
import { processesUnder, startBounded, until, watchArgs, writeKey } from '../helpers/damage.js';
import { blockersOf, FAKE_ORACLE, receiptsOf, worlds, type World } from '../helpers/lane.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * Runners on machines, round 27: a machine whose clock is stepped (NTP, a virtual machine resumed)
 * between a runner's start of a paid call and the recovery of that call by the runner started next.
 */

const dir = tempDir('machines-redteam-27-');
const fresh = worlds(join(dir, 'worlds'));
const env = { OPENAI_API_KEY: 'sk-test-key' };
const STEP_MS = 2 * 3_600_000;

afterEach(() => {
  vi.restoreAllMocks();
});

/** The fake Oracles still running for a world: a killed runner's orphans. */
function orphans(world: World): number[] {
  return processesUnder(world.dir)
    .filter((line) => line.includes(FAKE_ORACLE))
    .map((line) => Number(line.trim().split(' ')[0]));
}

/**
 * A consult whose answer the model holds until a second request arrives, claimed by a `coo watch
 * --once` that is SIGKILLed once its Oracle made the call: the Oracle is left running, waiting on it.
 */
async function killedMidCall(world: World): Promise<string> {
  world.server.holdUntil(2);
  const { messageId } = await world.consult({ ttlSeconds: 86_400 });
  const args = [...watchArgs(world, writeKey(world.dir, 'coo', world.actors.coo), join(world.dir, 'state')), '--once'];
  const runner = startBounded(args, env);
  await until('the model called', () => world.server.requests.length === 1);
  runner.child.kill('SIGKILL');
  await runner.ended;
  expect(orphans(world)).not.toHaveLength(0);
  return messageId;
}

/** Lets the held answer go: the second request the model waits for, one no Oracle makes. */
async function releaseAnswer(world: World): Promise<void> {
  const response = await fetch(`${world.server.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'release', messages: [{ role: 'user', content: 'release' }] }) });
  await response.text();
}

/**
 * The runner started next on the same state folder, its clock `stepMs` on from the clock the call was
 * started by: it recovers the attempt; once it says it waits for the orphaned Oracle (or its pass ended
 * without waiting), the model answers.
 */
async function recoverAfterStep(world: World, stepMs: number): Promise<RunnerEvent[]> {
  const real = Date.now.bind(Date);
  if (stepMs !== 0) vi.spyOn(Date, 'now').mockImplementation(() => real() + stepMs);
  const transport = new OracleCli({ command: [process.execPath, FAKE_ORACLE, '--fake-mode', 'http'], route: { baseUrl: `${world.server.url}/v1` }, env, hide: [world.gitdir] });
  const runner = world.runner({ transport, clock: () => new Date(Date.now()) });
  let ended = false;
  const pass = runner.runOnce().finally(() => (ended = true));
  try {
    await until('the wait for the orphaned Oracle, or the end of the pass', () => ended || world.events.some((event) => event.type === 'oracle_orphan'));
    await releaseAnswer(world);
    await pass;
  } finally {
    for (const pid of orphans(world)) process.kill(-pid, 'SIGKILL');
  }
  return world.events;
}

/** The model's requests an Oracle made: each a paid call. */
function paidCalls(world: World): number {
  return world.server.requests.filter((request) => request.model !== 'release').length;
}

describe("a runner killed while its Oracle waits on the model, restarted after the machine's clock was stepped", { timeout: 180_000 }, () => {
  it('two hours forward: the next runner still waits for the orphaned Oracle, harvests the answer it paid for, and pays nothing again', async () => {
    const world = await fresh();
    const messageId = await killedMidCall(world);
    const events = await recoverAfterStep(world, STEP_MS);
    expect(events).toContainEqual(expect.objectContaining({ type: 'oracle_orphan', messageId, attempt: 1 }));
    const receipts = await receiptsOf(world, messageId);
    expect(receipts.map((receipt) => receipt['status'])).toEqual(['succeeded']);
    expect(paidCalls(world)).toBe(1);
  });

  it('two hours back: the same (a guard)', async () => {
    const world = await fresh();
    const messageId = await killedMidCall(world);
    const events = await recoverAfterStep(world, -STEP_MS);
    expect(events).toContainEqual(expect.objectContaining({ type: 'oracle_orphan', messageId, attempt: 1 }));
    const receipts = await receiptsOf(world, messageId);
    expect(receipts.map((receipt) => receipt['status'])).toEqual(['succeeded']);
    expect(receipts.flatMap((receipt) => blockersOf(receipt))).toEqual([]);
    expect(paidCalls(world)).toBe(1);
  });
});
