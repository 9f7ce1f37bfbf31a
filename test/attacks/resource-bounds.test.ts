import { execFileSync } from 'node:child_process';
import { mkdirSync, symlinkSync, truncateSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { readAnswer } from '../../src/consult/oracle.js';
import { snapshotFiles } from '../../src/dispatch/asked-consult.js';
import { CatFileReader } from '../../src/ledger/object-store.js';
import { pinFiles, resolveCommit } from '../../src/lane/pins.js';
import { readStrictYaml } from '../../src/schema/strict-yaml.js';
import { readBounded } from '../../src/util/bounded-read.js';
import type * as BoundedReadModule from '../../src/util/bounded-read.js';
import { codeOf, codeOfAsync } from '../helpers/codes.js';
import { coo } from '../helpers/cli.js';
import { git, tempDir } from '../helpers/tmp.js';

vi.mock('../../src/util/bounded-read.js', async (importOriginal) => {
  const original = await importOriginal<typeof BoundedReadModule>();
  return { ...original, readBounded: vi.fn(original.readBounded) };
});

const MiB = 1024 * 1024;

describe('a consult naming more context than the policy allows', () => {
  it("refuses an agent's 200 files of 1 MiB each from their sizes, before reading any", () => {
    const worktree = tempDir();
    mkdirSync(join(worktree, 'src'));
    const names: string[] = [];
    for (let i = 0; i < 200; i += 1) {
      const path = `src/f${i}.bin`;
      writeFileSync(join(worktree, path), '');
      truncateSync(join(worktree, path), MiB);
      names.push(path);
    }
    const reads = vi.mocked(readBounded);
    reads.mockClear();
    expect(codeOf(() => snapshotFiles(worktree, names, ['src/**'], { files: 200, bytes: 4 * MiB }))).toBe('POLICY_LIMIT');
    expect(reads).not.toHaveBeenCalled();
    // Within the bounds the same files are read, each at most what is left of the total.
    reads.mockClear();
    const files = snapshotFiles(worktree, names.slice(0, 3), ['src/**'], { files: 200, bytes: 4 * MiB });
    expect(files.map((file) => file.bytes.length)).toEqual([MiB, MiB, MiB]);
    expect(reads.mock.calls.map((call) => call[1].maxBytes)).toEqual([MiB, MiB, MiB]);
    expect(codeOf(() => snapshotFiles(worktree, names.slice(0, 3), ['src/**'], { files: 2, bytes: 4 * MiB }))).toBe('POLICY_LIMIT');
    // A folder linked out of the worktree tells nothing of the size of what lies behind it.
    const outside = tempDir();
    writeFileSync(join(outside, 'secret.bin'), '');
    truncateSync(join(outside, 'secret.bin'), 3 * MiB);
    symlinkSync(outside, join(worktree, 'src', 'out'));
    expect(() => snapshotFiles(worktree, ['src/out/secret.bin'], ['src/**'], { files: 200, bytes: 4 * MiB })).toThrow(/symlink/);
  });

  it('refuses a pinned commit whose matching files pass the policy from git sizes, before reading a blob', async () => {
    const repo = tempDir();
    git(['init', '-q', '-b', 'main', repo]);
    for (let i = 0; i < 5; i += 1) writeFileSync(join(repo, `f${i}.txt`), 'x'.repeat(300 * 1024));
    git(['add', '.'], { cwd: repo });
    git(['commit', '-q', '-m', 'context'], { cwd: repo });
    const at = await resolveCommit(repo, 'HEAD');
    const blobs = new Set([0, 1, 2, 3, 4].map((i) => git(['rev-parse', `HEAD:f${i}.txt`], { cwd: repo }).trim()));
    const reads = vi.spyOn(CatFileReader.prototype, 'read');
    // The commit and its tree are read (through the checking reader) to list the files; no blob is.
    const blobReads = (): number => reads.mock.calls.filter(([oid]) => blobs.has(oid)).length;
    expect(await codeOfAsync(() => pinFiles(repo, at, ['*.txt'], { files: 200, bytes: MiB }))).toBe('POLICY_LIMIT');
    expect(blobReads()).toBe(0);
    expect(await pinFiles(repo, at, ['f0.txt', 'f1.txt'], { files: 200, bytes: MiB })).toHaveLength(2);
    expect(blobReads()).toBe(2);
    reads.mockRestore();
  });
});

describe('a YAML document nested deeper than the bound in flow style', () => {
  it.each([
    ['a sequence', `a: ${'['.repeat(200_000)}`],
    ['a mapping', `a: ${'{b: '.repeat(60_000)}`],
  ])('refuses %s of 200,000 levels as YAML_DEPTH from its tokens, not on the parser\'s stack', (_, text) => {
    expect(codeOf(() => readStrictYaml(Buffer.from(text), 'envelope.yaml', { maxBytes: 1024 * 1024 }))).toBe('YAML_DEPTH');
  });

  it('reads flow collections up to the bound', () => {
    expect(readStrictYaml(Buffer.from(`a: ${'['.repeat(20)}1${']'.repeat(20)}\nb: "[[[["\n`), 'envelope.yaml')).toEqual({ a: JSON.parse(`${'['.repeat(20)}1${']'.repeat(20)}`), b: '[[[[' });
  });
});

describe("a file the operator names on the command line, larger than any the CLI takes", () => {
  const dir = tempDir('operator-files-');
  const sparse = (name: string, size: number): string => {
    const path = join(dir, name);
    writeFileSync(path, '');
    truncateSync(path, size);
    return path;
  };

  it('refuses a key file that is /dev/zero after reading one byte past the key bound, never forever', () => {
    const result = coo(['append', join(dir, 'envelope.yaml'), '--ledger', join(dir, 'ledger'), '--key', '/dev/zero']);
    expect(result.status).toBe(2);
    expect(result.stderr).toContain('USAGE');
    expect(result.stderr).toContain('the key file /dev/zero is over the 65536-byte limit');
  });

  it("refuses a 5 GiB artifact for coo append and a 2 GiB bundle for coo verify-bundle from their sizes", () => {
    execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', 'coo', '-f', join(dir, 'coo.key')]);
    const appended = coo(['append', join(dir, 'envelope.yaml'), sparse('prompt.md', 5 * 1024 * MiB), '--ledger', join(dir, 'ledger'), '--key', join(dir, 'coo.key')]);
    expect(appended.status).toBe(2);
    expect(appended.stderr).toContain(`is 5368709120 bytes, over the 4194304-byte limit`);
    const verified = coo(['verify-bundle', sparse('bundle.tar', 2 * 1024 * MiB)]);
    expect(verified.status).toBe(2);
    expect(verified.stderr).toContain(`is 2147483648 bytes, over the 1073741824-byte limit`);
  });
});

describe('the answer file Oracle leaves in the folder it may change', () => {
  it('is never read through a link (to a key of the runner) nor waited on as a FIFO, and a large one is refused from its size', () => {
    const dir = tempDir('oracle-answer-');
    writeFileSync(join(dir, 'coo.key'), 'the COO private key\n');
    symlinkSync(join(dir, 'coo.key'), join(dir, 'linked.md'));
    expect(readAnswer(join(dir, 'linked.md')).bytes).toBeNull();
    execFileSync('mkfifo', [join(dir, 'fifo.md')]);
    expect(readAnswer(join(dir, 'fifo.md'))).toEqual({ bytes: null, size: 0 });
    const large = join(dir, 'large.md');
    writeFileSync(large, '');
    truncateSync(large, 5 * MiB);
    expect(readAnswer(large)).toEqual({ bytes: null, size: 5 * MiB });
    writeFileSync(join(dir, 'answer.md'), 'an answer\n');
    expect(readAnswer(join(dir, 'answer.md')).bytes?.toString('utf8')).toBe('an answer\n');
  });
});
