import { cpSync, existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createAttemptWorktree } from '../../src/dispatch/worktree.js';
import { CatFileReader } from '../../src/ledger/object-store.js';
import { commitsSince } from '../../src/ledger/history.js';
import { runRemoteGit } from '../../src/remote/git-remote.js';
import { credentialHelperPlaces, gitConfigFiles } from '../../src/util/credential-files.js';
import { coo } from '../helpers/cli.js';
import { makeTargetRepo } from '../helpers/dispatch-repo.js';
import { agentScript, dispatchTo, FIX, hostilePlaces, receiptsFor, watchOnce } from '../helpers/hostile-agent.js';
import { makeLedger } from '../helpers/ledger.js';
import { git, tempDir } from '../helpers/tmp.js';

/**
 * A careless operator starts coo where git has set its own variables: from a hook of the ledger or a
 * target (GIT_DIR, GIT_INDEX_FILE, GIT_WORK_TREE, a pre-receive hook's GIT_ALTERNATE_OBJECT_DIRECTORIES),
 * or with GIT_NAMESPACE, GIT_SHALLOW_FILE or GIT_CONFIG exported. None of them may have a git coo starts
 * work on another repository, read refs or objects coo did not name, or read less than coo asked for.
 */

const dir = tempDir('coo-redteam-59-');

/** Runs `act` with `setting` in this process's environment, then puts the environment back. */
async function withEnvironment<T>(setting: Readonly<Record<string, string>>, act: () => Promise<T>): Promise<T> {
  const before = Object.fromEntries(Object.keys(setting).map((name) => [name, process.env[name]]));
  Object.assign(process.env, setting);
  try {
    return await act();
  } finally {
    for (const [name, value] of Object.entries(before)) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
  }
}

/** A repository with three commits in a line (files of its own name: no two repositories share a commit): their ids, oldest first. */
function lineOfThree(name: string): { gitdir: string; commits: string[] } {
  const work = join(dir, name);
  git(['init', '-q', '-b', 'main', work]);
  const commits: string[] = [];
  for (const n of [1, 2, 3]) {
    writeFileSync(join(work, 'file'), `${name} ${n}\n`);
    git(['add', 'file'], { cwd: work });
    git(['commit', '-q', '-m', `c${n}`], { cwd: work });
    commits.push(git(['rev-parse', 'HEAD'], { cwd: work }).trim());
  }
  return { gitdir: join(work, '.git'), commits };
}

describe("git's own variables in coo's environment reach no git coo starts", () => {
  it('an attempt worktree is made in the target coo names, not in the repository GIT_DIR names (coo watch run from a hook of another repository)', async () => {
    const target = join(dir, 'target');
    const base = makeTargetRepo(target);
    // The operator's other repository holds the same commit (a clone): git would make the branch there.
    const other = join(dir, 'other');
    git(['clone', '-q', target, other]);
    const worktree = await withEnvironment({ GIT_DIR: join(other, '.git') }, () => createAttemptWorktree({ repo: target, base, branch: 'coo/att_redteam59', path: join(dir, 'attempt-1') }));
    expect(worktree.gitdir).toBe(join(target, '.git'));
    expect(git(['branch', '--list', 'coo/att_redteam59'], { cwd: target })).toContain('coo/att_redteam59');
    expect(git(['branch', '--list', 'coo/att_redteam59'], { cwd: other })).toBe('');
  });

  it("GIT_INDEX_FILE: the attempt's index is written in its own worktree, never over the operator's index file", async () => {
    const target = join(dir, 'target-index');
    const base = makeTargetRepo(target);
    const operatorIndex = join(dir, 'operator-index');
    writeFileSync(operatorIndex, 'the index of the repository whose hook started coo\n');
    const worktree = await withEnvironment({ GIT_INDEX_FILE: operatorIndex }, () => createAttemptWorktree({ repo: target, base, branch: 'coo/att_redteam59i', path: join(dir, 'attempt-2') }));
    expect(readFileSync(operatorIndex, 'utf8')).toBe('the index of the repository whose hook started coo\n');
    expect(existsSync(join(target, '.git', 'worktrees', 'attempt-2', 'index'))).toBe(true);
    expect(worktree.branch).toBe('coo/att_redteam59i');
  });

  it("GIT_NAMESPACE: a remote on this machine (a ledger's bare origin) is read at the refs coo names, not at those under refs/namespaces/ the other side's git would serve", async () => {
    const { gitdir, commits } = lineOfThree('namespace');
    git(['--git-dir', gitdir, 'update-ref', 'refs/namespaces/elsewhere/refs/heads/main', commits[0]!]);
    const listed = await withEnvironment({ GIT_NAMESPACE: 'elsewhere' }, () => runRemoteGit(['ls-remote', gitdir, 'refs/heads/main']));
    expect(listed.ok, listed.stderr).toBe(true);
    expect(listed.stdout.split('\n').filter((line) => line.endsWith('\trefs/heads/main'))).toEqual([`${commits[2]!}\trefs/heads/main`]);
  });

  it("GIT_SHALLOW_FILE: a walk of a ledger's history (coo verify, a runner catching up) lists every commit, not a history cut short", async () => {
    const { gitdir, commits } = lineOfThree('shallow');
    const shallow = join(dir, 'shallow-file');
    writeFileSync(shallow, `${commits[1]!}\n`);
    const reader = new CatFileReader(gitdir);
    try {
      const walked = await withEnvironment({ GIT_SHALLOW_FILE: shallow }, () => commitsSince(reader, commits[2]!, null));
      expect(walked).toEqual(commits);
    } finally {
      reader.close();
    }
  });

  it("GIT_CONFIG: the credential helpers' stores and the included files a sandbox hides are read from every configuration git reads, not from the one file GIT_CONFIG names", async () => {
    const store = join(dir, 'operator-credentials');
    const included = join(dir, 'operator-work.inc');
    const global = join(dir, 'operator-gitconfig');
    writeFileSync(global, `[include]\n\tpath = ${included}\n[credential]\n\thelper = store --file ${store}\n`);
    const { places, files } = await withEnvironment({ GIT_CONFIG_GLOBAL: global, GIT_CONFIG: '/dev/null' }, () => Promise.resolve({ places: credentialHelperPlaces([]), files: gitConfigFiles() }));
    expect(places).toContainEqual({ path: store, store: true });
    expect(files).toContain(included);
  });
});

