import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifyLedger } from '../../src/audit/verify.js';
import type { CommitCheck } from '../../src/authority/commit-check.js';
import { checkStopTime } from '../../src/authority/rules/attempt.js';
import type { AttemptRecord, MessageRecord } from '../../src/authority/state.js';
import type { AaReceipt } from '../../src/schema/receipt.js';
import { loadPrivateKey } from '../../src/cli/common.js';
import { enqueueConsult } from '../../src/consult/enqueue.js';
import { claimPath, messageFolder, receiptPath } from '../../src/ledger/layout.js';
import { LIMITS } from '../../src/limits.js';
import type { CooMessage } from '../../src/schema/message.js';
import { toYaml } from '../../src/schema/strict-yaml.js';
import { isoSeconds } from '../../src/util/time.js';
import { attack, codeOf, firstOr, useKit, type Kit } from '../helpers/attack-kit.js';
import { dispatchEnvelope, eaReceiptDoc, messageFiles } from '../helpers/ledger.js';
import { makeCase, holdingRunner, remoteReceipts, type Case, type Machine } from '../helpers/remote-runners.js';
import { removeHook } from '../helpers/remote-ledger.js';
import { git, tempDir } from '../helpers/tmp.js';

/**
 * Two machines on one hookless remote, their clocks apart: one whose --repo lacks the commit a
 * consult pins (it holds the consult, queued and unclaimed, until its expiry plus the skew allowed
 * between machines has passed by its clock) and one that holds the commit and runs it.
 */

const dir = tempDir('coo-attack-machines-redteam-24-');
const closers: Array<() => Promise<void> | void> = [];
afterAll(async () => {
  for (const close of closers.reverse()) await close();
});

const SKEW_MS = LIMITS.clockSkewSeconds * 1000;

/** A hookless case: the served ledger without its pre-receive hook, as on a forge. */
async function hookless(): Promise<Case> {
  const world = await makeCase(dir, closers);
  removeHook(world.served);
  return world;
}

/** A repository with one commit of its own: it lacks every commit of the project's target. */
function unrelatedRepo(name: string): string {
  const repo = join(dir, name);
  git(['init', '-q', repo]);
  git(['-C', repo, '-c', 'user.name=t', '-c', 'user.email=t@example.invalid', 'commit', '-q', '--allow-empty', '-m', 'elsewhere']);
  return repo;
}

/** The COO enqueues a consult through the remote, dated `at`, living `ttlSeconds`. */
async function consultAt(world: Case, at: Date, ttlSeconds: number): Promise<string> {
  const coo = await world.machine('coo');
  const key = loadPrivateKey(world.served.keys.coo);
  const published = await coo.remote.write((ledger) => enqueueConsult({ ledger, key, now: at, ttlSeconds, target: 'aa.chatgpt', repo: world.served.target, patterns: ['README.md'], question: 'Is add() correct for NaN?', maxRuntimeSeconds: 60 }));
  return published.result.messageId;
}

const shifted = (ms: number) => (): Date => new Date(Date.now() + ms);

async function clean(world: Case): Promise<void> {
  const served = loadPrivateKey(world.served.keys.ceo).publicKey;
  expect((await verifyLedger(world.served.gitdir, { trustRoot: served })).findings).toEqual([]);
}

