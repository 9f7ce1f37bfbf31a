import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { gitObjectId, type TreeFile } from '../../src/dispatch/git-tree.js';
import { snapshotWork } from '../../src/dispatch/snapshot.js';
import { checkoutFold } from '../../src/lane/raw-tree.js';
import { attack } from '../helpers/attack-kit.js';
import { agentScript, codesOf, dispatchTo, FIX, hostilePlaces, receiptsFor, watchOnce } from '../helpers/hostile-agent.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * The dispatch lane against a hostile execution agent, round twenty-one: names a macOS or Windows
 * checkout of the result does not tell apart. Each agent is a script in place of the executor that does one hostile thing.
 */

const dir = tempDir('dispatch-redteam-21');

/** `é` composed (NFC) and decomposed (NFD), as a shell's printf writes their bytes. */
const COMPOSED = "$(printf '\\303\\251')";
const DECOMPOSED = "e$(printf '\\314\\201')";

describe("a hostile agent's new name that a macOS or Windows checkout writes over another of the result", () => {
  const place = hostilePlaces(dir, 'fold');
  const cases: ReadonlyArray<readonly [string, string]> = [
    ['src/Add.js, a wrong add() beside the right fix in src/add.js (case)', "printf 'export const add = (a, b) => a - b;\\n' > src/Add.js"],
    ['two files named é.js, one composed and one decomposed (Unicode normalisation)', `printf 'a\\n' > "src/${COMPOSED}.js"; printf 'b\\n' > "src/${DECOMPOSED}.js"`],
    ['src/add.js. with a wrong add() (a trailing dot Windows drops)', "printf 'export const add = (a, b) => a - b;\\n' > 'src/add.js.'"],
    ['a folder src/Lib beside a folder src/lib, each with its own index.js (case, on a folder)', "mkdir -p src/lib src/Lib && printf 'a\\n' > src/lib/index.js && printf 'b\\n' > src/Lib/index.js"],
    ['src/a\u200db.js beside src/ab.js (a code point HFS+ ignores)', "printf 'a\\n' > src/ab.js; printf 'b\\n' > \"src/a$(printf '\\342\\200\\215')b.js\""],
  ];
  for (const [index, [what, action]] of cases.entries()) {
    attack(`a hostile agent: ${what}, in its scope`, 'runner', 'refused', async () => {
      const where = await place(`case-${index}`);
      const { messageId } = await dispatchTo(where, `fold-${index}`);
      const watch = watchOnce(where, agentScript(where.world.dir, `${FIX}; ${action}`), { timeoutMs: 60_000 });
      const [receipt] = watch.hung ? [] : await receiptsFor(where, messageId);
      if (receipt === undefined) return watch.hung ? 'hung' : `no receipt (exit ${watch.status})`;
      const head = receipt['head_sha'] as string | null;
      // The signed commit holds no two paths one checkout writes as one file.
      if (head !== null) {
        const listed = spawnSync('git', ['-c', 'core.quotePath=false', 'ls-tree', '-r', '--name-only', head], { cwd: where.repo, encoding: 'utf8' }).stdout.split('\n').filter(Boolean);
        const folded = new Set(listed.flatMap((path) => path.split('/').map((_, at, names) => names.slice(0, at + 1).map((name) => checkoutFold(name)).join('/'))));
        const names = new Set(listed.flatMap((path) => path.split('/').map((_, at, parts) => parts.slice(0, at + 1).join('/'))));
        if (folded.size !== names.size) return `accepted (${receipt['status'] as string})`;
      }
      const refused = receipt['status'] === 'failed' && codesOf(receipt).includes('scope_violation') && JSON.stringify(receipt['blockers']).includes('name_collision');
      return refused ? 'refused' : `receipted as ${String(receipt['status'])} ${JSON.stringify(receipt['blockers'])}`;
    });
  }
});

