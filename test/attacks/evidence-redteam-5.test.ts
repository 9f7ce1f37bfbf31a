import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { CooError } from '../../src/errors.js';
import { CatFileReader } from '../../src/ledger/object-store.js';
import { LIMITS } from '../../src/limits.js';
import { checkPins, pinFiles, resolveCommit } from '../../src/lane/pins.js';
import { sha256Ref } from '../../src/util/hash.js';
import { worlds } from '../helpers/lane.js';
import { gitEnv, tempDir } from '../helpers/tmp.js';

/**
 * A consult's context gathered from a target repository shaped against it at the pinned commit:
 * trees git would not write (entries out of order or twice, `.`, `..` or `.git` names), names that
 * differ only by case or Unicode normalisation, a filter the target configures, a pin to a tag or a
 * tree, a commit whose tree is missing, and a large folder the runner's check walks once per file.
 */

const dir = tempDir('evidence-redteam-5');
const BOUNDS = { files: 100, bytes: 1024 * 1024 };
let count = 0;

afterEach(() => {
  vi.restoreAllMocks();
});

function git(repo: string, args: readonly string[], input?: string | Buffer): string {
  return execFileSync('git', ['-C', repo, ...args], { input, encoding: 'utf8', env: gitEnv(), stdio: ['pipe', 'pipe', 'pipe'] }).trim();
}

function repository(): string {
  count += 1;
  const repo = join(dir, `r${count}`);
  mkdirSync(repo, { recursive: true });
  git(repo, ['init', '-q', '-b', 'main']);
  return repo;
}

const blob = (repo: string, text: string): string => git(repo, ['hash-object', '-w', '--stdin'], text);

/** A tree object written byte for byte as given, in the given order, as `git hash-object --literally` stores it. */
function rawTree(repo: string, entries: ReadonlyArray<readonly [mode: string, name: string, oid: string]>): string {
  const raw = Buffer.concat(entries.map(([mode, name, oid]) => Buffer.concat([Buffer.from(`${mode} ${name}\0`), Buffer.from(oid, 'hex')])));
  return git(repo, ['hash-object', '-w', '-t', 'tree', '--literally', '--stdin'], raw);
}

const commitOf = (repo: string, tree: string): string => git(repo, ['commit-tree', tree, '-m', 'context']);

/** What pinning `patterns` at `commit` ends in: the error's code, or the paths pinned. */
async function pinned(repo: string, commit: string, patterns: readonly string[]): Promise<string> {
  try {
    const files = await pinFiles(repo, await resolveCommit(repo, commit), patterns, BOUNDS);
    return `pinned ${files.map((file) => file.path).join(',')}`;
  } catch (error) {
    return error instanceof CooError ? error.code : `uncoded ${String(error)}`;
  }
}

/** The trees git would not write, each at the root of a commit, with `a` (alpha) among its files. */
function hostileTrees(repo: string): Record<string, string> {
  const alpha = blob(repo, 'alpha\n');
  const beta = blob(repo, 'beta\n');
  const folder = rawTree(repo, [['100644', 'x', blob(repo, 'secret\n')]]);
  const shapes: Record<string, ReadonlyArray<readonly [string, string, string]>> = {
    'a name twice': [['100644', 'a', alpha], ['100644', 'a', beta]],
    'a file and a folder of one name': [['100644', 'a', alpha], ['40000', 'a', folder]],
    'entries out of order': [['100644', 'b', beta], ['100644', 'a', alpha]],
    'a folder named ..': [['100644', 'a', alpha], ['40000', '..', folder]],
    'a folder named .': [['100644', 'a', alpha], ['40000', '.', folder]],
    'a folder named .git': [['40000', '.git', folder], ['100644', 'a', alpha]],
    'a folder named .GIT': [['40000', '.GIT', folder], ['100644', 'a', alpha]],
  };
  return Object.fromEntries(Object.entries(shapes).map(([shape, entries]) => [shape, commitOf(repo, rawTree(repo, entries))]));
}