describe('a runner that lacks the pinned commit, its clock apart from the runner that holds it', { timeout: 180_000 }, () => {
  it('ahead by less than the skew and past the expiry by its clock, it holds the consult; the runner that holds the commit runs it, paid once, and the held runner writes nothing after', async () => {
    const world = await hookless();
    const id = await consultAt(world, new Date(), 120);
    const lacking: Machine = await world.machine('lacking');
    const holding: Machine = await world.machine('holding');
    const ahead = lacking.runner({ repo: unrelatedRepo('lacking-1'), clock: shifted(SKEW_MS - 30_000) });
    const first = await ahead.runOnce();
    expect(first.held).toEqual([id]);
    expect(await remoteReceipts(world.served, id)).toEqual([]);
    expect(lacking.events).toContainEqual(expect.objectContaining({ type: 'error', messageId: id, code: 'RUNNER_CONFIG' }));
    await holding.runner().runOnce();
    expect(await remoteReceipts(world.served, id)).toEqual([{ attempt: 1, status: 'succeeded', blockers: [] }]);
    await ahead.runOnce();
    expect(await remoteReceipts(world.served, id)).toEqual([{ attempt: 1, status: 'succeeded', blockers: [] }]);
    expect(world.model.requests).toHaveLength(1);
    await clean(world);
  });

  it('a consult another runner claimed and is paying for is never receipted expired by a held runner whose clock runs an hour ahead: paid once, succeeded', async () => {
    const world = await hookless();
    const id = await consultAt(world, new Date(), 120);
    const lacking = await world.machine('lacking');
    const holding = await world.machine('holding');
    const paying = await holdingRunner(world, holding);
    const ahead = lacking.runner({ repo: unrelatedRepo('lacking-2'), clock: shifted(60 * 60_000) });
    const seen = await ahead.runOnce();
    expect(seen.held).toEqual([]);
    expect(await remoteReceipts(world.served, id)).toEqual([]);
    paying.release();
    await paying.running;
    await ahead.runOnce();
    expect(await remoteReceipts(world.served, id)).toEqual([{ attempt: 1, status: 'succeeded', blockers: [] }]);
    expect(world.model.requests).toHaveLength(1);
  });

  it('past its expiry plus the skew by the clock of every machine, the held runner receipts it expired, unpaid; the runner that holds the commit then pays nothing, and the ledger verifies', async () => {
    const world = await hookless();
    const id = await consultAt(world, new Date(Date.now() - SKEW_MS - 120_000), 60);
    const lacking = await world.machine('lacking');
    const holding = await world.machine('holding');
    await lacking.runner({ repo: unrelatedRepo('lacking-3') }).runOnce();
    expect(await remoteReceipts(world.served, id)).toEqual([{ attempt: 1, status: 'blocked', blockers: ['expired'] }]);
    await holding.runner().runOnce();
    expect(await remoteReceipts(world.served, id)).toEqual([{ attempt: 1, status: 'blocked', blockers: ['expired'] }]);
    expect(world.model.requests).toHaveLength(0);
    await clean(world);
  });
});

const getKit = useKit(dir);
let kit: Kit;
beforeAll(() => {
  kit = getKit();
});

/** A dispatch written `agoMs` ago (it expires an hour after, its deadline two), and the claim of its attempt 1 dated now with a receipt that ends it unrun with `blocker`, in one commit. */
async function stoppedNow(agoMs: number, blocker: 'expired' | 'deadline_passed'): Promise<Record<string, Buffer>> {
  const message: CooMessage = dispatchEnvelope({}, new Date(Date.now() - agoMs));
  expect(await kit.append(messageFiles(message), kit.keys.coo.key)).toBe('accepted');
  const folder = messageFolder(message.message_id, message.created_at);
  const now = isoSeconds(new Date());
  const claim = { schema_version: 'claim.v0', message_id: message.message_id, attempt_id: `ea_attempt_${message.message_id.slice(4)}_1`, attempt_number: 1, runner_id: 'ahead', transport_session_id: 'ahead', claimed_at: now };
  const receipt = eaReceiptDoc(message.message_id, 1, { status: 'blocked', blockers: [{ code: blocker, detail: 'not started in time' }], created_at: now, commands_run: [], inner_exit_codes: [], tests_run: [] });
  return { [claimPath(folder, 1)]: Buffer.from(toYaml(claim)), [receiptPath(folder, 1)]: Buffer.from(toYaml(receipt)) };
}

const appended = async (files: Record<string, Buffer>): Promise<string> => kit.append(Object.entries(files).map(([path, bytes]) => ({ path, bytes })), kit.keys.coo.key);
const HOUR_MS = 60 * 60_000;

