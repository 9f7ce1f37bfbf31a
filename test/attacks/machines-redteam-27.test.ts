import { spawn, spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, readdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { OracleCli } from '../../src/consult/oracle.js';
import type { RunnerEvent } from '../../src/runner/runner.js';
import { formatProcessRecord, processStartTime, recordedBoot } from '../../src/util/process.js';
import { endGroup, orphans, startBounded, until, watchArgs, writeKey } from '../helpers/damage.js';
import { awayOncePaid, makeCase, remoteReceipts, types } from '../helpers/remote-runners.js';
import { agentScript, codesOf, dispatchTo, hostilePlaces, receiptsFor, watchOnce } from '../helpers/hostile-agent.js';
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

const strangers: number[] = [];
const closers: Array<() => Promise<void> | void> = [];
afterAll(async () => {
  for (const group of strangers) endGroup(group);
  for (const close of closers.reverse()) await close();
});

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
    for (const pid of orphans(world)) endGroup(pid);
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

/** Whether a process runs (a killed one is a zombie until its parent reaps it). */
function running(pid: number): boolean {
  try {
    return !readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.startsWith('Z');
  } catch {
    return false;
  }
}

/**
 * A process group of this machine that is nobody's runner's: its leader exited and left a child in it,
 * so no process holds the group's number as its pid (Linux gives no new process that pid meanwhile).
 */
async function leaderlessGroup(): Promise<{ group: number; members: () => number[] }> {
  const leader = spawn('sh', ['-c', 'sleep 300 & exit 0'], { detached: true, stdio: 'ignore' });
  await new Promise((resolve) => leader.on('exit', resolve));
  const group = leader.pid!;
  strangers.push(group);
  // A member killed is a zombie until whoever adopted it reaps it: only a running one counts.
  const members = (): number[] =>
    spawnSync('ps', ['-eo', 'pid=,pgid=,stat='], { encoding: 'utf8' })
      .stdout.split('\n')
      .map((line) => line.trim().split(/\s+/))
      .filter(([, pgid, stat]) => Number(pgid) === group && stat !== undefined && !stat.startsWith('Z'))
      .map(([pid]) => Number(pid));
  expect(members()).toHaveLength(1);
  return { group, members };
}

describe("a runner's ledger and state folder restored onto another machine (a backup, a cloned disk), an attempt left claimed in them", { timeout: 180_000 }, () => {
  it("the runner there recovers the attempt and signals no process of its machine, though the Oracle pid the folder records is a group number there", async () => {
    const world = await fresh();
    const messageId = await killedMidCall(world);
    const sandboxes = join(world.dir, 'state', 'sandboxes');
    const [sandbox] = readdirSync(sandboxes);
    const pidPath = join(sandboxes, sandbox!, 'oracle.pid');
    const [pid, start] = readFileSync(pidPath, 'utf8').trim().split(' ');
    const recorded = { pid: Number(pid), start: start! };
    // The machine the folder came from is gone, and its Oracle with it.
    endGroup(recorded.pid);
    for (const pid of orphans(world)) endGroup(pid);
    await until('the orphaned Oracle gone', () => orphans(world).length === 0);
    // What that machine recorded, as this build writes it there: its Oracle's pid, which on this machine numbers another's group.
    const stranger = await leaderlessGroup();
    const elsewhere = '00000000-0000-4000-8000-000000000000';
    writeFileSync(pidPath, formatProcessRecord({ pid: stranger.group, start: recorded.start, boot: elsewhere }));
    const attemptPath = join(sandboxes, sandbox!, 'attempt.json');
    writeFileSync(attemptPath, JSON.stringify({ ...(JSON.parse(readFileSync(attemptPath, 'utf8')) as object), boot: elsewhere }));

    await recoverAfterStep(world, 0);
    expect(stranger.members()).toHaveLength(1);
    const receipts = await receiptsOf(world, messageId);
    expect(receipts.map((receipt) => blockersOf(receipt))).toEqual([['interrupted'], []]);
    expect(receipts[0]!['actual_cost_usd']).toBeGreaterThan(0);
  });
});

describe("a state folder copied from a stopped runner's machine, its journal holding a paid call's receipt, to a runner on another clone of the remote", { timeout: 180_000 }, () => {
  it('the runner with the copy publishes the receipt once; the first runner, restarted, finds it landed: nothing is paid or published again (a guard)', async () => {
    const world = await makeCase(join(dir, 'copied'), closers);
    const messageId = await world.consult();
    const first = await world.machine('first');
    const { away, onEvent } = awayOncePaid(world, first);
    const runner = first.runner({ onEvent });
    await runner.runOnce();
    runner.close();
    expect(types(first.events)).toEqual(expect.arrayContaining(['claimed', 'journaled']));
    renameSync(away, world.served.gitdir);

    const second = await world.machine('second');
    cpSync(first.stateDir, second.stateDir, { recursive: true });
    await second.runner().runOnce();
    expect(await remoteReceipts(world.served, messageId)).toEqual([{ attempt: 1, status: 'succeeded', blockers: [] }]);
    const head = world.served.head();

    await first.runner().runOnce();
    expect(world.served.head()).toBe(head);
    expect(readdirSync(join(first.stateDir, 'journal'))).toEqual([]);
    expect(types(second.events)).not.toContain('claimed');
    expect([...first.events, ...second.events].filter((event) => event.type === 'error')).toEqual([]);
    expect(world.model.requests).toHaveLength(1);
  });
});

describe("a dispatch whose runner died after its claim, its executor's pid recorded as this build records it (with its mark and its machine's boot)", { timeout: 180_000 }, () => {
  const place = hostilePlaces(join(dir, 'dispatch'), 'runner');
  it('the runner started next reads the whole record and ends that executor, and receipts the attempt interrupted (a guard)', async () => {
    const where = await place('boot-recorded');
    const agent = agentScript(where.world.dir, 'true');
    const { messageId } = await dispatchTo(where, 'boot-recorded');
    expect(watchOnce(where, agent, { env: { COO_FAILPOINT: 'after-claim' } }).signal).toBe('SIGKILL');
    const attemptId = (await where.world.ledger.state()).messages.get(messageId)!.attempts[0]!.attemptId;
    // The executor the dead runner left: a process in a group of its own, as the runner starts one.
    const executor = spawn('sleep', ['300'], { detached: true, stdio: 'ignore' }).pid!;
    strangers.push(executor);
    const folder = join(where.stateDir, 'dispatch', attemptId);
    mkdirSync(folder, { recursive: true });
    writeFileSync(join(folder, 'executor.pid'), formatProcessRecord({ pid: executor, start: processStartTime(executor), mark: 'b'.repeat(24), ...recordedBoot() }));
    watchOnce(where, agent);
    expect(running(executor)).toBe(false);
    expect(codesOf((await receiptsFor(where, messageId))[0])).toEqual(['interrupted']);
  });
});