describe('a tree at the pinned commit that git would not write', () => {
  const fresh = worlds(dir);

  it('is refused, coded, when the consult is written: nothing is committed to the ledger, whichever file the pattern names', async () => {
    const w = await fresh();
    const commits = hostileTrees(w.target);
    const head = git(w.gitdir, ['rev-parse', 'main']);
    const outcomes: Record<string, string[]> = {};
    for (const [shape, commit] of Object.entries(commits)) {
      git(w.target, ['update-ref', 'refs/heads/main', commit]);
      outcomes[shape] = [];
      for (const patterns of [['a'], ['**']]) {
        const code = await w.consult({ idempotencyKey: `hostile-${outcomes[shape].length}-${Object.keys(outcomes).length}`, patterns }).then(
          () => 'written',
          (error: unknown) => (error instanceof CooError ? error.code : `uncoded ${String(error)}`),
        );
        outcomes[shape].push(code);
      }
    }
    expect(outcomes).toEqual(Object.fromEntries(Object.keys(commits).map((shape) => [shape, ['GIT_FAILED', 'GIT_FAILED']])));
    expect(git(w.gitdir, ['rev-parse', 'main'])).toBe(head);
  }, 60_000);

  it("fails the runner's pin check (a stale context, unpaid), not read another way than git reads it", async () => {
    const repo = repository();
    const alpha = { path: 'a', sha256: sha256Ref(Buffer.from('alpha\n')) };
    for (const [shape, commit] of Object.entries(hostileTrees(repo))) {
      const check = await checkPins(repo, commit, [alpha]);
      expect({ shape, ok: check.ok }).toEqual({ shape, ok: false });
    }
  });

  it('out of order, git itself cannot find the file the pin would name: the reason it is refused', () => {
    const repo = repository();
    const commit = hostileTrees(repo)['entries out of order']!;
    expect(() => git(repo, ['cat-file', 'blob', `${commit}:a`])).toThrow();
  });
});

describe('a tree git writes, with names git orders in its own way', () => {
  it('is gathered whole, each file the blob git finds at its path: a folder ordered as git orders it, names differing by case or Unicode normalisation kept apart', async () => {
    const repo = repository();
    // git orders a folder as if its name ended in a slash: ab.c, then the folder ab, then ab0.
    const names = ['a', 'a-b', 'a.b', 'a0', 'A', 'é', 'e\u0301', '.gitx', '.github/w.yml', 'ab.c', 'ab/x', 'ab0', 'a b/y', 'bin/run'];
    const lines: string[] = [];
    const folders = new Map<string, string[]>();
    for (const name of names) {
      const [head, rest] = name.split('/') as [string, string | undefined];
      if (rest === undefined) lines.push(`${name === 'bin/run' ? '100755' : '100644'} blob ${blob(repo, `${name}\n`)}\t${name}`);
      else folders.set(head, [...(folders.get(head) ?? []), `${name === 'bin/run' ? '100755' : '100644'} blob ${blob(repo, `${name}\n`)}\t${rest}`]);
    }
    for (const [folder, entries] of folders) lines.push(`040000 tree ${git(repo, ['mktree'], `${entries.join('\n')}\n`)}\t${folder}`);
    const commit = commitOf(repo, git(repo, ['mktree'], `${lines.join('\n')}\n`));
    const at = await resolveCommit(repo, commit);
    const files = await pinFiles(repo, at, ['**'], BOUNDS);
    expect(files.map((file) => file.path).sort()).toEqual([...names].sort());
    for (const file of files) expect(file.bytes.toString('utf8')).toBe(git(repo, ['cat-file', 'blob', `${commit}:${file.path}`]) + '\n');
    expect(await checkPins(repo, commit, files)).toMatchObject({ ok: true });
  });
});

