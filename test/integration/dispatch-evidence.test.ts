import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { join } from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { generatePrivateKey } from '../../src/crypto/keys.js';
import { checkScope, commitAttempt, gatherEvidence, landAttemptCommit, runVerification } from '../../src/dispatch/evidence.js';
import { snapshotWork } from '../../src/dispatch/snapshot.js';
import { createAttemptWorktree, listTree, type AttemptWorktree } from '../../src/dispatch/worktree.js';
import { CatFileReader, ObjectWriter } from '../../src/ledger/object-store.js';
import { baseIgnoreRules } from '../../src/dispatch/ignore-rules.js';
import { readBlobs } from '../../src/dispatch/checkout.js';
import { makeTargetRepo, writeAllowedSigners } from '../helpers/dispatch-repo.js';
import { git, gitEnv, run, tempDir } from '../helpers/tmp.js';
import { requireBubblewrap } from '../helpers/bubblewrap.js';

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

/** The runner's reading of the worktree against the base, with the base's ignore rules. */
async function snapshot(wt: AttemptWorktree, scratch: string, limits?: { maxEntries?: number; maxFileBytes?: number }) {
  const reader = new CatFileReader(wt.gitdir);
  const baseFiles = await listTree(wt.gitdir, wt.base);
  const rules = await baseIgnoreRules(baseFiles, join(scratch, `ignore-${Math.random().toString(36).slice(2)}`), (oids) => readBlobs(reader, oids));
  try {
    return await snapshotWork(wt, { baseFiles, rules, objects: new ObjectWriter(wt.gitdir, -1), ...(limits === undefined ? {} : { limits }) });
  } finally {
    rules.close();
    reader.close();
  }
}

let homes = 0;
const verifyOptions = (scratch: string, timeoutSeconds = 30) => {
  homes += 1;
  const home = join(scratch, `home-${homes}`);
  mkdirSync(home, { recursive: true });
  return { timeoutSeconds, isolation: 'bwrap' as const, home, hide: [allowed] };
};
const sha256 = (text: string): string => `sha256:${createHash('sha256').update(text).digest('hex')}`;

/** What the branch of `wt` points at in the target repository. */
const branchOf = (wt: AttemptWorktree): string => git(['rev-parse', wt.branch], { cwd: repo }).trim();

