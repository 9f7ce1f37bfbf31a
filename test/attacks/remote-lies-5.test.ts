import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { holdingRunner, makeCase, remoteReceipts, types, type Case } from '../helpers/remote-runners.js';
import { git, tempDir } from '../helpers/tmp.js';

/**
 * A remote that lies without a hook to stop it (a forge), round 5: what a runner has seen of it
 * (its own claims among it) is kept where a clone made again from that remote cannot take it away.
 */

const dir = tempDir('coo-attack-remote-lies-5-');
const closers: Array<() => Promise<void> | void> = [];

afterAll(async () => {
  for (const close of closers.reverse()) await close();
});

const newCase = (): Promise<Case> => makeCase(dir, closers);

// Each case serves a ledger through git http-backend and clones it two or three times: on a loaded two-core machine one takes up to a minute.
describe('a remote that withholds a claim a runner is paying for, and a clone made again from it', { timeout: 180_000 }, () => {
  it("the runner on the new clone with the same state folder refuses the ledger as not holding the head its claim landed on: nothing is claimed or paid again", async () => {
    const world = await newCase();
    const messageId = await world.consult();
    const queued = world.served.head();
    const first = await world.machine('first');
    // The runner's claim landed and was confirmed; its call is paid and its answer held (a machine that goes down mid-call).
    const held = await holdingRunner(world, first);
    expect(types(first.events)).toContain('claimed');
    expect(existsSync(join(first.stateDir, 'ledger-head.json'))).toBe(true);
    expect(world.model.requests).toHaveLength(1);

    // The remote withholds the claim (main back at the queued message), and the operator clones it again for the same runner.
    git(['--git-dir', world.served.gitdir, 'update-ref', 'refs/heads/main', queued]);
    const again = await world.machine('again');
    await expect(again.runner({ stateDir: first.stateDir }).runOnce()).rejects.toMatchObject({
      code: 'HISTORY_FORK',
      message: expect.stringMatching(/does not hold [0-9a-f]{40} \(Ledger-Seq \d+\), which this runner saw before \(its own claims among what it saw\).*nothing was claimed/),
    });
    expect(types(again.events)).not.toContain('claimed');
    expect(world.model.requests).toHaveLength(1);
    expect(git(['--git-dir', world.served.gitdir, 'rev-parse', 'refs/heads/main']).trim()).toBe(queued);

    // The first clone still holds the claim: its runner, its answer released, refuses the remote as rolled back and keeps what it paid for.
    held.release();
    await expect(held.running).rejects.toMatchObject({ code: 'REMOTE_UNVERIFIED', message: expect.stringMatching(/rolled back/) });
    expect(await remoteReceipts(world.served, messageId)).toEqual([]);
    expect(world.model.requests).toHaveLength(1);
  });
});
