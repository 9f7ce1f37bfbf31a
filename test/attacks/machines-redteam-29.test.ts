import { spawn } from 'node:child_process';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { folderOf } from '../../src/authority/state.js';
import { readMessage } from '../../src/lane/envelope.js';
import type { Ledger } from '../../src/ledger/ledger.js';
import { awaitOutcome, type ToolContext } from '../../src/mcp/tools.js';
import type { Runner, RunnerEvent } from '../../src/runner/runner.js';
import { OracleCli } from '../../src/consult/oracle.js';
import { formatProcessRecord, parseProcessRecord, processStartTime, recordedBoot } from '../../src/util/process.js';
import { claimFileOn } from '../helpers/claim-files.js';
import { endGroup, orphans, startBounded, until, watchArgs, writeKey } from '../helpers/damage.js';
import { blockersOf, FAKE_ORACLE, receiptsOf, worlds, type World } from '../helpers/lane.js';
import { isoSeconds } from '../../src/util/time.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * Runners on machines, round 29: a state folder restored into a container recreated on the same
 * machine (the boot is the same, the pid namespace a new one), and a machine's clock stepped while a
 * dispatch's agent waits for a consult another runner claimed, or an MCP client for a message's outcome.
 */

const dir = tempDir('machines-redteam-29-');
const fresh = worlds(join(dir, 'worlds'));
const env = { OPENAI_API_KEY: 'sk-test-key' };
const DAY_MS = 86_400_000;

afterEach(() => {
  vi.restoreAllMocks();
});

const strangers: number[] = [];
afterAll(() => {
  for (const pid of strangers) endGroup(pid);
});

/** Whether a process runs (a killed one is a zombie until its parent reaps it). */
function running(pid: number): boolean {
  try {
    return !readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.startsWith('Z');
  } catch {
    return false;
  }
}


/** A consult claimed by a `coo watch --once` SIGKILLed once its Oracle made the call, whose Oracle then ended too (its container is gone): the folder's Oracle pid file. */
async function killedWithItsContainer(world: World): Promise<{ messageId: string; pidPath: string }> {
  world.server.holdUntil(2);
  const { messageId } = await world.consult({ ttlSeconds: 86_400 });
  const runner = startBounded([...watchArgs(world, writeKey(world.dir, 'coo', world.actors.coo), join(world.dir, 'state')), '--once'], env);
  await until('the model called', () => world.server.requests.length === 1);
  runner.child.kill('SIGKILL');
  await runner.ended;
  for (const pid of orphans(world)) endGroup(pid);
  await until('the orphaned Oracle gone', () => orphans(world).length === 0);
  const sandboxes = join(world.dir, 'state', 'sandboxes');
  const [sandbox] = readdirSync(sandboxes);
  return { messageId, pidPath: join(sandboxes, sandbox!, 'oracle.pid') };
}

/** A process of this machine that is nobody's runner's, in a group of its own, as the runner starts Oracle. */
function stranger(): number {
  const pid = spawn('sleep', ['300'], { detached: true, stdio: 'ignore' }).pid!;
  strangers.push(pid);
  return pid;
}

/** The runner started next on the state folder: its pass, ended early (the stranger killed) if it waits on the stranger as its Oracle. */
async function recover(world: World, pid: number): Promise<RunnerEvent[]> {
  const transport = new OracleCli({ command: [process.execPath, FAKE_ORACLE, '--fake-mode', 'http'], route: { baseUrl: `${world.server.url}/v1` }, env, hide: [world.gitdir] });
  const runner = world.runner({ transport });
  let ended = false;
  const pass = runner.runOnce().finally(() => (ended = true));
  try {
    // The held call is answered when the retry calls the model.
    await until('the wait for the recorded Oracle, or the end of the pass', () => ended || world.events.some((event) => event.type === 'oracle_orphan'));
  } finally {
    if (!ended) endGroup(pid);
    await pass;
  }
  return world.events;
}

