import { createServer, type Server, type Socket } from 'node:net';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { Ledger } from '../../src/ledger/ledger.js';
import { RemoteLedger } from '../../src/remote/publish.js';
import { cooAsync } from '../helpers/cli.js';
import { codeOfAsync } from '../helpers/codes.js';
import { makeCase, types, type Case } from '../helpers/remote-runners.js';
import { makeServedLedger, removeHook } from '../helpers/remote-ledger.js';
import { git, tempDir } from '../helpers/tmp.js';

/**
 * The remote's main, by its exact name and within a time limit: a branch that merely ends in
 * refs/heads/main is never taken for it, a remote whose main is gone is a finding rather than a
 * network failure, and a remote that accepts a connection and never answers ends every git command
 * (clone included) at its limit, which the error names.
 */
const dir = tempDir('coo-remote-refs-');
const closers: Array<() => Promise<void> | void> = [];
const newCase = (): Promise<Case> => makeCase(dir, closers);

afterAll(async () => {
  for (const close of closers.reverse()) await close();
});

/** A listener on 127.0.0.1 that accepts every connection and never says a word. */
async function silentListener(): Promise<{ port: number; close: () => Promise<void> }> {
  const sockets = new Set<Socket>();
  const server: Server = createServer((socket) => {
    sockets.add(socket);
    socket.on('error', () => undefined);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  return {
    port,
    close: () => {
      for (const socket of sockets) socket.destroy();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

describe("the remote's main, by its exact name", () => {
  it('a collaborator\'s branch a/refs/heads/main on a hookless remote never hides main from a runner that looks for new work', async () => {
    const world = await newCase();
    const first = await world.consult();
    removeHook(world.served);
    // The decoy sorts before refs/heads/main and points at an older commit.
    git(['--git-dir', world.served.gitdir, 'update-ref', 'refs/heads/a/refs/heads/main', `${world.served.head()}~1`]);
    const machine = await world.machine('runner');
    expect(await machine.remote.remoteHead()).toBe(world.served.head());
    const second = await world.consult();
    expect(second).not.toBe(first);
    expect(await machine.remote.remoteHead()).toBe(world.served.head());
    await machine.runner().runOnce();
    expect(types(machine.events).filter((type) => type === 'receipt')).toHaveLength(2);
  });

  it('a remote whose main was deleted is REMOTE_MAIN_MISSING for a writer and a runner, never unreachable, and a branch named refs/heads/main is not fetched in its place', async () => {
    const world = await newCase();
    await world.consult();
    const machine = await world.machine('runner');
    removeHook(world.served);
    git(['--git-dir', world.served.gitdir, 'update-ref', 'refs/heads/refs/heads/main', `${world.served.head()}~1`]);
    git(['--git-dir', world.served.gitdir, 'symbolic-ref', 'HEAD', 'refs/heads/refs/heads/main']);
    git(['--git-dir', world.served.gitdir, 'update-ref', '-d', 'refs/heads/main']);

    expect(await codeOfAsync(() => machine.remote.sync())).toBe('REMOTE_MAIN_MISSING');
    expect(await machine.remote.remoteHead()).toBe('');
    await expect(machine.runner().runOnce()).rejects.toMatchObject({ code: 'REMOTE_MAIN_MISSING' });
    expect(types(machine.events)).not.toContain('cut_off');
    expect(types(machine.events)).not.toContain('claimed');
    expect(git(['--git-dir', machine.gitdir, 'rev-parse', 'refs/remotes/origin/main']).trim()).not.toBe(git(['--git-dir', world.served.gitdir, 'rev-parse', 'refs/heads/refs/heads/main']).trim());
    expect(world.model.requests).toHaveLength(0);

    const cloned = await cooAsync(['clone', world.url, join(dir, 'no-main.git'), '--trust-root', world.served.ceoKeyId]);
    expect(cloned.status).toBe(3);
    expect(cloned.stderr).toMatch(/^coo: REMOTE_MAIN_MISSING: /);
    expect(existsSync(join(dir, 'no-main.git'))).toBe(false);
  });
});

describe('a remote that accepts the connection and never answers', () => {
  for (const scheme of ['http', 'git'] as const) {
    it(`ends coo clone over ${scheme}:// at its time limit, and says which limit ran out`, async () => {
      const listener = await silentListener();
      try {
        const target = join(dir, `hang-${scheme}.git`);
        const result = await cooAsync(['clone', `${scheme}://127.0.0.1:${listener.port}/ledger.git`, target, '--trust-root', `SHA256:${'A'.repeat(43)}`, '--timeout', '2']);
        expect(result.status).toBe(1);
        expect(result.stderr).toMatch(/^coo: REMOTE_UNREACHABLE: cannot clone .*: git clone did not finish within 2 s \(--timeout\)/);
        expect(existsSync(target)).toBe(false);
      } finally {
        await listener.close();
      }
    }, 60_000);
  }

  it('ends coo clone of fd::3 at its time limit', async () => {
    const result = await cooAsync(['clone', 'fd::3', join(dir, 'hang-fd.git'), '--trust-root', `SHA256:${'A'.repeat(43)}`, '--timeout', '2']);
    expect(result.status).not.toBe(0);
    expect(result.stderr).toMatch(/^coo: [A-Z_]+: /);
  }, 60_000);

  it('ends a fetch and a publish through a clone whose remote went silent at the time limit, as unreachable, naming the limit', async () => {
    const served = await makeServedLedger(join(dir, 'silent'));
    const gitdir = join(dir, 'silent', 'clone.git');
    const cloned = await cooAsync(['clone', served.gitdir, gitdir, '--trust-root', served.ceoKeyId]);
    expect(cloned.status, cloned.stderr).toBe(0);
    const listener = await silentListener();
    const url = `http://127.0.0.1:${listener.port}/ledger.git`;
    git(['--git-dir', gitdir, 'config', 'remote.origin.url', url]);
    const ledger = Ledger.open(gitdir);
    try {
      const remote = new RemoteLedger(ledger, { remote: url, timeoutMs: 1500, limitName: 'a 1.5 s test limit' });
      await expect(remote.sync()).rejects.toMatchObject({ code: 'REMOTE_UNREACHABLE', message: expect.stringMatching(/git ls-remote did not finish within 1\.5 s \(a 1\.5 s test limit\)/) });
      await expect(remote.write(async () => 'nothing')).rejects.toMatchObject({ code: 'REMOTE_UNREACHABLE', message: expect.stringMatching(/did not finish within 1\.5 s/) });
      expect(await remote.remoteHead()).toBeNull();
    } finally {
      ledger.close();
      await listener.close();
    }
  }, 60_000);
});
