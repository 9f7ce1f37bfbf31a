import { afterAll, describe, expect, it } from 'vitest';
import { holdingRunner, makeCase, remoteReceipts, types, type Case } from '../helpers/remote-runners.js';
import { tally } from '../helpers/tally.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * Races of runners on separate machines through one remote that once paid a model twice: a runner
 * whose clock is an hour ahead took over a live claim, and two containers of one image (one host
 * name, node as pid 1) shared a runner id. Clocks are injected (the wall clock skewed, the monotonic
 * clock stepped), never slept on; every case counts its paid calls for the reliability summary.
 */
const dir = tempDir('coo-remote-races-');
const closers: Array<() => Promise<void> | void> = [];
const newCase = (): Promise<Case> => makeCase(dir, closers);

afterAll(async () => {
  for (const close of closers.reverse()) await close();
});

describe('runners through a remote, racing', () => {
  for (const [skew, hours] of [['an hour ahead', 1], ['an hour behind', -1]] as const) {
    it(`a runner whose clock is ${skew} never takes over a live claim whose holder heartbeats, and no attempt is paid twice`, async () => {
      const world = await newCase();
      const messageId = await world.consult();
      const holderMachine = await world.machine('holder');
      const skewedMachine = await world.machine('skewed');
      const { runner: holder, running, release } = await holdingRunner(world, holderMachine);
      let tick = 0;
      const skewed = skewedMachine.runner({ clock: () => new Date(Date.now() + hours * 3_600_000), monotonic: () => tick, leaseGraceSeconds: 1 });

      // Far past the lease (900 s) and the runtime budget (60 s) plus grace on the skewed runner's own
      // clock, while the holder, alive inside its paid call, sends a heartbeat between every two looks.
      for (let look = 0; look < 4; look += 1) {
        await skewed.runOnce();
        await holder.heartbeat();
        tick += 1_000_000;
      }
      await skewed.runOnce();

      expect(types(skewedMachine.events)).not.toContain('takeover');
      expect(types(skewedMachine.events)).not.toContain('oracle_started');
      expect(await remoteReceipts(world.served, messageId)).toEqual([]);
      // A runner an hour behind sees the holder's entries dated an hour ahead: said once each, never acted on.
      const flagged = skewedMachine.events.filter((event) => event.type === 'clock_skew');
      if (hours < 0) expect(flagged).toContainEqual(expect.objectContaining({ messageId, runner: holder.runnerId, aheadSeconds: expect.any(Number) }));
      else expect(flagged).toEqual([]);

      release();
      await running;
      expect(await remoteReceipts(world.served, messageId)).toEqual([{ attempt: 1, status: 'succeeded', blockers: [] }]);
      expect(world.model.requests).toHaveLength(1);
      tally('load', { test: `clock ${skew}`, paid_calls: world.model.requests.length, duplicate_calls: world.model.requests.length - 1, lost: 0, takeovers: skewedMachine.events.filter((event) => event.type === 'takeover').length });
    });
  }

  it("two runners on hosts of the same name whose node is pid 1 (two containers) are two runners: the second never takes the first's live claim for its own", async () => {
    const world = await newCase();
    const messageId = await world.consult();
    const firstMachine = await world.machine('container-1');
    const secondMachine = await world.machine('container-2');
    // Both runners live in this one process: same host name, same pid, as two containers of one image.
    const { runner: first, running, release } = await holdingRunner(world, firstMachine);
    const second = secondMachine.runner();
    expect(second.runnerId).not.toBe(first.runnerId);

    await second.runOnce();
    await second.runOnce();

    expect(types(secondMachine.events)).not.toContain('takeover');
    expect(types(secondMachine.events)).not.toContain('oracle_started');
    expect(secondMachine.events).toContainEqual(expect.objectContaining({ type: 'skipped', messageId }));
    release();
    await running;
    expect(await remoteReceipts(world.served, messageId)).toEqual([{ attempt: 1, status: 'succeeded', blockers: [] }]);
    expect(world.model.requests).toHaveLength(1);
    tally('load', { test: 'two containers, one host name and pid', paid_calls: world.model.requests.length, duplicate_calls: world.model.requests.length - 1, lost: 0, takeovers: secondMachine.events.filter((event) => event.type === 'takeover').length });
  });
});