describe("a hostile agent's tree deeper than a path the system opens", () => {
  const place = hostilePlaces(dir, 'deep');

  // Guards what held before this round: each folder is opened by its whole path, and past PATH_MAX (4096 bytes) that fails.
  attack('a hostile agent: a file 200 folders of 20 letters deep in src/, beside a right fix', 'runner', 'refused', async () => {
    const where = await place('deep');
    const { messageId } = await dispatchTo(where, 'deep');
    const deep = "(cd src && i=0 && while [ $i -lt 200 ]; do mkdir dddddddddddddddddddd && cd dddddddddddddddddddd || exit 1; i=$((i+1)); done; printf 'x\\n' > f)";
    const watch = watchOnce(where, agentScript(where.world.dir, `${FIX}; ${deep}`), { timeoutMs: 60_000 });
    const [receipt] = watch.hung ? [] : await receiptsFor(where, messageId);
    if (receipt === undefined) return watch.hung ? 'hung' : `no receipt (exit ${watch.status})`;
    // The agent's act is blamed on the agent (never runner_error), and the commit holds nothing of the tree it could not read.
    const head = receipt['head_sha'] as string | null;
    if (head !== null && spawnSync('git', ['ls-tree', '-r', '--name-only', head], { cwd: where.repo, encoding: 'utf8' }).stdout.includes('dddd')) return `accepted (${receipt['status'] as string})`;
    return receipt['status'] === 'failed' && JSON.stringify(codesOf(receipt)) === '["scope_violation"]' ? 'refused' : `receipted as ${String(receipt['status'])} ${JSON.stringify(receipt['blockers'])}`;
  });
});

const blob = (text: string): string => gitObjectId('blob', Buffer.from(text));

/** The snapshot of a folder holding `files` against a base of `baseFiles`, every blob's bytes known. */
async function snapshotOf(name: string, baseFiles: readonly TreeFile[], files: Record<string, string>) {
  const root = join(dir, `snapshot-${name}`);
  for (const [path, content] of Object.entries(files)) {
    fs.mkdirSync(join(root, path, '..'), { recursive: true });
    fs.writeFileSync(join(root, path), content);
  }
  fs.mkdirSync(root, { recursive: true });
  return snapshotWork({ gitdir: '', worktreeGitdir: '', path: root, branch: 'b', base: '0'.repeat(40), gitLink: '' }, {
    baseFiles,
    rules: { ignored: (paths) => Promise.resolve(paths.map(() => false)), close: () => undefined },
    objects: { write: () => Promise.resolve('') },
  });
}

describe('the rule for names one checkout writes as one file', () => {
  it('folds case, Unicode normalisation, the code points HFS+ ignores and the trailing dots and spaces Windows drops', () => {
    expect(['Add.JS', 'add.js', 'add.js.', 'add.js ', 'a\u200dd\u200cd.js'].map((name) => checkoutFold(name))).toEqual(Array(5).fill('add.js'));
    expect(checkoutFold('\u00e9.js')).toBe(checkoutFold('e\u0301.js'));
    expect(checkoutFold('\u00c9.js')).toBe(checkoutFold('e\u0301.js'));
    expect(checkoutFold('add.ts')).not.toBe(checkoutFold('add.js'));
  });

  it("leaves names the base already holds, a file changed under one of them, and a new file in the base's folder of either spelling", async () => {
    const baseFiles = [
      { path: Buffer.from('src/README'), mode: '100644', oid: blob('a\n') },
      { path: Buffer.from('src/readme'), mode: '100644', oid: blob('b\n') },
      { path: Buffer.from('Lib/x.js'), mode: '100644', oid: blob('x\n') },
      { path: Buffer.from('lib/y.js'), mode: '100644', oid: blob('y\n') },
    ];
    const snapshot = await snapshotOf('base', baseFiles, { 'src/README': 'a\n', 'src/readme': 'changed\n', 'Lib/x.js': 'x\n', 'lib/y.js': 'y\n', 'lib/z.js': 'z\n' });
    expect(snapshot.refused).toEqual([]);
    expect(snapshot.changes.map((change) => [change.path, change.status])).toEqual([
      ['lib/z.js', 'added'],
      ['src/readme', 'modified'],
    ]);
    expect(snapshot.tree).not.toBeNull();
  });

  it('takes a file renamed to another case (the old name gone), and refuses a new name beside the one it folds as', async () => {
    const baseFiles = [
      { path: Buffer.from('src/add.js'), mode: '100644', oid: blob('x\n') },
      { path: Buffer.from('src/sub.js'), mode: '100644', oid: blob('y\n') },
    ];
    const snapshot = await snapshotOf('rename', baseFiles, { 'src/Add.js': 'x\n', 'src/sub.js': 'y\n', 'src/SUB.js': 'z\n' });
    expect(snapshot.refused).toEqual([{ path: 'src/SUB.js', why: 'name_collision' }]);
    expect(snapshot.changes.map((change) => [change.path, change.status])).toEqual([
      ['src/Add.js', 'added'],
      ['src/add.js', 'deleted'],
    ]);
  });
});
