import { spawnSync } from 'node:child_process';
import { renameSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { LIMITS } from '../../src/limits.js';
import { headOf, startBounded, until, watchArgs, writeKey } from '../helpers/damage.js';
import { blockersOf, receiptsOf, worlds, type World } from '../helpers/lane.js';
import { laneState } from '../helpers/startup.js';
import { agentScript, codesOf, dispatchTo, FIX, hostilePlaces, receiptsFor, watchOnce } from '../helpers/hostile-agent.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * A careless operator, round 23: a runner whose --repo cannot serve what the queue pins. A clone
 * made before the COO pinned a commit pushed later (never fetched), or a repository removed or
 * renamed while coo watch runs, is the runner's lack, as a missing provider key is: the message
 * stays queued and unclaimed, the runner says once what to do (git fetch, put it back), and a
 * runner that has the commit (or this one, once fetched) runs it; never a stale_context receipt
 * blaming the work for the runner's clone. Past its expiry and the skew allowed between machines
 * it is receipted expired, unpaid, as any held message is.
 */

const dir = tempDir('operator-redteam-23-');
const fresh = worlds(join(dir, 'worlds'));
const places = hostilePlaces(dir, 'place');
const env = { OPENAI_API_KEY: 'sk-test-key' };

function git(args: readonly string[]): string {
  const ran = spawnSync('git', args, { encoding: 'utf8' });
  expect(ran.status, ran.stderr).toBe(0);
  return ran.stdout.trim();
}

/** A full clone of the world's target made now, and a commit pushed to the target after it: the clone is behind. */
function behindClone(world: World): string {
  const behind = join(world.dir, 'behind');
  git(['clone', '-q', world.target, behind]);
  git(['-C', world.target, 'commit', '-q', '--allow-empty', '-m', 'pushed after the runner cloned']);
  return behind;
}

function watchOn(world: World, repo: string): string[] {
  const args = [...watchArgs(world, writeKey(world.dir, 'coo', world.actors.coo), join(world.dir, 'state')), '--isolation', 'none'];
  args[args.indexOf('--repo') + 1] = repo;
  return args;
}

describe('a --repo that is a full clone behind the queue', () => {
  it('coo watch --once leaves a consult pinning a commit it lacks queued, unclaimed and unpaid, says to fetch, and answers it once fetched (it ended stale_context before)', async () => {
    const world = await fresh();
    const behind = behindClone(world);
    const { messageId } = await world.consult();
    const before = headOf(world.gitdir);
    const held = await startBounded([...watchOn(world, behind), '--once'], env).ended;
    expect(held.status, held.stderr).toBe(0);
    expect(held.stderr).toContain(`coo watch: error on ${messageId}: RUNNER_CONFIG: it waits, queued and unclaimed: --repo ${behind} does not hold commit`);
    expect(held.stderr).toContain(`run git -C ${behind} fetch`);
    expect(held.stderr).toContain('1 message(s) stay queued, unclaimed, for what this runner lacks');
    expect(held.stderr).not.toMatch(/stale_context|\n\s+at /);
    expect(headOf(world.gitdir)).toBe(before);
    expect(laneState(world, messageId)).toBe('queued');
    expect(world.server.requests).toHaveLength(0);
    // --json says it as an event, with its code.
    const json = await startBounded([...watchOn(world, behind), '--once', '--json'], env).ended;
    expect(json.status).toBe(0);
    expect(json.stdout.split('\n').filter((line) => line.includes('"RUNNER_CONFIG"')).map((line) => JSON.parse(line) as Record<string, unknown>)).toEqual([expect.objectContaining({ type: 'error', messageId, code: 'RUNNER_CONFIG' })]);
    expect(headOf(world.gitdir)).toBe(before);

    git(['-C', behind, 'fetch', '-q']);
    const ran = await startBounded([...watchOn(world, behind), '--once'], env).ended;
    expect(ran.status, ran.stderr).toBe(0);
    expect(laneState(world, messageId)).toBe('succeeded');
  });

  it('a dispatch whose base the clone lacks is left queued and unclaimed, no worktree made, no agent run; fetched, the agent runs it', async () => {
    const place = await places('dispatch-behind');
    const ahead = `${place.repo}-ahead`;
    git(['clone', '-q', place.repo, ahead]);
    git(['-C', ahead, 'commit', '-q', '--allow-empty', '-m', 'pushed after the runner cloned']);
    const base = git(['-C', ahead, 'rev-parse', 'HEAD']);
    // The COO wrote the dispatch against the project's origin (here `ahead`); the runner's --repo is the older clone.
    renameSync(place.repo, `${place.repo}-runner`);
    renameSync(ahead, place.repo);
    const { messageId } = await dispatchTo(place, 'behind-base');
    renameSync(place.repo, ahead);
    renameSync(`${place.repo}-runner`, place.repo);
    const before = headOf(place.world.gitdir);
    const agent = agentScript(place.world.dir, `${FIX}; touch "${join(place.world.dir, 'agent-ran')}"`);
    const held = watchOnce(place, agent, { isolation: 'none' });
    expect(held.status, held.stderr).toBe(0);
    expect(held.stdout).toContain(`does not hold commit ${base}`);
    expect(headOf(place.world.gitdir)).toBe(before);
    expect(spawnSync('test', ['-e', join(place.world.dir, 'agent-ran')]).status).not.toBe(0);
    expect(git(['-C', place.repo, 'worktree', 'list']).split('\n')).toHaveLength(1);

    git(['-C', place.repo, 'fetch', '-q', ahead, 'main']);
    const ran = watchOnce(place, agent, { isolation: 'none' });
    expect(ran.status, ran.stderr).toBe(0);
    const [receipt] = await receiptsFor(place, messageId);
    expect(codesOf(receipt)).not.toContain('stale_context');
    expect(receipt?.['status']).toBe('succeeded');
  });

  it('held past its expiry, within the skew allowed between machines, it stays queued; past that too, it is receipted expired, unpaid, never stale_context', async () => {
    const world = await fresh();
    const behind = behindClone(world);
    const asked = await world.consult({ ttlSeconds: 60 });
    const expires = Date.parse(asked.envelope.expires_at);
    const within = new Date(expires + 1000);
    const first = await world.runner({ repo: behind, clock: () => within }).runOnce();
    expect(first.held).toEqual([asked.messageId]);
    expect(first.waiting).toContain(new Date(expires + LIMITS.clockSkewSeconds * 1000).toISOString().replace(/\.\d{3}Z$/, 'Z'));
    expect(await receiptsOf(world, asked.messageId)).toEqual([]);
    const past = new Date(expires + (LIMITS.clockSkewSeconds + 60) * 1000);
    const second = await world.runner({ repo: behind, clock: () => past }).runOnce();
    expect(second.held).toEqual([]);
    const receipts = await receiptsOf(world, asked.messageId);
    expect(receipts.map((receipt) => `${String(receipt['status'])}:${blockersOf(receipt).join(',')}`)).toEqual(['blocked:expired']);
    expect(world.server.requests).toHaveLength(0);
  });
});

describe('--repo removed or renamed while coo watch runs', () => {
  it('the next consult waits, queued and unclaimed, with what to do; put back, it is answered (it ended stale_context before)', async () => {
    const world = await fresh();
    const runner = startBounded(watchOn(world, world.target), env);
    await until('watching', () => runner.stderr().includes('(Ctrl-C stops)'));
    const answered = (await world.consult()).messageId;
    await until('the first consult answered', () => laneState(world, answered) === 'succeeded' || runner.child.exitCode !== null);
    const moved = `${world.target}-moved`;
    renameSync(world.target, moved);
    const { messageId } = await world.consult({ question: 'Is add() correct for Infinity?', repo: moved });
    await until('the runner says why it waits', () => runner.stderr().includes(`error on ${messageId}: RUNNER_CONFIG: it waits, queued and unclaimed: --repo ${world.target} is no longer a git repository`) || runner.child.exitCode !== null);
    expect(runner.child.exitCode).toBeNull();
    expect(laneState(world, messageId)).toBe('queued');
    expect(world.server.requests).toHaveLength(1);
    renameSync(moved, world.target);
    const third = (await world.consult({ question: 'Is add() correct for -0?' })).messageId;
    await until('both answered', () => (laneState(world, messageId) === 'succeeded' && laneState(world, third) === 'succeeded') || runner.child.exitCode !== null);
    runner.child.kill('SIGINT');
    const ended = await runner.ended;
    expect(ended.status).toBe(0);
    expect(ended.stderr).not.toMatch(/\n\s+at /);
    expect(laneState(world, messageId)).toBe('succeeded');
  });
});

describe('the repository a dispatch was cut from, changed by the operator while its agent runs (guards: these held already)', () => {
  it('checked out to another commit: the attempt runs from its pinned base in its own worktree, succeeds, and its branch starts at that base', async () => {
    const place = await places('repo-checkout', { 'extra.txt': 'x\n' });
    const { messageId } = await dispatchTo(place, 'repo-checkout');
    const agent = agentScript(place.world.dir, `${FIX}; git -C '${place.repo}' checkout -q --detach HEAD~1`);
    const ran = watchOnce(place, agent, { isolation: 'none' });
    expect(ran.status, ran.stderr).toBe(0);
    const [receipt] = await receiptsFor(place, messageId);
    expect(receipt).toMatchObject({ status: 'succeeded', base_sha: place.base });
    expect(git(['-C', place.repo, 'rev-parse', `${String(receipt!['branch'])}~1`])).toBe(place.base);
  });

  it('removed: the attempt is receipted failed as runner_error, coded, never as the agent\'s scope violation or failed tests', async () => {
    const place = await places('repo-removed', { 'extra.txt': 'x\n' });
    const { messageId } = await dispatchTo(place, 'repo-removed');
    const agent = agentScript(place.world.dir, `${FIX}; rm -rf '${place.repo}'`);
    const ran = watchOnce(place, agent, { isolation: 'none' });
    expect(ran.status, ran.stderr).toBe(0);
    expect(ran.stderr).not.toMatch(/\n\s+at /);
    const [receipt] = await receiptsFor(place, messageId);
    expect(receipt?.['status']).toBe('failed');
    expect(codesOf(receipt)).toEqual(['runner_error']);
    // Its detail names the repository by its marker, never by where it is on the runner's machine.
    expect(JSON.stringify(receipt)).toContain('[repo]');
    expect(JSON.stringify(receipt)).not.toContain(place.repo);
  });
});
