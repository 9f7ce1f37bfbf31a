import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync, readdirSync, renameSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadPrivateKey } from '../../src/cli/common.js';
import { CooError } from '../../src/errors.js';
import { generatePrivateKey } from '../../src/crypto/keys.js';
import { appendTrustVersion } from '../../src/ledger/trust-update.js';
import { Ledger } from '../../src/ledger/ledger.js';
import { RemoteLedger } from '../../src/remote/publish.js';
import { CLONE_FETCH_REFSPEC } from '../../src/remote/git-remote.js';
import type { Runner } from '../../src/runner/runner.js';
import { watchRemote } from '../../src/runner/watch.js';
import { cooBounded, headOf } from '../helpers/damage.js';
import { makeTargetRepo } from '../helpers/lane.js';
import { makeServedLedger, makeWriter } from '../helpers/remote-ledger.js';
import { awayOncePaid, makeCase, remoteReceipts, types, type Case, type Machine } from '../helpers/remote-runners.js';
import { git, tempDir } from '../helpers/tmp.js';

/**
 * A real deployment over a git remote, attacked by a careless operator and by a remote that lies:
 * no writer or runner builds on, acts on or pays for a history that did not verify from the trust
 * root, and a mistake in how one was started is said (exit 2) before anything is written or claimed.
 */

const dir = tempDir('deployment-redteam-');
const closers: Array<() => Promise<void> | void> = [];
afterAll(async () => {
  for (const close of closers.reverse()) await close();
});
const newCase = (): Promise<Case> => makeCase(dir, closers);

/** The CEO, at a desk of its own, rotates the COO's key out and revokes it, through the remote. */
async function revokeCooKey(world: Case, desk: Machine): Promise<void> {
  const ceo = loadPrivateKey(world.served.keys.ceo);
  const coo = loadPrivateKey(world.served.keys.coo);
  await desk.remote.write(async (ledger) => {
    const registry = (await ledger.state()).registry!.doc;
    return appendTrustVersion(ledger, { role: 'registry', document: { ...registry, version: undefined }, actorKeys: new Map([['coo.hermes', generatePrivateKey('coo.hermes').publicKey]]), revoke: new Map([[coo.publicKey.keyId, 'laptop stolen']]) }, ceo, new Date());
  });
}

/** A ledger made by coo init (the one the remote serves) and the keys that write it. */
function servedLedger(name: string): { place: string; origin: string; keys: string } {
  const place = join(dir, name);
  const keys = join(place, 'keys');
  for (const actor of ['ceo', 'coo.hermes']) expect(cooBounded(['keygen', '--actor', actor, '--out', keys]).status).toBe(0);
  const origin = join(place, 'ledger.git');
  expect(cooBounded(['init', '--ledger', origin, '--ceo-key', join(keys, 'ceo.key'), '--actor', `coo.hermes=${join(keys, 'coo.hermes.pub')}`]).status).toBe(0);
  return { place, origin, keys };
}

