import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { messageFolder, promptPath, envelopePath, sigPath, trustPath } from '../../src/ledger/layout.js';
import { CatFileReader, ObjectWriter } from '../../src/ledger/object-store.js';
import { renderTree, type TreeEntry } from '../../src/ledger/tree-format.js';
import { checkPins } from '../../src/lane/pins.js';
import { newMessageId } from '../../src/util/ids.js';
import { isoSeconds } from '../../src/util/time.js';
import { COO } from '../helpers/cli.js';
import { makeLedger, T0 } from '../helpers/ledger.js';
import { git, gitEnv, tempDir } from '../helpers/tmp.js';

/**
 * A ledger object far over every bound: 300 MiB of zeros, which a push carries in a few hundred
 * KiB of pack (well inside receive.maxInputSize). Whatever reads it must refuse it from git's
 * header, keeping none of its bytes.
 */
const HUGE = 300 * 1024 * 1024;
/** What a `coo` process may reach at its peak while meeting the object: a run keeping it whole is over 300 MiB. */
const PEAK_KIB = 160 * 1024;

let dir: string;
let gitdir: string;
let huge: string;
let preload: string;
let ceoKeyId: string;

function gitIn(args: readonly string[], input?: string): string {
  return execFileSync('git', ['--git-dir', gitdir, ...args], { input, encoding: 'utf8', env: gitEnv(), stdio: ['pipe', 'pipe', 'pipe'] });
}

/** A commit on main's head adding `path` as the huge blob (made with stock git: what a push would carry). */
function commitAdding(path: string): string {
  const main = gitIn(['rev-parse', 'main']).trim();
  const message = 'huge\n\nLedger-Seq: 2\n';
  const ref = `refs/attack/${Math.random().toString(36).slice(2)}`;
  const stream = [`commit ${ref}`, 'committer T <t@example.invalid> 1700000000 +0000', `data ${Buffer.byteLength(message)}`, message, `from ${main}`, `M 100644 ${huge} ${path}`, ''].join('\n');
  gitIn(['fast-import', '--quiet'], stream);
  return gitIn(['rev-parse', ref]).trim();
}

/** Runs the built CLI with a preload that reports the process's peak resident memory (KiB) as it exits. */
function cooMeasured(args: readonly string[], options: { input?: string; env?: NodeJS.ProcessEnv } = {}): { status: number | null; stderr: string; stdout: string; peakKib: number } {
  const result = spawnSync(process.execPath, ['--require', preload, COO, ...args], {
    input: options.input,
    encoding: 'utf8',
    env: { ...process.env, COO_LEDGER: '', COO_KEY: '', XDG_STATE_HOME: join(dir, 'state'), ...options.env },
  });
  const peak = /\ncoo-test-peak-kib (\d+)\n/.exec(result.stderr);
  return { status: result.status, stdout: result.stdout, stderr: result.stderr.replace(/\ncoo-test-peak-kib \d+\n/, ''), peakKib: Number(peak?.[1] ?? Number.NaN) };
}

/** Runs `run` on the ledger with main at `commit`, then puts main back where it was. */
function withMainAt<T>(commit: string, run: () => T): T {
  const main = gitIn(['rev-parse', 'main']).trim();
  gitIn(['update-ref', 'refs/heads/main', commit]);
  try {
    return run();
  } finally {
    gitIn(['update-ref', 'refs/heads/main', main]);
  }
}

function hook(commit: string): ReturnType<typeof cooMeasured> {
  const main = gitIn(['rev-parse', 'main']).trim();
  return cooMeasured(['hook', 'pre-receive'], { input: `${main} ${commit} refs/heads/main\n`, env: { GIT_DIR: gitdir } });
}

beforeAll(async () => {
  dir = tempDir();
  const made = await makeLedger(dir);
  gitdir = made.gitdir;
  ceoKeyId = made.actors.ceo.publicKey.keyId;
  preload = join(dir, 'peak.cjs');
  writeFileSync(preload, "process.on('exit', () => require('node:fs').writeSync(2, `\\ncoo-test-peak-kib ${process.resourceUsage().maxRSS}\\n`));\n");
  // Stored compressed (the ledger's own setting is no compression): a few hundred KiB on disk.
  huge = execFileSync('sh', ['-c', `head -c ${HUGE} /dev/zero | git --git-dir "$1" -c core.compression=9 -c core.looseCompression=9 hash-object -w --stdin`, 'sh', gitdir], { encoding: 'utf8', env: gitEnv() }).trim();
}, 120_000);

