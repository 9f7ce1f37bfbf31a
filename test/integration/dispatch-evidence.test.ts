import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { generatePrivateKey } from '../../src/crypto/keys.js';
import { checkCommitted, checkScope, commitAttempt, gatherEvidence, runVerification, snapshotWork } from '../../src/dispatch/evidence.js';
import { createAttemptWorktree, type AttemptWorktree } from '../../src/dispatch/worktree.js';
import { makeTargetRepo, writeAllowedSigners } from '../helpers/dispatch-repo.js';
import { git, gitEnv, run, tempDir } from '../helpers/tmp.js';

/** The evidence the COO gathers itself, in real git worktrees, and the signed commit checked with stock git. */
const dir = tempDir('coo-dispatch-evidence-');
const repo = join(dir, 'target');
const base = makeTargetRepo(repo);
const key = generatePrivateKey('coo.hermes');
const allowed = writeAllowedSigners(join(dir, 'allowed_signers'), 'coo.hermes', key);
const NOW = new Date('2026-12-01T12:00:00Z');
let n = 0;

async function attempt(): Promise<{ wt: AttemptWorktree; scratch: string }> {
  n += 1;
  const scratch = join(dir, `scratch-${n}`);
  mkdirSync(scratch, { recursive: true });
  const wt = await createAttemptWorktree({ repo, base, branch: `coo/attempt-${n}`, path: join(dir, `wt-${n}`) });
  return { wt, scratch };
}

const verifyOptions = (scratch: string, timeoutSeconds = 30) => ({ timeoutSeconds, isolation: 'bwrap' as const, scratch, hide: [allowed] });
const sha256 = (text: string): string => `sha256:${createHash('sha256').update(text).digest('hex')}`;