describe('what the pinned commit is, and what the target configures', () => {
  it("a file an LFS filter would smudge is pinned as the commit holds it (the pointer), the target's filter never run", async () => {
    const repo = repository();
    const ran = join(repo, 'smudged');
    git(repo, ['config', 'filter.lfs.smudge', `touch ${ran}; cat`]);
    git(repo, ['config', 'filter.lfs.process', `touch ${ran}`]);
    const pointer = 'version https://git-lfs.github.com/spec/v1\noid sha256:' + '0'.repeat(64) + '\nsize 12\n';
    const tree = git(repo, ['mktree'], `100644 blob ${blob(repo, '*.bin filter=lfs diff=lfs merge=lfs -text\n')}\t.gitattributes\n100644 blob ${blob(repo, pointer)}\tdata.bin\n`);
    const commit = commitOf(repo, tree);
    const files = await pinFiles(repo, await resolveCommit(repo, commit), ['data.bin'], BOUNDS);
    expect(files.map((file) => [file.path, file.sha256])).toEqual([['data.bin', sha256Ref(Buffer.from(pointer))]]);
    expect(existsSync(ran)).toBe(false);
  });

  it('a tag is pinned as the commit it names; a tree is no commit; a pin naming a tag or a tree fails the check', async () => {
    const repo = repository();
    const tree = git(repo, ['mktree'], `100644 blob ${blob(repo, 'alpha\n')}\ta\n`);
    const commit = commitOf(repo, tree);
    git(repo, ['tag', '-a', '-m', 'release', 'v1', commit]);
    const tag = git(repo, ['rev-parse', 'v1']);
    expect((await resolveCommit(repo, 'v1')).commit).toBe(commit);
    expect(await pinned(repo, tree, ['a'])).toBe('CONTEXT_INVALID');
    const alpha = [{ path: 'a', sha256: sha256Ref(Buffer.from('alpha\n')) }];
    expect(await checkPins(repo, commit, alpha)).toMatchObject({ ok: true });
    for (const oid of [tag, tree]) expect(await checkPins(repo, oid, alpha)).toMatchObject({ ok: false });
  });

  it('a commit whose tree is not in the repository (a partial clone) is refused, coded, and fails the check', async () => {
    const repo = repository();
    const commit = git(repo, ['hash-object', '-w', '-t', 'commit', '--literally', '--stdin'], `tree ${'1'.repeat(40)}\nauthor t <t@t> 0 +0000\ncommitter t <t@t> 0 +0000\n\nshallow\n`);
    expect(await pinned(repo, commit, ['a'])).toBe('GIT_FAILED');
    expect(await checkPins(repo, commit, [{ path: 'a', sha256: sha256Ref(Buffer.from('alpha\n')) }])).toMatchObject({ ok: false });
  });
});

describe('many patterns over a commit of many files', () => {
  it('more patterns than one request may name are refused, coded', async () => {
    const repo = repository();
    const commit = commitOf(repo, git(repo, ['mktree'], `100644 blob ${blob(repo, 'alpha\n')}\ta\n`));
    expect(await pinned(repo, commit, Array.from({ length: LIMITS.contextPatterns }, () => 'a'))).toBe('pinned a');
    expect(await pinned(repo, commit, Array.from({ length: LIMITS.contextPatterns + 1 }, () => 'a'))).toBe('CONTEXT_INVALID');
  });

  it('a plain path, looked up rather than matched against every file, pins what picomatch matches: itself, not a namesake, and ./ dropped', async () => {
    const repo = repository();
    const names = ['a', 'A', 'a.b', 'a-b', 'a_b', '.a', 'ab', 'b/a', 'b/a.b'];
    const commit = commitOf(repo, git(repo, ['mktree'], `${names.filter((name) => !name.includes('/')).map((name) => `100644 blob ${blob(repo, `${name}\n`)}\t${name}`).join('\n')}\n040000 tree ${git(repo, ['mktree'], `100644 blob ${blob(repo, 'b/a\n')}\ta\n100644 blob ${blob(repo, 'b/a.b\n')}\ta.b\n`)}\tb\n`));
    const outcomes = await Promise.all(['a', 'A', 'a.b', '.a', 'b/a', './a', 'a/', 'b', '!a', 'a*'].map(async (pattern) => [pattern, await pinned(repo, commit, [pattern])]));
    expect(Object.fromEntries(outcomes)).toEqual({
      a: 'pinned a',
      A: 'pinned A',
      'a.b': 'pinned a.b',
      '.a': 'pinned .a',
      'b/a': 'pinned b/a',
      './a': 'pinned a',
      'a/': 'CONTEXT_INVALID',
      b: 'CONTEXT_INVALID',
      '!a': 'pinned .a,A,a-b,a.b,a_b,ab,b/a,b/a.b',
      'a*': 'pinned a,a-b,a.b,a_b,ab',
    });
  });
});