describe('a 300 MiB object in a push or a ledger', () => {
  const folder = messageFolder(newMessageId(T0.getTime()), isoSeconds(T0));
  const cases: ReadonlyArray<readonly [string, string, string]> = [
    ['a YAML entry', envelopePath(folder), 'YAML_TOO_LARGE'],
    ['a trust file', trustPath('policy', 2), 'YAML_TOO_LARGE'],
    ['a signature file', sigPath(trustPath('policy', 2)), 'SIG_MALFORMED'],
    ['an artifact', promptPath(folder), 'POLICY_LIMIT'],
    ['a forge workflow', '.github/workflows/coo-verify.yml', 'POLICY_LIMIT'],
    ['a path the layout has no place for', 'junk/huge.bin', 'PATH_INVALID'],
  ];

  for (const [what, path, code] of cases) {
    it(`is refused by the pre-receive hook as ${what} (${code}) from its size, the hook's memory staying small`, () => {
      const result = hook(commitAdding(path));
      expect(result.status).not.toBe(0);
      expect(result.stderr).toMatch(/push declined/);
      expect(result.stderr).toContain(code);
      expect(result.stderr).toContain(path);
      expect(result.stderr).not.toMatch(/\n\s+at /);
      expect(result.peakKib).toBeLessThan(PEAK_KIB);
    }, 60_000);
  }

  it('is a coded finding of coo verify on a ledger whose main holds it, read within the same bound', () => {
    const commit = commitAdding(envelopePath(folder));
    const result = withMainAt(commit, () => cooMeasured(['verify', '--ledger', gitdir, '--full', '--no-checkpoint']));
    expect(result.status).toBe(3);
    expect(`${result.stdout}${result.stderr}`).toContain('YAML_TOO_LARGE');
    expect(`${result.stdout}${result.stderr}`).not.toMatch(/\n\s+at /);
    expect(result.peakKib).toBeLessThan(PEAK_KIB);
  }, 60_000);

  it('is refused by coo clone from a remote whose main holds it, with a coded finding and nothing cloned', () => {
    const commit = commitAdding(envelopePath(folder));
    const into = join(dir, 'cloned');
    const cloned = withMainAt(commit, () => cooMeasured(['clone', gitdir, into, '--trust-root', ceoKeyId]));
    expect(cloned.status).toBe(3);
    expect(cloned.stderr).toMatch(/YAML_TOO_LARGE.*nothing was cloned/s);
    expect(cloned.stderr).not.toMatch(/\n\s+at /);
    expect(existsSync(into)).toBe(false);
    expect(cloned.peakKib).toBeLessThan(PEAK_KIB);
  }, 120_000);

  it('reaches no reader of the ledger whole: the object reader answers its size and keeps none of its bytes', async () => {
    const reader = new CatFileReader(gitdir);
    try {
      const before = process.memoryUsage().arrayBuffers;
      const over = await reader.read(huge, 1024);
      expect(over).toEqual({ type: 'blob', size: HUGE, content: null });
      // The reader goes on answering after passing over the object's bytes.
      const main = gitIn(['rev-parse', 'main']).trim();
      expect((await reader.read(main, 64 * 1024))?.type).toBe('commit');
      expect(process.memoryUsage().arrayBuffers - before).toBeLessThan(64 * 1024 * 1024);
    } finally {
      reader.close();
    }
  }, 60_000);
});

