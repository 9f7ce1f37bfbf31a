import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { requireBubblewrap } from '../helpers/bubblewrap.js';
import { COO } from '../helpers/cli.js';
import { cooBounded, headOf, httpOracle, HUNG_MS, refusal, startBounded, until, watchArgs, writeKey } from '../helpers/damage.js';
import { receiptsOf, worlds, type World } from '../helpers/lane.js';
import { laneState, nothingClaimed } from '../helpers/startup.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * Runners started on one state folder. Runners of one ledger without a remote share it (the default
 * state folder is one per ledger): each tells a live runner from a dead one by its record, and the
 * one that recovers a dead runner's attempt harvests its sandbox from that folder. A runner through
 * a remote judges the others by leases, and would take another's live attempt in a shared folder
 * for a crashed one of its own: it has its folder to itself, and a start beside any other live
 * runner of the folder is refused (exit 2), claiming nothing.
 */

const dir = tempDir('startup-redteam-14-');
const fresh = worlds(dir);
const running: Array<ReturnType<typeof startBounded>> = [];

afterAll(async () => {
  for (const watch of running) {
    watch.child.kill('SIGKILL');
    await watch.ended;
  }
});

/** A `coo watch` that runs the consults to aa.claude only: one to aa.chatgpt waits, queued and unclaimed (its provider key is not set here). */
async function claudeOnlyWatch(world: World, stateDir: string): Promise<ReturnType<typeof startBounded>> {
  const watch = startBounded([...watchArgs(world, writeKey(world.dir, 'coo', world.actors.coo), stateDir), '--isolation', 'none'], { OPENAI_API_KEY: '', ANTHROPIC_API_KEY: 'sk-ant-test-key' });
  running.push(watch);
  await until('the watch to start', () => watch.stderr().includes('watching ') || watch.child.exitCode !== null);
  expect(watch.stderr()).toContain('consults to aa.chatgpt wait, queued and unclaimed');
  return watch;
}

/** A clone of the world's ledger (the remote: a bare repository on this machine), made by coo clone. */
function cloneOf(world: World, name: string): string {
  const clone = join(world.dir, name);
  const cloned = cooBounded(['clone', world.gitdir, clone, '--trust-root', world.actors.ceo.publicKey.keyId]);
  expect(cloned.status, cloned.stderr).toBe(0);
  return clone;
}

const env = { OPENAI_API_KEY: 'sk-test-key' };

describe('one --state-dir given to two runners of one ledger', { timeout: 180_000 }, () => {
  it('without --remote, is shared (the default): a second runner beside a live one runs what the first leaves queued, once', async () => {
    const world = await fresh();
    const consult = (await world.consult()).messageId;
    const shared = join(world.dir, 'shared-state');
    const first = await claudeOnlyWatch(world, shared);
    // Asynchronously: the model answers from this process.
    const second = await startBounded([...watchArgs(world, writeKey(world.dir, 'coo', world.actors.coo), shared), '--once', '--isolation', 'none'], env).ended;
    expect(second.status, second.stderr).toBe(0);
    expect((await receiptsOf(world, consult)).map((receipt) => receipt['status'])).toEqual(['succeeded']);
    expect(world.server.requests).toHaveLength(1);
    first.child.kill('SIGINT');
    expect((await first.ended).status).toBe(0);
  });

  it('through a remote, beside a live runner of the folder: refused at start (exit 2) by coo watch and coo mcp --run, claiming nothing; started alone, it runs the queued work once', async () => {
    const world = await fresh();
    const consult = (await world.consult()).messageId;
    const before = headOf(world.gitdir);
    const shared = join(world.dir, 'shared-state');
    const clone = cloneOf(world, 'clone.git');
    const key = writeKey(world.dir, 'coo', world.actors.coo);
    const through = ['--remote', world.gitdir, '--ledger', clone, '--key', key, '--repo', world.target, '--state-dir', shared, '--oracle-command', httpOracle(world.dir), '--oracle-base-url', `${world.server.url}/v1`, '--isolation', 'none'];
    const first = await claudeOnlyWatch(world, shared);

    const watched = cooBounded(['watch', '--once', ...through], { env });
    const line = refusal(watched);
    expect(line).toMatch(new RegExp(`^coo: RUNNER_CONFIG: the state folder ${shared} is in use by a runner of ${world.gitdir} \\(${shared}/holders/\\S+\\.json\\), and a runner through a remote has its state folder to itself .*: give each runner through a remote a --state-dir of its own, or stop the other runner; nothing was claimed$`));
    const served = cooBounded(['mcp', '--run', ...through], { env });
    expect(refusal(served)).toMatch(/^coo: RUNNER_CONFIG: the state folder .* is in use by a runner of /);
    await nothingClaimed(world, before, { consult });
    expect(headOf(clone)).toBe(before);

    first.child.kill('SIGINT');
    expect((await first.ended).status).toBe(0);
    const alone = await startBounded(['watch', '--once', ...through], env).ended;
    expect(alone.status, alone.stderr).toBe(0);
    expect(laneState(world, consult)).toBe('succeeded');
    expect((await receiptsOf(world, consult)).map((receipt) => receipt['status'])).toEqual(['succeeded']);
    expect(world.server.requests).toHaveLength(1);
  });
});

