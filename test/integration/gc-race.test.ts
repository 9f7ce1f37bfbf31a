import * as fs from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { verifyLedger } from '../../src/audit/verify.js';
import { ObjectWriter } from '../../src/ledger/object-store.js';
import { T0, dispatchEnvelope, messageFiles, makeLedger } from '../helpers/ledger.js';
import { git, run, tempDir } from '../helpers/tmp.js';

/**
 * Stock git packing the ledger at the exact moment the writer is between two steps on disk. The
 * writer's file calls pass through `beforeCall`, which runs the git command the test names when the
 * writer reaches the step: what a background `git gc` does at a random moment, done at the worst one.
 */
const hook = vi.hoisted(() => ({ beforeCall: null as ((call: string, path: string) => void) | null }));

vi.mock('node:fs', async (importOriginal) => {
  const actual = await importOriginal<typeof fs>();
  const watched = ['openSync', 'writeFileSync', 'renameSync', 'utimesSync', 'mkdirSync'] as const;
  const patched: Record<string, unknown> = {};
  for (const name of watched) {
    const original = actual[name] as (...args: unknown[]) => unknown;
    patched[name] = (...args: unknown[]) => {
      if (typeof args[0] === 'string') hook.beforeCall?.(name, args[0]);
      return original(...args);
    };
  }
  // isomorphic-git (which creates the ledgers here) asks every fs it is given for this property.
  return { ...actual, ...patched, _original_unwrapped_fs: undefined, default: { ...actual, ...patched } };
});

afterEach(() => {
  hook.beforeCall = null;
});

const dir = tempDir();
const FAN_OUT = /[/\\]objects[/\\][0-9a-f]{2}$/;
const LOOSE_OBJECT = /^[0-9a-f]{38}$/;

/** A file the writer creates in a fan-out folder that is not the object itself: its temporary file. */
function isObjectTemp(path: string): boolean {
  return FAN_OUT.test(dirname(path)) && !LOOSE_OBJECT.test(basename(path));
}

/** Runs `fn` (once) the first time the writer reaches the call `when` picks. */
function once(when: (call: string, path: string) => boolean, fn: (path: string) => void): { readonly fired: () => boolean } {
  let fired = false;
  hook.beforeCall = (call, path) => {
    if (fired || !when(call, path)) return;
    fired = true;
    fn(path);
  };
  return { fired: () => fired };
}

async function ledgerWithEverythingPacked(name: string) {
  const made = await makeLedger(dir, undefined, name);
  // Packed but still loose: the next `git prune-packed` empties every fan-out folder and removes it.
  git(['--git-dir', made.gitdir, 'repack', '-a', '-q']);
  return made;
}

async function expectSound(gitdir: string, seq: number): Promise<void> {
  expect(git(['--git-dir', gitdir, 'fsck', '--strict', '--no-dangling'])).toBe('');
  expect(git(['--git-dir', gitdir, 'for-each-ref', '--format=%(refname)']).trim()).toBe('refs/heads/main');
  const report = await verifyLedger(gitdir, { full: true });
  expect(report.findings).toEqual([]);
  expect(report.seq).toBe(seq);
}