describe('a push of a 300 MiB blob with stock git (a few hundred KiB of pack)', () => {
  it("is declined by the ledger's hook with a coded line, the hook's peak memory staying small", () => {
    const work = join(dir, 'work');
    execFileSync('git', ['clone', '-q', gitdir, work], { env: gitEnv() });
    const blob = execFileSync('sh', ['-c', `head -c ${HUGE} /dev/zero | git -C "$1" -c core.looseCompression=9 hash-object -w --stdin`, 'sh', work], { encoding: 'utf8', env: gitEnv() }).trim();
    const message = 'huge\n\nLedger-Seq: 2\n';
    const stream = ['commit refs/heads/main', 'committer T <t@example.invalid> 1700000000 +0000', `data ${Buffer.byteLength(message)}`, message, 'from refs/heads/main^0', `M 100644 ${blob} ${trustPath('policy', 2)}`, ''].join('\n');
    execFileSync('git', ['-C', work, 'fast-import', '--quiet'], { input: stream, env: gitEnv() });
    const result = spawnSync('git', ['push', 'origin', 'main'], { cwd: work, encoding: 'utf8', env: { ...gitEnv(), NODE_OPTIONS: `--require ${preload}` } });
    expect(result.status).not.toBe(0);
    expect(result.stderr).toMatch(/push declined/);
    expect(result.stderr).toMatch(/YAML_TOO_LARGE .*trust\/policy\/000002\.yaml is 314572800 bytes/);
    expect(Number(/coo-test-peak-kib (\d+)/.exec(result.stderr)?.[1] ?? Number.NaN)).toBeLessThan(PEAK_KIB);
  }, 120_000);
});

describe('an object reader closed while it passes over a 300 MiB object', () => {
  it('answers the next read from a new git cat-file, none of the old one\'s bytes taken for its replies', async () => {
    const reader = new CatFileReader(gitdir);
    try {
      const main = gitIn(['rev-parse', 'main']).trim();
      expect(await reader.read(huge, 1024)).toEqual({ type: 'blob', size: HUGE, content: null });
      reader.close();
      const commit = await reader.read(main, 64 * 1024);
      expect(commit?.type).toBe('commit');
      expect(commit?.content?.toString('utf8')).toBe(gitIn(['cat-file', 'commit', main]));
      expect(await reader.read(huge, 1024)).toEqual({ type: 'blob', size: HUGE, content: null });
    } finally {
      reader.close();
    }
  }, 60_000);
});

describe('a 300 MiB commit object (its message) in a push or a ledger', () => {
  it('is refused by the pre-receive hook and coo verify as COMMIT_MALFORMED from its size, memory staying small', () => {
    const main = gitIn(['rev-parse', 'main']).trim();
    const tree = gitIn(['rev-parse', 'main^{tree}']).trim();
    const commit = execFileSync('sh', ['-c', `{ printf 'huge\\n\\n'; head -c ${HUGE} /dev/zero | tr '\\0' x; printf '\\n\\nLedger-Seq: 2\\n'; } | git --git-dir "$1" -c core.compression=9 -c core.looseCompression=9 commit-tree "$2" -p "$3"`, 'sh', gitdir, tree, main], { encoding: 'utf8', env: gitEnv() }).trim();
    const pushed = hook(commit);
    expect(pushed.status).not.toBe(0);
    expect(pushed.stderr).toMatch(/COMMIT_MALFORMED.*over the 65536-byte bound on a commit/);
    expect(pushed.stderr).not.toMatch(/\n\s+at /);
    expect(pushed.peakKib).toBeLessThan(PEAK_KIB);
    const verified = withMainAt(commit, () => cooMeasured(['verify', '--ledger', gitdir, '--full', '--no-checkpoint']));
    expect(verified.status).toBe(3);
    expect(`${verified.stdout}${verified.stderr}`).toMatch(/COMMIT_MALFORMED/);
    expect(`${verified.stdout}${verified.stderr}`).not.toMatch(/\n\s+at /);
    expect(verified.peakKib).toBeLessThan(PEAK_KIB);
  }, 120_000);
});

