import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { errorClassOf } from '../../src/errors.js';
import { watchRemote } from '../../src/runner/watch.js';
import { makeCase, remoteReceipts } from '../helpers/remote-runners.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * A careless operator, round 3: clocks, start-up and the folders a runner makes. Each mistake is
 * found before anything is claimed or paid for, and said as one coded line that says what to do.
 */

const dir = tempDir('operator-redteam-3-');
const HOUR = 3600_000;

describe('a runner whose clock runs half an hour ahead of the remote it works through', () => {
  const closers: Array<() => Promise<void> | void> = [];
  afterAll(async () => {
    for (const close of closers.reverse()) await close();
  });

  it('stops at its first refused claim (CLOCK_AHEAD, exit 2) saying its clock is ahead of the remote and to set it right, having claimed and paid nothing', async () => {
    const world = await makeCase(join(dir, 'ahead'), closers);
    const messageId = await world.consult();
    const fast = await world.machine('fast');
    const error = await fast.runner({ clock: () => new Date(Date.now() + HOUR / 2) }).runOnce().then(
      () => null,
      (failure: unknown) => failure,
    );
    expect(error).toMatchObject({ code: 'CLOCK_AHEAD', message: expect.stringMatching(/refused the write: CLOCK_SKEW .*claimed_at .*this machine's clock runs ahead of the remote's .*set the wrong clock right \(NTP\)/) });
    expect(errorClassOf('CLOCK_AHEAD')).toBe('usage');
    expect(fast.events.filter((event) => event.type === 'claimed')).toEqual([]);
    expect(await remoteReceipts(world.served, messageId)).toEqual([]);
    expect(world.model.requests).toHaveLength(0);
    const right = await world.machine('right');
    await right.runner().runOnce();
    expect(await remoteReceipts(world.served, messageId)).toEqual([{ attempt: 1, status: 'succeeded', blockers: [] }]);
  });

  it('a watch through the remote ends with CLOCK_AHEAD, from its heartbeat or its pass, never retrying each poll', async () => {
    const world = await makeCase(join(dir, 'ahead-watch'), closers);
    const messageId = await world.consult();
    const fast = await world.machine('fast');
    const runner = fast.runner({ clock: () => new Date(Date.now() + HOUR / 2) });
    const errors: unknown[] = [];
    const ended = await watchRemote(runner, { remote: fast.remote, pollSeconds: 0.05, maxPollSeconds: 0.1, heartbeatSeconds: 3600, onError: (error) => errors.push(error) }).then(
      () => null,
      (failure: unknown) => failure,
    );
    expect(ended).toMatchObject({ code: 'CLOCK_AHEAD' });
    expect(errors).toEqual([]);
    expect(await remoteReceipts(world.served, messageId)).toEqual([]);
    expect(world.model.requests).toHaveLength(0);
  });
});
