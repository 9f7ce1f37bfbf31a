import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CatFileReader, ObjectWriter, catFileProtocol, type GitObject, type ObjectReader } from '../../src/ledger/object-store.js';
import { renderTree, type TreeEntry } from '../../src/ledger/tree-format.js';
import { commitsSince, descendsFrom, isAncestor, TreeReader } from '../../src/ledger/history.js';
import { git, tempDir } from '../helpers/tmp.js';

const dir = tempDir();
const gitdir = join(dir, 'history.git');
let reader: CatFileReader;
let main: string[];
let side: string;
let merge: string;

/** A first-parent chain of 100 commits on main, a side branch from commit 10, and a merge of it on top of main. */
function fastImport(): string {
  const lines: string[] = [];
  const commit = (ref: string, mark: number, from: number | null, extraParent: number | null): void => {
    const message = `c${mark}\n`;
    lines.push(`commit ${ref}`, `mark :${mark}`, `committer T <t@x> ${1_700_000_000 + mark} +0000`, `data ${message.length}`, message.trimEnd());
    if (from !== null) lines.push(`from :${from}`);
    if (extraParent !== null) lines.push(`merge :${extraParent}`);
    lines.push('');
  };
  for (let i = 1; i <= 100; i += 1) commit('refs/heads/main', i, i === 1 ? null : i - 1, null);
  commit('refs/heads/side', 101, 10, null);
  commit('refs/heads/merged', 102, 100, 101);
  return `${lines.join('\n')}\n`;
}

beforeAll(() => {
  git(['init', '-q', '--bare', gitdir]);
  git(['--git-dir', gitdir, 'fast-import', '--quiet'], { input: fastImport() });
  main = git(['--git-dir', gitdir, 'rev-list', '--reverse', 'main']).trim().split('\n');
  side = git(['--git-dir', gitdir, 'rev-parse', 'side']).trim();
  merge = git(['--git-dir', gitdir, 'rev-parse', 'merged']).trim();
  reader = new CatFileReader(gitdir);
});

afterAll(() => reader.close());

describe('the commits since a known head', () => {
  it('has the chain it is built on', () => {
    expect(main).toHaveLength(100);
  });

  it('lists a short range oldest first, as git rev-list does', async () => {
    expect(await commitsSince(reader, main[99]!, main[95]!)).toEqual(main.slice(96));
    expect(await commitsSince(reader, main[99]!, main[98]!)).toEqual([main[99]]);
  });

  it('lists a range longer than the in-process walk through git, with the same answer', async () => {
    expect(await commitsSince(reader, main[99]!, main[5]!)).toEqual(main.slice(6));
    expect(await commitsSince(reader, main[99]!, null)).toEqual(main);
  });

  it('gives an empty range when nothing is new', async () => {
    expect(await commitsSince(reader, main[40]!, main[40]!)).toEqual([]);
  });

  it('follows first parents across a merge', async () => {
    expect(await commitsSince(reader, merge, main[97]!)).toEqual([main[98], main[99], merge]);
  });

  it('returns null when the head does not descend from the known head, near or far', async () => {
    expect(await commitsSince(reader, side, main[20]!)).toBeNull();
    expect(await commitsSince(reader, main[30]!, main[31]!)).toBeNull();
    expect(await commitsSince(reader, main[3]!, side)).toBeNull();
  });

  it('agrees with git on a side branch merged in: the side commit is reachable but not a first parent', async () => {
    // git decides descent by reachability: the merge descends from the side commit; the range is
    // what rev-list --first-parent lists, which excludes everything the side commit reaches.
    expect(await commitsSince(reader, merge, side)).toEqual(git(['--git-dir', gitdir, 'rev-list', '--first-parent', '--reverse', merge, `^${side}`]).trim().split('\n'));
  });
});

describe('whether one commit descends from another, asked of the open reader first', () => {
  it('answers as git merge-base --is-ancestor does, near and far, forward and back, across a merge and off a side branch', async () => {
    const pairs: Array<[string, string]> = [
      [main[95]!, main[99]!],
      [main[5]!, main[99]!],
      [main[99]!, main[95]!],
      [main[40]!, main[40]!],
      [main[97]!, merge],
      [side, merge],
      [main[20]!, side],
      [side, main[99]!],
      [main[3]!, side],
    ];
    const answers = await Promise.all(pairs.map(([ancestor, descendant]) => descendsFrom(reader, ancestor, descendant)));
    expect(answers).toEqual([true, true, false, true, true, true, false, false, true]);
    expect(answers).toEqual(await Promise.all(pairs.map(([ancestor, descendant]) => isAncestor(gitdir, ancestor, descendant))));
  });
});

