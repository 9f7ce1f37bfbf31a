import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
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

/** A remote that takes every push (git reports it landed) and then serves main as it was before it. */
function dropPushes(world: Case): void {
  writeFileSync(
    join(world.served.gitdir, 'hooks', 'post-receive'),
    `#!/bin/sh
# Test fixture: a lying remote that answers "ok" to a push, then moves main back.
while read old new ref; do git update-ref "$ref" "$old"; done
`,
    { mode: 0o755 },
  );
}

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

  it('a remote that takes the claim push and then serves main without it: the runner finds its claim gone before it pays, and never calls the model', async () => {
    const world = await newCase();
    const messageId = await world.consult();
    const machine = await world.machine('runner');
    dropPushes(world);

    await machine.runner().runOnce();

    expect(world.model.requests).toHaveLength(0);
    expect(types(machine.events)).not.toContain('claimed');
    expect(machine.events).toContainEqual(expect.objectContaining({ type: 'error', messageId, code: 'REMOTE_UNVERIFIED', message: expect.stringMatching(/rolled back/) }));
    expect(await remoteReceipts(world.served, messageId)).toEqual([]);
    // The next pass refuses the remote outright.
    await expect(machine.runner().runOnce()).rejects.toMatchObject({ code: 'REMOTE_UNVERIFIED' });
    expect(world.model.requests).toHaveLength(0);
  });
});