describe('a runner through a remote, watching', { timeout: 180_000 }, () => {
  it('keeps its state folder to itself: coo watch and coo mcp --run on the ledger itself, given that folder, are refused at start (exit 2), claiming nothing; once it stops, coo watch runs the queued work once', async () => {
    const world = await fresh();
    const consult = (await world.consult()).messageId;
    const shared = join(world.dir, 'shared-state');
    const clone = cloneOf(world, 'clone.git');
    const key = writeKey(world.dir, 'coo', world.actors.coo);
    // Its consults to aa.chatgpt wait (no OPENAI_API_KEY here); those to aa.claude would run.
    const holder = startBounded(['watch', '--remote', world.gitdir, '--ledger', clone, '--key', key, '--repo', world.target, '--state-dir', shared, '--oracle-command', httpOracle(world.dir), '--oracle-base-url', `${world.server.url}/v1`, '--isolation', 'none'], { OPENAI_API_KEY: '', ANTHROPIC_API_KEY: 'sk-ant-test-key' });
    running.push(holder);
    await until('the watch through the remote to start', () => holder.stderr().includes('watching ') || holder.child.exitCode !== null);

    const local = [...watchArgs(world, key, shared), '--once', '--isolation', 'none'];
    expect(refusal(cooBounded(local, { env }))).toMatch(new RegExp(`^coo: RUNNER_CONFIG: the state folder ${shared} is in use by a runner of ${clone} through ${world.gitdir} \\(\\S+\\), and a runner through a remote has its state folder to itself`));
    const served = cooBounded(['mcp', '--run', '--ledger', world.gitdir, '--key', key, '--repo', world.target, '--state-dir', shared, '--oracle-base-url', `${world.server.url}/v1`, '--isolation', 'none'], { env });
    expect(refusal(served)).toMatch(/^coo: RUNNER_CONFIG: the state folder .* is in use by a runner of /);
    // The ledger's head moves with the heartbeats of the runner through the remote: the consult stays queued and unpaid.
    expect(laneState(world, consult)).toBe('queued');
    expect(world.server.requests).toHaveLength(0);

    holder.child.kill('SIGINT');
    expect((await holder.ended).status).toBe(0);
    const alone = await startBounded(local, env).ended;
    expect(alone.status, alone.stderr).toBe(0);
    expect((await receiptsOf(world, consult)).map((receipt) => receipt['status'])).toEqual(['succeeded']);
    expect(world.server.requests).toHaveLength(1);
  });
});

describe('coo mcp --run given the state folder of another ledger', () => {
  it('refuses at start (exit 2), as coo watch does, before it serves the agent anything', async () => {
    const [first, second] = [await fresh(), await fresh()];
    const shared = join(first.dir, 'shared-state');
    const ranFirst = await startBounded([...watchArgs(first, writeKey(first.dir, 'coo', first.actors.coo), shared), '--once', '--isolation', 'none'], env).ended;
    expect(ranFirst.status, ranFirst.stderr).toBe(0);
    const consult = (await second.consult()).messageId;
    const before = headOf(second.gitdir);
    const served = cooBounded(['mcp', '--run', '--ledger', second.gitdir, '--key', writeKey(second.dir, 'coo', second.actors.coo), '--repo', second.target, '--state-dir', shared, '--oracle-base-url', `${second.server.url}/v1`, '--isolation', 'none'], { env });
    expect(refusal(served)).toBe(`coo: RUNNER_CONFIG: the state folder ${shared} holds what a runner saw of another ledger (${first.gitdir}), not of ${second.gitdir}: give each ledger a --state-dir of its own (the default is one per ledger); nothing was claimed`);
    await nothingClaimed(second, before, { consult });
  });
});

