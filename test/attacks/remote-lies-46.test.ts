import { existsSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadPrivateKey } from '../../src/cli/common.js';
import { enqueueConsult } from '../../src/consult/enqueue.js';
import { Ledger } from '../../src/ledger/ledger.js';
import { packLooseObjects } from '../../src/ledger/object-store.js';
import { RemoteLedger } from '../../src/remote/publish.js';
import { makeServedLedger, makeWriter, removeHook } from '../helpers/remote-ledger.js';
import { cooAsync } from '../helpers/cli.js';
import { git, gitEnv, run, tempDir } from '../helpers/tmp.js';

/**
 * A remote that lies without a hook to stop it (a forge), round 46: what it lists beside its main.
 */

const dir = tempDir('coo-attack-remote-lies-46-');
const closers: Array<() => Promise<void> | void> = [];

afterAll(async () => {
  for (const close of closers.reverse()) await close();
});

/** Refs a hookless remote takes from anyone who may push a branch: each name ends in refs/heads/main, and git's ls-remote matches a pattern by its tail. */
function tailNamedRefs(gitdir: string, count: number, at: string): void {
  const lines = Array.from({ length: count }, (_, i) => `create refs/heads/a${String(i).padStart(5, '0')}/refs/heads/main ${at}\n`).join('');
  git(['--git-dir', gitdir, 'update-ref', '--stdin'], { input: lines });
}

describe('a hookless remote that lists many refs whose names end in refs/heads/main before its main', { timeout: 180_000 }, () => {
  it("a writer and a runner's look still find the remote's main by its exact name: the write is published on it, never refused as a main that was deleted", async () => {
    const caseDir = join(dir, 'tail-refs');
    const served = await makeServedLedger(caseDir);
    removeHook(served);
    const writer = await makeWriter(caseDir, 'coo', served, served.gitdir);
    const head = served.head();
    // About 110 KB of ls-remote output, every line of it before refs/heads/main's own (git lists refs in name order).
    tailNamedRefs(served.gitdir, 1500, head);
    const listed = git(['ls-remote', served.gitdir, 'refs/heads/main']);
    expect(listed.length).toBeGreaterThan(100_000);
    expect(listed.trimEnd().split('\n').at(-1)).toBe(`${head}\trefs/heads/main`);

    const ledger = Ledger.open(writer.gitdir);
    closers.push(() => ledger.close());
    const remote = new RemoteLedger(ledger, { remote: served.gitdir });
    expect(await remote.remoteHead()).toBe(head);
    const key = loadPrivateKey(served.keys.coo);
    const published = await remote.write((on) => enqueueConsult({ ledger: on, key, now: new Date(), target: 'aa.chatgpt', repo: served.target, patterns: ['README.md'], question: 'Is add() correct for NaN?', maxRuntimeSeconds: 60 }));
    expect(published.commit).toMatch(/^[0-9a-f]{40}$/);
    expect(served.head()).toBe(published.commit);
    expect(git(['--git-dir', served.gitdir, 'rev-parse', 'refs/heads/main^']).trim()).toBe(head);
    expect(await remote.remoteHead()).toBe(published.commit);
  });
});

/** Whether the clone holds the object `oid`. */
function hasObject(gitdir: string, oid: string): boolean {
  return run('git', ['--git-dir', gitdir, 'cat-file', '-e', oid], { env: gitEnv() }).status === 0;
}

/**
 * A served ledger without its hook and a writer's clone of it; then a valid commit on the remote's
 * main (another writer's consult), and a graft in the remote that gives that commit a second parent
 * holding 16 MiB of zeros, deflated to a few KiB: the remote's git walks it, and packs it with main.
 */
