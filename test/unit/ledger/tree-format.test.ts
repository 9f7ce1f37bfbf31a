import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { compareEntries, parseTree, RawTree, renderTree, type TreeEntry } from '../../../src/ledger/tree-format.js';
import { codeOf } from '../../helpers/codes.js';
import { git, gitEnv, tempDir } from '../../helpers/tmp.js';

const gitdir = join(tempDir(), 'trees.git');
const A = 'a'.repeat(40);
const B = 'b'.repeat(40);

/** A raw tree entry written by hand, so malformed ones can be made. */
function raw(mode: string, name: string | Buffer, oid = A): Buffer {
  return Buffer.concat([Buffer.from(`${mode} `, 'latin1'), typeof name === 'string' ? Buffer.from(name, 'utf8') : name, Buffer.from([0]), Buffer.from(oid, 'hex')]);
}

describe('ledger trees', () => {
  it('reads what stock git writes, in git order (a directory sorts as if its name ended in "/")', () => {
    const input = ['100644 blob ' + A + '\ta.b', '040000 tree ' + B + '\ta', '100644 blob ' + B + '\ta0', '100644 blob ' + A + '\tz'].map((line) => `${line}\n`).join('');
    git(['init', '-q', '--bare', gitdir]);
    const oid = git(['--git-dir', gitdir, 'mktree', '--missing'], { input }).trim();
    const bytes = execFileSync('git', ['--git-dir', gitdir, 'cat-file', 'tree', oid], { env: gitEnv() });
    const entries = parseTree(bytes);
    expect(entries).toEqual([
      { name: 'a.b', mode: '100644', oid: A },
      { name: 'a', mode: '40000', oid: B },
      { name: 'a0', mode: '100644', oid: B },
      { name: 'z', mode: '100644', oid: A },
    ]);
    expect(renderTree(entries).equals(bytes)).toBe(true);
  });

  it.each([
    ['a mode other than directory or regular file', raw('100755', 'run'), 'not allowed'],
    ['a symlink', raw('120000', 'link'), 'not allowed'],
    ['an entry named .git, in any case', raw('40000', '.GiT'), 'not allowed'],
    ['an entry named ..', raw('40000', '..'), 'not allowed'],
    ['an entry named .', raw('100644', '.'), 'not allowed'],
    ['an empty name', raw('100644', ''), 'not allowed'],
    ['a name with a slash', raw('100644', 'a/b'), '"/"'],
    ['a name that is not UTF-8', raw('100644', Buffer.from([0x61, 0xff, 0x62])), 'not UTF-8'],
    ['a truncated id', raw('100644', 'a').subarray(0, 20), 'truncated'],
    ['entries out of order', Buffer.concat([raw('100644', 'b'), raw('100644', 'a')]), 'out of order'],
    ['a duplicated name', Buffer.concat([raw('100644', 'a'), raw('100644', 'a', B)]), 'out of order or duplicated'],
    ['a file and a directory of one name', Buffer.concat([raw('100644', 'a'), raw('40000', 'a', B)]), 'out of order or duplicated'],
  ])('refuses %s', (_label, bytes, reason) => {
    expect(codeOf(() => parseTree(bytes))).toBe('TREE_MALFORMED');
    expect(() => parseTree(bytes)).toThrow(reason);
  });

  it('reads a UTF-8 name that is not ASCII', () => {
    expect(parseTree(raw('100644', 'café'))[0]!.name).toBe('café');
  });

  it('orders raw entries as compareEntries orders parsed ones (property)', () => {
    const name = fc.stringMatching(/^[a-z0-9._-]{1,6}$/).filter((text) => !['.', '..', '.git'].includes(text.toLowerCase()));
    const entry = fc.record({ name, mode: fc.constantFrom<'40000' | '100644'>('40000', '100644'), oid: fc.constantFrom(A, B) });
    fc.assert(
      fc.property(fc.uniqueArray(entry, { selector: (item: TreeEntry) => item.name, minLength: 2, maxLength: 12 }), (entries) => {
        const tree = RawTree.parse(renderTree(entries));
        const sorted = [...entries].sort(compareEntries);
        expect(tree.entries()).toEqual(sorted);
        for (let i = 0; i < tree.count; i += 1) {
          for (let j = 0; j < tree.count; j += 1) {
            expect(Math.sign(tree.compare(i, tree, j))).toBe(Math.sign(compareEntries(sorted[i]!, sorted[j]!)));
            expect(tree.sameObject(i, tree, j)).toBe(sorted[i]!.oid === sorted[j]!.oid);
          }
        }
      }),
      { numRuns: 300 },
    );
  });

  it('parses against an earlier version exactly as from scratch, and finds the entries both share (property)', () => {
    const name = fc.stringMatching(/^[a-z0-9._-]{1,4}$/).filter((text) => !['.', '..', '.git'].includes(text.toLowerCase()));
    const entry = fc.record({ name, mode: fc.constantFrom<'40000' | '100644'>('40000', '100644'), oid: fc.constantFrom(A, B) });
    const entries = fc.uniqueArray(entry, { selector: (item: TreeEntry) => item.name, maxLength: 10 });
    fc.assert(
      fc.property(entries, entries, (before, after) => {
        const base = RawTree.parse(renderTree(before));
        const bytes = renderTree(after);
        const fresh = RawTree.parse(bytes);
        const incremental = RawTree.parse(bytes, base);
        expect(incremental.entries()).toEqual(fresh.entries());
        for (let i = 0; i < fresh.count; i += 1) expect(incremental.compare(i, fresh, i)).toBe(0);
        let shared = 0;
        const a = base.entries();
        const b = fresh.entries();
        while (shared < a.length && shared < b.length && JSON.stringify(a[shared]) === JSON.stringify(b[shared])) shared += 1;
        expect(base.sharedPrefix(fresh)).toBe(shared);
        expect(fresh.sharedPrefix(base)).toBe(shared);
      }),
      { numRuns: 500 },
    );
  });

  it('still refuses what follows the shared entries when it is malformed', () => {
    const base = RawTree.parse(Buffer.concat([raw('100644', 'a'), raw('100644', 'c')]));
    const cases: Array<[Buffer, string]> = [
      [Buffer.concat([raw('100644', 'a'), raw('100644', 'c'), raw('100644', 'b')]), 'out of order'],
      [Buffer.concat([raw('100644', 'a'), raw('100644', 'c'), raw('100644', 'c', B)]), 'out of order or duplicated'],
      [Buffer.concat([raw('100644', 'a'), raw('100644', 'c'), raw('100755', 'd')]), 'not allowed'],
      [Buffer.concat([raw('100644', 'a'), raw('100644', 'c'), raw('100644', '.git')]), 'not allowed'],
      [Buffer.concat([raw('100644', 'a'), raw('100644', 'c')]).subarray(0, 40), 'truncated'],
    ];
    for (const [bytes, reason] of cases) expect(() => RawTree.parse(bytes, base)).toThrow(reason);
  });
});
