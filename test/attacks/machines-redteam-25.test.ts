import { execFile } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { claimPath, messageFolder, receiptPath } from '../../src/ledger/layout.js';
import type { Ledger, NewFile } from '../../src/ledger/ledger.js';
import type { PrivateKey } from '../../src/crypto/keys.js';
import { approve } from '../../src/dispatch/approve.js';
import { loadPrivateKey } from '../../src/cli/common.js';
import { holdStateFolder } from '../../src/runner/state-folder.js';
import type { CooMessage } from '../../src/schema/message.js';
import { toYaml } from '../../src/schema/strict-yaml.js';
import { attemptIdFor } from '../../src/util/ids.js';
import { isoSeconds } from '../../src/util/time.js';
import { attack, firstOr, useKit, type Kit } from '../helpers/attack-kit.js';
import { dispatchEnvelope, eaReceiptDoc, messageFiles } from '../helpers/ledger.js';
import { cliEnded, holdingRunner, makeCase, remoteReceipts, types, type Case, type Machine } from '../helpers/remote-runners.js';
import { removeHook } from '../helpers/remote-ledger.js';
import { stockCommit } from '../helpers/stock.js';
import { git, tempDir } from '../helpers/tmp.js';

/**
 * A remote without the ledger's hook (a forge) that lies, and an operator who starts a runner
 * carelessly, against the runners and the stop-time rule (rules/attempt.ts checkStopTime): a
 * runner never builds on a head that does not verify, never pays twice for an attempt, never loses
 * a receipt of a call it paid for, and a start-up mistake exits 2 having claimed nothing.
 */

const dir = tempDir('coo-attack-machines-redteam-25-');
const run = promisify(execFile);
const closers: Array<() => Promise<void> | void> = [];
afterAll(async () => {
  for (const close of closers.reverse()) await close();
});

const MINUTE = 60_000;
const minutes = (base: number, count: number): Date => new Date(base + count * MINUTE);

/** The claim of attempt `attempt` of `message`, dated `at`, and its receipt (a failed one by default; override any field), keyed by ledger path. */
function attemptEntries(message: CooMessage, attempt: number, at: Date, receipt: Record<string, unknown>): Record<string, string> {
  const folder = messageFolder(message.message_id, message.created_at);
  const claim = { schema_version: 'claim.v0', message_id: message.message_id, attempt_id: attemptIdFor(message.message_id, attempt, 'ea'), attempt_number: attempt, runner_id: 'run-forger', transport_session_id: 'forger', claimed_at: isoSeconds(at) };
  return { [claimPath(folder, attempt)]: toYaml(claim), [receiptPath(folder, attempt)]: toYaml(eaReceiptDoc(message.message_id, attempt, { created_at: isoSeconds(at), ...receipt })) };
}

/** A receipt that ends its attempt unrun with `blocker`. */
const unrun = (blocker: 'expired' | 'deadline_passed') => ({ status: 'blocked', blockers: [{ code: blocker, detail: 'not started in time' }], commands_run: [], inner_exit_codes: [], tests_run: [] });

/**
 * A dispatch written `age` minutes ago (it expires an hour after, its deadline two: at the default 90
 * it expired 30 minutes ago and its deadline is 30 minutes ahead), its first attempt failed a minute
 * later, the CEO approved a retry a minute after that (`approve`, on the ledger it is given), and
 * the entries of its second attempt, claimed now, ended unrun with `blocker`.
 */
function retryStopped(blocker: 'expired' | 'deadline_passed', age = 90): { message: CooMessage; first: Record<string, string>; approve: (ledger: Ledger, key: PrivateKey) => Promise<unknown>; second: Record<string, string> } {
  const now = Date.now();
  const message = dispatchEnvelope({}, minutes(now, -age));
  const first = attemptEntries(message, 1, minutes(now, 1 - age), {});
  const second = attemptEntries(message, 2, new Date(now), unrun(blocker));
  return { message, first, second, approve: (ledger, key) => approve({ ledger, key, now: minutes(now, 2 - age), reason: 'one more try', messageId: message.message_id }) };
}

const files = (entries: Record<string, string>): NewFile[] => Object.entries(entries).map(([path, text]) => ({ path, bytes: Buffer.from(text) }));

const getKit = useKit(dir);
let kit: Kit;
beforeAll(() => {
  kit = getKit();
});