async function graftedRemote(name: string) {
  const caseDir = join(dir, name);
  const served = await makeServedLedger(caseDir);
  removeHook(served);
  const writer = await makeWriter(caseDir, 'coo', served, served.gitdir);
  const before = writer.head();
  const direct = Ledger.open(served.gitdir);
  await enqueueConsult({ ledger: direct, key: loadPrivateKey(served.keys.coo), now: new Date(), target: 'aa.chatgpt', repo: served.target, patterns: ['README.md'], question: 'Is add() correct for NaN?', maxRuntimeSeconds: 60 });
  direct.close();
  const valid = served.head();
  expect(git(['--git-dir', served.gitdir, 'rev-parse', `${valid}^`]).trim()).toBe(before);
  // Test fixture: the remote's own git is told to walk a parent the commit's bytes do not hold.
  const zeros = run('git', ['--git-dir', served.gitdir, '-c', 'core.compression=9', 'hash-object', '-w', '--stdin'], { input: Buffer.alloc(16 * 1024 * 1024), env: gitEnv() }).stdout.trim();
  const tree = git(['--git-dir', served.gitdir, 'mktree'], { input: `100644 blob ${zeros}\tzeros\n` }).trim();
  const extra = git(['--git-dir', served.gitdir, 'commit-tree', '-m', 'not in the ledger', tree]).trim();
  git(['--git-dir', served.gitdir, 'config', 'pack.compression', '9']);
  writeFileSync(join(served.gitdir, 'info', 'grafts'), `${valid} ${before} ${extra}\n`);
  return { caseDir, served, writer, before, valid, unnamed: [zeros, tree, extra] };
}

describe("a hookless remote whose packs hold objects its main does not name (its git walks an info/grafts file)", { timeout: 180_000 }, () => {
  it('a sync keeps none of them and refuses the remote with a clear code, the local main as it was; once the remote is repaired the same clone adopts its main', async () => {
    const { served, writer, before, valid, unnamed } = await graftedRemote('grafted-sync');
    const ledger = Ledger.open(writer.gitdir);
    closers.push(() => ledger.close());
    const remote = new RemoteLedger(ledger, { remote: served.gitdir });
    await expect(remote.sync()).rejects.toMatchObject({
      code: 'REMOTE_UNVERIFIED',
      message: expect.stringMatching(new RegExp(`sent, for its main \\(${valid.slice(0, 12)}\\), 3 objects beside the history of ${valid.slice(0, 12)} .*; what it sent was removed; nothing was acted on; .*info/grafts`)),
    });
    for (const oid of [...unnamed, valid]) expect(hasObject(writer.gitdir, oid)).toBe(false);
    expect(readdirSync(join(writer.gitdir, 'objects')).filter((name) => name.startsWith('tmp_'))).toEqual([]);
    expect(writer.head()).toBe(before);

    // The remote's operator removes the graft: the same clone fetches its main alone, verifies and adopts it.
    writeFileSync(join(served.gitdir, 'info', 'grafts'), '');
    expect(await remote.sync()).toEqual({ head: valid, arrived: 1 });
    for (const oid of unnamed) expect(hasObject(writer.gitdir, oid)).toBe(false);
    expect(writer.head()).toBe(valid);
  });

  it('coo clone refuses the remote with a clear code and leaves nothing behind', async () => {
    const { caseDir, served, writer, valid } = await graftedRemote('grafted-clone');
    const into = join(caseDir, 'fresh.git');
    const cloned = await cooAsync(['clone', served.gitdir, into, '--trust-root', served.ceoKeyId], { env: writer.env });
    expect(cloned.status).not.toBe(0);
    expect(cloned.stderr).toMatch(/REMOTE_UNVERIFIED/);
    expect(cloned.stderr).toContain(`sent, for its main (${valid.slice(0, 12)}), 3 objects beside the history of ${valid.slice(0, 12)}`);
    expect(cloned.stderr).toMatch(/nothing was cloned/);
    expect(existsSync(into)).toBe(false);
    expect(readdirSync(caseDir).filter((name) => name.includes('clone-'))).toEqual([]);
  });
});

