import { chmodSync, existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { loadPrivateKey } from '../../src/cli/common.js';
import { enqueueConsult } from '../../src/consult/enqueue.js';
import { Ledger } from '../../src/ledger/ledger.js';
import { cloneLedger } from '../../src/remote/clone.js';
import { RemoteLedger } from '../../src/remote/publish.js';
import { makeServedLedger, makeWriter, removeHook, type ServedLedger } from '../helpers/remote-ledger.js';
import { git, gitEnv, run, tempDir } from '../helpers/tmp.js';

/**
 * Round 47: the check of what a fetch or a clone received (git-remote.ts unnamedObjects): what an
 * honest fetch costs, whose failure a failure of the local git is, and a main that names no commit.
 */

const dir = tempDir('coo-attack-remote-lies-47-');
const closers: Array<() => Promise<void> | void> = [];
const path = process.env['PATH'];

afterAll(async () => {
  for (const close of closers.reverse()) await close();
});

afterEach(() => {
  process.env['PATH'] = path;
});

/** Whether the clone holds the object `oid`. */
function hasObject(gitdir: string, oid: string): boolean {
  return run('git', ['--git-dir', gitdir, 'cat-file', '-e', oid], { env: gitEnv() }).status === 0;
}

/** Every object id the clone holds. */
function heldIds(gitdir: string): Set<string> {
  return new Set(git(['--git-dir', gitdir, 'cat-file', '--batch-all-objects', '--batch-check=%(objectname)']).split('\n').filter((line) => line !== ''));
}

/** The ids a pack's index lists (git show-index). */
function packIds(idx: string): string[] {
  return run('git', ['show-index'], { input: readFileSync(idx), env: gitEnv() })
    .stdout.split('\n')
    .filter((line) => line !== '')
    .map((line) => line.split(' ')[1]!);
}

/**
 * Test fixture: a `git` first on PATH that logs each start (the quarantine it was given, if any, and
 * its arguments) and runs the real git; `script` runs first and may end it instead.
 */
function wrapGit(name: string, script = ''): string {
  const bin = join(dir, name);
  const log = join(bin, 'log');
  run('mkdir', ['-p', bin]);
  writeFileSync(log, '');
  const real = run('sh', ['-c', 'command -v git']).stdout.trim();
  writeFileSync(join(bin, 'git'), `#!/bin/sh\nprintf '%s\\t%s\\n' "\${GIT_OBJECT_DIRECTORY:-}" "$*" >> '${log}'\n${script}\nexec '${real}' "$@"\n`);
  chmodSync(join(bin, 'git'), 0o755);
  process.env['PATH'] = `${bin}:${path ?? ''}`;
  return log;
}

/** A consult on the remote's main, written there directly (another writer's). */
async function consultOn(served: ServedLedger, question: string): Promise<void> {
  const direct = Ledger.open(served.gitdir);
  await enqueueConsult({ ledger: direct, key: loadPrivateKey(served.keys.coo), now: new Date(), target: 'aa.chatgpt', repo: served.target, patterns: ['README.md'], question, maxRuntimeSeconds: 60 });
  direct.close();
}

/** A writer's clone of a served ledger (`seeded` consults on it first), then another writer's consult on the remote's main, not yet fetched. */
async function oneAhead(name: string, seeded = 0): Promise<{ caseDir: string; served: ServedLedger; gitdir: string; before: string; valid: string }> {
  const caseDir = join(dir, name);
  const served = await makeServedLedger(caseDir);
  for (let i = 0; i < seeded; i += 1) await consultOn(served, `Is add() correct for NaN? (asked ${i})`);
  const writer = await makeWriter(caseDir, 'coo', served, served.gitdir);
  await consultOn(served, 'Is add() correct for NaN?');
  return { caseDir, served, gitdir: writer.gitdir, before: writer.head(), valid: served.head() };
}

function remoteFor(gitdir: string, served: ServedLedger): RemoteLedger {
  const ledger = Ledger.open(gitdir);
  closers.push(() => ledger.close());
  return new RemoteLedger(ledger, { remote: served.gitdir });
}

const tmpFolders = (gitdir: string): string[] => readdirSync(join(gitdir, 'objects')).filter((name) => name.startsWith('tmp_'));

describe('an honest incremental fetch, whose thin pack index-pack completes with bases the clone held', { timeout: 180_000 }, () => {
  it('is admitted, and checking what it received starts one git process (rev-list) beside the fetch, which runs no maintenance', async () => {
    const { served, gitdir, valid } = await oneAhead('thin', 3);
    const remote = remoteFor(gitdir, served);
    const held = heldIds(gitdir);
    const packsBefore = new Set(readdirSync(join(gitdir, 'objects', 'pack')));
    const log = wrapGit('thin-bin');
    expect(await remote.sync()).toEqual({ head: valid, arrived: 1 });
    process.env['PATH'] = path;

    // The pack the fetch kept holds objects the clone held before: the thin pack's bases, copied in beside what came.
    const fetched = readdirSync(join(gitdir, 'objects', 'pack')).filter((name) => name.endsWith('.idx') && !packsBefore.has(name));
    expect(fetched).toHaveLength(1);
    const ids = packIds(join(gitdir, 'objects', 'pack', fetched[0]!));
    expect(ids).toContain(valid);
    expect(ids.filter((id) => held.has(id)).length).toBeGreaterThan(0);

    const starts = readFileSync(log, 'utf8').split('\n').filter((line) => line !== '');
    const inQuarantine = starts.filter((line) => !line.startsWith('\t'));
    expect(inQuarantine).toHaveLength(2);
    expect(inQuarantine[0]).toMatch(/ fetch --quiet --no-tags --no-auto-maintenance origin /);
    expect(inQuarantine[1]).toMatch(new RegExp(` rev-list --objects --no-object-names ${valid}\\^\\{commit\\} --not --all$`));
    expect(starts.filter((line) => / cat-file --batch-(all-objects|check)/.test(line))).toEqual([]);
  });
});

describe("a failure of this machine's git while what a fetch received is checked", { timeout: 180_000 }, () => {
  it('is GIT_FAILED, never the remote refused as REMOTE_UNVERIFIED (which ends coo watch); nothing is kept, and the next sync adopts the main', async () => {
    const { served, gitdir, before, valid } = await oneAhead('local-failure');
    const remote = remoteFor(gitdir, served);
    // Test fixture: the walk in the quarantine runs out of memory, as git says it.
    wrapGit('oom-bin', `case "$* \${GIT_OBJECT_DIRECTORY:-}" in *rev-list*tmp_coo-incoming-*) echo 'fatal: Out of memory, malloc failed (tried to allocate 1048576 bytes)' >&2; exit 128;; esac`);
    const refused = await remote.sync().then(
      () => null,
      (error: unknown) => error,
    );
    process.env['PATH'] = path;
    expect(refused).toMatchObject({ code: 'GIT_FAILED', message: expect.stringMatching(/Out of memory.*nothing was kept, and the remote was not judged/) });
    expect(hasObject(gitdir, valid)).toBe(false);
    expect(tmpFolders(gitdir)).toEqual([]);
    expect(git(['--git-dir', gitdir, 'rev-parse', 'main']).trim()).toBe(before);

    expect(await remote.sync()).toEqual({ head: valid, arrived: 1 });
  });

  it('a walk killed by a signal is GIT_FAILED too', async () => {
    const { served, gitdir, before, valid } = await oneAhead('local-kill');
    const remote = remoteFor(gitdir, served);
    wrapGit('kill-bin', `case "$* \${GIT_OBJECT_DIRECTORY:-}" in *rev-list*tmp_coo-incoming-*) kill -KILL $$;; esac`);
    const refused = await remote.sync().then(
      () => null,
      (error: unknown) => error,
    );
    process.env['PATH'] = path;
    expect(refused).toMatchObject({ code: 'GIT_FAILED', message: expect.stringMatching(/stopped by SIGKILL/) });
    expect(hasObject(gitdir, valid)).toBe(false);
    expect(git(['--git-dir', gitdir, 'rev-parse', 'main']).trim()).toBe(before);
  });
});

describe('a hookless remote whose main names no commit (its ref file written by hand)', { timeout: 180_000 }, () => {
  it('a sync of a main naming a tag keeps nothing it fetched: the tag and the commit under it are checked in the quarantine and removed', async () => {
    const { served, gitdir, before, valid } = await oneAhead('tag-kept');
    removeHook(served);
    const tag = git(['--git-dir', served.gitdir, 'mktag'], { input: `object ${valid}\ntype commit\ntag main\ntagger Mallory <m@example.invalid> 0 +0000\n\nthe head, wrapped\n` }).trim();
    git(['--git-dir', served.gitdir, 'pack-refs', '--all']);
    writeFileSync(join(served.gitdir, 'refs', 'heads', 'main'), `${tag}\n`);
    const remote = remoteFor(gitdir, served);
    const refused = new RegExp(`names ${tag.slice(0, 12)}, a tag object, not a commit: .*nothing was acted on`);
    for (let poll = 0; poll < 2; poll += 1) {
      await expect(remote.sync()).rejects.toMatchObject({ code: 'REMOTE_UNVERIFIED', message: expect.stringMatching(refused) });
      expect(hasObject(gitdir, tag)).toBe(false);
      expect(hasObject(gitdir, valid)).toBe(false);
      expect(tmpFolders(gitdir)).toEqual([]);
      expect(git(['--git-dir', gitdir, 'rev-parse', 'main']).trim()).toBe(before);
    }
  });

  it('a sync of a main naming a blob says what it names and keeps none of it', async () => {
    const { served, gitdir, before } = await oneAhead('blob-sync');
    removeHook(served);
    const blob = git(['--git-dir', served.gitdir, 'hash-object', '-w', '--stdin'], { input: 'not a commit\n' }).trim();
    git(['--git-dir', served.gitdir, 'pack-refs', '--all']);
    writeFileSync(join(served.gitdir, 'refs', 'heads', 'main'), `${blob}\n`);
    const remote = remoteFor(gitdir, served);
    await expect(remote.sync()).rejects.toMatchObject({ code: 'REMOTE_UNVERIFIED', message: expect.stringMatching(new RegExp(`names ${blob.slice(0, 12)}, a blob object, not a commit: .*nothing was acted on`)) });
    expect(hasObject(gitdir, blob)).toBe(false);
    expect(git(['--git-dir', gitdir, 'rev-parse', 'main']).trim()).toBe(before);
  });

  it('coo clone of a main naming a blob or a tree says so (REMOTE_UNVERIFIED, as a sync says), never that the remote has no main; nothing is cloned', async () => {
    const caseDir = join(dir, 'clone-not-commit');
    const served = await makeServedLedger(caseDir);
    removeHook(served);
    const blob = git(['--git-dir', served.gitdir, 'hash-object', '-w', '--stdin'], { input: 'not a commit\n' }).trim();
    const tree = git(['--git-dir', served.gitdir, 'mktree'], { input: `100644 blob ${blob}\tfile\n` }).trim();
    git(['--git-dir', served.gitdir, 'pack-refs', '--all']);
    for (const [oid, type] of [
      [blob, 'blob'],
      [tree, 'tree'],
    ] as const) {
      writeFileSync(join(served.gitdir, 'refs', 'heads', 'main'), `${oid}\n`);
      const into = join(caseDir, `fresh-${type}.git`);
      await expect(cloneLedger({ url: served.gitdir, gitdir: into, trustRoot: { keyId: served.ceoKeyId }, now: new Date() })).rejects.toMatchObject({
        code: 'REMOTE_UNVERIFIED',
        message: expect.stringMatching(new RegExp(`names ${oid.slice(0, 12)}, a ${type} object, not a commit: .*nothing was cloned`)),
      });
      expect(existsSync(into)).toBe(false);
      expect(readdirSync(caseDir).filter((name) => name.includes('clone-'))).toEqual([]);
    }
  });
});

describe('a push whose answer is lost, then a fetch that finds what the remote sent amiss', { timeout: 180_000 }, () => {
  it('the refusal says whether the write landed is unknown, never that nothing was acted on', async () => {
    const { served, gitdir, valid } = await oneAhead('answer-lost');
    const remote = remoteFor(gitdir, served);
    expect(await remote.sync()).toMatchObject({ head: valid });
    removeHook(served);
    const tag = git(['--git-dir', served.gitdir, 'mktag'], { input: `object ${valid}\ntype commit\ntag main\ntagger Mallory <m@example.invalid> 0 +0000\n\nthe head, wrapped\n` }).trim();
    git(['--git-dir', served.gitdir, 'pack-refs', '--all']);
    // Test fixture: the remote's receive-pack dies before it answers the push, and its main then names a tag.
    writeFileSync(join(served.gitdir, 'hooks', 'pre-receive'), `#!/bin/sh\ncat >/dev/null\nprintf '%s\\n' ${tag} > '${join(served.gitdir, 'refs', 'heads', 'main')}'\nkill -KILL $PPID\n`, { mode: 0o755 });
    const key = loadPrivateKey(served.keys.coo);
    const refused = await remote
      .write((on) => enqueueConsult({ ledger: on, key, now: new Date(), target: 'aa.chatgpt', repo: served.target, patterns: ['README.md'], question: 'And for -0?', maxRuntimeSeconds: 60 }))
      .then(
        () => null,
        (error: unknown) => error as Error,
      );
    expect(refused).toMatchObject({ code: 'REMOTE_UNVERIFIED', message: expect.stringMatching(new RegExp(`names ${tag.slice(0, 12)}, a tag object, not a commit: .*whether the remote took the write pushed before is unknown`)) });
    expect(refused?.message).not.toMatch(/nothing was acted on/);
    expect(git(['--git-dir', gitdir, 'rev-parse', 'main']).trim()).toBe(valid);
  });
});
