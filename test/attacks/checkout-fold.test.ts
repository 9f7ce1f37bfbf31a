import * as fs from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { gitObjectId, type TreeFile } from '../../src/dispatch/git-tree.js';
import { snapshotWork } from '../../src/dispatch/snapshot.js';
import { checkoutFold } from '../../src/lane/raw-tree.js';
import type * as RawTreeModule from '../../src/lane/raw-tree.js';
import { clipText } from '../../src/util/bytes.js';
import { attack } from '../helpers/attack-kit.js';
import { agentScript, dispatchTo, FIX, hostilePlaces, receiptsFor, watchOnce } from '../helpers/hostile-agent.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * The rule for names a macOS or Windows checkout of a dispatch's result writes as one file, under review:
 * names a filesystem merges that the rule missed, honest work it refused, and its cost on deep trees.
 */

vi.mock('../../src/lane/raw-tree.js', async (importOriginal) => {
  const original = await importOriginal<typeof RawTreeModule>();
  return { ...original, checkoutFold: vi.fn(original.checkoutFold) };
});

const dir = tempDir('checkout-fold');
const blob = (text: string): string => gitObjectId('blob', Buffer.from(text));
const base = (...paths: string[]): TreeFile[] => paths.map((path) => ({ path: Buffer.from(path), mode: '100644', oid: blob(`${path}\n`) }));

/** The snapshot of a folder holding `files` (the base's files with their base bytes unless given) against `baseFiles`. */
async function snapshotOf(name: string, baseFiles: readonly TreeFile[], files: Record<string, string>) {
  const root = join(dir, `snapshot-${name}`);
  fs.mkdirSync(root, { recursive: true });
  for (const [path, content] of Object.entries(files)) {
    fs.mkdirSync(join(root, path, '..'), { recursive: true });
    fs.writeFileSync(join(root, path), content);
  }
  return snapshotWork({ gitdir: '', worktreeGitdir: '', path: root, branch: 'b', base: '0'.repeat(40), gitLink: '' }, {
    baseFiles,
    rules: { ignored: (paths) => Promise.resolve(paths.map(() => false)), close: () => undefined },
    objects: { write: () => Promise.resolve('') },
  });
}

const kept = (...paths: string[]): Record<string, string> => Object.fromEntries(paths.map((path) => [path, `${path}\n`]));
const listed = (snapshot: Awaited<ReturnType<typeof snapshotOf>>) => snapshot.changes.map((change) => [change.path, change.status]);

describe('names a case-insensitive filesystem merges that toLowerCase keeps apart', () => {
  it('folds them as Unicode full case folding does, code point by code point', () => {
    // A final sigma: toLowerCase of a whole name turns a last Σ into ς, and leaves ς as ς; APFS and NTFS fold both as σ.
    expect(checkoutFold('\u03b1\u03c2.js')).toBe(checkoutFold('\u03b1\u03c3.js'));
    expect(checkoutFold('\u0391\u03a3')).toBe(checkoutFold('\u03b1\u03c3'));
    // Long s, micro sign, Greek beta symbol: one letter to case folding, two to toLowerCase.
    expect(checkoutFold('\u017f.js')).toBe(checkoutFold('s.js'));
    expect(checkoutFold('\u00b5.js')).toBe(checkoutFold('\u03bc.js'));
    expect(checkoutFold('\u03d0.js')).toBe(checkoutFold('\u03b2.js'));
    // German sharp s, small and capital, fold as ss.
    expect(checkoutFold('stra\u00dfe.js')).toBe(checkoutFold('STRASSE.js'));
    expect(checkoutFold('\u1e9e.js')).toBe(checkoutFold('ss.js'));
  });

  it('keeps apart what only Turkic folding joins, and joins what canonical equivalence does (guards)', () => {
    expect(checkoutFold('\u0131.js')).not.toBe(checkoutFold('i.js'));
    expect(checkoutFold('\u0130.js')).not.toBe(checkoutFold('i.js'));
    expect(checkoutFold('\u0130.js')).toBe(checkoutFold('i\u0307.js'));
    expect(checkoutFold('\u212a.js')).toBe(checkoutFold('k.js'));
    expect(checkoutFold('\u212b.js')).toBe(checkoutFold('\u00e5.js'));
  });

  it('refuses a new file beside a base file that only full case folding joins', async () => {
    const snapshot = await snapshotOf('sigma', base('src/\u03b1\u03c3.js', 'src/ok.js'), { ...kept('src/\u03b1\u03c3.js', 'src/ok.js'), 'src/\u03b1\u03c2.js': 'wrong\n' });
    expect(snapshot.refused).toEqual([{ path: 'src/\u03b1\u03c2.js', why: 'name_collision' }]);
    expect(snapshot.changes).toEqual([]);
  });
});

