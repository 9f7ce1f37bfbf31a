import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { existsSync, readdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadPrivateKey } from '../../src/cli/common.js';
import { CooError } from '../../src/errors.js';
import { formatPrivateKey, generatePrivateKey } from '../../src/crypto/keys.js';
import { attemptIdOf } from '../../src/authority/runnable.js';
import { folderOf } from '../../src/authority/state.js';
import { claimPath } from '../../src/ledger/layout.js';
import { appendTrustVersion } from '../../src/ledger/trust-update.js';
import { type RunnerRemote } from '../../src/runner/runner.js';
import { toYaml } from '../../src/schema/strict-yaml.js';
import { sessionSlugFor } from '../../src/util/ids.js';
import { isoSeconds } from '../../src/util/time.js';
import { coo, cooAsync, json } from '../helpers/cli.js';
import { removeHook } from '../helpers/remote-ledger.js';
import { awayOncePaid, holdingRunner, makeCase, remoteReceipts, types, type Case } from '../helpers/remote-runners.js';
import { stockCommit } from '../helpers/stock.js';
import { tempDir } from '../helpers/tmp.js';

const dir = tempDir('coo-runner-remote-');
const run = promisify(execFile);
const closers: Array<() => Promise<void> | void> = [];

afterAll(async () => {
  for (const close of closers.reverse()) await close();
});

const newCase = (): Promise<Case> => makeCase(dir, closers);