/** A retry of a dispatch written `age` minutes ago, claimed now and ended `blocker` unrun, on the kit's ledger: the entries of its last commit, not yet written. */
async function retryOnKit(blocker: 'expired' | 'deadline_passed', age?: number): Promise<Record<string, string>> {
  const { message, first, approve: approveRetry, second } = retryStopped(blocker, age);
  expect(await kit.append(messageFiles(message), kit.keys.coo.key)).toBe('accepted');
  expect(await kit.append(files(first), kit.keys.coo.key)).toBe('accepted');
  await approveRetry(kit.world.ledger, kit.keys.ceo.key);
  return second;
}

describe('a receipt that ends a retry unrun as expired: expires_at bounds the first start alone, and a retry stays live until the deadline', () => {
  attack('an expired receipt of attempt 2, claimed after the expiry and before the deadline (a COO that ends live work unrun, in a ledger without a hook)', 'library', 'ATTEMPT_INVALID', async () => kit.append(files(await retryOnKit('expired')), kit.keys.coo.key));

  attack('coo verify of such a receipt written behind the hook', 'verify', 'ATTEMPT_INVALID', async () => {
    const second = await retryOnKit('expired');
    let codes: string[] = ['unset'];
    await kit.bypass(second, { key: kit.keys.coo.file }, () => {
      codes = kit.verifyCodes();
    });
    return firstOr(codes, 'ATTEMPT_INVALID');
  });

  it('takes a deadline_passed receipt of a retry claimed past the deadline, as every runner writes it, and refuses one claimed before it', async () => {
    // A dispatch written 130 minutes ago: its deadline passed 10 minutes before the retry's claim.
    expect(await kit.append(files(await retryOnKit('deadline_passed', 130)), kit.keys.coo.key)).toBe('accepted');
    expect(await kit.append(files(await retryOnKit('deadline_passed')), kit.keys.coo.key)).toBe('ATTEMPT_INVALID');
  });
});

/** A hookless case: the served ledger without its pre-receive hook, as on a forge. */
async function hookless(): Promise<Case> {
  const world = await makeCase(dir, closers);
  removeHook(world.served);
  return world;
}

let forgeries = 0;

/** Commits `entries` on the remote's main with stock git, signed with the COO's key (entries and commit), and pushes: a hookless remote takes it. */
async function pushSigned(world: Case, entries: Record<string, string>): Promise<string> {
  forgeries += 1;
  const work = join(world.dir, `forger-${forgeries}`);
  await run('git', ['clone', '-q', world.url, work]);
  stockCommit(work, entries, { key: world.served.keys.coo, seq: world.served.seq() + 1, message: 'by hand' });
  await run('git', ['push', '-q', 'origin', 'main'], { cwd: work });
  return world.served.head();
}

/** `coo watch --once` through the remote, on `machine`'s clone; bounded (damage.ts startBounded kills it at its limit). */
function watchOnce(world: Case, machine: Pick<Machine, 'gitdir' | 'stateDir'>, extra: { key?: string; remote?: string; stateDir?: string } = {}) {
  return cliEnded(
    ['watch', '--once', '--json', '--remote', extra.remote ?? world.url, '--ledger', machine.gitdir, '--key', extra.key ?? world.served.keys.coo, '--repo', world.served.target, '--state-dir', extra.stateDir ?? machine.stateDir, '--oracle-base-url', `${world.model.url}/v1`, '--isolation', 'none'],
    {},
  );
}