describe('the commits since a known head, with a graft file in the repository', () => {
  it('follows the commits\' own parents, not info/grafts: a graft that makes the side branch\'s tip a child of main[99] neither hides main nor passes off the side branch as its descendant', async () => {
    const grafted = join(dir, 'grafted.git');
    git(['clone', '-q', '--bare', '--no-local', gitdir, grafted]);
    // The side commit (a fork from main[9]) grafted onto main[99], and main[60] grafted as a root.
    writeFileSync(join(grafted, 'info', 'grafts'), `${side} ${main[99]}\n${main[60]}\n`);
    const graftedReader = new CatFileReader(grafted);
    try {
      expect(await commitsSince(graftedReader, side, main[70]!)).toBeNull();
      expect(await commitsSince(graftedReader, main[99]!, main[5]!)).toEqual(main.slice(6));
      expect(await commitsSince(graftedReader, main[99]!, null)).toEqual(main);
    } finally {
      graftedReader.close();
    }
  });
});

/** A tree made with stock git from `mode name oid` lines. */
function mktree(lines: string[]): string {
  return git(['--git-dir', gitdir, 'mktree'], { input: lines.map((line) => `${line}\n`).join('') }).trim();
}

function blob(text: string): string {
  return git(['--git-dir', gitdir, 'hash-object', '-w', '--stdin'], { input: text }).trim();
}

describe('the difference between two trees', () => {
  it('agrees with git diff-tree, a file turning into a directory and back included', async () => {
    const [one, two, three] = [blob('one\n'), blob('two\n'), blob('three\n')];
    const dirWith = (name: string, oid: string): string => mktree([`100644 blob ${oid}\t${name}`]);
    const before = mktree([`100644 blob ${one}\ta`, `100644 blob ${one}\ta-b`, `040000 tree ${dirWith('x', two)}\tc`, `040000 tree ${dirWith('same', one)}\td`, `100644 blob ${one}\tgone`]);
    const after = mktree([`040000 tree ${dirWith('y', three)}\ta`, `100644 blob ${two}\ta-b`, `100644 blob ${three}\tc`, `040000 tree ${dirWith('same', one)}\td`, `100644 blob ${one}\tnew`]);
    const ours = (await new TreeReader(reader).diff(before, after)).map((change) => `${change.status[0]!.toUpperCase()} ${change.path}`).sort();
    const theirs = git(['--git-dir', gitdir, 'diff-tree', '-r', '--no-renames', '--name-status', before, after])
      .trim()
      .split('\n')
      .map((line) => line.replace('\t', ' '))
      .sort();
    expect(theirs).toEqual(['A a/y', 'A c', 'A new', 'D a', 'D c/x', 'D gone', 'M a-b']);
    expect(ours).toEqual(theirs);
  });

  it('reads a folder once when two diffs ask for it at the same time', async () => {
    const writer = new ObjectWriter(gitdir);
    const files = [blob('r\n'), blob('s\n'), blob('t\n')];
    const version = async (count: number): Promise<string> => {
      const day = await writer.write('tree', renderTree(files.slice(0, count).map((oid, i) => ({ name: `msg_${i}`, mode: '100644', oid }))));
      const month = await writer.write('tree', renderTree([{ name: '01', mode: '40000', oid: day }]));
      return writer.write('tree', renderTree([{ name: '2024', mode: '40000', oid: month }]));
    };
    const [one, two, three] = [await version(1), await version(2), await version(3)];
    const reads = new Map<string, number>();
    const counting: ObjectReader = {
      gitdir,
      read: (oid) => {
        reads.set(oid, (reads.get(oid) ?? 0) + 1);
        return reader.read(oid);
      },
      close: () => undefined,
    };
    const trees = new TreeReader(counting);
    // As in a replay's read-ahead: the second commit's diff starts while the first one's is reading.
    const [first, second] = await Promise.all([trees.diff(one, two), trees.diff(two, three)]);
    expect(first.map((change) => change.path)).toEqual(['2024/01/msg_1']);
    expect(second.map((change) => change.path)).toEqual(['2024/01/msg_2']);
    expect([...reads.values()].filter((count) => count > 1)).toEqual([]);
    expect(reads.size).toBe(9);
  });

  it('agrees with git diff-tree on folders that grow, shrink and change, read through one cache (property)', async () => {
    const writer = new ObjectWriter(gitdir);
    const blobs = [blob('p\n'), blob('q\n')];
    /** Writes nested folders for `files` (path -> blob index) and returns the root tree's id. */
    const write = async (files: Map<string, number>): Promise<string> => {
      const entries: TreeEntry[] = [];
      const folders = new Map<string, Map<string, number>>();
      for (const [path, which] of files) {
        const [head, ...rest] = path.split('/');
        if (rest.length === 0) entries.push({ name: head!, mode: '100644', oid: blobs[which]! });
        else folders.set(head!, (folders.get(head!) ?? new Map()).set(rest.join('/'), which));
      }
      for (const [name, inner] of folders) entries.push({ name, mode: '40000', oid: await write(inner) });
      return writer.write('tree', renderTree(entries));
    };
    const segment = fc.constantFrom('a', 'b', 'b-c', 'd', 'msg_1', 'msg_2', 'msg_3', 'z');
    const path = fc.array(segment, { minLength: 1, maxLength: 3 }).map((parts) => parts.join('/'));
    const files = fc.dictionary(path, fc.integer({ min: 0, max: 1 }), { maxKeys: 12 }).map((record) => {
      // A path may not be both a file and a folder: keep the first of any clash.
      const kept = new Map<string, number>();
      for (const [name, which] of Object.entries(record)) {
        if ([...kept.keys()].some((other) => other.startsWith(`${name}/`) || name.startsWith(`${other}/`))) continue;
        kept.set(name, which);
      }
      return kept;
    });
    const trees = new TreeReader(reader);
    await fc.assert(
      fc.asyncProperty(files, files, async (first, second) => {
        const before = await write(first);
        const after = await write(second);
        const ours = (await trees.diff(before, after)).map((change) => `${change.status[0]!.toUpperCase()} ${change.path}`).sort();
        const theirs = git(['--git-dir', gitdir, 'diff-tree', '-r', '--no-renames', '--name-status', before, after])
          .split('\n')
          .filter((line) => line !== '')
          .map((line) => line.replace('\t', ' '))
          .sort();
        expect(ours).toEqual(theirs);
      }),
      { numRuns: 60 },
    );
  });
});