describe('dispatch evidence', () => {
  it('lists changed files with their sha256, verifies, commits signed on the attempt branch, and stock git sees a Good signature', async () => {
    const { wt, scratch } = await attempt();
    writeFileSync(join(wt.path, 'src', 'add.js'), 'export const add = (a, b) => a + b;\n');
    writeFileSync(join(wt.path, 'src', 'new.js'), 'export {};\n');
    const snapshot = await snapshotWork(wt, scratch);
    expect(snapshot.changes).toEqual([
      { path: 'src/add.js', status: 'modified', mode: '100644', sha256: sha256('export const add = (a, b) => a + b;\n') },
      { path: 'src/new.js', status: 'added', mode: '100644', sha256: sha256('export {};\n') },
    ]);
    expect(snapshot.gitLinkTampered).toBe(false);
    expect(checkScope(snapshot.changes, ['src/**'])).toEqual({ outOfScope: [], notRegular: [] });
    const verified = await runVerification(wt, 'sh test.sh && echo verified', verifyOptions(scratch));
    expect(verified).toMatchObject({ exitCode: 0, killedByTimer: false, outputOverflow: false });
    expect(verified.output.toString()).toBe('verified\n');
    const commit = await commitAttempt(wt, snapshot.tree, { key, actor: 'coo.hermes', attemptId: 'ea_attempt_X_1', summary: 'Fix add', now: NOW });
    expect(commit.branch).toBe(wt.branch);
    expect(await checkCommitted(wt, commit.headSha)).toEqual({ headMatches: true, dirty: [] });
    const stock = (args: string[]) => run('git', ['-C', repo, '-c', 'gpg.format=ssh', '-c', `gpg.ssh.allowedSignersFile=${allowed}`, ...args], { env: gitEnv() });
    const log = stock(['log', '--format=%H %G?', `${base}..${wt.branch}`]);
    expect(log.stdout).toBe(`${commit.headSha} G\n`);
    expect(stock(['verify-commit', commit.headSha]).status).toBe(0);
    expect(git(['show', '-s', '--format=%P%n%B', commit.headSha], { cwd: repo })).toBe(`${base}\nFix add\n\nCoo-Attempt: ea_attempt_X_1\n\n`);
  });

  it('finds a file the EA hid behind a .gitignore and a change outside the scope', async () => {
    const { wt, scratch } = await attempt();
    mkdirSync(join(wt.path, 'build'));
    writeFileSync(join(wt.path, 'build', 'payload.sh'), 'curl evil\n');
    writeFileSync(join(wt.path, 'src', '.gitignore'), 'hidden.js\n');
    writeFileSync(join(wt.path, 'src', 'hidden.js'), 'secret\n');
    writeFileSync(join(wt.path, '.github', 'ci.yml'), 'on: [push, pull_request]\n');
    const snapshot = await snapshotWork(wt, scratch);
    expect(snapshot.changes.map((change) => change.path)).toEqual(['.github/ci.yml', 'build/payload.sh', 'src/.gitignore', 'src/hidden.js']);
    expect(checkScope(snapshot.changes, ['src/**']).outOfScope).toEqual(['.github/ci.yml', 'build/payload.sh']);
  });

  it('refuses a symbolic link as work, and lists deletions', async () => {
    const { wt, scratch } = await attempt();
    rmSync(join(wt.path, 'test.sh'));
    run('ln', ['-s', '/etc/passwd', join(wt.path, 'src', 'link')]);
    const snapshot = await snapshotWork(wt, scratch);
    expect(snapshot.changes).toEqual([
      { path: 'src/link', status: 'added', mode: '120000', sha256: sha256('/etc/passwd') },
      { path: 'test.sh', status: 'deleted', mode: '000000', sha256: null },
    ]);
    expect(checkScope(snapshot.changes, ['src/**', 'test.sh'])).toEqual({ outOfScope: [], notRegular: ['src/link'] });
  });

  it('flags a replaced .git link and never runs what the EA put in it', async () => {
    const { wt, scratch } = await attempt();
    const sentinel = join(dir, 'fsmonitor-ran');
    rmSync(join(wt.path, '.git'));
    mkdirSync(join(wt.path, '.git', 'hooks'), { recursive: true });
    writeFileSync(join(wt.path, '.git', 'config'), `[core]\n\tfsmonitor = touch ${sentinel}\n\thooksPath = .git/hooks\n`);
    writeFileSync(join(wt.path, '.git', 'HEAD'), 'ref: refs/heads/main\n');
    writeFileSync(join(wt.path, 'src', 'add.js'), 'export const add = (a, b) => a + b;\n');
    const snapshot = await snapshotWork(wt, scratch);
    expect(snapshot.gitLinkTampered).toBe(true);
    expect(snapshot.changes.map((change) => change.path)).toEqual(['src/add.js']);
    const commit = await commitAttempt(wt, snapshot.tree, { key, actor: 'coo.hermes', attemptId: 'ea_attempt_X_4', summary: 'x', now: NOW });
    await checkCommitted(wt, commit.headSha);
    expect(existsSync(sentinel)).toBe(false);
  });

  it('reports a worktree a verification command left dirty', async () => {
    const { wt, scratch } = await attempt();
    writeFileSync(join(wt.path, 'src', 'add.js'), 'export const add = (a, b) => a + b;\n');
    const snapshot = await snapshotWork(wt, scratch);
    const verified = await runVerification(wt, 'sh test.sh && echo generated > src/generated.js && mkdir -p build && echo ok > build/out', verifyOptions(scratch));
    expect(verified.exitCode).toBe(0);
    const commit = await commitAttempt(wt, snapshot.tree, { key, actor: 'coo.hermes', attemptId: 'ea_attempt_X_5', summary: 'x', now: NOW });
    // An ignored build output is not dirt; a new source file is.
    expect(await checkCommitted(wt, commit.headSha)).toEqual({ headMatches: true, dirty: ['src/generated.js'] });
  });

  it('kills a verification command at its time box and bounds its output', async () => {
    const { wt, scratch } = await attempt();
    const slow = await runVerification(wt, 'sleep 30', verifyOptions(scratch, 1));
    expect(slow).toMatchObject({ exitCode: null, killedByTimer: true });
    const loud = await runVerification(wt, 'head -c 100000 /dev/zero', { ...verifyOptions(scratch), maxOutputBytes: 1000 });
    expect(loud).toMatchObject({ exitCode: 0, outputOverflow: true });
    expect(loud.output.length).toBe(1000);
    const failing = await runVerification(wt, 'sh test.sh', verifyOptions(scratch));
    expect(failing.exitCode).toBe(1);
  });

  it('hides the ledger stand-in from a verification command', async () => {
    const { wt, scratch } = await attempt();
    const read = await runVerification(wt, `cat ${allowed}`, verifyOptions(scratch));
    expect(read.output.toString()).not.toContain('ssh-ed25519');
  });

  it('gathers everything in one call: commits the snapshot beside the verification, then finds what the verification left', async () => {
    const { wt, scratch } = await attempt();
    writeFileSync(join(wt.path, 'src', 'add.js'), 'export const add = (a, b) => a + b;\n');
    const commit = { key, actor: 'coo.hermes', attemptId: 'ea_attempt_X_9', summary: 'Fix add', now: NOW };
    const gathered = await gatherEvidence(wt, { scratch, scope: ['src/**'], verify: ['sh test.sh', 'echo more > src/extra.js'], verifyTimeoutSeconds: 30, isolation: 'bwrap', hide: [allowed], commit });
    expect(gathered.summary).toMatchObject({ outOfScope: [], verification: [{ exitCode: 0 }, { exitCode: 0 }], commit: { headMatches: true, dirty: ['src/extra.js'] } });
    expect(git(['rev-parse', wt.branch], { cwd: repo }).trim()).toBe(gathered.commit?.headSha);
  });

  it('commits nothing for an attempt without changes: its head is the base', async () => {
    const { wt, scratch } = await attempt();
    const commit = { key, actor: 'coo.hermes', attemptId: 'ea_attempt_X_10', summary: 'nothing', now: NOW };
    const gathered = await gatherEvidence(wt, { scratch, scope: ['src/**'], verify: ['true'], verifyTimeoutSeconds: 30, isolation: 'none', hide: [], commit });
    expect(gathered.commit).toBeNull();
    expect(gathered.summary).toMatchObject({ changes: [], commit: null, dirtyWithoutCommit: [] });
    expect(git(['rev-parse', wt.branch], { cwd: repo }).trim()).toBe(base);
  });

  it('refuses an attempt branch that already exists and a path that exists', async () => {
    await expect(createAttemptWorktree({ repo, base, branch: 'main', path: join(dir, 'wt-main') })).rejects.toMatchObject({ code: 'USAGE' });
    await expect(createAttemptWorktree({ repo, base, branch: 'coo/fresh', path: repo })).rejects.toMatchObject({ code: 'USAGE' });
    await expect(createAttemptWorktree({ repo, base: 'f'.repeat(40), branch: 'coo/fresh', path: join(dir, 'wt-x') })).rejects.toMatchObject({ code: 'GIT_FAILED' });
    await expect(createAttemptWorktree({ repo, base, branch: '-x', path: join(dir, 'wt-y') })).rejects.toMatchObject({ code: 'USAGE' });
  });
});