describe('a receipt that ends a message unrun as expired, or past its deadline, while its own claim says it was live', () => {
  attack('an expired receipt of a dispatch claimed an hour before its expiry (a COO that ends live work unrun, in a ledger without a hook)', 'library', 'ATTEMPT_INVALID', async () => appended(await stoppedNow(0, 'expired')));

  attack('a deadline_passed receipt of a dispatch claimed before its deadline, after its expiry', 'library', 'ATTEMPT_INVALID', async () => appended(await stoppedNow(90 * 60_000, 'deadline_passed')));

  attack('coo verify of such a receipt written behind the hook', 'verify', 'ATTEMPT_INVALID', async () => {
    const files = await stoppedNow(0, 'expired');
    let codes: string[] = ['unset'];
    await kit.bypass(files, { key: kit.keys.coo.file }, () => {
      codes = kit.verifyCodes();
    });
    return firstOr(codes, 'ATTEMPT_INVALID');
  });

  it('takes the expired receipt claimed past the expiry and the deadline_passed one claimed past the deadline, as every runner writes them', async () => {
    expect(await appended(await stoppedNow(90 * 60_000, 'expired'))).toBe('accepted');
    expect(await appended(await stoppedNow(3 * HOUR_MS, 'deadline_passed'))).toBe('accepted');
  });
});

describe("a panel's members stopped together on one member's expiry", () => {
  const T = Date.parse('2026-12-01T10:00:00Z');
  const at = (minutes: number): string => isoSeconds(new Date(T + minutes * 60_000));
  const member = (id: string, expiresIn: number, panel?: string): MessageRecord => ({ id, expiresAt: at(expiresIn), deadlineAt: at(expiresIn + 60), attempts: [], ...(panel === undefined ? {} : { panel }) }) as unknown as MessageRecord;
  const judged = (records: readonly MessageRecord[], panel: readonly string[]) =>
    ({ state: { panels: new Map([['p', { name: 'review', messages: panel }]]) }, message: (id: string) => records.find((record) => record.id === id) }) as unknown as CommitCheck;
  const attempt = { number: 1, claim: { at: at(1) } } as unknown as AttemptRecord;
  const expired = { blockers: [{ code: 'expired', detail: 'x' }] } as unknown as AaReceipt;

  it("takes a member whose own expiry is ahead when a sibling's passed by the claim, and refuses it when no member's did, or alone", async () => {
    const live = member('a', 10, 'p');
    expect(await codeOf(async () => checkStopTime(judged([live, member('b', 0, 'p')], ['a', 'b']), live, attempt, expired, 'r'))).toBe('accepted');
    expect(await codeOf(async () => checkStopTime(judged([live, member('b', 5, 'p')], ['a', 'b']), live, attempt, expired, 'r'))).toBe('ATTEMPT_INVALID');
    const alone = member('c', 10);
    expect(await codeOf(async () => checkStopTime(judged([alone], []), alone, attempt, expired, 'r'))).toBe('ATTEMPT_INVALID');
  });

  it("takes a member's retry stopped with a sibling on its first start past its expiry, and refuses it when every member is on a retry, or the message is alone", async () => {
    const retry = { number: 2, claim: { at: at(1) } } as unknown as AttemptRecord;
    const live = member('a', 10, 'p');
    // The sibling is on its first start: no attempt before the one this stop claims (claimed in the same commit, or not yet seen).
    const firstStart = (expiresIn: number, attempts: ReadonlyArray<{ number: number; claim: { at: string } }>) => ({ ...member('b', expiresIn, 'p'), attempts }) as unknown as MessageRecord;
    expect(await codeOf(async () => checkStopTime(judged([live, firstStart(0, [])], ['a', 'b']), live, retry, expired, 'r'))).toBe('accepted');
    expect(await codeOf(async () => checkStopTime(judged([live, firstStart(0, [{ number: 1, claim: { at: at(1) } }])], ['a', 'b']), live, retry, expired, 'r'))).toBe('accepted');
    // Every member on a retry (the sibling's first attempt claimed earlier and ended): expires_at bounds neither, whoever wrote the receipt.
    const onRetry = firstStart(0, [{ number: 1, claim: { at: at(-5) } }, { number: 2, claim: { at: at(1) } }]);
    expect(await codeOf(async () => checkStopTime(judged([live, onRetry], ['a', 'b']), live, retry, expired, 'r'))).toBe('ATTEMPT_INVALID');
    const alone = member('c', 0);
    expect(await codeOf(async () => checkStopTime(judged([alone], []), alone, retry, expired, 'r'))).toBe('ATTEMPT_INVALID');
  });
});