describe('a file entry of a pushed tree that names a commit instead of a file', () => {
  it('is refused by the pre-receive hook as TREE_MALFORMED, not read as the file', async () => {
    const main = gitIn(['rev-parse', 'main']).trim();
    const writer = new ObjectWriter(gitdir);
    const root = gitIn(['ls-tree', 'main'])
      .split('\n')
      .filter((line) => line !== '')
      .map((line) => {
        const [head, name] = line.split('\t') as [string, string];
        const [mode, , oid] = head.split(' ') as [string, string, string];
        return { mode: (mode === '040000' ? '40000' : mode) as TreeEntry['mode'], name, oid };
      });
    const switches = await writer.write('tree', renderTree([{ mode: '100644', name: '000001.yaml', oid: main }]));
    const control = await writer.write('tree', renderTree([{ mode: '40000', name: 'kill-switch', oid: switches }]));
    const tree = await writer.write('tree', renderTree([...root.filter((entry) => entry.name !== 'control'), { mode: '40000', name: 'control', oid: control }]));
    const commit = gitIn(['commit-tree', tree, '-p', main, '-m', 'not a file\n\nLedger-Seq: 2']).trim();
    const result = hook(commit);
    expect(result.status).not.toBe(0);
    expect(result.stderr).toMatch(/TREE_MALFORMED .*control\/kill-switch\/000001\.yaml.*names a commit object/);
    expect(result.stderr).not.toMatch(/\n\s+at /);
  }, 60_000);
});

describe("a ledger's state cache that is a FIFO (coo/checkpoint.json)", () => {
  it('is passed over by the pre-receive hook, which ends and judges the push, never blocking on it', () => {
    const cache = join(gitdir, 'coo', 'checkpoint.json');
    mkdirSync(join(gitdir, 'coo'), { recursive: true });
    rmSync(cache, { force: true });
    execFileSync('mkfifo', [cache]);
    const main = gitIn(['rev-parse', 'main']).trim();
    // Bounded so that a hook blocked on the FIFO fails the test rather than hanging it.
    const result = spawnSync(process.execPath, [COO, 'hook', 'pre-receive'], {
      input: `${main} ${commitAdding('junk/file.bin')} refs/heads/main\n`,
      encoding: 'utf8',
      timeout: 30_000,
      env: { ...process.env, GIT_DIR: gitdir, XDG_STATE_HOME: join(dir, 'state') },
    });
    rmSync(cache, { force: true });
    expect(result.signal).toBeNull();
    expect(result.stderr).toMatch(/push declined/);
    expect(result.stderr).toContain('PATH_INVALID');
  }, 60_000);
});

describe("a FIFO where git's gc.log goes in a ledger", () => {
  it('is passed over by coo verify, which ends with its verdict, never blocking on it', () => {
    const log = join(gitdir, 'gc.log');
    execFileSync('mkfifo', [log]);
    // Bounded so that a verify blocked on the FIFO fails the test rather than hanging it.
    const result = spawnSync(process.execPath, [COO, 'verify', '--ledger', gitdir, '--full', '--no-checkpoint'], {
      encoding: 'utf8',
      timeout: 30_000,
      env: { ...process.env, COO_LEDGER: '', XDG_STATE_HOME: join(dir, 'state') },
    });
    rmSync(log, { force: true });
    expect(result.signal).toBeNull();
    expect(result.status).toBe(0);
    expect(result.stdout).toMatch(/^ok:/);
  }, 60_000);
});

describe('a pinned context file that became 300 MiB in the target repository', () => {
  it("is refused by the runner's pin check from git's reply header, none of its bytes kept", async () => {
    const repo = join(dir, 'target');
    git(['init', '-q', '-b', 'main', repo]);
    const blob = execFileSync('sh', ['-c', `head -c ${HUGE} /dev/zero | git -C "$1" -c core.looseCompression=9 hash-object -w --stdin`, 'sh', repo], { encoding: 'utf8', env: gitEnv() }).trim();
    git(['-C', repo, 'update-index', '--add', '--cacheinfo', `100644,${blob},notes.md`]);
    const commit = git(['-C', repo, 'commit-tree', git(['-C', repo, 'write-tree']).trim(), '-m', 'context']).trim();
    const before = process.memoryUsage().arrayBuffers;
    const check = await checkPins(repo, commit, [{ path: 'notes.md', sha256: `sha256:${'0'.repeat(64)}` }]);
    expect(check).toEqual({ ok: false, detail: `notes.md: ${HUGE} bytes exceeds the 1048576-byte limit for one context file` });
    expect(process.memoryUsage().arrayBuffers - before).toBeLessThan(64 * 1024 * 1024);
  }, 60_000);
});