describe('dispatch evidence', () => {
  it('lists changed files with their sha256, verifies, commits signed on the attempt branch, and stock git sees a Good signature', async () => {
    const { wt, scratch } = await attempt();
    writeFileSync(join(wt.path, 'src', 'add.js'), 'export const add = (a, b) => a + b;\n');
    writeFileSync(join(wt.path, 'src', 'new.js'), 'export {};\n');
    const work = await snapshot(wt, scratch);
    expect(work.changes).toEqual([
      { path: 'src/add.js', status: 'modified', mode: '100644', sha256: sha256('export const add = (a, b) => a + b;\n') },
      { path: 'src/new.js', status: 'added', mode: '100644', sha256: sha256('export {};\n') },
    ]);
    expect(work.gitLinkTampered).toBe(false);
    expect(checkScope(work, ['src/**'])).toEqual({ outOfScope: [], notRegular: [] });
    const head = await commitAttempt(wt, work.tree!, { key, actor: 'coo.hermes', attemptId: 'ea_attempt_X_1', summary: 'Fix add', now: NOW });
    // Nothing is on the branch until a receipt names the commit.
    expect(branchOf(wt)).toBe(base);
    await landAttemptCommit(wt, head, 'ea_attempt_X_1');
    expect(branchOf(wt)).toBe(head);
    const stock = (args: string[]) => run('git', ['-C', repo, '-c', 'gpg.format=ssh', '-c', `gpg.ssh.allowedSignersFile=${allowed}`, ...args], { env: gitEnv() });
    const log = stock(['log', '--format=%H %G?', `${base}..${wt.branch}`]);
    expect(log.stdout).toBe(`${head} G\n`);
    expect(stock(['verify-commit', head]).status).toBe(0);
    expect(git(['show', '-s', '--format=%P%n%B', head], { cwd: repo })).toBe(`${base}\nFix add\n\nCoo-Attempt: ea_attempt_X_1\n\n`);
    expect(git(['show', `${head}:src/new.js`], { cwd: repo })).toBe('export {};\n');
  });

  it('lists a file the EA hid behind a .gitignore of its own, and leaves out what the base commit ignores', async () => {
    const { wt, scratch } = await attempt();
    mkdirSync(join(wt.path, 'build'));
    writeFileSync(join(wt.path, 'build', 'payload.sh'), 'curl evil\n');
    writeFileSync(join(wt.path, 'src', '.gitignore'), 'hidden.js\n');
    writeFileSync(join(wt.path, 'src', 'hidden.js'), 'secret\n');
    writeFileSync(join(wt.path, '.github', 'ci.yml'), 'on: [push, pull_request]\n');
    const work = await snapshot(wt, scratch);
    // build/ is the base's own ignore rule: build output, never work, never committed.
    expect(work.changes.map((change) => change.path)).toEqual(['.github/ci.yml', 'src/.gitignore', 'src/hidden.js']);
    expect(checkScope(work, ['src/**']).outOfScope).toEqual(['.github/ci.yml']);
    const files = git(['ls-tree', '-r', '--name-only', work.tree!], { cwd: repo }).trim().split('\n');
    expect(files).toContain('src/hidden.js');
    expect(files).not.toContain('build/payload.sh');
  });

  it('refuses a symbolic link as work, and lists deletions', async () => {
    const { wt, scratch } = await attempt();
    rmSync(join(wt.path, 'test.sh'));
    run('ln', ['-s', '/etc/passwd', join(wt.path, 'src', 'link')]);
    const work = await snapshot(wt, scratch);
    expect(work.changes).toEqual([
      { path: 'src/link', status: 'added', mode: '120000', sha256: sha256('/etc/passwd') },
      { path: 'test.sh', status: 'deleted', mode: '000000', sha256: null },
    ]);
    expect(checkScope(work, ['src/**', 'test.sh'])).toEqual({ outOfScope: [], notRegular: ['src/link'] });
  });

  it('flags a replaced .git link and never runs what the EA put in it', async () => {
    const { wt, scratch } = await attempt();
    const sentinel = join(dir, 'fsmonitor-ran');
    rmSync(join(wt.path, '.git'));
    mkdirSync(join(wt.path, '.git', 'hooks'), { recursive: true });
    writeFileSync(join(wt.path, '.git', 'config'), `[core]\n\tfsmonitor = touch ${sentinel}\n\thooksPath = .git/hooks\n`);
    writeFileSync(join(wt.path, '.git', 'HEAD'), 'ref: refs/heads/main\n');
    writeFileSync(join(wt.path, 'src', 'add.js'), 'export const add = (a, b) => a + b;\n');
    const gathered = await gatherEvidence(wt, { runnerDir: join(scratch, 'runner'), scope: ['src/**'], verify: ['sh test.sh'], verifyTimeoutSeconds: 30, isolation: 'bwrap', hide: [allowed], commit: { key, actor: 'coo.hermes', attemptId: 'ea_attempt_X_4', summary: 'x', now: NOW } });
    expect(gathered.snapshot.gitLinkTampered).toBe(true);
    expect(gathered.snapshot.changes.map((change) => change.path)).toEqual(['src/add.js']);
    expect(existsSync(sentinel)).toBe(false);
  });

  it('reports a checkout a verification command left dirty, and takes ignored build output for what it is', async () => {
    const { wt, scratch } = await attempt();
    writeFileSync(join(wt.path, 'src', 'add.js'), 'export const add = (a, b) => a + b;\n');
    const commit = { key, actor: 'coo.hermes', attemptId: 'ea_attempt_X_5', summary: 'x', now: NOW };
    const gathered = await gatherEvidence(wt, { runnerDir: join(scratch, 'runner'), scope: ['src/**'], verify: ['sh test.sh && echo generated > src/generated.js && mkdir -p build && echo ok > build/out'], verifyTimeoutSeconds: 30, isolation: 'bwrap', hide: [allowed], commit });
    expect(gathered.verification[0]?.exitCode).toBe(0);
    // An ignored build output is not dirt; a new source file is.
    expect(gathered.summary.commit).toMatchObject({ branchAtBase: true, dirty: ['src/generated.js'] });
  });

  it('kills a verification command at its time box and bounds its output', async () => {
    const { wt, scratch } = await attempt();
    const slow = await runVerification(wt.path, 'sleep 30', verifyOptions(scratch, 1));
    expect(slow).toMatchObject({ exitCode: null, killedByTimer: true });
    const loud = await runVerification(wt.path, 'head -c 100000 /dev/zero', { ...verifyOptions(scratch), maxOutputBytes: 1000 });
    expect(loud).toMatchObject({ exitCode: 0, outputOverflow: true });
    expect(loud.output.length).toBe(1000);
    const failing = await runVerification(wt.path, 'sh test.sh', verifyOptions(scratch));
    expect(failing.exitCode).toBe(1);
  });

  it("measures how long a verification ran on the machine's monotonic clock: a wall clock stepped an hour forward while it ran is not its time", async () => {
    const { wt, scratch } = await attempt();
    vi.useFakeTimers({ toFake: ['Date'] });
    try {
      vi.setSystemTime(new Date('2026-12-06T20:00:00Z'));
      const running = runVerification(wt.path, 'sleep 0.2', verifyOptions(scratch));
      vi.setSystemTime(new Date('2026-12-06T21:00:00Z'));
      const ran = await running;
      expect(ran.exitCode).toBe(0);
      expect(ran.elapsedMs).toBeGreaterThan(0);
      expect(ran.elapsedMs).toBeLessThan(3_600_000);
    } finally {
      vi.useRealTimers();
    }
  });

  it('gives a verification command no network under bubblewrap: a server on the host\'s 127.0.0.1 is out of its reach, its own loopback is not', async () => {
    requireBubblewrap('a verification without network');
    const { wt, scratch } = await attempt();
    const accepted: string[] = [];
    const server = createServer((socket) => {
      accepted.push('connection');
      socket.destroy();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as AddressInfo).port;
    // Exit 0 once connected, 7 when the connection is refused or fails.
    const reach = (where: number | 'own') =>
      where === 'own'
        ? `node -e 'const net = require("net"); const s = net.createServer().listen(0, "127.0.0.1", () => net.connect(s.address().port, "127.0.0.1").on("connect", () => process.exit(0)).on("error", () => process.exit(7)))'`
        : `node -e 'require("net").connect(${where}, "127.0.0.1").on("connect", () => process.exit(0)).on("error", () => process.exit(7))'`;
    try {
      const sandboxed = await runVerification(wt.path, reach(port), verifyOptions(scratch));
      expect(sandboxed.exitCode, sandboxed.output.toString()).toBe(7);
      expect(accepted).toEqual([]);
      const own = await runVerification(wt.path, reach('own'), verifyOptions(scratch));
      expect(own.exitCode, own.output.toString()).toBe(0);
      // Without bubblewrap there is no such guarantee: the same command reaches the server.
      const bare = await runVerification(wt.path, reach(port), { ...verifyOptions(scratch), isolation: 'none' });
      expect(bare.exitCode, bare.output.toString()).toBe(0);
      expect(accepted).toEqual(['connection']);
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it('hides the ledger stand-in from a verification command', async () => {
    const { wt, scratch } = await attempt();
    const read = await runVerification(wt.path, `cat ${allowed}`, verifyOptions(scratch));
    expect(read.output.toString()).not.toContain('ssh-ed25519');
  });

  it('gathers everything in one call: commits the snapshot, verifies a checkout of the commit, then finds what the verification left', async () => {
    const { wt, scratch } = await attempt();
    writeFileSync(join(wt.path, 'src', 'add.js'), 'export const add = (a, b) => a + b;\n');
    const commit = { key, actor: 'coo.hermes', attemptId: 'ea_attempt_X_9', summary: 'Fix add', now: NOW };
    const gathered = await gatherEvidence(wt, { runnerDir: join(scratch, 'runner'), scope: ['src/**'], verify: ['sh test.sh', 'echo more > src/extra.js'], verifyTimeoutSeconds: 30, isolation: 'bwrap', hide: [allowed], commit });
    expect(gathered.summary).toMatchObject({ outOfScope: [], verification: [{ exitCode: 0 }, { exitCode: 0 }], commit: { branchAtBase: true, dirty: ['src/extra.js'] } });
    expect(git(['cat-file', '-t', gathered.commit!.headSha], { cwd: repo }).trim()).toBe('commit');
    // The verification wrote into its own checkout, never into the EA's worktree.
    expect(existsSync(join(wt.path, 'src', 'extra.js'))).toBe(false);
  });

  it('commits nothing for an attempt without changes: its head is the base', async () => {
    const { wt, scratch } = await attempt();
    const commit = { key, actor: 'coo.hermes', attemptId: 'ea_attempt_X_10', summary: 'nothing', now: NOW };
    const gathered = await gatherEvidence(wt, { runnerDir: join(scratch, 'runner'), scope: ['src/**'], verify: ['true'], verifyTimeoutSeconds: 30, isolation: 'none', hide: [], commit });
    expect(gathered.commit).toBeNull();
    expect(gathered.summary).toMatchObject({ changes: [], commit: null, dirtyWithoutCommit: [] });
    expect(branchOf(wt)).toBe(base);
  });

  it('stops at the entry bound and at a file over the file bound: work not read whole has no tree to commit', async () => {
    const { wt, scratch } = await attempt();
    for (let i = 0; i < 50; i += 1) writeFileSync(join(wt.path, 'src', `f${i}.js`), `${i}\n`);
    const many = await snapshot(wt, scratch, { maxEntries: 20 });
    expect(many).toMatchObject({ tree: null, overflow: true });
    const big = await snapshot(wt, scratch, { maxFileBytes: 4 });
    expect(big.tree).toBeNull();
    expect(big.refused.filter((entry) => entry.why === 'too_large').map((entry) => entry.path)).toContain('src/add.js');
  });

  it('writes the agent\'s worktree from the base\'s objects, so a no-op agent changes nothing whatever the base\'s .gitattributes say', async () => {
    const attributed = join(dir, 'attributed');
    const first = makeTargetRepo(attributed);
    writeFileSync(join(attributed, '.gitattributes'), '* text eol=crlf\nsrc/add.js ident\n');
    writeFileSync(join(attributed, 'src', 'add.js'), 'export const add = (a, b) => a - b; // $Id$\n');
    git(['add', '-A'], { cwd: attributed });
    git(['commit', '-q', '-m', 'attributes'], { cwd: attributed, env: gitEnv() });
    const head = git(['rev-parse', 'HEAD'], { cwd: attributed }).trim();
    expect(head).not.toBe(first);
    const wt = await createAttemptWorktree({ repo: attributed, base: head, branch: 'coo/attributed', path: join(dir, 'wt-attributed') });
    const scratch = join(dir, 'scratch-attributed');
    mkdirSync(scratch);
    const work = await snapshot(wt, scratch);
    expect(work.changes).toEqual([]);
    expect(readFileSync(join(wt.path, 'src', 'add.js'), 'utf8')).toBe('export const add = (a, b) => a - b; // $Id$\n');
  });

  it('refuses an attempt branch that already exists and a path that exists', async () => {
    await expect(createAttemptWorktree({ repo, base, branch: 'main', path: join(dir, 'wt-main') })).rejects.toMatchObject({ code: 'USAGE' });
    await expect(createAttemptWorktree({ repo, base, branch: 'coo/fresh', path: repo })).rejects.toMatchObject({ code: 'USAGE' });
    await expect(createAttemptWorktree({ repo, base: 'f'.repeat(40), branch: 'coo/fresh', path: join(dir, 'wt-x') })).rejects.toMatchObject({ code: 'GIT_FAILED' });
    await expect(createAttemptWorktree({ repo, base, branch: '-x', path: join(dir, 'wt-y') })).rejects.toMatchObject({ code: 'USAGE' });
  });
});
