import { spawnSync } from 'node:child_process';
import { cpSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { headOf, refusal, startBounded, watchArgs, writeKey } from '../helpers/damage.js';
import { worlds, type World } from '../helpers/lane.js';
import { nothingClaimed, queued } from '../helpers/startup.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * A careless operator, round 20: a runner pointed at a repository or a folder it cannot do the
 * queued work in. Each is found before anything is claimed, and said as one coded line (exit 2)
 * that says what to do; the queued messages stay queued, never ended with a receipt that blames them.
 */

const dir = tempDir('operator-redteam-20-');
const fresh = worlds(join(dir, 'worlds'));
const env = { OPENAI_API_KEY: 'sk-test-key' };

function git(args: readonly string[]): void {
  const ran = spawnSync('git', args, { encoding: 'utf8' });
  expect(ran.status, ran.stderr).toBe(0);
}

/** `coo watch --once` and `coo mcp --run` for a world, with `--repo` and `--state-dir` as given. */
function runners(world: World, repo: string, state: string): string[][] {
  const key = writeKey(world.dir, 'coo', world.actors.coo);
  const watch = [...watchArgs(world, key, state), '--once', '--isolation', 'none'];
  watch[watch.indexOf('--repo') + 1] = repo;
  const mcp = ['mcp', '--run', '--ledger', world.gitdir, '--key', key, '--repo', repo, '--state-dir', state, '--oracle-command', watch[watch.indexOf('--oracle-command') + 1]!, '--oracle-base-url', `${world.server.url}/v1`, '--isolation', 'none'];
  return [watch, mcp];
}

describe('a --repo that holds none of the history its queued messages pin', () => {
  it('an empty repository or a shallow clone is refused at start by coo watch and coo mcp --run (RUNNER_CONFIG, exit 2) saying what to give; no message ends stale_context, nothing is claimed', async () => {
    const world = await fresh();
    const ids = await queued(world);
    const before = headOf(world.gitdir);
    const empty = join(world.dir, 'empty');
    git(['init', '-q', empty]);
    // The work moved on after the messages pinned their commit: a clone of depth 1 holds only the newer one.
    git(['-C', world.target, 'commit', '-q', '--allow-empty', '-m', 'later']);
    const shallow = join(world.dir, 'shallow');
    git(['clone', '-q', '--depth', '1', `file://${world.target}`, shallow]);
    const cases: Array<[string, RegExp]> = [
      [empty, /^coo: RUNNER_CONFIG: --repo \S+ holds no commit: every queued message pins a commit of the repository it was written for, and each would wait here, unclaimed, until it expired; give that repository/],
      [shallow, /^coo: RUNNER_CONFIG: --repo \S+ is a shallow clone without [0-9a-f]{40}, which queued message \S+ pins: it would wait here, unclaimed, until it expired; run git -C \S+ fetch --unshallow, or give a full clone; nothing was claimed$/],
    ];
    for (const [repo, said] of cases) {
      for (const args of runners(world, repo, join(world.dir, 'state'))) {
        expect(refusal(await startBounded(args, env).ended), `${args[0]} ${repo}`).toMatch(said);
      }
    }
    await nothingClaimed(world, before, ids);
  });
});

describe('a --repo whose path holds a line end', () => {
  it('is refused at start by coo watch and coo mcp --run (RUNNER_CONFIG, exit 2), never a dispatch claimed and failed for the worktree it could not make; nothing is claimed', async () => {
    const world = await fresh();
    const ids = await queued(world);
    const before = headOf(world.gitdir);
    const repo = join(world.dir, 'the\nrepo');
    cpSync(world.target, repo, { recursive: true });
    for (const args of runners(world, repo, join(world.dir, 'state'))) {
      expect(refusal(await startBounded(args, env).ended), args[0]).toBe(
        `coo: RUNNER_CONFIG: --repo ${JSON.stringify(repo)} holds a line end: each dispatch's worktree names the repository's git folder on one line of its .git file, so every dispatch would be claimed and fail without a worktree; give a path without one (rename the folder, or link it from one); nothing was claimed`,
      );
    }
    await nothingClaimed(world, before, ids);
  });
});

describe('a runner started with a PATH that holds no git', () => {
  it('is refused at start by coo watch and coo mcp --run (RUNNER_CONFIG, exit 2) saying to put git on PATH, never an internal git failure (exit 1); nothing is claimed', async () => {
    const world = await fresh();
    const ids = await queued(world);
    const before = headOf(world.gitdir);
    for (const args of runners(world, world.target, join(world.dir, 'state'))) {
      expect(refusal(await startBounded(args, { ...env, PATH: join(world.dir, 'no-such-folder') }).ended), args[0]).toBe(
        'coo: RUNNER_CONFIG: git cannot be run (not on PATH?): the runner reads and writes the ledger and the repository with it; install git, or put the folder that holds it on PATH; nothing was claimed',
      );
    }
    await nothingClaimed(world, before, ids);
  });
});