describe('reading objects through git cat-file', () => {
  it('answers the same through either protocol: contents, types, a missing object, and a burst in one turn', async () => {
    const text = 'binary \u0000 and\nnewlines\n\n';
    const stored = blob(text);
    const absent = '0'.repeat(40);
    const tree = git(['--git-dir', gitdir, 'rev-parse', `${main[7]!}^{tree}`]).trim();
    const oids = [main[0]!, stored, absent, tree, ...main.slice(10, 60)];
    const answers = await Promise.all(
      (['batch', 'batch-command'] as const).map(async (protocol) => {
        const own = new CatFileReader(gitdir, { protocol });
        try {
          return await Promise.all(oids.map((oid) => own.read(oid)));
        } finally {
          own.close();
        }
      }),
    );
    const [batch, command] = answers as [Array<GitObject | null>, Array<GitObject | null>];
    expect(command).toEqual(batch);
    expect(batch[1]).toEqual({ type: 'blob', content: Buffer.from(text) });
    expect(batch[2]).toBeNull();
    expect(batch[3]?.type).toBe('tree');
    expect(batch[0]?.content.toString('utf8')).toBe(git(['--git-dir', gitdir, 'cat-file', 'commit', main[0]!]));
    expect(batch.slice(4).map((object) => object?.content.toString('utf8').trim().split('\n').pop())).toEqual(main.slice(10, 60).map((_, i) => `c${i + 11}`));
  });

  it('uses the buffered protocol where git has it', () => {
    const [, major, minor] = /git version (\d+)\.(\d+)/.exec(git(['--version'])) ?? [];
    expect(catFileProtocol()).toBe(Number(major) > 2 || (Number(major) === 2 && Number(minor) >= 36) ? 'batch-command' : 'batch');
  });
});
