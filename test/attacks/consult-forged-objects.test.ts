import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CooError } from '../../src/errors.js';
import { checkPins, pinFiles, PinnedRepo, resolveCommit } from '../../src/lane/pins.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * The context a consult names (`coo consult`, the MCP consult, a dispatch's context) is read from
 * the target's objects: with an object file someone put at another object's id, or refs/replace in
 * the target, the manifest it pins must be the commit's own bytes, the ones the runner's pin check
 * reads later, or nothing at all.
 */

const dir = tempDir('consult-forged-objects');
const BOUNDS = { files: 10, bytes: 1024 * 1024 };

function git(repo: string, args: readonly string[]): string {
  return execFileSync('git', ['-C', repo, ...args], { encoding: 'utf8', env: { ...process.env, GIT_AUTHOR_NAME: 't', GIT_AUTHOR_EMAIL: 't@t', GIT_COMMITTER_NAME: 't', GIT_COMMITTER_EMAIL: 't@t' } }).trim();
}

/** A repository whose one commit holds src/add.js adding, and the id of a src tree whose add.js multiplies (written, not committed). */
function target(name: string): { repo: string; good: string; evil: string } {
  const repo = join(dir, name);
  mkdirSync(join(repo, 'src'), { recursive: true });
  git(repo, ['init', '-q']);
  writeFileSync(join(repo, 'src', 'add.js'), 'export const add = (a, b) => a * b;\n');
  git(repo, ['add', '.']);
  const evil = git(repo, ['rev-parse', `${git(repo, ['write-tree'])}:src`]);
  writeFileSync(join(repo, 'src', 'add.js'), 'export const add = (a, b) => a + b;\n');
  git(repo, ['add', '.']);
  git(repo, ['commit', '-q', '-m', 'add']);
  return { repo, good: git(repo, ['rev-parse', 'HEAD:src']), evil };
}

function loose(repo: string, oid: string): string {
  return join(repo, '.git', 'objects', oid.slice(0, 2), oid.slice(2));
}

async function outcome(repo: string): Promise<string> {
  const at = await resolveCommit(repo, 'HEAD');
  let files;
  try {
    files = await pinFiles(repo, at, ['src/add.js'], BOUNDS);
  } catch (error) {
    return error instanceof CooError ? error.code : `uncoded ${String(error)}`;
  }
  const check = await checkPins(repo, at.commit, files);
  return `pinned ${files[0]!.bytes.toString('utf8').trim()} (the runner's check: ${check.ok ? 'same' : 'differs'})`;
}

describe('consult context from a target with forged objects', () => {
  it('a loose object file at the id of the src tree, holding another src tree, is refused when the context is pinned, never pinned as the commit\'s', async () => {
    const { repo, good, evil } = target('loose');
    rmSync(loose(repo, good), { force: true });
    copyFileSync(loose(repo, evil), loose(repo, good));
    expect(await outcome(repo)).toBe('GIT_FAILED');
  });

  it("refs/replace over the src tree changes nothing: the commit's own add.js is pinned, the one the runner checks", async () => {
    const { repo, good, evil } = target('replace');
    git(repo, ['replace', good, evil]);
    expect(await outcome(repo)).toBe("pinned export const add = (a, b) => a + b; (the runner's check: same)");
  });

  it("the runner's pin check of a target with an object file at another's id fails that check only: the next check, the object put back, passes", async () => {
    const { repo, good, evil } = target('runner-check');
    const at = await resolveCommit(repo, 'HEAD');
    const files = await pinFiles(repo, at, ['src/add.js'], BOUNDS);
    const saved = join(dir, 'saved-src-tree');
    copyFileSync(loose(repo, good), saved);
    const pins = new PinnedRepo(repo);
    try {
      expect((await pins.check(at.commit, files)).ok).toBe(true);
      rmSync(loose(repo, good), { force: true });
      copyFileSync(loose(repo, evil), loose(repo, good));
      const forged = await pins.check(at.commit, files);
      expect(forged.ok ? 'passed' : forged.detail).toMatch(/cannot be read from .*the bytes of another object/);
      rmSync(loose(repo, good), { force: true });
      copyFileSync(saved, loose(repo, good));
      expect((await pins.check(at.commit, files)).ok).toBe(true);
    } finally {
      pins.close();
    }
  });
});

describe('consult context from a commit whose trees name one subtree many times', () => {
  it('a few kilobytes of trees that list a million paths are refused with POLICY_LIMIT once the listing passes its bound, not listed whole', async () => {
    const repo = join(dir, 'bomb');
    mkdirSync(repo, { recursive: true });
    git(repo, ['init', '-q']);
    const blob = execFileSync('git', ['-C', repo, 'hash-object', '-w', '--stdin'], { input: 'leaf\n', encoding: 'utf8' }).trim();
    const mktree = (lines: string): string => execFileSync('git', ['-C', repo, 'mktree'], { input: lines, encoding: 'utf8' }).trim();
    let tree = mktree(`100644 blob ${blob}\tf\n`);
    // Three levels of a hundred names for the same tree: 10^6 paths in about 10 KB of objects.
    for (let level = 0; level < 3; level += 1) {
      const child = tree;
      tree = mktree(Array.from({ length: 100 }, (_, index) => `040000 tree ${child}\td${String(index).padStart(3, '0')}\n`).join(''));
    }
    const commit = git(repo, ['commit-tree', tree, '-m', 'bomb']);
    git(repo, ['update-ref', 'refs/heads/main', commit]);
    const at = await resolveCommit(repo, commit);
    const refused = await pinFiles(repo, at, ['d000/d000/d000/f'], BOUNDS).then(
      () => 'pinned',
      (error: unknown) => (error instanceof CooError ? error.code : `uncoded ${String(error)}`),
    );
    expect(refused).toBe('POLICY_LIMIT');
  });
});

describe("consult context read by enqueue and by the runner's check alike", () => {
  it('a file of the legacy mode 100664 is pinned at enqueue and found by the pin check, as git reads it: a regular file', async () => {
    const repo = join(dir, 'legacy-mode');
    mkdirSync(repo, { recursive: true });
    git(repo, ['init', '-q']);
    const blob = execFileSync('git', ['-C', repo, 'hash-object', '-w', '--stdin'], { input: 'old mode\n', encoding: 'utf8' }).trim();
    const src = execFileSync('git', ['-C', repo, 'mktree'], { input: `100664 blob ${blob}\tf.txt\n`, encoding: 'utf8' }).trim();
    const root = execFileSync('git', ['-C', repo, 'mktree'], { input: `040000 tree ${src}\tsrc\n`, encoding: 'utf8' }).trim();
    const commit = git(repo, ['commit-tree', root, '-m', 'legacy']);
    const at = await resolveCommit(repo, commit);
    const files = await pinFiles(repo, at, ['src/f.txt'], BOUNDS);
    expect(files.map((file) => file.path)).toEqual(['src/f.txt']);
    expect(await checkPins(repo, commit, files)).toMatchObject({ ok: true });
  });
});