describe('a flag given without the flag it goes with', () => {
  it('is USAGE at start (exit 2) from coo watch and coo mcp, claiming nothing, never a flag silently left unused', async () => {
    const world = await fresh();
    const consult = (await world.consult()).messageId;
    const before = headOf(world.gitdir);
    const key = writeKey(world.dir, 'coo', world.actors.coo);
    const stateDir = join(world.dir, 'state');
    const watch = [...watchArgs(world, key, stateDir), '--once', '--isolation', 'none'];
    const mcp = ['mcp', '--ledger', world.gitdir, '--key', key, '--repo', world.target];
    const cases: Array<[readonly string[], string]> = [
      // Without --remote a watch looks at its ledger's folder, not on a timer: these said nothing and the watch ran.
      [[...watch, '--poll-interval', '5'], '--poll-interval goes with --remote'],
      [[...watch, '--poll-max', '60'], '--poll-max goes with --remote'],
      // One pass looks once and writes no heartbeat.
      [[...watch, '--heartbeat'], '--heartbeat goes with a watch that keeps running (without --once)'],
      // Without --run no runner runs: the runner's flags were dropped, and the operator's queued work waited for a runner that was never started.
      [[...mcp, '--state-dir', stateDir], '--state-dir goes with --run'],
      [[...mcp, '--oracle-base-url', `${world.server.url}/v1`], '--oracle-base-url goes with --run'],
      [[...mcp, '--ea-command', join(world.dir, 'codex')], '--ea-command goes with --run'],
      [[...mcp, '--heartbeat'], '--heartbeat goes with --run'],
      [[...mcp, '--run', '--state-dir', stateDir, '--oracle-base-url', `${world.server.url}/v1`, '--isolation', 'none', '--poll-interval', '5'], '--poll-interval goes with --remote'],
    ];
    for (const [args, said] of cases) {
      // Asynchronously: a watch that ran would call the model, which answers from this process.
      expect(refusal(await startBounded(args, env).ended), args.join(' ')).toBe(`coo: USAGE: ${said}`);
    }
    await nothingClaimed(world, before, { consult });
    // A value from the environment is not the operator's word on this run: coo mcp serves with it set.
    const served = await startBounded(mcp, { ...env, COO_ORACLE_BASE_URL: `${world.server.url}/v1` }).ended;
    expect(served.status, served.stderr).toBe(0);
    expect(served.stderr).toContain('serving without a runner');
  });
});

describe('a clone on a read-only file system, with work queued on its remote since it was cloned', () => {
  it('is refused by coo watch --remote and coo mcp --run --remote with one line, the same, saying the clone cannot be written', async () => {
    const world = await fresh();
    const clone = cloneOf(world, 'clone.git');
    const consult = (await world.consult()).messageId;
    const before = headOf(world.gitdir);
    const key = writeKey(world.dir, 'coo', world.actors.coo);
    const through = ['--remote', world.gitdir, '--ledger', clone, '--key', key, '--repo', world.target, '--state-dir', join(world.dir, 'state'), '--oracle-command', httpOracle(world.dir), '--oracle-base-url', `${world.server.url}/v1`, '--isolation', 'none'];
    // The clone mounted read-only for each command (bubblewrap: a read-only bind), as on a read-only volume.
    const readOnly = (args: readonly string[]): string => {
      const ran = spawnSync(requireBubblewrap('a read-only clone'), ['--bind', '/', '/', '--dev', '/dev', '--proc', '/proc', '--ro-bind', clone, clone, '--', process.execPath, COO, ...args], {
        env: { ...process.env, ...env, COO_LEDGER: '', COO_KEY: '', XDG_STATE_HOME: join(world.dir, 'xdg') },
        encoding: 'utf8',
        timeout: HUNG_MS,
      });
      return refusal({ status: ran.status, stdout: ran.stdout, stderr: ran.stderr });
    };
    const line = readOnly(['watch', '--once', ...through]);
    expect(line).toBe(`coo: RUNNER_CONFIG: cannot write in ${clone}/coo/runners, the ledger's folder of runners (EROFS): the runner commits its claims and receipts in the ledger; run it where the ledger is writable (a clone of it with --remote, coo clone)`);
    expect(readOnly(['mcp', '--run', ...through])).toBe(line);
    await nothingClaimed(world, before, { consult });
  });
});
