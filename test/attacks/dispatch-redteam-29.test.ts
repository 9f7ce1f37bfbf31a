import * as fs from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { gitObjectId } from '../../src/dispatch/git-tree.js';
import { snapshotWork } from '../../src/dispatch/snapshot.js';
import { snapshotFiles } from '../../src/dispatch/asked-consult.js';
import { attack } from '../helpers/attack-kit.js';
import { agentScript, dispatchTo, FIX, hostilePlaces, receiptsFor, watchOnce, type HostilePlace } from '../helpers/hostile-agent.js';
import { git, tempDir } from '../helpers/tmp.js';

/**
 * The dispatch lane against a hostile execution agent, round twenty-nine: an agent that does
 * something to its worktree's own folder (replaces it by a file or by a link to another folder),
 * and one whose committed check reaches for what it left beside its work. Each agent is a script in
 * place of the executor; each case judges the receipt: the files it names, the commit and the
 * verification's result.
 */

const dir = tempDir('dispatch-redteam-29');

async function attempted(where: HostilePlace, name: string, action: string, isolation: 'auto' | 'none', overrides: Parameters<typeof dispatchTo>[2] = {}) {
  const { messageId } = await dispatchTo(where, name, overrides);
  const watch = watchOnce(where, agentScript(where.world.dir, action), { timeoutMs: 40_000, isolation });
  const [receipt] = watch.hung ? [] : await receiptsFor(where, messageId);
  return { receipt, unreceipted: watch.hung ? 'hung' : `no receipt (exit ${watch.status}) ${watch.stderr.slice(-300)}` };
}

type Hashes = Array<{ path: string; sha256: string | null }>;

describe('a worktree whose own folder the agent replaced', () => {
  const place = hostilePlaces(dir, 'root');

  // Without bubblewrap the agent can rename its worktree's folder (under it the folder is a mount it cannot move);
  // a runner that is not root reads a worktree its agent made unreadable (chmod 000 .) the same way, under either.
  attack('a hostile agent: after a right fix, it removes its worktree and leaves a file at its path', 'runner', 'refused', async () => {
    const where = await place('file');
    const { receipt, unreceipted } = await attempted(where, 'file', `${FIX}\nwt=$(pwd); cd ..; rm -rf "$wt"; printf 'x\\n' > "$wt"`, 'none');
    if (receipt === undefined) return unreceipted;
    const deleted = (receipt['file_hashes'] as Hashes).filter((file) => file.sha256 === null).map((file) => file.path);
    // Nothing of the work was read: no file is known to be gone, and no commit of the COO's says one is.
    if (deleted.length > 0) return `accepted: the receipt names ${deleted.join(', ')} deleted, in commit ${String(receipt['head_sha'])}`;
    expect(receipt['status']).toBe('failed');
    // No commit of the work: the receipt names the base, and no branch.
    expect(receipt['head_sha']).toBe(receipt['base_sha']);
    expect(receipt['branch']).toBeNull();
    expect(receipt['files_changed']).toEqual([]);
    expect(JSON.stringify(receipt['blockers'])).toContain('. (unreadable)');
    return 'refused';
  });

  attack('a hostile agent: after a right fix, it moves its worktree aside and leaves a link to it at its path', 'runner', 'refused', async () => {
    const where = await place('link');
    const { receipt, unreceipted } = await attempted(where, 'link', `${FIX}\nwt=$(pwd); cd ..; mv "$wt" "$wt.moved"; ln -s "$wt.moved" "$wt"`, 'none');
    if (receipt === undefined) return unreceipted;
    // The walk never follows a link, the worktree's own path included: what a link names is not the worktree.
    if (receipt['status'] === 'succeeded') return `accepted: the work was read through the link, committed as ${String(receipt['head_sha'])}`;
    expect(receipt['head_sha']).toBe(receipt['base_sha']);
    expect(receipt['files_changed']).toEqual([]);
    expect(JSON.stringify(receipt['blockers'])).toContain('. (unreadable)');
    return 'refused';
  });

  it('a worktree that is a link to a folder of work, or a file, is read as no work: nothing in it, and none of the base known to be gone', async () => {
    const top = fs.mkdtempSync(join(dir, 'snapshot-'));
    const blob = (text: string): string => gitObjectId('blob', Buffer.from(text));
    const baseFiles = [
      { path: Buffer.from('src/add.js'), mode: '100644', oid: blob('x\n') },
      { path: Buffer.from('test.sh'), mode: '100644', oid: blob('y\n') },
    ];
    fs.mkdirSync(join(top, 'elsewhere', 'src'), { recursive: true });
    fs.writeFileSync(join(top, 'elsewhere', 'src', 'add.js'), 'z\n');
    fs.writeFileSync(join(top, 'elsewhere', 'test.sh'), 'y\n');
    fs.symlinkSync(join(top, 'elsewhere'), join(top, 'linked'));
    fs.writeFileSync(join(top, 'file'), 'x\n');
    const written: string[] = [];
    for (const name of ['linked', 'file', 'gone']) {
      const snapshot = await snapshotWork({ gitdir: '', worktreeGitdir: '', path: join(top, name), branch: 'b', base: '0'.repeat(40), gitLink: 'gitdir: x\n' }, {
        baseFiles,
        rules: { ignored: (paths) => Promise.resolve(paths.map(() => false)), close: () => undefined },
        objects: {
          write: (_type, content) => {
            written.push(content.toString('utf8'));
            return Promise.resolve('');
          },
        },
      });
      expect(snapshot.changes, name).toEqual([]);
      expect(snapshot.refused, name).toEqual([{ path: '.', why: 'unreadable' }]);
    }
    // Not even the bytes behind the link were taken as work.
    expect(written.filter((text) => text === 'z\n')).toEqual([]);
  });
});

