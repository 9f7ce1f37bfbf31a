import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { holdingRunner, makeCase, remoteReceipts, types, type Case } from '../helpers/remote-runners.js';
import { git, tempDir } from '../helpers/tmp.js';

/**
 * A careless operator reaches into a runner's clone while it runs: the clone's origin is made to
 * name another copy of the same ledger (a backup or a mirror, which takes pushes and shares the
 * history the clone verified). A runner works through the remote it was started with and no other:
 * otherwise it claims and pays on a copy no other runner reads, while the runners of the remote
 * claim and pay for the same message again.
 */

const dir = tempDir('coo-attack-machines-redteam-30-');
const run = promisify(execFile);
const closers: Array<() => Promise<void> | void> = [];
afterAll(async () => {
  for (const close of closers.reverse()) await close();
});

/** A bare copy of the served ledger, made with stock git as a backup is: the same history, no hook. */
async function copyOf(world: Case, name: string): Promise<string> {
  const copy = join(world.dir, name);
  await run('git', ['clone', '-q', '--bare', world.served.gitdir, copy]);
  return copy;
}

// Each case serves a ledger through git http-backend and clones it twice: on a loaded two-core machine one takes up to a minute.
describe("a runner's clone whose origin is changed while it runs", { timeout: 240_000 }, () => {
  /**
   * A runner that started and checked its clone's origin, with nothing queued yet; a consult queued;
   * then `change` points the origin at a copy of the ledger. The runner's next pass refuses it
   * (REMOTE_UNVERIFIED, `said`) before it claims, the copy keeps the remote's head, and a runner of the
   * remote pays for the consult once.
   */
  async function refusedAfterStart(name: string, copyName: string, change: (gitdir: string, copy: string, world: Case) => void, said: RegExp): Promise<void> {
    const world = await makeCase(dir, closers);
    const machine = await world.machine(name);
    const runner = machine.runner();
    await runner.runOnce();
    const messageId = await world.consult();
    const copy = await copyOf(world, copyName);
    change(machine.gitdir, copy, world);

    await expect(runner.runOnce()).rejects.toMatchObject({ code: 'REMOTE_UNVERIFIED', message: expect.stringMatching(said) });
    expect(types(machine.events)).not.toContain('claimed');
    expect(git(['--git-dir', copy, 'rev-parse', 'refs/heads/main']).trim()).toBe(world.served.head());

    const other = await world.machine('other');
    await other.runner().runOnce();
    expect(await remoteReceipts(world.served, messageId)).toEqual([{ attempt: 1, status: 'succeeded', blockers: [] }]);
    expect(world.model.requests).toHaveLength(1);
  }

  it("origin set to a copy of the ledger after the runner started: the runner refuses it (REMOTE_UNVERIFIED, naming both), claims nothing there, and the consult is paid once, by a runner of the remote", async () => {
    await refusedAfterStart('moved', 'backup.git', (gitdir, copy) => git(['--git-dir', gitdir, 'remote', 'set-url', 'origin', copy]), /the origin of \S+ now fetches from \S*backup\.git and pushes to \S*backup\.git, not only \S+ it was started with/);
  });

  it('a push URL added to the origin after the runner started, naming a copy: the runner refuses it before it claims, and the consult is paid once', async () => {
    await refusedAfterStart('pushes-elsewhere', 'mirror.git', (gitdir, copy) => git(['--git-dir', gitdir, 'remote', 'set-url', '--push', 'origin', copy]), /pushes to .*mirror\.git/);
  });

  it("a URL rewrite added to the clone's config after the runner started (url.COPY.insteadOf naming the remote): the runner refuses it before it claims, and the consult is paid once", async () => {
    await refusedAfterStart('rewritten', 'rewrite.git', (gitdir, copy, world) => git(['--git-dir', gitdir, 'config', `url.${copy}.insteadOf`, world.url]), /now fetches from \S*rewrite\.git and pushes to \S*rewrite\.git/);
  });

  it('origin set to a copy while a paid call runs: the receipt is refused there and kept, nothing lands on the copy, and once origin is set back it lands on the remote, paid once', async () => {
    const world = await makeCase(dir, closers);
    const messageId = await world.consult();
    const machine = await world.machine('mid-call');
    const held = await holdingRunner(world, machine);
    const claimed = world.served.head();
    const copy = await copyOf(world, 'mid-call.git');
    git(['--git-dir', machine.gitdir, 'remote', 'set-url', 'origin', copy]);
    held.release();
    await expect(held.running).rejects.toMatchObject({ code: 'REMOTE_UNVERIFIED' });
    expect(types(machine.events)).toContain('result_kept');
    expect(git(['--git-dir', copy, 'rev-parse', 'refs/heads/main']).trim()).toBe(claimed);
    expect(world.served.head()).toBe(claimed);

    // The operator sets the origin back, as the error says, and the runner's next pass publishes what it kept.
    git(['--git-dir', machine.gitdir, 'remote', 'set-url', 'origin', world.url]);
    await held.runner.runOnce();
    expect(await remoteReceipts(world.served, messageId)).toEqual([{ attempt: 1, status: 'succeeded', blockers: [] }]);
    expect(world.model.requests).toHaveLength(1);
  });

  it('a clone whose origin names a copy first and the remote second, given that remote: a start-up mistake (USAGE) before anything is claimed', async () => {
    const world = await makeCase(dir, closers);
    const machine = await world.machine('two-urls');
    const messageId = await world.consult();
    const copy = await copyOf(world, 'first.git');
    // git fetches from an origin's first URL and pushes to every one of them.
    git(['--git-dir', machine.gitdir, 'config', '--replace-all', 'remote.origin.url', copy]);
    git(['--git-dir', machine.gitdir, 'config', '--add', 'remote.origin.url', world.url]);

    await expect(machine.runner().runOnce()).rejects.toMatchObject({ code: 'USAGE', message: expect.stringMatching(/first\.git/) });
    expect(types(machine.events)).not.toContain('claimed');
    expect(await remoteReceipts(world.served, messageId)).toEqual([]);
    expect(world.model.requests).toHaveLength(0);
  });

  it('a clone left as coo clone made it: each pass works through the remote, and the consult is paid once (a guard)', async () => {
    const world = await makeCase(dir, closers);
    const machine = await world.machine('untouched');
    const runner = machine.runner();
    await runner.runOnce();
    const messageId = await world.consult();
    await runner.runOnce();
    await runner.runOnce();
    expect(await remoteReceipts(world.served, messageId)).toEqual([{ attempt: 1, status: 'succeeded', blockers: [] }]);
    expect(world.model.requests).toHaveLength(1);
  });
});