describe("coo verify judges the ledger's own objects", () => {
  it('GIT_ALTERNATE_OBJECT_DIRECTORIES (a pre-receive hook of another repository, an operator\'s shell): a ledger with a file gone is found damaged, not made whole by objects from elsewhere', async () => {
    const { gitdir } = await makeLedger(join(dir, 'verify'));
    const spare = join(dir, 'verify-spare-objects');
    cpSync(join(gitdir, 'objects'), spare, { recursive: true });
    // The trust root's file: a blob the first commit holds, written loose.
    const blob = /^100644 blob ([0-9a-f]{40})\t/m.exec(git(['--git-dir', gitdir, 'ls-tree', '-r', 'HEAD', 'trust/']))![1]!;
    rmSync(join(gitdir, 'objects', blob.slice(0, 2), blob.slice(2)));
    expect(coo(['verify', '--ledger', gitdir, '--no-checkpoint']).status).not.toBe(0);
    const borrowed = coo(['verify', '--ledger', gitdir, '--no-checkpoint'], { env: { GIT_ALTERNATE_OBJECT_DIRECTORIES: spare } });
    expect(borrowed.status, borrowed.stdout + borrowed.stderr).not.toBe(0);
  });
});

describe('coo watch started from a hook of another repository', () => {
  const place = hostilePlaces(dir, 'watch');

  it("dispatches on the repository --repo names: the attempt's branch and index are made there, the hook's repository is left as it was, and the agent is handed none of git's variables", async () => {
    const where = await place('hook');
    const other = join(dir, 'hook-other');
    git(['clone', '-q', where.repo, other]);
    const index = readFileSync(join(other, '.git', 'index'));
    const seen = join(dir, 'hook-agent-env');
    const { messageId } = await dispatchTo(where, 'hook-1');
    const hook = { GIT_DIR: join(other, '.git'), GIT_WORK_TREE: other, GIT_INDEX_FILE: join(other, '.git', 'index'), GIT_PREFIX: '' };
    const watch = watchOnce(where, agentScript(where.world.dir, `${FIX}; env > '${seen}'`), { env: hook, isolation: 'none' });
    expect(watch.hung).toBe(false);
    const [receipt] = await receiptsFor(where, messageId);
    expect(receipt?.['status'], watch.stderr).toBe('succeeded');
    const branch = String(receipt!['branch']);
    expect(git(['branch', '--list', branch], { cwd: where.repo })).toContain(branch);
    expect(git(['for-each-ref', '--format=%(refname)', 'refs/heads/coo/'], { cwd: other })).toBe('');
    expect(readFileSync(join(other, '.git', 'index')).equals(index)).toBe(true);
    expect(readFileSync(seen, 'utf8').split('\n').filter((line) => line.startsWith('GIT_') && !line.startsWith('GIT_CONFIG_NOSYSTEM='))).toEqual([]);
  });
});