describe('a folder of the base holding a file the ledger cannot name, replaced by a file', () => {
  const place = hostilePlaces(dir, 'kept');

  attack('a hostile agent: beside a right fix, it replaces src/d (whose src/d/a\\b.js the base holds) by a file', 'runner', 'refused', async () => {
    const where = await place('backslash', { 'src/d/a\\b.js': 'one\n' });
    const { receipt, unreceipted } = await attempted(where, 'backslash', `${FIX}\nrm -rf src/d && printf 'x\\n' > src/d`, 'auto');
    if (receipt === undefined) return unreceipted;
    // The deletion of src/d/a\b.js is a change the ledger cannot name, left out of the commit: src/d stays its folder.
    const blockers = JSON.stringify(receipt['blockers']);
    if (blockers.includes('runner_error')) return `accepted: a commit of a tree naming src/d twice, the attempt a runner error: ${blockers.slice(0, 300)}`;
    expect(receipt['status']).toBe('failed');
    expect(receipt['files_changed']).toEqual(['src/add.js']);
    expect(blockers).toContain('src/d (folder_kept)');
    expect(blockers).toContain('src/d/a\\\\b.js (unrecordable_name)');
    // The commit the receipt names is one git reads: the fix, and the base's folder as it was.
    const head = String(receipt['head_sha']);
    expect(git(['ls-tree', '-r', '-z', '--name-only', head], { cwd: where.repo }).split('\0').filter(Boolean).sort()).toEqual(['.github/ci.yml', '.gitignore', 'src/add.js', 'src/d/a\\b.js', 'test.sh']);
    // Nor did the runner write such a tree anywhere in the target's objects.
    expect(git(['fsck', '--no-dangling', '--strict'], { cwd: where.repo })).not.toContain('duplicate');
    return 'refused';
  });
});

describe("the agent's committed check, run by the verification, reaching for what the agent left beside its work", () => {
  const place = hostilePlaces(dir, 'left');

  attack('a hostile agent: its check script sources build/ok.sh (ignored, never committed) from its worktree by its absolute path', 'runner', 'refused', async () => {
    // Guard: the verification's sandbox hides the agent's worktree; what passes there is what the signed commit holds.
    const where = await place('ignored');
    const action = `${FIX}\nmkdir -p build && printf 'exit 0\\n' > build/ok.sh && printf '. %s/build/ok.sh\\nexit 1\\n' "$(pwd)" > src/check.sh`;
    const { receipt, unreceipted } = await attempted(where, 'ignored', action, 'auto', { verify: ['sh src/check.sh'] });
    if (receipt === undefined) return unreceipted;
    expect(receipt['files_changed']).toEqual(['src/add.js', 'src/check.sh']);
    if (receipt['status'] === 'succeeded') return 'accepted: the verification passed on a file no commit holds';
    expect(receipt['inner_exit_codes']).toEqual([2]);
    return 'refused';
  });
});

describe("a consult the agent asks after replacing its worktree's own folder by a link", () => {
  it("is refused (CONTEXT_INVALID): its context is never read from the folder the link names, a file of another actor's work; the same worktree as a folder is read", () => {
    const base = tempDir('dispatch-redteam-29-consult');
    const other = join(base, 'other-work');
    fs.mkdirSync(join(other, 'src'), { recursive: true });
    fs.writeFileSync(join(other, 'src', 'secret.ts'), "another actor's file\n");
    const worktree = join(base, 'worktree');
    fs.symlinkSync(other, worktree);
    const bounds = { files: 10, bytes: 1024 * 1024 };
    expect(() => snapshotFiles(worktree, ['src/secret.ts'], ['src/**'], bounds)).toThrow(expect.objectContaining({ code: 'CONTEXT_INVALID', message: expect.stringMatching(/no longer a folder of its own/) }));
    expect(() => snapshotFiles(`${worktree}/`, ['src/secret.ts'], ['src/**'], bounds)).toThrow(expect.objectContaining({ code: 'CONTEXT_INVALID' }));
    // A guard: the folder itself, reached by its own name, is read.
    expect(snapshotFiles(other, ['src/secret.ts'], ['src/**'], bounds).map((file) => file.path)).toEqual(['src/secret.ts']);
  });
});
