import { spawn } from 'node:child_process';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { OracleCli } from '../../src/consult/oracle.js';
import type { RunnerEvent } from '../../src/runner/runner.js';
import { formatProcessRecord, parseProcessRecord, processStartTime, recordedBoot } from '../../src/util/process.js';
import { processesUnder, startBounded, until, watchArgs, writeKey } from '../helpers/damage.js';
import { blockersOf, FAKE_ORACLE, receiptsOf, worlds, type World } from '../helpers/lane.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * Runners on machines, round 29: a state folder restored into a container recreated on the same
 * machine (the boot is the same, the pid namespace a new one).
 */

const dir = tempDir('machines-redteam-29-');
const fresh = worlds(join(dir, 'worlds'));
const env = { OPENAI_API_KEY: 'sk-test-key' };

const strangers: number[] = [];
afterAll(() => {
  for (const pid of strangers) endGroup(pid);
});

/** Ends the group a process leads, or the process alone when it leads none. */
function endGroup(pid: number): void {
  for (const target of [-pid, pid]) {
    try {
      process.kill(target, 'SIGKILL');
      return;
    } catch {
      // no such group: the process alone, or it is already gone
    }
  }
}

/** Whether a process runs (a killed one is a zombie until its parent reaps it). */
function running(pid: number): boolean {
  try {
    return !readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.startsWith('Z');
  } catch {
    return false;
  }
}

/** The fake Oracles still running for a world: a killed runner's orphans. */
function orphans(world: World): number[] {
  return processesUnder(world.dir)
    .filter((line) => line.includes(FAKE_ORACLE))
    .map((line) => Number(line.trim().split(' ')[0]));
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