// Each case serves a ledger through git http-backend and clones it two or three times: on a loaded two-core machine one takes up to a minute.
describe('a hookless remote that serves an invalid head: the runner refuses it with a clear code, claims nothing and pays nothing', { timeout: 240_000 }, () => {
  it('a pushed claim of a live dispatch and its expired receipt in one commit: the runner and coo watch --once refuse the remote (REMOTE_UNVERIFIED, first ATTEMPT_INVALID), exit 3, and nothing is built on it', async () => {
    const world = await hookless();
    await world.consult();
    const runner = await world.machine('runner');
    const watcher = await world.machine('watcher');
    const message = dispatchEnvelope({}, new Date());
    await pushSigned(world, Object.fromEntries(messageFiles(message).map((file) => [file.path, file.bytes.toString('utf8')])));
    const forged = await pushSigned(world, attemptEntries(message, 1, new Date(), unrun('expired')));

    const refused = (await runner.runner().runOnce().catch((error: unknown) => error)) as { code: string; message: string };
    expect(refused).toMatchObject({ code: 'REMOTE_UNVERIFIED', message: expect.stringMatching(/first ATTEMPT_INVALID .*says expired but attempt 1 was claimed at .*before the expires_at/) });
    expect(types(runner.events)).not.toContain('claimed');

    const watched = await watchOnce(world, watcher);
    expect(watched.status, watched.stderr).toBe(3);
    expect(watched.stderr).toMatch(/^coo: REMOTE_UNVERIFIED: what \S+ holds does not verify \(\d+ finding\(s\), first ATTEMPT_INVALID /m);
    expect(watched.stderr).not.toMatch(/^\s+at /m);
    expect(world.model.requests).toHaveLength(0);
    expect(world.served.head()).toBe(forged);
    expect(runner.ledger.head()).not.toBe(forged);
  });

  it('a pushed retry of a dispatch, claimed after its expiry and before its deadline, receipted expired: the runner refuses the remote and pays nothing', async () => {
    const world = await hookless();
    await world.consult();
    const runner = await world.machine('runner');
    const writer = await world.machine('writer');
    const { message, first, approve: approveRetry, second } = retryStopped('expired');
    const key = loadPrivateKey(world.served.keys.coo);
    // Everything before the last commit is valid, and is written through the remote as any writer writes it.
    await writer.remote.append({ files: messageFiles(message), key, now: new Date(), summary: `dispatch ${message.message_id}` });
    await writer.remote.append({ files: files(first), key, now: new Date(), summary: `attempt 1 of ${message.message_id}` });
    await writer.remote.write((ledger) => approveRetry(ledger, loadPrivateKey(world.served.keys.ceo)));
    const forged = await pushSigned(world, second);

    const refused = (await runner.runner().runOnce().catch((error: unknown) => error)) as { code: string; message: string };
    expect(refused).toMatchObject({ code: 'REMOTE_UNVERIFIED', message: expect.stringMatching(/first ATTEMPT_INVALID .*says expired but attempt 2 is a retry/) });
    expect(types(runner.events)).not.toContain('claimed');
    expect(world.model.requests).toHaveLength(0);
    expect(world.served.head()).toBe(forged);
  });
});

describe('a hookless remote that lies about its history while runners work', { timeout: 240_000 }, () => {
  it('forced back to the valid head before a claim while the claimant pays: no runner that saw the claim claims again, the paid result is kept, and it lands once the head is restored, paid once', async () => {
    const world = await hookless();
    const messageId = await world.consult();
    const queued = world.served.head();
    const first = await world.machine('first');
    const held = await holdingRunner(world, first);
    const claimed = world.served.head();
    expect(claimed).not.toBe(queued);
    const second = await world.machine('second');

    git(['--git-dir', world.served.gitdir, 'update-ref', 'refs/heads/main', queued]);
    await expect(second.runner().runOnce()).rejects.toMatchObject({ code: 'REMOTE_UNVERIFIED', message: expect.stringMatching(/rolled back/) });
    expect(types(second.events)).not.toContain('claimed');
    held.release();
    await expect(held.running).rejects.toMatchObject({ code: 'REMOTE_UNVERIFIED', message: expect.stringMatching(/rolled back/) });
    expect(types(first.events)).toContain('result_kept');
    expect(world.model.requests).toHaveLength(1);

    // The operator follows the advice: the head the clone verified is pushed back (a fast-forward).
    await run('git', ['--git-dir', first.gitdir, 'push', '-q', 'origin', `refs/coo/remote-verified:refs/heads/main`]);
    expect(world.served.head()).toBe(claimed);
    await held.runner.runOnce();
    await second.runner().runOnce();
    expect(await remoteReceipts(world.served, messageId)).toEqual([{ attempt: 1, status: 'succeeded', blockers: [] }]);
    expect(world.model.requests).toHaveLength(1);
  });

  it('extra refs under refs/ naming an unsigned claim of the queued message: a branch named refs/heads/main refuses every push to main, said as such (REMOTE_REJECTED), never as a remote that did not answer; once it is gone the runner pays once, and the refs it never reads change nothing', async () => {
    const world = await hookless();
    const messageId = await world.consult();
    const machine = await world.machine('runner');
    const record = (await machine.ledger.state()).messages.get(messageId)!;
    const work = join(world.dir, 'extra-refs');
    await run('git', ['clone', '-q', world.url, work]);
    const folder = messageFolder(messageId, record.createdAt);
    const claim = { schema_version: 'claim.v0', message_id: messageId, attempt_id: attemptIdFor(messageId, 1), attempt_number: 1, runner_id: 'run-extra', transport_session_id: 'extra', claimed_at: isoSeconds(new Date()) };
    stockCommit(work, { [claimPath(folder, 1)]: toYaml(claim) }, { key: null, seq: world.served.seq() + 1, sign: false });
    const forged = git(['-C', work, 'rev-parse', 'HEAD']).trim();
    for (const ref of ['refs/coo/remote-verified', 'refs/remotes/origin/main', 'refs/heads/refs/heads/main']) await run('git', ['push', '-q', 'origin', `HEAD:${ref}`], { cwd: work });
    const queued = world.served.head();
    expect(queued).not.toBe(forged);
    // The operator's stock fetch too: the clone's refspec brings main alone.
    await run('git', ['--git-dir', machine.gitdir, 'fetch', '-q', 'origin']);

    const runner = machine.runner();
    await runner.runOnce();
    expect(machine.events).toContainEqual(expect.objectContaining({ type: 'error', messageId, code: 'REMOTE_REJECTED', message: expect.stringMatching(/holds another ref that git takes for refs\/heads\/main beside its main .*dst refspec refs\/heads\/main matches more than one.*nothing was written/) }));
    expect(types(machine.events)).not.toContain('cut_off');
    expect(types(machine.events)).not.toContain('claimed');
    expect(world.served.head()).toBe(queued);
    expect(world.model.requests).toHaveLength(0);

    // The forge's owner deletes the branch, as the error says.
    git(['--git-dir', world.served.gitdir, 'update-ref', '-d', 'refs/heads/refs/heads/main']);
    await runner.runOnce();
    expect(await remoteReceipts(world.served, messageId)).toEqual([{ attempt: 1, status: 'succeeded', blockers: [] }]);
    expect(world.model.requests).toHaveLength(1);
    const verified = git(['--git-dir', machine.gitdir, 'rev-parse', 'refs/coo/remote-verified']).trim();
    expect(verified).toBe(world.served.head());
    expect(git(['--git-dir', world.served.gitdir, 'rev-parse', 'refs/coo/remote-verified']).trim()).toBe(forged);
  });

  it("a branch named refs/heads/main that appears while a paid call runs: the receipt is refused as such (REMOTE_REJECTED) and kept, and once the branch is gone it lands, paid once", async () => {
    const world = await hookless();
    const messageId = await world.consult();
    const machine = await world.machine('runner');
    const held = await holdingRunner(world, machine);
    const claimed = world.served.head();
    git(['--git-dir', world.served.gitdir, 'update-ref', 'refs/heads/refs/heads/main', claimed]);
    held.release();
    await held.running.catch(() => undefined);
    expect(machine.events).toContainEqual(expect.objectContaining({ code: 'REMOTE_REJECTED', message: expect.stringMatching(/holds another ref that git takes for refs\/heads\/main/) }));
    expect(types(machine.events)).toContain('result_kept');
    expect(types(machine.events)).not.toContain('cut_off');
    expect(world.served.head()).toBe(claimed);
    expect(world.model.requests).toHaveLength(1);

    git(['--git-dir', world.served.gitdir, 'update-ref', '-d', 'refs/heads/refs/heads/main']);
    await held.runner.runOnce();
    expect(await remoteReceipts(world.served, messageId)).toEqual([{ attempt: 1, status: 'succeeded', blockers: [] }]);
    expect(world.model.requests).toHaveLength(1);
  });

  it('a main that names a commit whose parent the remote does not have: no runner claims or pays, and the clone keeps the head it verified', async () => {
    const world = await hookless();
    await world.consult();
    const machine = await world.machine('runner');
    const before = machine.ledger.head();
    const head = world.served.head();
    const raw = git(['--git-dir', world.served.gitdir, 'cat-file', 'commit', head]);
    // A commit whose parent is an object the remote never had, written with stock git's plumbing (no check of the parent).
    const orphan = raw.replace(/^parent [0-9a-f]{40}$/m, `parent ${'d'.repeat(40)}`);
    const oid = git(['--git-dir', world.served.gitdir, 'hash-object', '-w', '-t', 'commit', '--literally', '--stdin'], { input: orphan }).trim();
    git(['--git-dir', world.served.gitdir, 'update-ref', 'refs/heads/main', oid]);

    const passed = await machine
      .runner()
      .runOnce()
      .then(
        () => 'passed',
        (error: { code?: string }) => error.code ?? 'uncoded',
      );
    // git cannot fetch that main: the runner is cut off (REMOTE_UNREACHABLE, naming what git said) and starts nothing.
    expect(passed).toBe('passed');
    expect(machine.events).toContainEqual(expect.objectContaining({ type: 'cut_off', detail: expect.stringMatching(/^cannot fetch from /) }));
    expect(types(machine.events)).not.toContain('claimed');
    expect(world.model.requests).toHaveLength(0);
    expect(machine.ledger.head()).toBe(before);
    expect(git(['--git-dir', machine.gitdir, 'rev-parse', 'refs/coo/remote-verified']).trim()).toBe(before);
  });
});

describe('a careless operator: each start-up mistake exits 2 and claims nothing', { timeout: 300_000 }, () => {
  let world: Case;
  let messageId: string;
  let queued: string;
  beforeAll(async () => {
    world = await hookless();
    messageId = await world.consult();
    queued = world.served.head();
  }, 240_000);

  async function nothingClaimed(): Promise<void> {
    expect(world.served.head()).toBe(queued);
    expect(await remoteReceipts(world.served, messageId)).toEqual([]);
    expect(world.model.requests).toHaveLength(0);
  }

  it("a key that is not the COO's (the CEO's): RUNNER_CONFIG, exit 2", async () => {
    const machine = await world.machine('ceo-key');
    const watched = await watchOnce(world, machine, { key: world.served.keys.ceo });
    expect(watched.status, watched.stderr).toBe(2);
    expect(watched.stderr).toMatch(/^coo: RUNNER_CONFIG: .* is not the active COO's key/m);
    await nothingClaimed();
  });

  it('a clone of a different ledger given with this remote: USAGE, exit 2, naming the origin', async () => {
    const other = await makeCase(dir, closers);
    const elsewhere = await other.machine('elsewhere');
    const watched = await watchOnce(world, elsewhere);
    expect(watched.status, watched.stderr).toBe(2);
    expect(watched.stderr).toMatch(/^coo: USAGE: --remote \S+ is not the origin of /m);
    expect(other.model.requests).toHaveLength(0);
    await nothingClaimed();
  });

  it('a clone no trust root was pinned for (stock git clone --bare): USAGE, exit 2', async () => {
    const gitdir = join(world.dir, 'stock-clone.git');
    await run('git', ['clone', '-q', '--bare', world.url, gitdir]);
    const watched = await watchOnce(world, { gitdir, stateDir: join(world.dir, 'stock-state') });
    expect(watched.status, watched.stderr).toBe(2);
    expect(watched.stderr).toMatch(/^coo: USAGE: .* made by git, not by coo clone, so its history was never verified from a trust root you pinned/m);
    await nothingClaimed();
  });

  it('a clone with a wrong trust root pinned: coo clone refuses it (exit 3) and leaves no ledger, so the runner on that path exits 2', async () => {
    const other = await makeCase(dir, closers);
    const gitdir = join(world.dir, 'wrong-root.git');
    const cloned = await cliEnded(['clone', world.url, gitdir, '--trust-root', other.served.ceoKeyId, '--json'], {});
    expect(cloned.status, cloned.stderr).toBe(3);
    const watched = await watchOnce(world, { gitdir, stateDir: join(world.dir, 'wrong-root-state') });
    expect(cloned.stderr).toMatch(/TRUST_ROOT_MISMATCH/);
    expect(watched.status, watched.stderr).toBe(2);
    expect(watched.stderr).toMatch(/^coo: LEDGER_NOT_FOUND: /m);
    await nothingClaimed();
  });

  it('a state folder another live runner on another clone of the remote holds: RUNNER_CONFIG, exit 2', async () => {
    const holder = await world.machine('holder');
    const careless = await world.machine('careless');
    mkdirSync(holder.stateDir, { recursive: true, mode: 0o700 });
    // This test process is the live runner that holds the folder, as coo watch --remote holds its own at start.
    const release = holdStateFolder(holder.stateDir, holder.gitdir, world.url);
    closers.push(release);
    const watched = await watchOnce(world, careless, { stateDir: holder.stateDir });
    expect(watched.status, watched.stderr).toBe(2);
    expect(watched.stderr).toMatch(/^coo: RUNNER_CONFIG: the state folder .* is in use by a runner of .* through .*a runner through a remote has its state folder to itself/m);
    await nothingClaimed();
  });

  it('an unreachable remote (nothing listens at its port) is no start-up mistake: the runner starts cut off, exit 0, and claims nothing', async () => {
    const machine = await world.machine('unreachable');
    const port = new URL(world.url).port;
    // The clone's origin is made to name a port nothing listens on (the operator's typo), and --remote names the same.
    const url = world.url.replace(`:${port}/`, ':9/');
    git(['--git-dir', machine.gitdir, 'remote', 'set-url', 'origin', url]);
    const watched = await watchOnce(world, machine, { remote: url });
    expect(watched.status, watched.stderr).toBe(0);
    expect(watched.stdout.split('\n').filter((line) => line !== '').map((line) => (JSON.parse(line) as { type: string }).type)).toContain('cut_off');
    await nothingClaimed();
  });
});
