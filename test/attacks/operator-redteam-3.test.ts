import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { errorClassOf } from '../../src/errors.js';
import { watchRemote } from '../../src/runner/watch.js';
import { coo } from '../helpers/cli.js';
import { makeServedLedger, type ServedLedger } from '../helpers/remote-ledger.js';
import { makeCase, remoteReceipts } from '../helpers/remote-runners.js';
import { git, tempDir } from '../helpers/tmp.js';

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

/** Puts a commit holding `mib` MiB of random bytes on the served main, past its hook: a remote that sends that much for main. */
function growServed(served: ServedLedger, mib: number): void {
  const blob = spawnSync('git', ['--git-dir', served.gitdir, 'hash-object', '-w', '--stdin'], { input: randomBytes(mib * 1024 * 1024) }).stdout.toString('utf8').trim();
  const tree = git(['--git-dir', served.gitdir, 'mktree'], { input: `100644 blob ${blob}\tnoise.bin\n` }).trim();
  git(['--git-dir', served.gitdir, 'update-ref', 'refs/heads/main', git(['--git-dir', served.gitdir, 'commit-tree', tree, '-p', 'main', '-m', 'noise']).trim()]);
}

describe('coo clone and coo watch --remote take --max-fetch (MiB): the bound of one fetch, 1024 MiB by default, can be raised', () => {
  it('coo clone --max-fetch 1 stops a remote that sends 3 MiB and says to raise --max-fetch; --max-fetch 8 fetches it (and the validator, not the bound, refuses it); a small ledger clones within 1 MiB', async () => {
    const place = join(dir, 'max-fetch-clone');
    const served = await makeServedLedger(place);
    const small = coo(['clone', served.gitdir, join(place, 'small.git'), '--trust-root', served.ceoKeyId, '--max-fetch', '1']);
    expect(small.status).toBe(0);
    growServed(served, 3);
    const bounded = coo(['clone', served.gitdir, join(place, 'bounded.git'), '--trust-root', served.ceoKeyId, '--max-fetch', '1']);
    expect(bounded.status).toBe(3);
    expect(bounded.stderr).toMatch(/^coo: REMOTE_UNVERIFIED: .*received more than 1 MiB, the most one fetch takes; .*nothing was cloned; a ledger that large is cloned with a higher --max-fetch \(MiB\)\n$/);
    const raised = coo(['clone', served.gitdir, join(place, 'raised.git'), '--trust-root', served.ceoKeyId, '--max-fetch', '8']);
    expect(raised.status).toBe(3);
    expect(raised.stderr).not.toMatch(/one fetch takes/);
    expect(raised.stderr).toMatch(/does not verify/);
    expect(readdirSync(place).filter((name) => name.includes('bounded') || name.includes('raised'))).toEqual([]);
  });

  it('coo watch --remote --max-fetch 1 fetches within 1 MiB at start: a remote that sends 3 MiB is stopped at it, nothing claimed', async () => {
    const place = join(dir, 'max-fetch-watch');
    const served = await makeServedLedger(place);
    const clone = join(place, 'clone.git');
    expect(coo(['clone', served.gitdir, clone, '--trust-root', served.ceoKeyId]).status).toBe(0);
    growServed(served, 3);
    const args = ['watch', '--ledger', clone, '--remote', served.gitdir, '--key', served.keys.coo, '--repo', served.target, '--state-dir', join(place, 'state'), '--isolation', 'none', '--once'];
    const bounded = coo([...args, '--max-fetch', '1']);
    expect(bounded.status).toBe(3);
    expect(bounded.stderr).toMatch(/REMOTE_UNVERIFIED: .*received more than 1 MiB, the most one fetch takes; .*higher --max-fetch/);
    const unbounded = coo(args);
    expect(unbounded.stderr).not.toMatch(/one fetch takes/);
  });

  it('refuses a --max-fetch of 0, below 0, a fraction, not a number, past 1 TiB, or without --remote (USAGE, exit 2, nothing cloned)', () => {
    for (const value of ['0', '-1', '1.5', 'abc', '', '1e3', '1048577']) {
      const target = join(dir, 'never.git');
      const result = coo(['clone', join(dir, 'nowhere.git'), target, '--trust-root', 'SHA256:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA', '--max-fetch', value]);
      expect({ value, status: result.status, stderr: result.stderr }).toEqual({ value, status: 2, stderr: `coo: USAGE: --max-fetch takes a whole number of MiB from 1 to 1048576 (default 1024), got ${JSON.stringify(value)}\n` });
      expect(existsSync(target)).toBe(false);
    }
    const watch = coo(['watch', '--ledger', join(dir, 'nowhere.git'), '--key', join(dir, 'none.key'), '--repo', dir, '--max-fetch', '8']);
    expect({ status: watch.status, stderr: watch.stderr }).toEqual({ status: 2, stderr: 'coo: USAGE: --max-fetch goes with --remote\n' });
  });

  it('--help of coo clone and coo watch says what --max-fetch bounds, in MiB, and its default', () => {
    for (const verb of ['clone', 'watch']) {
      const help = coo([verb, '--help']).stdout.replace(/\s+/g, ' ');
      expect(help).toMatch(/--max-fetch <MiB> .*the most one fetch of the remote's main may bring, in MiB \(default 1024\)/);
    }
  });
});
