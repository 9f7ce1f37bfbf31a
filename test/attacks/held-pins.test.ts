import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PinnedRepo } from '../../src/lane/pins.js';
import { headOf, startBounded, watchArgs, writeKey } from '../helpers/damage.js';
import { worlds } from '../helpers/lane.js';
import { laneState } from '../helpers/startup.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * A review of the runner's hold of a message whose pinned commit its --repo lacks (Runner.heldFor,
 * PinnedRepo.lacks). A hold is for the runner's own lack, which a fetch or putting the repository
 * back mends; an id that names an object of another kind in the repository (a tree, a blob, an
 * annotated tag) is no such lack: no fetch makes it a commit, so the message is not held until it
 * expires (receipted expired, as if no runner had been there) but goes to its lane, whose pin check
 * receipts it stale_context, as it did before messages were held.
 */

const dir = tempDir('held-pins-');
const fresh = worlds(join(dir, 'worlds'));

function git(repo: string, args: readonly string[]): string {
  return execFileSync('git', ['-C', repo, ...args], { encoding: 'utf8', env: { ...process.env, GIT_AUTHOR_NAME: 't', GIT_AUTHOR_EMAIL: 't@t', GIT_COMMITTER_NAME: 't', GIT_COMMITTER_EMAIL: 't@t' } }).trim();
}

describe('PinnedRepo.lacks: what a hold is for', () => {
  it('holds for a commit the repository lacks, never for an id the repository holds as a tree, a blob or an annotated tag', async () => {
    const repo = join(dir, 'kinds');
    mkdirSync(join(repo, 'src'), { recursive: true });
    git(repo, ['init', '-q']);
    writeFileSync(join(repo, 'src', 'add.js'), 'export const add = (a, b) => a + b;\n');
    git(repo, ['add', '.']);
    git(repo, ['commit', '-q', '-m', 'add']);
    git(repo, ['tag', '-a', '-m', 'one', 'v1']);
    const pinned = new PinnedRepo(repo);
    try {
      expect(await pinned.lacks(git(repo, ['rev-parse', 'HEAD']))).toBeNull();
      for (const rev of ['HEAD^{tree}', 'HEAD:src', 'HEAD:src/add.js', 'v1']) expect({ rev, lack: await pinned.lacks(git(repo, ['rev-parse', rev])) }).toEqual({ rev, lack: null });
      expect(git(repo, ['cat-file', '-t', git(repo, ['rev-parse', 'v1'])])).toBe('tag');
      expect(await pinned.lacks('0'.repeat(39) + '1')).toContain(`--repo ${repo} does not hold commit ${'0'.repeat(39)}1`);
    } finally {
      pinned.close();
    }
  });
});

describe('a --repo that is a partial clone', () => {
  it('coo watch refuses to start (exit 2, RUNNER_CONFIG, nothing claimed): it lacks the blobs of the pinned files and never fetches them, so each consult ended stale_context, blamed on the work', async () => {
    const world = await fresh();
    expect(spawnSync('git', ['-C', world.target, 'config', 'uploadpack.allowFilter', 'true']).status).toBe(0);
    const partial = join(world.dir, 'partial');
    const cloned = spawnSync('git', ['clone', '-q', '--no-checkout', '--filter=blob:none', `file://${world.target}`, partial], { encoding: 'utf8' });
    expect(cloned.status, cloned.stderr).toBe(0);
    const { messageId } = await world.consult();
    const before = headOf(world.gitdir);
    const args = [...watchArgs(world, writeKey(world.dir, 'coo', world.actors.coo), join(world.dir, 'state')), '--isolation', 'none', '--once'];
    args[args.indexOf('--repo') + 1] = partial;
    const ran = await startBounded(args, { OPENAI_API_KEY: 'sk-test-key' }).ended;
    expect(ran.status, ran.stderr).toBe(2);
    expect(ran.stderr).toContain(`RUNNER_CONFIG: --repo ${partial} is a partial clone (git clone --filter; remote.origin.promisor)`);
    expect(ran.stderr).not.toMatch(/\n\s+at /);
    expect(headOf(world.gitdir)).toBe(before);
    expect(laneState(world, messageId)).toBe('queued');
    expect(world.server.requests).toHaveLength(0);
  });
});