describe('a ledger packed by git while the writer writes', () => {
  it('writes an object when git prune-packed removes its folder between the writer finding it and creating the temporary file in it', async () => {
    const { gitdir, actors, ledger } = await ledgerWithEverythingPacked('folder-removed.git');
    let folderRemoved = false;
    const removed = once(
      (call, path) => isObjectTemp(path) && call !== 'renameSync' && fs.existsSync(dirname(path)),
      (path) => {
        git(['--git-dir', gitdir, 'prune-packed']);
        folderRemoved = !fs.existsSync(dirname(path));
      },
    );
    const result = await ledger.append({ files: [...messageFiles(dispatchEnvelope())], key: actors.coo, summary: 'dispatch', now: T0 });
    expect(removed.fired()).toBe(true);
    expect(folderRemoved).toBe(true);
    expect('seq' in result && result.seq).toBe(2);
    ledger.close();
    await expectSound(gitdir, 2);
  });

  it('gives up with a coded error, the head unmoved and nothing left behind, when the folder is removed at every try', async () => {
    const { gitdir, actors, ledger } = await ledgerWithEverythingPacked('folder-always-removed.git');
    git(['--git-dir', gitdir, 'prune-packed']);
    const head = git(['--git-dir', gitdir, 'rev-parse', 'main']).trim();
    let removals = 0;
    hook.beforeCall = (call, path) => {
      if (call !== 'openSync' || !isObjectTemp(path) || !fs.existsSync(dirname(path))) return;
      fs.rmdirSync(dirname(path));
      removals += 1;
    };
    await expect(ledger.append({ files: [...messageFiles(dispatchEnvelope())], key: actors.coo, summary: 'dispatch', now: T0 })).rejects.toMatchObject({
      code: 'IO_ERROR',
      message: "cannot write to the ledger's objects: ENOENT; the ledger is unchanged",
    });
    hook.beforeCall = null;
    expect(removals).toBeGreaterThan(1);
    expect(removals).toBeLessThan(10);
    expect(git(['--git-dir', gitdir, 'rev-parse', 'main']).trim()).toBe(head);
    expect(git(['--git-dir', gitdir, 'count-objects', '-v'])).toMatch(/^count: 0$[\s\S]*^garbage: 0$/m);
    ledger.close();
    await expectSound(gitdir, 1);
  });

  it("names its temporary objects as git does, so that git's prune (run by gc) neither complains about them nor keeps a crashed write's forever", async () => {
    const { gitdir, actors, ledger } = await makeLedger(dir, undefined, 'prune-quiet.git');
    let complaint = '';
    let abandonedKept = true;
    const pruned = once(
      (call, path) => call === 'renameSync' && isObjectTemp(path),
      (path) => {
        // What gc runs; its complaints go to gc.log, and git packs nothing more while that file is there.
        complaint = run('git', ['--git-dir', gitdir, 'prune', '--expire=2.weeks.ago']).stderr;
        // A temporary file older than the expiry is one a crash left: git's prune removes it.
        const abandoned = join(dirname(path), `${basename(path)}-abandoned`);
        fs.copyFileSync(path, abandoned);
        fs.utimesSync(abandoned, new Date('2020-01-01T00:00:00Z'), new Date('2020-01-01T00:00:00Z'));
        complaint += run('git', ['--git-dir', gitdir, 'prune', '--expire=2.weeks.ago']).stderr;
        abandonedKept = fs.existsSync(abandoned);
      },
    );
    await ledger.append({ files: [...messageFiles(dispatchEnvelope())], key: actors.coo, summary: 'dispatch', now: T0 });
    expect(pruned.fired()).toBe(true);
    expect(complaint).toBe('');
    expect(abandonedKept).toBe(false);
    ledger.close();
    await expectSound(gitdir, 2);
  });

  it('writes an object again when git packs and removes its loose copy while the writer freshens it', async () => {
    const { gitdir, ledger } = await ledgerWithEverythingPacked('freshen-packed.git');
    ledger.close();
    const writer = new ObjectWriter(gitdir);
    const bytes = Buffer.from('written, packed, then needed again\n');
    const oid = await writer.write('blob', bytes);
    git(['--git-dir', gitdir, 'pack-objects', '-q', join(gitdir, 'objects', 'pack', 'pack')], { input: `${oid}\n` });
    const path = join(gitdir, 'objects', oid.slice(0, 2), oid.slice(2));
    const packed = once(
      (call, target) => call === 'utimesSync' && target === path,
      () => git(['--git-dir', gitdir, 'prune-packed']),
    );
    expect(await writer.write('blob', bytes)).toBe(oid);
    expect(packed.fired()).toBe(true);
    expect(git(['--git-dir', gitdir, 'cat-file', 'blob', oid])).toBe(bytes.toString());
  });

  it("moves the head when git pack-refs runs between the writer writing the head's new value and renaming it into place, and leaves no second branch", async () => {
    const { gitdir, actors, ledger } = await makeLedger(dir, undefined, 'pack-refs.git');
    const refs = join(gitdir, 'refs', 'heads');
    const packed = once(
      (call, path) => call === 'renameSync' && dirname(path) === refs,
      () => git(['--git-dir', gitdir, 'pack-refs', '--all']),
    );
    const result = await ledger.append({ files: [...messageFiles(dispatchEnvelope())], key: actors.coo, summary: 'dispatch', now: T0 });
    expect(packed.fired()).toBe(true);
    expect('commit' in result && git(['--git-dir', gitdir, 'rev-parse', 'main']).trim()).toBe('commit' in result && result.commit);
    expect(fs.readFileSync(join(gitdir, 'packed-refs'), 'utf8')).not.toMatch(/refs\/heads\/main\S/);
    ledger.close();
    await expectSound(gitdir, 2);
  });

  it('moves the head by compare-and-swap when git gc has packed it into packed-refs and removed the loose ref', async () => {
    const { gitdir, actors, ledger } = await makeLedger(dir, undefined, 'packed-head.git');
    const appendOne = () => ledger.append({ files: [...messageFiles(dispatchEnvelope())], key: actors.coo, summary: 'dispatch', now: T0 });
    await appendOne();
    git(['--git-dir', gitdir, 'gc', '-q']);
    expect(fs.existsSync(join(gitdir, 'refs', 'heads', 'main'))).toBe(false);
    const packedHead = git(['--git-dir', gitdir, 'rev-parse', 'main']).trim();
    // gc packs refs while the writer holds the lock: git cannot prune the loose head, and leaves it.
    once(
      (call, path) => call === 'renameSync' && basename(dirname(path)) === 'heads',
      () => run('git', ['--git-dir', gitdir, 'gc', '-q']),
    );
    const second = await appendOne();
    expect('commit' in second && git(['--git-dir', gitdir, 'rev-parse', 'main~1']).trim()).toBe(packedHead);
    const third = await appendOne();
    expect('seq' in third && third.seq).toBe(4);
    expect('commit' in third && git(['--git-dir', gitdir, 'rev-parse', 'main']).trim()).toBe('commit' in third && third.commit);
    ledger.close();
    await expectSound(gitdir, 4);
  });
});