describe("a hookless remote whose main's ref file names a tag of a valid head (git writes no such branch; a hand or a forge's own code does)", { timeout: 180_000 }, () => {
  it('a sync and coo clone refuse it with a clear code, naming the object and what to do; the local main and the head the clone last fetched stay as they were', async () => {
    const caseDir = join(dir, 'tag-main');
    const served = await makeServedLedger(caseDir);
    removeHook(served);
    const writer = await makeWriter(caseDir, 'coo', served, served.gitdir);
    const before = writer.head();
    const direct = Ledger.open(served.gitdir);
    await enqueueConsult({ ledger: direct, key: loadPrivateKey(served.keys.coo), now: new Date(), target: 'aa.chatgpt', repo: served.target, patterns: ['README.md'], question: 'Is add() correct for NaN?', maxRuntimeSeconds: 60 });
    direct.close();
    const valid = served.head();
    const tag = git(['--git-dir', served.gitdir, 'mktag'], { input: `object ${valid}\ntype commit\ntag main\ntagger Mallory <m@example.invalid> 0 +0000\n\nthe head, wrapped\n` }).trim();
    git(['--git-dir', served.gitdir, 'pack-refs', '--all']);
    writeFileSync(join(served.gitdir, 'refs', 'heads', 'main'), `${tag}\n`);
    expect(git(['ls-remote', served.gitdir, 'refs/heads/main'])).toContain(`${tag}\trefs/heads/main\n`);

    const ledger = Ledger.open(writer.gitdir);
    closers.push(() => ledger.close());
    const remote = new RemoteLedger(ledger, { remote: served.gitdir });
    const refused = new RegExp(`the main of .* names ${tag.slice(0, 12)}, a tag object, not a commit: .*nothing was acted on; have the remote's operator set its main back`);
    await expect(remote.sync()).rejects.toMatchObject({ code: 'REMOTE_UNVERIFIED', message: expect.stringMatching(refused) });
    expect(writer.head()).toBe(before);
    expect(git(['--git-dir', writer.gitdir, 'rev-parse', 'refs/remotes/origin/main']).trim()).toBe(before);

    const into = join(caseDir, 'fresh.git');
    const cloned = await cooAsync(['clone', served.gitdir, into, '--trust-root', served.ceoKeyId], { env: writer.env });
    expect(cloned.status).not.toBe(0);
    expect(cloned.stderr).toMatch(/REMOTE_UNVERIFIED/);
    expect(cloned.stderr).toContain(`names ${tag.slice(0, 12)}, a tag object, not a commit`);
    expect(cloned.stderr).toMatch(/nothing was cloned/);
    expect(existsSync(into)).toBe(false);

    // The remote's operator sets main back to the commit: the same clone adopts it.
    writeFileSync(join(served.gitdir, 'refs', 'heads', 'main'), `${valid}\n`);
    expect(await remote.sync()).toEqual({ head: valid, arrived: 1 });
  });
});

describe('a hookless remote that is a shallow copy of the ledger (a shallow file in it cuts its history above what a clone holds)', { timeout: 180_000 }, () => {
  it('a sync keeps none of what it sent and says the history came cut short; coo clone clones nothing; once the remote is whole again the same clone adopts its main', async () => {
    const caseDir = join(dir, 'shallow');
    const served = await makeServedLedger(caseDir);
    removeHook(served);
    const writer = await makeWriter(caseDir, 'coo', served, served.gitdir);
    const before = writer.head();
    const direct = Ledger.open(served.gitdir);
    for (const question of ['Is add() correct for NaN?', 'And for -0?', 'And for Infinity?']) {
      await enqueueConsult({ ledger: direct, key: loadPrivateKey(served.keys.coo), now: new Date(), target: 'aa.chatgpt', repo: served.target, patterns: ['README.md'], question, maxRuntimeSeconds: 60 });
    }
    direct.close();
    const head = served.head();
    const cut = git(['--git-dir', served.gitdir, 'rev-parse', 'main^']).trim();
    // Test fixture: the remote's git takes main's parent for a first commit, as in a copy made with git clone --depth 2.
    writeFileSync(join(served.gitdir, 'shallow'), `${cut}\n`);

    const ledger = Ledger.open(writer.gitdir);
    closers.push(() => ledger.close());
    const remote = new RemoteLedger(ledger, { remote: served.gitdir });
    await expect(remote.sync()).rejects.toMatchObject({
      code: 'REMOTE_UNVERIFIED',
      message: expect.stringMatching(new RegExp(`sent, for its main \\(${head.slice(0, 12)}\\), the history of ${head.slice(0, 12)} with objects under it missing .*; what it sent was removed; nothing was acted on; .*shallow file`)),
    });
    for (const oid of [head, cut]) expect(hasObject(writer.gitdir, oid)).toBe(false);
    expect(writer.head()).toBe(before);

    const into = join(caseDir, 'fresh.git');
    const cloned = await cooAsync(['clone', served.gitdir, into, '--trust-root', served.ceoKeyId], { env: writer.env });
    expect(cloned.status).not.toBe(0);
    expect(cloned.stderr).toMatch(/REMOTE_UNVERIFIED/);
    expect(cloned.stderr).toContain(`the history of ${head.slice(0, 12)} cut short (a shallow copy: git took ${cut.slice(0, 12)} for its first commit)`);
    expect(cloned.stderr).toMatch(/nothing was cloned/);
    expect(existsSync(into)).toBe(false);

    // The remote is whole again: the same clone fetches main's history, verifies it and adopts it.
    writeFileSync(join(served.gitdir, 'shallow'), '');
    expect(await remote.sync()).toEqual({ head, arrived: 3 });
    expect(writer.head()).toBe(head);
  });
});