describe('a state folder restored into a container recreated on the same machine, a consult left claimed in it', { timeout: 180_000 }, () => {
  it("the runner there neither waits on nor signals the process its namespace gives the recorded Oracle's pid, though that process has the recorded start time", async () => {
    const world = await fresh();
    const { messageId, pidPath } = await killedWithItsContainer(world);
    const written = parseProcessRecord(readFileSync(pidPath, 'utf8'))!;
    // What the old container recorded, read in the new one: the same boot, the pid and start time now a stranger's here, the namespace another.
    const pid = stranger();
    writeFileSync(pidPath, formatProcessRecord({ ...written, pid, start: processStartTime(pid), pidns: String(Number(written.pidns) + 1) }));

    const events = await recover(world, pid);
    expect(events.filter((event) => event.type === 'oracle_orphan')).toEqual([]);
    expect(running(pid)).toBe(true);
    const receipts = await receiptsOf(world, messageId);
    expect(receipts.map((receipt) => blockersOf(receipt))).toEqual([['interrupted'], []]);
    // The record the runner wrote stated the boot and the pid namespace it was written in.
    expect(written).toMatchObject(recordedBoot());
    expect(written.pidns).toMatch(/^\d+$/);
  });

  it('a record of its own namespace naming a live stranger with another start time: neither waited on nor signalled (a guard)', async () => {
    const world = await fresh();
    const { messageId, pidPath } = await killedWithItsContainer(world);
    const written = parseProcessRecord(readFileSync(pidPath, 'utf8'))!;
    const pid = stranger();
    writeFileSync(pidPath, formatProcessRecord({ ...written, pid, start: String(Number(processStartTime(pid)) + 1) }));

    const events = await recover(world, pid);
    expect(events.filter((event) => event.type === 'oracle_orphan')).toEqual([]);
    expect(running(pid)).toBe(true);
    const receipts = await receiptsOf(world, messageId);
    expect(receipts.map((receipt) => blockersOf(receipt))).toEqual([['interrupted'], []]);
  });
});

/**
 * A runner whose wall clock is stepped by `stepMs` once it has read the consult's deadline (its second
 * reading: the first is the look at what the message needs), and whose monotonic clock the test moves.
 */
function steppedRunner(world: World, stepMs: number): { runner: Runner; ask: (messageId: string) => Promise<void>; looks: (more: number) => Promise<'looked'>; setMonotonic: (ms: number) => void } {
  let offset = 0;
  let monotonic = 0;
  let readings = 0;
  const waiting: Array<{ at: number; resolve: (value: 'looked') => void }> = [];
  const runner = world.runner({
    clock: () => {
      const now = new Date(Date.now() + offset);
      readings += 1;
      if (readings === 2) offset = stepMs;
      for (const wait of waiting.filter((item) => readings >= item.at)) {
        waiting.splice(waiting.indexOf(wait), 1);
        wait.resolve('looked');
      }
      return now;
    },
    monotonic: () => monotonic,
  });
  // The white box: the wait a dispatch attempt's consult tool runs, with the consult lane it lends.
  const internals = runner as unknown as { runAsked(lane: unknown, id: string): Promise<void>; lanes: ReadonlyMap<string, unknown> };
  return {
    runner,
    ask: (messageId) => internals.runAsked(internals.lanes.get('aa_consult'), messageId),
    looks: (more) => new Promise((resolve) => waiting.push({ at: readings + more, resolve })),
    setMonotonic: (ms) => (monotonic = ms),
  };
}

/** A consult another runner claimed and has not receipted: a dispatch's agent that asks it waits for that receipt. */
async function claimedElsewhere(world: World): Promise<{ messageId: string; leftMs: number }> {
  const { messageId } = await world.consult();
  const state = await world.ledger.state();
  const record = state.messages.get(messageId)!;
  const claimedAt = new Date();
  const claim = claimFileOn(state, { id: messageId, folder: folderOf(record), attempt: 1, kind: 'aa', runner: 'run-elsewhere', claimedAt: isoSeconds(claimedAt) });
  await world.ledger.append({ files: [claim], key: world.actors.coo, now: claimedAt, summary: `claim ${messageId} attempt 1` });
  const message = await readMessage(world.ledger, (await world.ledger.state()).messages.get(messageId)!);
  return { messageId, leftMs: Date.parse(message.deadline_at) - claimedAt.getTime() };
}

/** Which ends first: the wait, or `more` further looks at the ledger. */
async function firstOf(ask: Promise<unknown>, looked: Promise<'looked'>): Promise<'ended' | 'looked'> {
  return Promise.race([ask.then(() => 'ended' as const), looked]);
}

