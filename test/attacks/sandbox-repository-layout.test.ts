import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { bwrapArgs, type BwrapLayout } from '../../src/util/bubblewrap.js';
import { requireBubblewrap } from '../helpers/bubblewrap.js';
import { git, outsideTempDir } from '../helpers/tmp.js';

/**
 * What a sandbox around an attempt sees of its target repository (util/bubblewrap.ts repositoryLayout),
 * laid out where an operator's checkout and state folder may be: the work tree hidden, the git folder
 * read-only, and what the sandbox is given to write still writable.
 */

const root = outsideTempDir('sandbox-repository-layout-');

/** A repository with one commit and an untracked .env in its work tree, and the sandbox's configuration file. */
function repositoryAt(name: string): { readonly folder: string; readonly gitdir: string; readonly config: string; readonly env: string } {
  const folder = join(root, name);
  mkdirSync(folder, { recursive: true });
  git(['init', '-q', '-b', 'main'], { cwd: folder });
  writeFileSync(join(folder, 'README'), 'tracked\n');
  git(['add', '-A'], { cwd: folder });
  git(['commit', '-q', '-m', 'base'], { cwd: folder });
  const env = join(folder, '.env');
  writeFileSync(env, 'SECRET=repository-env\n');
  const config = join(root, `${name}-config`);
  writeFileSync(config, '[core]\n\trepositoryformatversion = 0\n');
  return { folder, gitdir: join(folder, '.git'), config, env };
}

/** Runs `check` under bubblewrap laid out as `layout`; its exit, what it printed and what bubblewrap said. */
function inSandbox(layout: BwrapLayout, check: string): { status: number | null; stdout: string; stderr: string } {
  const argv = [...bwrapArgs(requireBubblewrap('a sandbox test'), layout), '/bin/sh', '-c', check];
  const run = spawnSync(argv[0]!, argv.slice(1), { encoding: 'utf8' });
  return { status: run.status, stdout: run.stdout, stderr: run.stderr };
}

describe("a sandbox around an attempt on a repository", () => {
  it("keeps its worktree and scratch writable when the runner's state folder is inside the repository's git folder, and the work tree hidden", () => {
    const repository = repositoryAt('state-in-gitdir');
    const attempt = join(repository.gitdir, 'coo-state', 'dispatch', 'a1');
    const worktree = join(attempt, 'worktree');
    const scratch = join(attempt, 'scratch');
    for (const dir of [worktree, scratch]) mkdirSync(dir, { recursive: true });
    const run = inSandbox(
      { writable: [worktree, scratch], hide: [], chdir: worktree, ownPids: true, repository },
      `touch '${join(worktree, 'written')}' && touch '${join(scratch, 'written')}' && test ! -e '${repository.env}' && test -f '${join(repository.gitdir, 'HEAD')}' && ! touch '${join(repository.gitdir, 'written')}' 2>/dev/null`,
    );
    expect(run.stderr).toBe('');
    expect(run.status).toBe(0);
    expect(existsSync(join(worktree, 'written'))).toBe(true);
    expect(existsSync(join(scratch, 'written'))).toBe(true);
    expect(existsSync(join(repository.gitdir, 'written'))).toBe(false);
  });
});