/** Bytes of every file under `path`. */
function bytesUnder(path: string): number {
  return readdirSync(path, { withFileTypes: true }).reduce((sum, entry) => sum + (entry.isDirectory() ? bytesUnder(join(path, entry.name)) : statSync(join(path, entry.name)).size), 0);
}

describe("a hookless remote whose main holds a blob of zeros in a commit no one signed (a sync fetches it, then refuses it)", { timeout: 180_000 }, () => {
  it("the ledger's packing, once there are many packs, keeps the objects no ref names compressed: the clone's objects stay a few MiB, not the blob's 64 MiB", async () => {
    const caseDir = join(dir, 'zeros-refused');
    const served = await makeServedLedger(caseDir);
    removeHook(served);
    const writer = await makeWriter(caseDir, 'coo', served, served.gitdir);
    const before = writer.head();
    // Test fixture: a commit on main that adds 64 MiB of zeros beside the ledger's files, deflated to a few KiB in the remote's pack.
    const zeros = run('git', ['--git-dir', served.gitdir, '-c', 'core.compression=9', 'hash-object', '-w', '--stdin'], { input: Buffer.alloc(64 * 1024 * 1024), env: gitEnv() }).stdout.trim();
    const listed = git(['--git-dir', served.gitdir, 'ls-tree', before]);
    const tree = git(['--git-dir', served.gitdir, 'mktree'], { input: `${listed}100644 blob ${zeros}\tzeros\n` }).trim();
    const unsigned = git(['--git-dir', served.gitdir, 'commit-tree', '-p', before, '-m', 'zeros', tree]).trim();
    git(['--git-dir', served.gitdir, 'config', 'pack.compression', '9']);
    git(['--git-dir', served.gitdir, 'update-ref', 'refs/heads/main', unsigned]);

    const ledger = Ledger.open(writer.gitdir);
    closers.push(() => ledger.close());
    await expect(new RemoteLedger(ledger, { remote: served.gitdir }).sync()).rejects.toMatchObject({ code: 'REMOTE_UNVERIFIED' });
    expect(writer.head()).toBe(before);
    // What the fetch brought stays (nothing verified it before it came), in the pack it came in: a few KiB.
    expect(hasObject(writer.gitdir, zeros)).toBe(true);
    expect(bytesUnder(join(writer.gitdir, 'objects'))).toBeLessThan(4 * 1024 * 1024);

    // Test fixture: the many small packs a runner's fetches leave, past git's gc.autoPackLimit (50).
    for (let i = 0; i < 55; i += 1) {
      const blob = git(['--git-dir', writer.gitdir, 'hash-object', '-w', '--stdin'], { input: `fetched ${i}\n` }).trim();
      git(['--git-dir', writer.gitdir, 'pack-objects', '-q', join(writer.gitdir, 'objects', 'pack', 'pack')], { input: `${blob}\n` });
    }
    const packs = (): number => readdirSync(join(writer.gitdir, 'objects', 'pack')).filter((name) => name.endsWith('.pack')).length;
    expect(packs()).toBeGreaterThan(50);
    packLooseObjects(writer.gitdir);
    // git's packing runs apart from this process: its end is when the packs are one again and its lock is gone.
    for (let waited = 0; (packs() > 2 || existsSync(join(writer.gitdir, 'gc.pid'))) && waited < 120_000; waited += 100) await new Promise((resolve) => setTimeout(resolve, 100));
    expect(packs()).toBeLessThanOrEqual(2);
    expect(existsSync(join(writer.gitdir, 'gc.pid'))).toBe(false);
    expect(hasObject(writer.gitdir, zeros)).toBe(true);
    expect(bytesUnder(join(writer.gitdir, 'objects'))).toBeLessThan(4 * 1024 * 1024);
  });
});