describe('a ledger stock git cloned (git clone --bare, --mirror, with a work tree, under another remote name)', () => {
  it('is refused by every writing verb and by coo watch, with --remote and without (exit 2, nothing written); the ledger coo init made stays writable', () => {
    const { place, origin, keys } = servedLedger('stock-clones');
    const repo = join(place, 'repo');
    makeTargetRepo(repo);
    const copies = {
      bare: ['--bare'],
      mirror: ['--mirror'],
      upstream: ['--bare', '--origin', 'upstream'],
    } as const;
    const gitdirs = Object.entries(copies).map(([name, flags]) => {
      const gitdir = join(place, `${name}.git`);
      git(['clone', '-q', ...flags, origin, gitdir]);
      return gitdir;
    });
    git(['clone', '-q', origin, join(place, 'work')]);
    gitdirs.push(join(place, 'work', '.git'));
    const before = headOf(origin);
    for (const gitdir of gitdirs) {
      const said = `is a clone of ${origin} made by git, not by coo clone, so its history was never verified from a trust root you pinned`;
      for (const remote of [[], ['--remote', origin]]) {
        const stop = cooBounded(['kill-switch', 'on', '--ledger', gitdir, '--key', join(keys, 'ceo.key'), '--reason', 'stop everything', ...remote]);
        expect({ gitdir, remote, status: stop.status, stderr: stop.stderr }).toMatchObject({ gitdir, remote, status: 2, stderr: expect.stringContaining(`coo: USAGE: ${gitdir} ${said}`) });
      }
      const watch = cooBounded(['watch', '--once', '--ledger', gitdir, '--key', join(keys, 'coo.hermes.key'), '--repo', repo, '--state-dir', join(place, 'state'), '--isolation', 'none']);
      expect({ gitdir, status: watch.status, stderr: watch.stderr }).toMatchObject({ gitdir, status: 2, stderr: expect.stringContaining(`coo: USAGE: ${gitdir} ${said}: coo watch runs on it neither alone nor through its remote`) });
      expect(headOf(gitdir)).toBe(before);
    }
    expect(headOf(origin)).toBe(before);
    // The ledger the remote serves, made by coo init, is written on its own; and so is one pushed to a backup with git remote add.
    expect(cooBounded(['kill-switch', 'on', '--ledger', origin, '--key', join(keys, 'ceo.key'), '--reason', 'stop everything']).status).toBe(0);
    const backup = join(place, 'backup.git');
    git(['init', '-q', '--bare', backup]);
    git(['--git-dir', origin, 'remote', 'add', 'origin', backup]);
    git(['--git-dir', origin, 'push', '-q', 'origin', 'main']);
    expect(cooBounded(['kill-switch', 'off', '--ledger', origin, '--key', join(keys, 'ceo.key'), '--reason', 'resume']).status).toBe(0);
    expect(headOf(origin)).not.toBe(before);
  });
});

describe('a runner through a remote publishes nothing before its checks pass', () => {
  it('a journaled receipt waits while the key is revoked on the remote: the pass that reconnects refuses the key (RUNNER_CONFIG, exit 2) before it publishes the journal, and the receipt stays for a runner with a valid key', async () => {
    const world = await newCase();
    const messageId = await world.consult();
    const machine = await world.machine('runner');
    // The call is paid; the remote goes away before the receipt is published.
    const { away, onEvent } = awayOncePaid(world, machine);
    const runner = machine.runner({ onEvent });
    await runner.runOnce();
    expect(types(machine.events)).toEqual(expect.arrayContaining(['claimed', 'journaled', 'cut_off']));
    expect(readdirSync(join(machine.stateDir, 'journal'))).toHaveLength(1);
    renameSync(away, world.served.gitdir);
    // While this runner was cut off, the CEO revoked its key.
    await revokeCooKey(world, await world.machine('ceo-desk'));
    const revoked = world.served.head();

    await expect(runner.runOnce()).rejects.toMatchObject({ code: 'RUNNER_CONFIG', message: expect.stringContaining('is not the active COO') });
    expect(types(machine.events)).not.toContain('result_kept');
    expect(readdirSync(join(machine.stateDir, 'journal'))).toHaveLength(1);
    expect(world.served.head()).toBe(revoked);
    expect(await remoteReceipts(world.served, messageId)).toEqual([]);
    expect(world.model.requests).toHaveLength(1);
  });

  it('a heartbeat with a key revoked on the remote is refused as the key check refuses it (RUNNER_CONFIG, exit 2), never as a rejected write (exit 3), and publishes nothing', async () => {
    const world = await newCase();
    const machine = await world.machine('runner');
    await machine.remote.sync();
    await revokeCooKey(world, await world.machine('ceo-desk'));
    const revoked = world.served.head();
    await expect(machine.runner().heartbeat()).rejects.toMatchObject({ code: 'RUNNER_CONFIG', message: expect.stringContaining('is not the active COO') });
    expect(world.served.head()).toBe(revoked);
  });

  it('a watch whose heartbeat is refused for a start-up mistake ends with that mistake after the pass in flight, and starts no other', async () => {
    const controller = new AbortController();
    const refused = Promise.reject(new CooError('RUNNER_CONFIG', 'the key is not the active COO key'));
    refused.catch(() => undefined);
    let passes = 0;
    let looks = 0;
    const runner = {
      cutOffAt: null,
      heartbeat: () => refused,
      // Each pass ends once the heartbeat was refused; a watch that went on anyway is stopped at its third.
      runOnce: async () => {
        passes += 1;
        await refused.catch(() => undefined);
        await new Promise((resolve) => setImmediate(resolve));
        if (passes >= 3) controller.abort();
        return { receipts: 0, waiting: [], held: [] };
      },
    } as unknown as Runner;
    const remote = { remoteHead: () => Promise.resolve(String((looks += 1))) };
    const ended = await watchRemote(runner, { remote, heartbeatSeconds: 3600, pollSeconds: 0.05, maxPollSeconds: 0.05, signal: controller.signal }).then(
      () => 'ended without an error',
      (error: unknown) => error,
    );
    expect(ended).toMatchObject({ code: 'RUNNER_CONFIG' });
    expect(passes).toBe(1);
  });
});

