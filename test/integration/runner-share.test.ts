import { afterAll, describe, expect, it } from 'vitest';
import { assignWork } from '../../src/runner/assignment.js';
import { heldTransport, makeCase, remoteReceipts, type Case } from '../helpers/remote-runners.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * Runners that share one remote's queue (runner/runner.ts, QueueSharing): each takes what the
 * assignment gives it, in turn, and leaves the rest to its runner for the hand-off time, measured
 * on its own monotonic clock; a runner that lets its message pass is left out until it shows progress.
 */
const dir = tempDir('coo-runner-share-');
const closers: Array<() => Promise<void> | void> = [];
afterAll(async () => {
  for (const close of closers.reverse()) await close();
});

const share = { handoffMs: 10_000, staggerMs: 4_000 };

describe('runners sharing a remote queue', () => {
  it('take their own messages in turn, leave the others for the hand-off, then take them and leave the silent runner out until it beats again', async () => {
    const world: Case = await makeCase(dir, closers);
    const a = await world.machine('runner-a');
    const b = await world.machine('runner-b');
    let tick = 0;
    const first = await world.consult();
    const second = await world.consult();
    const mine = a.runner({ share, monotonic: () => tick });
    // The assignment is recomputed as the queue drains: once its own message is done, a runner that
    // scores higher for the other one is given it. The other runner is one that keeps its message
    // both while the two are queued and once it stands alone (runner ids are random: a few tries).
    const pairFor = (silentId: string): { own: string; theirs: string; ownTurn: number } | null => {
      const matched = assignWork([first, second], [mine.runnerId, silentId]);
      const own = [...matched.entries()].find(([, runner]) => runner === mine.runnerId)![0];
      const theirs = own === first ? second : first;
      return assignWork([theirs], [mine.runnerId, silentId]).get(theirs) === silentId ? { own, theirs, ownTurn: [...matched.keys()].indexOf(own) } : null;
    };
    let silent = b.runner({ share });
    for (let tries = 0; tries < 64 && pairFor(silent.runnerId) === null; tries += 1) {
      silent.close();
      silent = b.runner({ share });
    }
    const { own, theirs, ownTurn } = pairFor(silent.runnerId)!;
    await mine.heartbeat();
    await silent.heartbeat();

    // At first sight: its own message if it comes first, and nothing of the other runner's.
    const firstPass = await mine.runOnce();
    expect(firstPass.receipts).toBe(ownTurn === 0 ? 1 : 0);
    expect(await remoteReceipts(world.served, theirs)).toEqual([]);
    // Its own message once its turn has come, still nothing of the other's; it says when to look again.
    tick = share.staggerMs;
    await mine.runOnce();
    expect((await remoteReceipts(world.served, own)).map((receipt) => receipt.status)).toEqual(['succeeded']);
    const waiting = await mine.runOnce();
    expect(await remoteReceipts(world.served, theirs)).toEqual([]);
    expect(waiting.waiting.length).toBeGreaterThan(0);
    // The other runner said nothing for the hand-off time: the message is taken, once.
    tick = share.handoffMs;
    expect((await mine.runOnce()).receipts).toBe(1);
    expect((await remoteReceipts(world.served, theirs)).map((receipt) => receipt.status)).toEqual(['succeeded']);
    // The silent runner is left out: a new message is taken at once, whoever the assignment would name.
    const third = await world.consult();
    expect((await mine.runOnce()).receipts).toBe(1);
    expect((await remoteReceipts(world.served, third)).map((receipt) => receipt.status)).toEqual(['succeeded']);
    // Once it beats again it is back in the assignment: a message given to it waits for it again.
    await silent.heartbeat();
    let given: string | null = null;
    let taken = 0;
    for (let tries = 0; tries < 40 && given === null; tries += 1) {
      const next = await world.consult();
      if (assignWork([next], [mine.runnerId, silent.runnerId]).get(next) === silent.runnerId) given = next;
      else taken += (await mine.runOnce()).receipts;
    }
    expect(given).not.toBeNull();
    expect((await mine.runOnce()).receipts).toBe(0);
    expect(await remoteReceipts(world.served, given!)).toEqual([]);
    // One paid call for each message taken, none for the one left.
    expect(world.model.requests).toHaveLength(3 + taken);
  });

  it('claim one at a time: a runner whose place moves up as a claim before it lands waits its turn again from there, not from when it first saw its message', async () => {
    const world: Case = await makeCase(dir, closers);
    const [a, b, c] = [await world.machine('runner-a'), await world.machine('runner-b'), await world.machine('runner-c')];
    let tick = 0;
    const queued = [await world.consult(), await world.consult(), await world.consult()];
    const mine = a.runner({ share, monotonic: () => tick });
    // The first message goes to a runner whose paid call is held, the second to one that stays
    // silent, and stays its once the first runner and this one are idle again, the third to this
    // runner (runner ids are random: some tries). The first runner's clock stands still, so the
    // hand-off of the silent runner's message never comes for it however long the test takes.
    const slow = heldTransport(world, b);
    let first = b.runner({ share, transport: slow.transport, monotonic: () => 0 });
    let second = c.runner({ share });
    const fits = (): boolean => {
      const matched = assignWork(queued, [mine.runnerId, first.runnerId, second.runnerId]);
      const after = assignWork([queued[1]!], [mine.runnerId, first.runnerId, second.runnerId]);
      return matched.get(queued[0]!) === first.runnerId && matched.get(queued[1]!) === second.runnerId && matched.get(queued[2]!) === mine.runnerId && after.get(queued[1]!) === second.runnerId;
    };
    for (let tries = 0; tries < 256 && !fits(); tries += 1) {
      first.close();
      second.close();
      first = b.runner({ share, transport: slow.transport, monotonic: () => 0 });
      second = c.runner({ share });
    }
    expect(fits()).toBe(true);
    for (const runner of [mine, first, second]) await runner.heartbeat();

    // Third in turn: nothing at first sight.
    expect((await mine.runOnce()).receipts).toBe(0);
    // The first runner claims its message and is inside its paid call.
    const running = first.runOnce();
    await slow.paid;
    // One stagger after first sight this runner's message is second: it waits one stagger from
    // when it saw its place move, for the second runner's claim, rather than pushing beside it.
    tick = share.staggerMs;
    expect((await mine.runOnce()).receipts).toBe(0);
    expect(await remoteReceipts(world.served, queued[2]!)).toEqual([]);
    expect(world.model.requests).toHaveLength(1);
    // The second runner said nothing for that stagger: this runner's turn has come (the hand-off of
    // the second runner's message has not).
    tick = 2 * share.staggerMs;
    expect((await mine.runOnce()).receipts).toBe(1);
    expect((await remoteReceipts(world.served, queued[2]!)).map((receipt) => receipt.status)).toEqual(['succeeded']);
    expect(await remoteReceipts(world.served, queued[1]!)).toEqual([]);
    slow.release();
    await running;
    expect((await remoteReceipts(world.served, queued[0]!)).map((receipt) => receipt.status)).toEqual(['succeeded']);
    expect(world.model.requests).toHaveLength(2);
  });
});
