import { execFile } from 'node:child_process';
import { existsSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { formatPrivateKey, generatePrivateKey } from '../../src/crypto/keys.js';
import { attemptIdOf } from '../../src/authority/runnable.js';
import { folderOf } from '../../src/authority/state.js';
import { claimPath, heartbeatPath } from '../../src/ledger/layout.js';
import { toYaml } from '../../src/schema/strict-yaml.js';
import { sessionSlugFor } from '../../src/util/ids.js';
import { isoSeconds } from '../../src/util/time.js';
import { loadPrivateKey } from '../../src/cli/common.js';
import { awayOncePaid, holdingRunner, makeCase, remoteReceipts, types, type Case } from '../helpers/remote-runners.js';
import { cooAsync, json } from '../helpers/cli.js';
import { consultArgs, makeWriter, removeHook } from '../helpers/remote-ledger.js';
import { stockCommit } from '../helpers/stock.js';
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

/** The remote's main moved to the history of another ledger (with one consult of its own); that ledger's case. */
async function pointMainAtAnotherLedger(world: Case): Promise<Case> {
  const other = await newCase();
  await other.consult();
  git(['--git-dir', world.served.gitdir, 'fetch', '-q', other.served.gitdir, 'main']);
  git(['--git-dir', world.served.gitdir, 'update-ref', 'refs/heads/main', other.served.head()]);
  return other;
}

// Each case serves a ledger through git http-backend and clones it two or three times: on a loaded two-core machine one takes up to a minute.
describe('runners over a lying remote', { timeout: 180_000 }, () => {
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
    const watcher = await world.machine('watcher');
    dropPushes(world);

    // coo watch --remote on another machine: its claim is dropped too, and it exits 3 before it pays.
    const watched = await cooAsync(
      ['watch', '--once', '--json', '--remote', world.url, '--ledger', watcher.gitdir, '--key', world.served.keys.coo, '--repo', world.served.target, '--state-dir', join(world.dir, 'cli-state'), '--oracle-base-url', `${world.model.url}/v1`],
      { env: { OPENAI_API_KEY: 'sk-test-key' } },
    );
    expect(watched.status).toBe(3);
    expect(world.model.requests).toHaveLength(0);
    // Met mid-pass, the lie stops the runner as it would at the start of a pass (coo watch exits 3).
    await expect(machine.runner().runOnce()).rejects.toMatchObject({ code: 'REMOTE_UNVERIFIED', message: expect.stringMatching(/rolled back/) });

    expect(world.model.requests).toHaveLength(0);
    expect(types(machine.events)).not.toContain('claimed');
    expect(await remoteReceipts(world.served, messageId)).toEqual([]);
    // The next pass refuses the remote outright.
    await expect(machine.runner().runOnce()).rejects.toMatchObject({ code: 'REMOTE_UNVERIFIED' });
    expect(world.model.requests).toHaveLength(0);
  });

  it('a remote that takes the claim push and then cannot be reached before the claim is looked for again: the runner pays once, as it would have, journals the receipt and publishes it when the remote is back', async () => {
    const world = await newCase();
    const messageId = await world.consult();
    const machine = await world.machine('runner');
    const away = `${world.served.gitdir}.away`;
    // Test fixture: the remote goes away as soon as it has taken a push (the claim).
    writeFileSync(join(world.served.gitdir, 'hooks', 'post-receive'), '#!/bin/sh\nmv "$(pwd)" "$(pwd).away"\n', { mode: 0o755 });
    const runner = machine.runner();
    await runner.runOnce();
    expect(types(machine.events)).toEqual(expect.arrayContaining(['claimed', 'journaled']));
    expect(world.model.requests).toHaveLength(1);
    renameSync(away, world.served.gitdir);
    rmSync(join(world.served.gitdir, 'hooks', 'post-receive'));

    await runner.runOnce();
    expect(await remoteReceipts(world.served, messageId)).toEqual([{ attempt: 1, status: 'succeeded', blockers: [] }]);
    expect(world.model.requests).toHaveLength(1);
  });

  it('a remote whose main now points at an unrelated ledger history: refused as another ledger, nothing claimed, nothing paid', async () => {
    const world = await newCase();
    const messageId = await world.consult();
    const machine = await world.machine('runner');
    await machine.remote.sync();
    const other = await pointMainAtAnotherLedger(world);

    await expect(machine.runner().runOnce()).rejects.toMatchObject({ code: 'REMOTE_UNVERIFIED', message: expect.stringMatching(/ serves another ledger: its main \([0-9a-f]{12}\) shares no first commit with the head this clone verified/) });
    expect(types(machine.events)).not.toContain('claimed');
    expect(world.model.requests).toHaveLength(0);
    expect(other.model.requests).toHaveLength(0);
    expect((await machine.ledger.state()).messages.has(messageId)).toBe(true);
  });

  it('coo mcp --run through a remote whose main now points at an unrelated history: the session ends with one coded line and exit 3, never a stack trace', async () => {
    const world = await newCase();
    await world.consult();
    const machine = await world.machine('runner');
    await machine.remote.sync();
    await pointMainAtAnotherLedger(world);

    const served = await cooAsync(
      ['mcp', '--run', '--remote', world.url, '--ledger', machine.gitdir, '--key', world.served.keys.coo, '--repo', world.served.target, '--state-dir', join(world.dir, 'mcp-rewritten-state'), '--oracle-base-url', `${world.model.url}/v1`],
      { env: { OPENAI_API_KEY: 'sk-test-key' } },
    );
    expect(served.status).toBe(3);
    expect(served.stderr).toMatch(/^coo: REMOTE_UNVERIFIED: .* serves another ledger/m);
    expect(served.stderr).not.toMatch(/^\s+at /m);
    expect(world.model.requests).toHaveLength(0);
  });

  it('runners whose wall clocks differ by minutes, either way: a live claim is never taken over and the call is paid once', async () => {
    const world = await newCase();
    const messageId = await world.consult();
    const first = await world.machine('runner-1');
    const second = await world.machine('runner-2');
    const third = await world.machine('runner-3');
    // The holder's clock runs 5 minutes ahead: its claim is dated in the others' future.
    const { running, release } = await holdingRunner(world, first, { clock: () => new Date(Date.now() + 5 * 60_000) });
    let tick = 0;
    const behind = second.runner({ monotonic: () => tick, clock: () => new Date(Date.now() - 10 * 60_000) });
    const ahead = third.runner({ monotonic: () => tick, clock: () => new Date(Date.now() + 30 * 60_000) });

    await behind.runOnce();
    await ahead.runOnce();
    // Past the runtime budget and grace (120 s) on their own clocks, well inside the lease (900 s).
    tick = 300_000;
    await behind.runOnce();
    await ahead.runOnce();

    for (const machine of [second, third]) {
      expect(types(machine.events)).not.toContain('takeover');
      expect(types(machine.events)).not.toContain('claimed');
      expect(machine.events.filter((event) => event.type === 'skipped')).toHaveLength(2);
    }
    expect(second.events).toContainEqual(expect.objectContaining({ type: 'clock_skew', messageId }));
    release();
    await running;
    expect(await remoteReceipts(world.served, messageId)).toEqual([{ attempt: 1, status: 'succeeded', blockers: [] }]);
    await behind.runOnce();
    await ahead.runOnce();
    expect(world.model.requests).toHaveLength(1);
  });

  it('a runner whose journal holds a receipt for an attempt another runner already closed: kept as late, never published, never paid again', async () => {
    const world = await newCase();
    const messageId = await world.consult();
    const first = await world.machine('runner-1');
    const second = await world.machine('runner-2');
    // The call is paid; the remote goes away before the receipt is published.
    const { away, onEvent } = awayOncePaid(world, first);
    // Both runners' wall clocks stand still, so the retry the take-over schedules never comes due here,
    // however slow the machine: the attempt that reconnects is the journaled one alone.
    const frozen = new Date();
    const cutOff = first.runner({ onEvent, clock: () => frozen });
    await cutOff.runOnce();
    expect(types(first.events)).toEqual(expect.arrayContaining(['claimed', 'journaled', 'cut_off']));
    renameSync(away, world.served.gitdir);

    // Another machine takes the quiet attempt over (its own clock, past the lease and the budget) and closes it.
    let tick = 0;
    const taker = second.runner({ monotonic: () => tick, clock: () => frozen });
    await taker.runOnce();
    tick = 1_000_000;
    await taker.runOnce();
    expect(await remoteReceipts(world.served, messageId)).toEqual([{ attempt: 1, status: 'failed', blockers: ['interrupted'] }]);

    // The first runner reconnects with the receipt in its journal.
    await cutOff.runOnce();

    expect(first.events.filter((event) => event.type === 'late_result')).toEqual([expect.objectContaining({ messageId, attempt: 1 })]);
    expect(types(first.events)).not.toContain('receipt');
    expect(readdirSync(join(first.stateDir, 'journal'))).toEqual([]);
    expect(existsSync(join(first.stateDir, 'late-results'))).toBe(true);
    expect(await remoteReceipts(world.served, messageId)).toEqual([{ attempt: 1, status: 'failed', blockers: ['interrupted'] }]);
    expect(world.model.requests).toHaveLength(1);
  });

  it('a heartbeat signed by a key the trust files do not allow, naming the holder of a live claim, pushed to a hookless remote: every runner refuses the remote, and nothing is paid twice', async () => {
    const world = await newCase();
    const messageId = await world.consult();
    const first = await world.machine('runner-1');
    const second = await world.machine('runner-2');
    const { runner: holder, running, release } = await holdingRunner(world, first);
    removeHook(world.served);
    const intruder = join(world.dir, 'intruder.key');
    writeFileSync(intruder, formatPrivateKey(generatePrivateKey('coo.hermes')), { mode: 0o600 });
    const work = join(world.dir, 'forger');
    await run('git', ['clone', '-q', world.url, work]);
    const seq = world.served.seq() + 1;
    const now = new Date();
    const doc = { schema_version: 'heartbeat.v0', runner_id: holder.runnerId, ledger_seq: seq, created_at: isoSeconds(now), expires_at: isoSeconds(new Date(now.getTime() + 600_000)) };
    stockCommit(work, { [heartbeatPath(doc.created_at, seq)]: toYaml(doc) }, { key: intruder, seq, message: `heartbeat from ${holder.runnerId}` });
    await run('git', ['push', '-q', 'origin', 'main'], { cwd: work });

    let tick = 0;
    const taker = second.runner({ monotonic: () => tick });
    const refused = (await taker.runOnce().catch((error: unknown) => error)) as { code: string; message: string };
    expect(refused).toMatchObject({ code: 'REMOTE_UNVERIFIED', message: expect.stringMatching(/first SIGNER_UNKNOWN/) });
    tick = 2_000_000;
    await expect(taker.runOnce()).rejects.toMatchObject({ code: 'REMOTE_UNVERIFIED' });
    expect(types(second.events)).not.toContain('takeover');
    // The holder's answer cannot land on that remote: it is kept, never lost, and the holder stops too.
    release();
    await expect(running).rejects.toMatchObject({ code: 'REMOTE_UNVERIFIED' });
    expect(types(first.events)).toContain('result_kept');
    expect(types(first.events)).not.toContain('receipt');
    expect(await remoteReceipts(world.served, messageId)).toEqual([]);
    expect(world.model.requests).toHaveLength(1);
  });

  it('a writer killed after the remote took its push and before its own main moved, then a remote that drops that write: the next write through the clone is refused as a rollback', async () => {
    const world = await newCase();
    const writer = await makeWriter(world.dir, 'killed', world.served, world.url);
    const before = world.served.head();

    // Killed at its second ref update: the first records what the remote took, the second would move its main.
    const killed = await cooAsync(consultArgs(writer, world.served), { env: { ...writer.env, COO_FAILPOINT: 'ref-update@2' } });
    expect(killed.status).toBeNull();
    expect(world.served.head()).not.toBe(before);
    expect(writer.head()).toBe(before);
    git(['--git-dir', world.served.gitdir, 'update-ref', 'refs/heads/main', before]);

    const again = await cooAsync(consultArgs(writer, world.served), { env: writer.env });
    expect(again.status).toBe(3);
    expect(json<{ error: { code: string; message: string } }>(again).error).toMatchObject({ code: 'REMOTE_UNVERIFIED', message: expect.stringMatching(/rolled back/) });
    expect(world.served.head()).toBe(before);
  });

  it('an unsigned commit on top of a valid head of a hookless remote, taking the queued message for itself: no runner acts on it or pays', async () => {
    const world = await newCase();
    const messageId = await world.consult();
    const machine = await world.machine('runner');
    removeHook(world.served);
    const work = join(world.dir, 'unsigned');
    await run('git', ['clone', '-q', world.url, work]);
    const record = (await machine.ledger.state()).messages.get(messageId)!;
    const claim = { schema_version: 'claim.v0', message_id: messageId, attempt_id: attemptIdOf(record, 1), attempt_number: 1, runner_id: 'run-unsigned', transport_session_id: sessionSlugFor(messageId, 1), claimed_at: isoSeconds(new Date()) };
    stockCommit(work, { [claimPath(folderOf(record), 1)]: toYaml(claim) }, { key: null, seq: world.served.seq() + 1, sign: false });
    await run('git', ['push', '-q', 'origin', 'main'], { cwd: work });

    const refused = (await machine.runner().runOnce().catch((error: unknown) => error)) as { code: string; message: string };
    expect(refused).toMatchObject({ code: 'REMOTE_UNVERIFIED', message: expect.stringMatching(/does not verify/) });
    expect(types(machine.events)).not.toContain('claimed');
    expect(world.model.requests).toHaveLength(0);
  });

  it('coo watch or coo mcp --run on a clone of a remote without --remote: a start-up mistake (exit 2) that claims nothing, never a runner paying on a stale copy while others work through the remote', async () => {
    const world = await newCase();
    const messageId = await world.consult();
    const machine = await world.machine('careless');
    const before = machine.ledger.head();

    const watched = await cooAsync(
      ['watch', '--once', '--json', '--ledger', machine.gitdir, '--key', world.served.keys.coo, '--repo', world.served.target, '--state-dir', join(world.dir, 'careless-state'), '--oracle-base-url', `${world.model.url}/v1`],
      { env: { OPENAI_API_KEY: 'sk-test-key' } },
    );

    expect(watched.status).toBe(2);
    expect(json<{ error: { code: string; message: string } }>(watched).error).toMatchObject({ code: 'USAGE', message: expect.stringMatching(/--remote/) });
    const served = await cooAsync(
      ['mcp', '--run', '--ledger', machine.gitdir, '--key', world.served.keys.coo, '--repo', world.served.target, '--state-dir', join(world.dir, 'careless-mcp-state'), '--oracle-base-url', `${world.model.url}/v1`],
      { env: { OPENAI_API_KEY: 'sk-test-key' } },
    );
    expect(served.status).toBe(2);
    expect(served.stderr).toMatch(/^coo: USAGE: .* is a clone of .*: coo mcp --run works through its remote/);
    expect(world.model.requests).toHaveLength(0);
    expect(machine.ledger.head()).toBe(before);
    expect(await remoteReceipts(world.served, messageId)).toEqual([]);
  });

  it('a remote whose main was deleted, after a stock git fetch moved origin/main of a clone to a rolled-back head: the advice restores the head the clone verified, never what git fetched', async () => {
    const world = await newCase();
    await world.consult();
    const machine = await world.machine('runner');
    await machine.runner().runOnce();
    const verified = machine.ledger.head()!;
    git(['--git-dir', world.served.gitdir, 'update-ref', 'refs/heads/main', `${verified}~1`]);
    await run('git', ['--git-dir', machine.gitdir, 'fetch', '-q', 'origin']);
    git(['--git-dir', world.served.gitdir, 'update-ref', '-d', 'refs/heads/main']);

    const refused = (await machine.remote.sync().catch((error: unknown) => error)) as { code: string; message: string };
    expect(refused.code).toBe('REMOTE_MAIN_MISSING');
    const ref = /git push ORIGIN (\S+):refs\/heads\/main/.exec(refused.message)?.[1];
    expect(ref).toBeDefined();
    expect(git(['--git-dir', machine.gitdir, 'rev-parse', ref!]).trim()).toBe(verified);
  });
  it("a consult a dispatch's agent asked, claimed by another runner, then a remote rolled back or with main deleted: the wait for its receipt ends at once with the remote's coded error, never at the consult's deadline", async () => {
    const world = await newCase();
    const messageId = await world.consult();
    const queued = world.served.head();
    const first = await world.machine('runner-1');
    const second = await world.machine('runner-2');
    const { running, release } = await holdingRunner(world, first);
    const asker = second.runner();
    await second.remote.sync();
    expect((await second.ledger.state()).messages.get(messageId)?.attempts).toHaveLength(1);
    // The white box: the wait a dispatch attempt's consult tool runs, with the consult lane it lends.
    const internals = asker as unknown as { runAsked(lane: unknown, id: string): Promise<void>; lanes: ReadonlyMap<string, unknown> };
    const ask = (): Promise<void> => internals.runAsked(internals.lanes.get('aa_consult'), messageId);
    const claimed = world.served.head();

    git(['--git-dir', world.served.gitdir, 'update-ref', 'refs/heads/main', queued]);
    await expect(ask()).rejects.toMatchObject({ code: 'REMOTE_UNVERIFIED', message: expect.stringMatching(/rolled back/) });
    git(['--git-dir', world.served.gitdir, 'update-ref', '-d', 'refs/heads/main']);
    await expect(ask()).rejects.toMatchObject({ code: 'REMOTE_MAIN_MISSING' });

    expect(types(second.events)).not.toContain('claimed');
    git(['--git-dir', world.served.gitdir, 'update-ref', 'refs/heads/main', claimed]);
    release();
    await running;
    expect(await remoteReceipts(world.served, messageId)).toEqual([{ attempt: 1, status: 'succeeded', blockers: [] }]);
    expect(world.model.requests).toHaveLength(1);
  }, 120_000);
  it("heartbeats signed with the one COO key naming a crashed runner's id, written by another runner: its claim's takeover waits while they come, and nothing is paid twice or lost", async () => {
    const world = await newCase();
    const messageId = await world.consult();
    const elsewhere = await world.machine('elsewhere');
    const key = loadPrivateKey(world.served.keys.coo);
    const record = (await elsewhere.ledger.state()).messages.get(messageId)!;
    const claimedAt = new Date();
    const doc = { schema_version: 'claim.v0', message_id: messageId, attempt_id: attemptIdOf(record, 1), attempt_number: 1, runner_id: 'run-gone', transport_session_id: sessionSlugFor(messageId, 1), claimed_at: isoSeconds(claimedAt) };
    await elsewhere.remote.append({ files: [{ path: claimPath(folderOf(record), 1), bytes: Buffer.from(toYaml(doc)) }], key, now: claimedAt, summary: `claim ${messageId} attempt 1` });
    // Another runner of the same COO (same key) beats in the crashed runner's name: the validator cannot tell.
    const beatFor = async (runner: string): Promise<void> => {
      const now = new Date();
      await elsewhere.remote.append({
        files: (state) => {
          const seq = state.seq + 1;
          const beat = { schema_version: 'heartbeat.v0', runner_id: runner, ledger_seq: seq, created_at: isoSeconds(now), expires_at: isoSeconds(new Date(now.getTime() + 600_000)) };
          return [{ path: heartbeatPath(beat.created_at, seq), bytes: Buffer.from(toYaml(beat)) }];
        },
        key,
        now,
        summary: `heartbeat from ${runner}`,
      });
    };
    let tick = 0;
    const machine = await world.machine('taker');
    // Its wall clock stands still: the retry a takeover schedules never comes due in this test.
    const taker = machine.runner({ monotonic: () => tick, clock: () => claimedAt, leaseGraceSeconds: 1 });
    await taker.runOnce();
    for (let look = 0; look < 3; look += 1) {
      await beatFor('run-gone');
      tick += 1_000_000;
      await taker.runOnce();
      expect(types(machine.events)).not.toContain('takeover');
    }
    expect(await remoteReceipts(world.served, messageId)).toEqual([]);
    // The heartbeats stop: past the lease and the runtime budget on the taker's own clock, the attempt is taken over, once.
    tick += 1_000_000;
    await taker.runOnce();
    expect(machine.events.filter((event) => event.type === 'takeover')).toEqual([expect.objectContaining({ messageId, attempt: 1, runner: 'run-gone' })]);
    expect(await remoteReceipts(world.served, messageId)).toEqual([{ attempt: 1, status: 'failed', blockers: ['interrupted'] }]);
    expect(world.model.requests).toHaveLength(0);
  });
});