/** Bytes of every file under `path`. */
function bytesUnder(path: string): number {
  return readdirSync(path, { withFileTypes: true }).reduce((sum, entry) => sum + (entry.isDirectory() ? bytesUnder(join(path, entry.name)) : statSync(join(path, entry.name)).size), 0);
}

describe('a remote that lies with a small pack of large objects', () => {
  it('a fetch of a main holding a 64 MiB blob of zeros (a pack of a few hundred KiB) is refused and lands on disk as the pack it was, never as 64 MiB of loose objects', async () => {
    const place = join(dir, 'zeros');
    const served = await makeServedLedger(place);
    const writer = await makeWriter(place, 'runner', served, served.gitdir);
    // The remote's main moves to a commit nobody signed, whose tree holds the blob; the remote packs it compressed.
    git(['--git-dir', served.gitdir, 'config', 'core.compression', '9']);
    const blob = spawnSync('git', ['-c', 'core.compression=9', '--git-dir', served.gitdir, 'hash-object', '-w', '--stdin'], { input: Buffer.alloc(64 * 1024 * 1024) }).stdout.toString('utf8').trim();
    const tree = git(['--git-dir', served.gitdir, 'mktree'], { input: `100644 blob ${blob}\tzeros.bin\n` }).trim();
    git(['--git-dir', served.gitdir, 'update-ref', 'refs/heads/main', git(['--git-dir', served.gitdir, 'commit-tree', tree, '-p', 'main', '-m', 'zeros']).trim()]);
    const before = bytesUnder(join(writer.gitdir, 'objects'));
    const ledger = Ledger.open(writer.gitdir);
    try {
      await expect(new RemoteLedger(ledger, { remote: served.gitdir }).sync()).rejects.toMatchObject({ code: 'REMOTE_UNVERIFIED' });
    } finally {
      ledger.close();
    }
    expect(bytesUnder(join(writer.gitdir, 'objects')) - before).toBeLessThan(4 * 1024 * 1024);
  });

  it('a fetch that brings more than one fetch takes (a pack of 3 MiB against a bound of 1 MiB) is stopped as a finding about the remote, and nothing it sent stays', async () => {
    const place = join(dir, 'huge-pack');
    const served = await makeServedLedger(place);
    const writer = await makeWriter(place, 'runner', served, served.gitdir);
    const blob = spawnSync('git', ['--git-dir', served.gitdir, 'hash-object', '-w', '--stdin'], { input: randomBytes(3 * 1024 * 1024) }).stdout.toString('utf8').trim();
    const tree = git(['--git-dir', served.gitdir, 'mktree'], { input: `100644 blob ${blob}\tnoise.bin\n` }).trim();
    const lie = git(['--git-dir', served.gitdir, 'commit-tree', tree, '-p', 'main', '-m', 'noise']).trim();
    git(['--git-dir', served.gitdir, 'update-ref', 'refs/heads/main', lie]);
    const objects = join(writer.gitdir, 'objects');
    const before = bytesUnder(objects);
    const ledger = Ledger.open(writer.gitdir);
    try {
      await expect(new RemoteLedger(ledger, { remote: served.gitdir, maxFetchBytes: 1024 * 1024 }).sync()).rejects.toMatchObject({
        code: 'REMOTE_UNVERIFIED',
        message: expect.stringContaining(`sent more for its main (${lie.slice(0, 12)}) than one fetch takes: git fetch received more than 1 MiB`),
      });
    } finally {
      ledger.close();
    }
    expect(bytesUnder(objects) - before).toBeLessThan(64 * 1024);
    expect(spawnSync('git', ['--git-dir', writer.gitdir, 'cat-file', '-e', lie]).status).not.toBe(0);
    expect(readdirSync(objects).filter((name) => name.startsWith('tmp_'))).toEqual([]);
  });
});