describe("the runner's pin check on many files of one folder", () => {
  it('reads and parses each tree on the way once, not once per pinned file', async () => {
    const repo = repository();
    const entries = Array.from({ length: 40 }, (_, index) => `100644 blob ${blob(repo, `file ${index}\n`)}\tf${String(index).padStart(2, '0')}.txt`);
    const folder = git(repo, ['mktree'], `${entries.join('\n')}\n`);
    const commit = commitOf(repo, git(repo, ['mktree'], `040000 tree ${folder}\tdocs\n`));
    const files = await pinFiles(repo, await resolveCommit(repo, commit), ['docs/*.txt'], BOUNDS);
    expect(files).toHaveLength(40);
    const read = CatFileReader.prototype.read;
    const asked: string[] = [];
    vi.spyOn(CatFileReader.prototype, 'read').mockImplementation(function (this: CatFileReader, oid: string, limit?: number) {
      asked.push(oid);
      return read.call(this, oid, limit ?? Number.POSITIVE_INFINITY);
    });
    expect(await checkPins(repo, commit, files)).toMatchObject({ ok: true });
    const root = git(repo, ['rev-parse', `${commit}^{tree}`]);
    expect([asked.filter((oid) => oid === root).length, asked.filter((oid) => oid === folder).length, asked.length]).toEqual([1, 1, 1 + 2 + 40]);
  });

  it('reads each folder once when the envelope lists its pins alternating between two folders, and answers them in the envelope\'s order', async () => {
    const repo = repository();
    const folderOf = (name: string) => git(repo, ['mktree'], `${Array.from({ length: 10 }, (_, index) => `100644 blob ${blob(repo, `${name} ${index}\n`)}\tf${index}.txt`).join('\n')}\n`);
    const [docs, src] = [folderOf('docs'), folderOf('src')];
    const commit = commitOf(repo, git(repo, ['mktree'], `040000 tree ${docs}\tdocs\n040000 tree ${src}\tsrc\n`));
    const files = await pinFiles(repo, await resolveCommit(repo, commit), ['docs/*.txt', 'src/*.txt'], BOUNDS);
    // A hand-signed envelope may list its pins in any order: here docs, src, docs, src, ...
    const alternating = Array.from({ length: 10 }, (_, index) => [files[index]!, files[10 + index]!]).flat();
    const read = CatFileReader.prototype.read;
    const asked: string[] = [];
    vi.spyOn(CatFileReader.prototype, 'read').mockImplementation(function (this: CatFileReader, oid: string, limit?: number) {
      asked.push(oid);
      return read.call(this, oid, limit ?? Number.POSITIVE_INFINITY);
    });
    const checked = await checkPins(repo, commit, alternating);
    expect(checked.ok && checked.files.map((file) => file.path)).toEqual(alternating.map((file) => file.path));
    expect([asked.filter((oid) => oid === docs).length, asked.filter((oid) => oid === src).length]).toEqual([1, 1]);
  });
});