describe("a dispatch's agent waiting for a consult another runner claimed, its machine's clock stepped", { timeout: 60_000 }, () => {
  it("a day forward, past the consult's deadline: the wait goes on until the time that was left passed on the monotonic clock", async () => {
    const world = await fresh();
    const { messageId, leftMs } = await claimedElsewhere(world);
    const asker = steppedRunner(world, DAY_MS + leftMs);
    const ask = asker.ask(messageId);
    try {
      expect(await firstOf(ask, asker.looks(6))).toBe('looked');
      asker.setMonotonic(leftMs - 1000);
      expect(await firstOf(ask, asker.looks(3))).toBe('looked');
      asker.setMonotonic(leftMs + 1000);
      expect(await firstOf(ask, asker.looks(6))).toBe('ended');
    } finally {
      asker.runner.interrupt('the test ended');
      await ask;
    }
    expect(world.events.filter((event) => event.type === 'claimed')).toEqual([]);
  });

  it("a day back: the wait ends once the time that was left to the deadline passed on the monotonic clock, not a day later", async () => {
    const world = await fresh();
    const { messageId, leftMs } = await claimedElsewhere(world);
    const asker = steppedRunner(world, -DAY_MS);
    const ask = asker.ask(messageId);
    try {
      expect(await firstOf(ask, asker.looks(6))).toBe('looked');
      asker.setMonotonic(leftMs + 1000);
      expect(await firstOf(ask, asker.looks(6))).toBe('ended');
    } finally {
      asker.runner.interrupt('the test ended');
      await ask;
    }
    expect(world.events.filter((event) => event.type === 'claimed')).toEqual([]);
  });
});

/** An MCP tool context on the world's ledger whose looks at the ledger the test counts, and whose monotonic clock it moves. */
function countedContext(world: World): { context: ToolContext; looks: (more: number) => Promise<'looked'>; setMonotonic: (ms: number) => void } {
  let monotonic = 0;
  let readings = 0;
  const waiting: Array<{ at: number; resolve: (value: 'looked') => void }> = [];
  const ledger = new Proxy(world.ledger, {
    get(target, name, receiver) {
      if (name !== 'state') return Reflect.get(target, name, receiver) as unknown;
      return async () => {
        const state = await target.state();
        readings += 1;
        for (const wait of waiting.filter((item) => readings >= item.at)) {
          waiting.splice(waiting.indexOf(wait), 1);
          wait.resolve('looked');
        }
        return state;
      };
    },
  }) as Ledger;
  return {
    context: { ledger, key: world.actors.coo, repo: world.target, auditDir: null, clock: () => new Date(), monotonic: () => monotonic },
    looks: (more) => new Promise((resolve) => waiting.push({ at: readings + more, resolve })),
    setMonotonic: (ms) => (monotonic = ms),
  };
}

describe("an MCP client waiting for a queued consult's outcome (wait_seconds: 60), the server's machine clock stepped once the wait began", { timeout: 60_000 }, () => {
  for (const [how, stepMs] of [
    ['a day forward: the wait does not end at once, and ends when the 60 seconds passed on the monotonic clock', DAY_MS],
    ['a day back: the wait ends when the 60 seconds passed on the monotonic clock, not a day later', -DAY_MS],
  ] as const) {
    it(how, async () => {
      const world = await fresh();
      const { messageId } = await world.consult();
      const { context, looks, setMonotonic } = countedContext(world);
      let offset = 0;
      const real = Date.now.bind(Date);
      vi.spyOn(Date, 'now').mockImplementation(() => real() + offset);
      const cancel = new AbortController();
      const wait = awaitOutcome(context, messageId, 60, cancel.signal);
      try {
        await looks(1);
        offset = stepMs;
        expect(await firstOf(wait, looks(5))).toBe('looked');
        setMonotonic(59_000);
        expect(await firstOf(wait, looks(3))).toBe('looked');
        setMonotonic(61_000);
        expect(await firstOf(wait, looks(5))).toBe('ended');
        expect(await wait).toMatchObject({ message_id: messageId, terminal: false });
      } finally {
        cancel.abort();
        await wait;
      }
    });
  }
});