describe('a remote with no branch main but a tag named main', () => {
  it('is not cloned (REMOTE_MAIN_MISSING, nothing left behind): git clone --branch main would take the tag and leave an empty clone that any later main would be adopted into', async () => {
    const place = join(dir, 'tag-main');
    const served = await makeServedLedger(place);
    git(['--git-dir', served.gitdir, 'tag', 'main', 'refs/heads/main']);
    git(['--git-dir', served.gitdir, 'symbolic-ref', 'HEAD', 'refs/heads/other']);
    git(['--git-dir', served.gitdir, 'update-ref', '-d', 'refs/heads/main']);
    const clone = join(place, 'clone.git');
    const cloned = cooBounded(['clone', served.gitdir, clone, '--trust-root', served.ceoKeyId]);
    expect({ status: cloned.status, stderr: cloned.stderr }).toEqual({ status: 3, stderr: `coo: REMOTE_MAIN_MISSING: ${served.gitdir} answers but has no main (refs/heads/main) to clone; nothing was cloned\n` });
    expect(existsSync(clone)).toBe(false);
    expect(readdirSync(place).filter((name) => name.includes('clone'))).toEqual([]);
  });

  it('a clone that holds no history (made by an older coo clone that took the tag) adopts nothing the remote serves later: no pinned root verified it', async () => {
    const place = join(dir, 'empty-clone');
    // Another CEO's ledger: its history verifies from its own first commit, not from the root the clone pinned.
    const theirs = await makeServedLedger(place);
    const clone = join(place, 'clone.git');
    git(['init', '-q', '--bare', clone]);
    git(['--git-dir', clone, 'config', 'remote.origin.url', theirs.gitdir]);
    git(['--git-dir', clone, 'config', 'remote.origin.fetch', CLONE_FETCH_REFSPEC]);
    const ledger = Ledger.open(clone);
    try {
      await expect(new RemoteLedger(ledger, { remote: theirs.gitdir }).sync()).rejects.toMatchObject({ code: 'REMOTE_UNVERIFIED', message: expect.stringContaining('holds no history verified from a trust root you pinned') });
      expect(ledger.head()).toBeNull();
    } finally {
      ledger.close();
    }
  });
});

describe('a push of a small pack of zero-filled blobs into the served ledger', () => {
  it('is held in the quarantine as the pack it came in (kilobytes), never unpacked into 64 MiB of loose objects, and declined by the hook', async () => {
    const place = join(dir, 'zero-push');
    const served = await makeServedLedger(place);
    // Test fixture: the hook weighs the quarantine git received the push into, then runs the ledger's hook.
    const hooks = join(served.gitdir, 'hooks');
    renameSync(join(hooks, 'pre-receive'), join(hooks, 'pre-receive.ledger'));
    const weight = join(place, 'quarantine-kib');
    writeFileSync(join(hooks, 'pre-receive'), `#!/bin/sh\ndu -sk "$GIT_QUARANTINE_PATH" | cut -f1 > "${weight}"\nexec "${join(hooks, 'pre-receive.ledger')}"\n`, { mode: 0o755 });
    const work = join(place, 'work');
    git(['clone', '-q', served.gitdir, work]);
    const blob = spawnSync('git', ['-C', work, '-c', 'core.compression=9', 'hash-object', '-w', '--stdin'], { input: Buffer.alloc(64 * 1024 * 1024) }).stdout.toString('utf8').trim();
    const tree = git(['-C', work, 'mktree'], { input: `100644 blob ${blob}\tzeros.bin\n` }).trim();
    git(['-C', work, 'update-ref', 'refs/heads/main', git(['-C', work, 'commit-tree', tree, '-p', 'main', '-m', 'zeros']).trim()]);
    const pushed = spawnSync('git', ['-C', work, 'push', 'origin', 'main'], { encoding: 'utf8' });
    expect(pushed.status).not.toBe(0);
    expect(pushed.stderr).toMatch(/push declined/);
    expect(Number(readFileSync(weight, 'utf8').trim())).toBeLessThan(4 * 1024);
  });
});