describe('runners through a remote', () => {
  it('a runner behind on fetch tries to claim: it is refused by CAS and skips, and never calls the model', async () => {
    const world = await newCase();
    const messageId = await world.consult();
    const first = await world.machine('runner-1');
    const second = await world.machine('runner-2');
    const firstRunner = first.runner();
    let builds = 0;
    // The second runner's publisher: the first runner claims (and finishes) the attempt after the
    // second fetched and before it pushed, so its claim, built on the head it fetched, is refused by
    // the remote's compare-and-swap; rebuilt on the new head, the validator refuses it.
    const behind: RunnerRemote = {
      url: second.remote.url,
      sync: () => second.remote.sync(),
      append: (options) =>
        second.remote.write(async (ledger) => {
          builds += 1;
          if (builds === 1) await firstRunner.runOnce();
          return ledger.append(options);
        }),
    };

    const summary = await second.runner({ remote: behind }).runOnce();

    expect(summary.receipts).toBe(0);
    expect(builds).toBe(2);
    expect(second.events).toContainEqual({ type: 'skipped', messageId, reason: 'attempt 1 was claimed by another runner' });
    expect(types(second.events)).not.toContain('oracle_started');
    expect(world.model.requests).toHaveLength(1);
    expect(await remoteReceipts(world.served, messageId)).toEqual([{ attempt: 1, status: 'succeeded', blockers: [] }]);
  });

  it('the remote goes away between a paid call and its receipt, then comes back: the receipt lands exactly once', async () => {
    const world = await newCase();
    const messageId = await world.consult();
    const machine = await world.machine('runner');
    // The call is paid; the remote goes away before the receipt is published.
    const { away, onEvent } = awayOncePaid(world, machine);

    await machine.runner({ onEvent }).runOnce();

    expect(types(machine.events)).toEqual(expect.arrayContaining(['claimed', 'oracle_ended', 'journaled', 'cut_off']));
    expect(types(machine.events)).not.toContain('receipt');
    expect(readdirSync(join(machine.stateDir, 'journal'))).toHaveLength(1);
    // Cut off, a pass starts nothing, and says so.
    const cutOff = machine.events.length;
    const waiting = machine.runner({ onEvent });
    await waiting.runOnce();
    expect(types(machine.events.slice(cutOff))).toEqual(['cut_off']);
    renameSync(away, world.served.gitdir);
    expect(await remoteReceipts(world.served, messageId)).toEqual([]);

    // A restarted runner (the journal is on disk) publishes it when the remote is back.
    const restarted = machine.runner({ onEvent });
    await restarted.runOnce();
    await restarted.runOnce();
    // The runner that was cut off says it is back, and finds nothing left to publish.
    await waiting.runOnce();

    expect(machine.events.filter((event) => event.type === 'receipt')).toEqual([{ type: 'receipt', messageId, attempt: 1, status: 'succeeded', blockers: [], retryAt: null }]);
    expect(types(machine.events)).toContain('reconnected');
    expect(readdirSync(join(machine.stateDir, 'journal'))).toEqual([]);
    expect(await remoteReceipts(world.served, messageId)).toEqual([{ attempt: 1, status: 'succeeded', blockers: [] }]);
    expect(world.model.requests).toHaveLength(1);
    expect(coo(['verify', '--ledger', world.served.gitdir, '--no-checkpoint']).status).toBe(0);
  });

  it('a receipt that lost every push to other writers waits in the journal, and the same pass publishes it rather than record its own attempt as interrupted', async () => {
    const world = await newCase();
    const messageId = await world.consult();
    const machine = await world.machine('runner');
    let refusals = 0;
    // Other writers beat this receipt to the remote on every try, once.
    const remote: RunnerRemote = {
      url: machine.remote.url,
      sync: () => machine.remote.sync(),
      append: (options) => {
        if (options.summary.startsWith('receipt ') && refusals === 0) {
          refusals += 1;
          return Promise.reject(new CooError('REMOTE_CONFLICT', `${world.url} moved under 8 tries in a row`));
        }
        return machine.remote.append(options);
      },
    };

    await machine.runner({ remote }).runOnce();

    expect(refusals).toBe(1);
    expect(types(machine.events)).toEqual(expect.arrayContaining(['claimed', 'oracle_ended', 'journaled', 'receipt']));
    expect(machine.events.filter((event) => event.type === 'receipt')).toEqual([{ type: 'receipt', messageId, attempt: 1, status: 'succeeded', blockers: [], retryAt: null }]);
    expect(readdirSync(join(machine.stateDir, 'journal'))).toEqual([]);
    expect(await remoteReceipts(world.served, messageId)).toEqual([{ attempt: 1, status: 'succeeded', blockers: [] }]);
    expect(world.model.requests).toHaveLength(1);
  });

  it('a receipt that meets the clone held by another process past the lock\'s wait waits in the journal, not kept as refused, and the same pass publishes it', async () => {
    const world = await newCase();
    const messageId = await world.consult();
    const machine = await world.machine('runner');
    let locked = 0;
    // A coo command on the same clone holds its lock past the wait, once, as the receipt goes out.
    const remote: RunnerRemote = {
      url: machine.remote.url,
      sync: () => machine.remote.sync(),
      append: (options) => {
        if (options.summary.startsWith('receipt ') && locked === 0) {
          locked += 1;
          return Promise.reject(new CooError('LEDGER_LOCKED', `${machine.remote.url}'s clone is locked by pid 1 on this host; nothing was written`));
        }
        return machine.remote.append(options);
      },
    };

    await machine.runner({ remote }).runOnce();

    expect(locked).toBe(1);
    expect(types(machine.events)).toEqual(expect.arrayContaining(['claimed', 'oracle_ended', 'journaled', 'receipt']));
    expect(types(machine.events)).not.toContain('result_kept');
    expect(machine.events.filter((event) => event.type === 'receipt')).toEqual([{ type: 'receipt', messageId, attempt: 1, status: 'succeeded', blockers: [], retryAt: null }]);
    expect(readdirSync(join(machine.stateDir, 'journal'))).toEqual([]);
    expect(await remoteReceipts(world.served, messageId)).toEqual([{ attempt: 1, status: 'succeeded', blockers: [] }]);
    expect(world.model.requests).toHaveLength(1);
  });

  it('a forged commit pushed to a hookless remote: every runner refuses to act, and coo watch --remote exits 3', async () => {
    const world = await newCase();
    const messageId = await world.consult();
    const machines = [await world.machine('runner-1'), await world.machine('runner-2')];
    removeHook(world.served);
    const intruder = join(world.dir, 'intruder.key');
    writeFileSync(intruder, formatPrivateKey(generatePrivateKey('intruder')), { mode: 0o600 });
    const work = join(world.dir, 'forger');
    // Stock git over the in-process http server: run without blocking this process.
    await run('git', ['clone', '-q', world.url, work]);
    stockCommit(work, { 'notes/forged.yaml': 'x: 1\n' }, { key: intruder, seq: world.served.seq() + 1 });
    await run('git', ['push', '-q', 'origin', 'main'], { cwd: work });

    for (const machine of machines) {
      await expect(machine.runner().runOnce()).rejects.toMatchObject({ code: 'REMOTE_UNVERIFIED' });
      expect(types(machine.events)).not.toContain('claimed');
    }
    const watched = await cooAsync(
      ['watch', '--once', '--json', '--remote', world.url, '--ledger', machines[0]!.gitdir, '--key', world.served.keys.coo, '--repo', world.served.target, '--state-dir', join(world.dir, 'cli-state'), '--oracle-base-url', `${world.model.url}/v1`],
      { env: { OPENAI_API_KEY: 'sk-test-key' } },
    );
    expect(watched.status).toBe(3);
    expect(json<{ ok: boolean; error: { code: string } }>(watched).error.code).toBe('REMOTE_UNVERIFIED');
    expect(world.model.requests).toHaveLength(0);
    expect(await remoteReceipts(world.served, messageId)).toEqual([]);
  });

  it('takes over a claim only once it was quiet for its lease and its runtime budget plus grace passed since it was first seen, both on its own clock, records it as interrupted, and the original runner keeps its result as late', async () => {
    const world = await newCase();
    const messageId = await world.consult();
    const first = await world.machine('runner-1');
    const second = await world.machine('runner-2');
    // Both wall clocks stand still: the retry the takeover schedules (2 s on) never comes due in this test, however slow the machine.
    const frozen = new Date();
    const { runner: original, running, release } = await holdingRunner(world, first, { clock: () => frozen });
    // Policy: heartbeat TTL 900 s; the consult's runtime budget 60 s; grace 600 s. The taker's own monotonic clock:
    let tick = 0;
    const taker = second.runner({ monotonic: () => tick, clock: () => frozen, leaseGraceSeconds: 600 });

    await taker.runOnce();
    // The runtime budget and grace (660 s) have passed since the claim was first seen, the lease (900 s quiet) has not.
    tick = 661_000;
    await taker.runOnce();
    tick = 899_000;
    await taker.runOnce();
    expect(await remoteReceipts(world.served, messageId)).toEqual([]);
    expect(second.events.filter((event) => event.type === 'skipped')).toHaveLength(3);
    expect(second.events.at(-1)).toEqual({ type: 'skipped', messageId, reason: expect.stringMatching(new RegExp(`^attempt 1 is held by ${original.runnerId} for at least 1 s more: `)) });

    // Both have run out: the attempt is taken over, recorded as interrupted.
    tick = 901_000;
    await taker.runOnce();
    expect(types(second.events)).toContain('takeover');
    expect(await remoteReceipts(world.served, messageId)).toEqual([{ attempt: 1, status: 'failed', blockers: ['interrupted'] }]);

    // The original runner comes back with its answer: refused, kept as late, never applied.
    release();
    await running;
    expect(first.events.filter((event) => event.type === 'late_result')).toEqual([expect.objectContaining({ messageId, attempt: 1 })]);
    expect(types(first.events)).not.toContain('receipt');
    expect(existsSync(join(first.stateDir, 'late-results', `${attemptIdOf((await first.ledger.state()).messages.get(messageId)!, 1)}.json`))).toBe(true);
    expect(await remoteReceipts(world.served, messageId)).toEqual([{ attempt: 1, status: 'failed', blockers: ['interrupted'] }]);
    expect(world.model.requests).toHaveLength(1);
  });

  it('waits out a runtime budget longer than the lease before a takeover', async () => {
    const world = await newCase();
    const messageId = await world.consult();
    const coo = await world.machine('elsewhere');
    const record = (await coo.ledger.state()).messages.get(messageId)!;
    // A claim another machine made and then went silent (no heartbeat).
    const claimedAt = new Date();
    const doc = { schema_version: 'claim.v0', message_id: messageId, attempt_id: attemptIdOf(record, 1), attempt_number: 1, runner_id: 'run-gone', transport_session_id: sessionSlugFor(messageId, 1), claimed_at: isoSeconds(claimedAt) };
    await coo.remote.append({ files: [{ path: claimPath(folderOf(record), 1), bytes: Buffer.from(toYaml(doc)) }], key: loadPrivateKey(world.served.keys.coo), now: claimedAt, summary: `claim ${messageId} attempt 1` });
    let tick = 0;
    const machine = await world.machine('runner');
    // Its wall clock stands still: the retry the takeover schedules never comes due in this test.
    const taker = machine.runner({ monotonic: () => tick, clock: () => claimedAt, leaseGraceSeconds: 1000 });

    await taker.runOnce();
    // Quiet for longer than the lease (900 s), but the runtime budget and grace (1,060 s) have not passed.
    tick = 950_000;
    await taker.runOnce();
    expect(await remoteReceipts(world.served, messageId)).toEqual([]);
    expect(machine.events.at(-1)).toEqual({ type: 'skipped', messageId, reason: expect.stringMatching(/^attempt 1 is held by run-gone for at least 110 s more: /) });

    tick = 1_061_000;
    await taker.runOnce();
    expect(machine.events).toContainEqual(expect.objectContaining({ type: 'takeover', messageId, attempt: 1, runner: 'run-gone' }));
    expect(await remoteReceipts(world.served, messageId)).toEqual([{ attempt: 1, status: 'failed', blockers: ['interrupted'] }]);
    expect(world.model.requests).toHaveLength(0);
  });

  it('a COO key rotated by the CEO while a paid call is in flight: the refused receipt is kept and said, and a runner with the new key publishes it without paying again', async () => {
    const world = await newCase();
    const messageId = await world.consult();
    const machine = await world.machine('runner');
    const { running, release } = await holdingRunner(world, machine);

    // The CEO rotates the COO's key through the remote while the call is in flight.
    const ceoMachine = await world.machine('ceo');
    const rotated = generatePrivateKey('coo.hermes');
    const registry = (await ceoMachine.ledger.state()).registry!.doc;
    await ceoMachine.remote.write((ledger) => appendTrustVersion(ledger, { role: 'registry', document: { ...registry, version: undefined }, actorKeys: new Map([['coo.hermes', rotated.publicKey]]) }, loadPrivateKey(world.served.keys.ceo), new Date()));

    release();
    // The paid result is kept, then the runner stops: its key is no longer the active COO's.
    await expect(running).rejects.toMatchObject({ code: 'RUNNER_CONFIG', message: expect.stringMatching(/^the runner's key \(SHA256:\S+\) is not the active COO's key: it is a key of coo\.hermes retired/) });
    const kept = machine.events.filter((event) => event.type === 'result_kept');
    expect(kept).toEqual([expect.objectContaining({ messageId, attempt: 1, code: expect.stringMatching(/^SIGNER_|NOT_ACTIVE_COO/) })]);
    const keptPath = (kept[0] as { kept: string }).kept;
    expect(existsSync(keptPath)).toBe(true);
    expect(JSON.parse(readFileSync(keptPath, 'utf8'))).toMatchObject({ messageId, attempt: 1, refused: { code: expect.any(String) } });
    expect(machine.events).toContainEqual(expect.objectContaining({ type: 'error', messageId }));
    expect(await remoteReceipts(world.served, messageId)).toEqual([]);

    // The operator restarts the runner with the new key on the same machine: once the old claim's
    // lease has run out on its clock, it recovers the answer already paid for from the sandbox.
    let tick = 0;
    const after = machine.runner({ key: rotated, monotonic: () => tick, leaseGraceSeconds: 1 });
    await after.runOnce();
    tick = 1_000_000;
    await after.runOnce();
    expect(await remoteReceipts(world.served, messageId)).toEqual([{ attempt: 1, status: 'succeeded', blockers: [] }]);
    expect(world.model.requests).toHaveLength(1);
  });
});
