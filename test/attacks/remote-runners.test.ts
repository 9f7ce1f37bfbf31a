import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { makeCase, remoteReceipts, types, type Case } from '../helpers/remote-runners.js';
import { git, tempDir } from '../helpers/tmp.js';

/**
 * Runners on separate machines sharing a remote that lies (a hookless remote, a forge) or an
 * operator who reaches into a runner's clone with stock git: nothing they do makes a runner pay
 * twice for one message or act on a history it did not verify.
 */

const dir = tempDir('coo-attack-remote-runners-');
const run = promisify(execFile);
const closers: Array<() => Promise<void> | void> = [];

afterAll(async () => {
  for (const close of closers.reverse()) await close();
});

const newCase = (): Promise<Case> => makeCase(dir, closers);

describe('runners over a lying remote', () => {
  it('a remote rolled back to before a receipt the runner saw, after a stock git fetch moved origin/main there: refused as a rollback, never as commits to drop, and never paid again', async () => {
    const world = await newCase();
    const messageId = await world.consult();
    const queued = world.served.head();
    const machine = await world.machine('runner');
    await machine.runner().runOnce();
    expect(await remoteReceipts(world.served, messageId)).toEqual([{ attempt: 1, status: 'succeeded', blockers: [] }]);
    const seen = machine.ledger.head();

    // The remote withholds the claim and the receipt; the operator fetches into the clone with stock git.
    git(['--git-dir', world.served.gitdir, 'update-ref', 'refs/heads/main', queued]);
    await run('git', ['--git-dir', machine.gitdir, 'fetch', '-q', 'origin']);

    await expect(machine.runner().runOnce()).rejects.toMatchObject({ code: 'REMOTE_UNVERIFIED', message: expect.stringMatching(/rolled back/) });
    expect(machine.ledger.head()).toBe(seen);
    // The operator then moves the clone's main back to what the remote serves: still a rollback, still nothing paid.
    git(['--git-dir', machine.gitdir, 'update-ref', 'refs/heads/main', 'refs/remotes/origin/main']);
    await expect(machine.runner().runOnce()).rejects.toMatchObject({ code: 'REMOTE_UNVERIFIED', message: expect.stringMatching(/rolled back/) });
    expect(world.model.requests).toHaveLength(1);
    expect(types(machine.events).filter((type) => type === 'claimed')).toHaveLength(1);
  });
});
