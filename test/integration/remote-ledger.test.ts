import { spawn } from 'node:child_process';
import { readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parsePrivateKey } from '../../src/crypto/keys.js';
import { isCooError } from '../../src/errors.js';
import { Ledger } from '../../src/ledger/ledger.js';
import { RemoteLedger } from '../../src/remote/publish.js';
import { hostLabel } from '../../src/util/process.js';
import { startGitHttp, type GitHttpServer } from '../helpers/git-http.js';
import { dispatchEnvelope, messageFiles } from '../helpers/ledger.js';
import { advanceBeforeEachPush, makeServedLedger, makeWriter } from '../helpers/remote-ledger.js';
import { git, tempDir } from '../helpers/tmp.js';

const dir = tempDir('coo-remote-ledger-');
const https: GitHttpServer[] = [];

afterAll(async () => {
  for (const server of https) await server.close();
});

describe('RemoteLedger', () => {
  it('counts a write only once the remote took it: a precheck that finds the entry another writer landed first skips, and nothing is written twice', async () => {
    const served = await makeServedLedger(dir);
    const server = await startGitHttp(served.root);
    https.push(server);
    const url = server.url(served.name);
    const mine = await makeWriter(dir, 'mine', served, url);
    const rival = await makeWriter(dir, 'rival', served, url);
    const key = parsePrivateKey(readFileSync(served.keys.coo, 'utf8'));
    const envelope = dispatchEnvelope({}, new Date());
    const files = messageFiles(envelope);
    // The rival writes the same entry on its clone; its commit reaches the remote between my fetch and my push.
    const theirs = Ledger.open(rival.gitdir);
    const landed = await theirs.append({ files, key, summary: 'rival', now: new Date() });
    theirs.close();
    if ('skipped' in landed) throw new Error('the rival skipped');
    git(['--git-dir', served.gitdir, 'fetch', '-q', rival.gitdir, 'main']);
    advanceBeforeEachPush(served, dir, [landed.commit]);

    const ledger = Ledger.open(mine.gitdir);
    try {
      const remote = new RemoteLedger(ledger, { remote: url, backoffMs: () => 0 });
      const published = await remote.append({ files, key, summary: 'mine', now: new Date(), precheck: (state) => (state.messages.has(envelope.message_id) ? 'taken' : undefined) });

      expect(published).toEqual({ result: { skipped: 'taken' }, commit: null, report: { url, tries: 2, conflicts: 1 } });
      expect(served.head()).toBe(landed.commit);
      expect(ledger.head()).toBe(landed.commit);
      expect((await ledger.state()).messages.has(envelope.message_id)).toBe(true);
    } finally {
      ledger.close();
    }
  });

  it("lets a writer of this process wait its turn on the clone behind another for as long as that one takes, and waits for another process's lock only so long", async () => {
    const served = await makeServedLedger(join(dir, 'turns'));
    const server = await startGitHttp(served.root);
    https.push(server);
    const url = server.url(served.name);
    const mine = await makeWriter(join(dir, 'turns'), 'mine', served, url);
    const key = parsePrivateKey(readFileSync(served.keys.coo, 'utf8'));
    const append = (remote: RemoteLedger, summary: string) => remote.append({ files: messageFiles(dispatchEnvelope({}, new Date())), key, summary, now: new Date() });
    const lockWaitMs = 20;
    const ledger = Ledger.open(mine.gitdir);
    const handles = [ledger];
    const other = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore' });
    try {
      // A runner's pass and its heartbeat share one handle; a handle on the same clone through another path is on the same clone.
      const remote = new RemoteLedger(ledger, { remote: url, lockWaitMs });
      const alias = join(dir, 'turns', 'alias.git');
      symlinkSync(mine.gitdir, alias);
      const aliased = Ledger.open(alias);
      handles.push(aliased);
      const beside = new RemoteLedger(aliased, { remote: url, lockWaitMs });
      await remote.sync();
      await beside.sync();
      let entered: () => void = () => undefined;
      const inside = new Promise<void>((resolve) => (entered = resolve));
      let open: () => void = () => undefined;
      const gate = new Promise<void>((resolve) => (open = resolve));
      const long = remote.write(async (handle) => {
        entered();
        await gate;
        return handle.append({ files: messageFiles(dispatchEnvelope({}, new Date())), key, summary: 'long', now: new Date() });
      });
      await inside;
      const heartbeat = append(remote, 'heartbeat');
      const next = append(beside, 'next');
      // The long write holds the clone many times longer than a waiter for another process's lock waits.
      await new Promise((resolve) => setTimeout(resolve, 10 * lockWaitMs));
      open();
      const [first, second, third] = await Promise.all([long, heartbeat, next]);
      expect([first.commit, second.commit, third.commit].every((commit) => commit !== null)).toBe(true);
      expect(git(['--git-dir', served.gitdir, 'rev-list', '--parents', '-n', '1', third.commit!]).trim().split(' ')[1]).toBe(second.commit);
      expect(git(['--git-dir', served.gitdir, 'rev-list', '--parents', '-n', '1', second.commit!]).trim().split(' ')[1]).toBe(first.commit);
      expect(served.head()).toBe(third.commit);

      // Another process holds the clone's lock (a coo command on the same clone): a writer here waits lockWaitMs, then says so, and writes nothing.
      const lockPath = join(mine.gitdir, 'coo', 'publish.lock');
      writeFileSync(lockPath, JSON.stringify({ pid: other.pid, host: hostLabel(), nonce: 'another-process' }));
      const refused = await append(remote, 'refused').catch((caught: unknown) => caught);
      expect(isCooError(refused) && refused.code).toBe('LEDGER_LOCKED');
      expect(isCooError(refused) && refused.message).toContain(`by pid ${other.pid}`);
      expect(served.head()).toBe(third.commit);
      expect(ledger.head()).toBe(third.commit);
      // The refusal does not hold up this process's next writer; once that process is gone, its lock is.
      const afterExit = new Promise((resolve) => other.once('exit', resolve));
      other.kill();
      await afterExit;
      const landed = await append(remote, 'after');
      expect(served.head()).toBe(landed.commit);
    } finally {
      other.kill();
      for (const handle of handles) handle.close();
    }
  });

  it('refuses a write started on the same clone inside a write\'s own turn (INTERNAL) instead of waiting for itself, and the outer write lands', async () => {
    const served = await makeServedLedger(join(dir, 'reentry'));
    const server = await startGitHttp(served.root);
    https.push(server);
    const url = server.url(served.name);
    const mine = await makeWriter(join(dir, 'reentry'), 'mine', served, url);
    const key = parsePrivateKey(readFileSync(served.keys.coo, 'utf8'));
    const ledger = Ledger.open(mine.gitdir);
    const alias = join(dir, 'reentry', 'alias.git');
    symlinkSync(mine.gitdir, alias);
    const aliased = Ledger.open(alias);
    try {
      const remote = new RemoteLedger(ledger, { remote: url });
      const beside = new RemoteLedger(aliased, { remote: url });
      const inner: unknown[] = [];
      const outer = await remote.write(async (handle) => {
        inner.push(await remote.sync().catch((caught: unknown) => caught));
        inner.push(await beside.append({ files: messageFiles(dispatchEnvelope({}, new Date())), key, summary: 'inner', now: new Date() }).catch((caught: unknown) => caught));
        return handle.append({ files: messageFiles(dispatchEnvelope({}, new Date())), key, summary: 'outer', now: new Date() });
      });
      expect(inner.map((caught) => isCooError(caught) && caught.code)).toEqual(['INTERNAL', 'INTERNAL']);
      expect(outer.commit).not.toBeNull();
      expect(served.head()).toBe(outer.commit);
      // Writers after the turn are not refused: the refusal is for the turn's own context only.
      const after = await beside.append({ files: messageFiles(dispatchEnvelope({}, new Date())), key, summary: 'after', now: new Date() });
      expect(served.head()).toBe(after.commit);
    } finally {
      ledger.close();
      aliased.close();
    }
  });

  it('syncs: fetches, verifies and moves the local main to the remote head, and refuses a remote it cannot reach with a coded error', async () => {
    const served = await makeServedLedger(join(dir, 'sync'));
    const server = await startGitHttp(served.root);
    https.push(server);
    const url = server.url(served.name);
    const mine = await makeWriter(join(dir, 'sync'), 'mine', served, url);
    const other = await makeWriter(join(dir, 'sync'), 'other', served, url);
    const key = parsePrivateKey(readFileSync(served.keys.coo, 'utf8'));
    const otherLedger = Ledger.open(other.gitdir);
    const written = await new RemoteLedger(otherLedger, { remote: url }).append({ files: messageFiles(dispatchEnvelope({}, new Date())), key, summary: 'other', now: new Date() });
    otherLedger.close();

    const ledger = Ledger.open(mine.gitdir);
    try {
      const remote = new RemoteLedger(ledger, { remote: url });
      expect(await remote.sync()).toEqual({ head: written.commit, arrived: 1 });
      expect(ledger.head()).toBe(written.commit);
      await server.close();
      const error = await remote.sync().catch((caught: unknown) => caught);
      expect(isCooError(error) && error.code).toBe('REMOTE_UNREACHABLE');
      expect(ledger.head()).toBe(written.commit);
    } finally {
      ledger.close();
    }
  });
});