describe('honest work whose folders differ from the base only in case', () => {
  it("takes a new file in a folder that folds as the base's folder of another spelling (one folder there, no file over another)", async () => {
    const snapshot = await snapshotOf('new-in-folder', base('Lib/x.js'), { ...kept('Lib/x.js'), 'lib/z.js': 'z\n' });
    expect(snapshot.refused).toEqual([]);
    expect(listed(snapshot)).toEqual([['lib/z.js', 'added']]);
    expect(snapshot.tree).not.toBeNull();
  });

  it('takes a file moved from A/x to a/x while A/y stays', async () => {
    const snapshot = await snapshotOf('moved', base('A/x.js', 'A/y.js'), { ...kept('A/y.js'), 'a/x.js': 'A/x.js\n' });
    expect(snapshot.refused).toEqual([]);
    expect(listed(snapshot)).toEqual([
      ['A/x.js', 'deleted'],
      ['a/x.js', 'added'],
    ]);
  });

  it('takes the deletion of one of two base names of one fold, and a whole folder renamed to another case (guards)', async () => {
    const deleted = await snapshotOf('deleted', base('src/README', 'src/readme'), kept('src/README'));
    expect(deleted.refused).toEqual([]);
    expect(listed(deleted)).toEqual([['src/readme', 'deleted']]);
    const renamed = await snapshotOf('renamed', base('A/x.js', 'A/y.js'), { 'a/x.js': 'A/x.js\n', 'a/y.js': 'A/y.js\n' });
    expect(renamed.refused).toEqual([]);
  });

  it('still refuses a file over a file, a file over a folder and a folder over a file (guards)', async () => {
    const snapshot = await snapshotOf('still', base('src/lib/x.js', 'docs'), { ...kept('src/lib/x.js', 'docs'), 'src/Lib/x.js': 'b\n', 'src/LIB': 'c\n', 'DOCS/y.md': 'd\n' });
    expect(snapshot.refused.map((entry) => [entry.path, entry.why])).toEqual([
      ['DOCS/y.md', 'name_collision'],
      ['src/LIB', 'name_collision'],
      ['src/Lib/x.js', 'name_collision'],
    ]);
    expect(snapshot.changes).toEqual([]);
  });
});

describe('the cost of the rule on a deep tree', () => {
  it('folds each name of each path once, not each folder of a path again for every path under it', async () => {
    const depth = 60;
    const folder = Array.from({ length: depth }, () => 'd').join('/');
    const files = Object.fromEntries(Array.from({ length: 20 }, (_, index) => [`${folder}/f${index}.js`, `${index}\n`]));
    const fold = vi.mocked(checkoutFold);
    fold.mockClear();
    const snapshot = await snapshotOf('deep', [], files);
    expect(snapshot.changes).toHaveLength(20);
    // One fold per name of each new path: 20 paths of 61 names (the old rule folded 61·62/2 per path).
    expect(fold.mock.calls.length).toBeLessThanOrEqual(20 * (depth + 1));
  });
});

/** Whether a text holds half of a UTF-16 surrogate pair standing alone. */
const loneHalf = (text: string): boolean => /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/.test(text);

describe('a receipt naming thousands of characters of colliding names', () => {
  it('clips a text at its bound without cutting a character in half', () => {
    expect(clipText('ab\u{1f600}', 3)).toBe('ab');
    expect(clipText('ab\u{1f600}', 4)).toBe('ab\u{1f600}');
    expect(clipText('abc', 2)).toBe('ab');
  });

  const place = hostilePlaces(dir, 'wide');
  for (const pad of [0, 1]) {
    attack(`a hostile agent: six pairs of names of 480 characters of emoji each that fold as one (padded by ${pad})`, 'runner', 'refused', async () => {
      const where = await place(`wide-${pad}`);
      const { messageId } = await dispatchTo(where, `wide-${pad}`);
      // Four folders of 60 emoji each (240 bytes, within a name's 255): over 500 UTF-16 code units a path.
      const emoji = "$(printf '\\360\\237\\230\\200')";
      const folder = `src/${'x'.repeat(pad)}$e/$e/$e`;
      const names = `e=''; i=0; while [ $i -lt 60 ]; do e="$e${emoji}"; i=$((i+1)); done; mkdir -p "${folder}"; for n in A B C D E F; do printf 'x\\n' > "${folder}/$e$n.js"; l=$(printf '%s' $n | tr A-Z a-z); printf 'y\\n' > "${folder}/$e$l.js"; done`;
      const watch = watchOnce(where, agentScript(where.world.dir, `${FIX}; ${names}`), { timeoutMs: 60_000 });
      const [receipt] = watch.hung ? [] : await receiptsFor(where, messageId);
      if (receipt === undefined) return watch.hung ? 'hung' : `no receipt (exit ${watch.status})`;
      const blockers = receipt['blockers'] as Array<{ code: string; detail: string }>;
      const collision = blockers.find((blocker) => blocker.detail.includes('(name_collision)'));
      if (receipt['status'] !== 'failed' || collision === undefined) return `receipted as ${String(receipt['status'])} ${JSON.stringify(blockers)}`;
      // The detail is at its bound, and every character of it is whole.
      return collision.detail.length >= 1999 && blockers.every((blocker) => !loneHalf(blocker.detail) && blocker.detail.length <= 2000) ? 'refused' : `a detail of ${collision.detail.length} with a lone half: ${JSON.stringify(collision.detail.slice(-8))}`;
    });
  }
});
