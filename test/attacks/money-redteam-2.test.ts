import { afterAll, describe, expect } from 'vitest';
import type { LedgerState, MessageRecord } from '../../src/authority/state.js';
import { heldByOpenAttemptsUsd, judgedSpend, spendMovedSince } from '../../src/lane/budget.js';
import { defaultPolicy } from '../../src/ledger/init.js';
import { attack } from '../helpers/attack-kit.js';
import { FIX, agentScript, dispatchTo, hostilePlaces, receiptsFor, watchOnce } from '../helpers/hostile-agent.js';
import { attemptIdOf } from '../../src/authority/runnable.js';
import { folderOf } from '../../src/authority/state.js';
import { claimPath } from '../../src/ledger/layout.js';
import { readStrictYaml, toYaml } from '../../src/schema/strict-yaml.js';
import { isoSeconds } from '../../src/util/time.js';
import { Ledger } from '../../src/ledger/ledger.js';
import { loadPrivateKey } from '../../src/cli/common.js';
import { enqueueDispatch } from '../../src/dispatch/enqueue.js';
import { sendCommand } from '../../src/inbox/ceo-messages.js';
import { appendTrustVersion } from '../../src/ledger/trust-update.js';
import { makeWorld, receiptsOf } from '../helpers/lane.js';
import { mkdirSync, realpathSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { hostLabel } from '../../src/util/process.js';
import { holdingRunner, makeCase, remoteReceipts } from '../helpers/remote-runners.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * Money across runners: an open claim on the ledger is known, so what its attempt may still spend
 * counts against its correlation and its day until its receipt lands, in every pre-flight and in
 * the judgement of a claim on the state it is written on.
 */

const dir = tempDir('money-redteam-2');
const closers: Array<() => Promise<void> | void> = [];
afterAll(async () => {
  for (const close of closers.reverse()) await close();
});

/** The allowance the claim of a message's attempt records, as the remote holds it. */
async function claimedAllowance(ledger: { readFile(path: string): Promise<Buffer | null>; state(): Promise<LedgerState> }, messageId: string, attempt: number): Promise<number | undefined> {
  const claim = (await ledger.state()).messages.get(messageId)!.attempts[attempt - 1]!.claim!;
  const doc = readStrictYaml((await ledger.readFile(claim.path))!, claim.path) as { allowance_usd?: number };
  return doc.allowance_usd;
}

describe("two runners through one remote at the edge of the day's cap", () => {
  attack("another runner's claim is open, its call in flight and no receipt yet: the pre-flight counts what it may still spend", 'runner', 'held', async () => {
    const base = defaultPolicy();
    // $0.50 a day: one consult's worst case (its output cap is what the day pays for) takes all of it.
    const world = await makeCase(dir, closers, { ...base, budgets: { ...base.budgets, daily_cost_cap_usd: 0.5 } });
    const first = await world.consult();
    const second = await world.consult();
    const a = await world.machine('a');
    const b = await world.machine('b');
    // b claims one consult and pays its call; its answer is held, so its claim stays open on the remote.
    const held = await holdingRunner(world, b);
    const heldId = (await b.ledger.state()).messages.get(first)!.attempts.length === 1 ? first : second;
    const otherId = heldId === first ? second : first;
    const heldAllowance = await claimedAllowance(b.ledger, heldId, 1);
    await a.runner().runOnce();
    const paidByA = world.model.requests.length - 1;
    const receiptsThen = await remoteReceipts(world.served, otherId);
    held.release();
    await held.running;
    if (paidByA > 0) return 'accepted';
    expect(heldAllowance).toBeGreaterThan(0.49);
    expect(heldAllowance).toBeLessThanOrEqual(0.5);
    // Not receipted either: what the open attempt held may come back unspent.
    expect(a.events).toContainEqual(expect.objectContaining({ type: 'skipped', messageId: otherId, reason: expect.stringMatching(/open attempts may still spend; the next pass judges it again/) }));
    expect(receiptsThen).toEqual([]);
    // b's receipt says what its call cost (little, the loopback model's answer is short): the day has room again, and b's pass went on to it.
    await a.runner().runOnce();
    expect(await remoteReceipts(world.served, otherId)).toEqual([{ attempt: 1, status: 'succeeded', blockers: [] }]);
    expect(world.model.requests).toHaveLength(2);
    return 'held';
  });
});

describe('what open attempts hold, as the ledger knows them', () => {
  const correlation = 'corr_0123456789abcdef0123';
  const day = '2026-12-03';
  const claim = (id: string, allowanceUsd?: number) => ({ path: `c/${id}`, session: 's', runner: 'run-x', at: `${day}T10:00:00Z`, seq: 10, ...(allowanceUsd === undefined ? {} : { allowanceUsd }) });
  const receipt = (costUsd: number) => ({ path: 'r', status: 'succeeded' as const, blockers: [], costUsd, nextAttemptAt: null, createdAt: `${day}T10:05:00Z`, seq: 11 });
  const message = (id: string, fields: Partial<MessageRecord> & { attempts: MessageRecord['attempts'] }): MessageRecord => ({ id, correlation, chain: [], maxCostUsd: 5, intent: 'ea_dispatch', ...fields }) as unknown as MessageRecord;
  const stateOf = (...records: MessageRecord[]) => ({ messages: new Map(records.map((record) => [record.id, record])), spendByCorrelation: new Map([[correlation, 1]]), spendByDay: new Map([[day, 1]]), policy: { doc: defaultPolicy() } }) as unknown as LedgerState;

  attack("a dispatch attempt's open claim holds its allowance less what its consults' receipts cost; its open consult holds nothing of its own", 'library', 'held', () => {
    const dispatch = message('msg_dispatch', { attempts: [{ number: 1, attemptId: 'a1', claim: claim('d', 4), receipt: null }], consults: [{ id: 'msg_done', attempt: 1 }, { id: 'msg_open', attempt: 1 }] });
    const done = message('msg_done', { intent: 'aa_consult', chain: ['msg_dispatch'], askedIn: 1, attempts: [{ number: 1, attemptId: 'c1', claim: claim('c1', 0.9), receipt: receipt(1.5) }] } as Partial<MessageRecord> & { attempts: MessageRecord['attempts'] });
    const open = message('msg_open', { intent: 'aa_consult', chain: ['msg_dispatch'], askedIn: 1, attempts: [{ number: 1, attemptId: 'c2', claim: claim('c2', 0.9), receipt: null }] } as Partial<MessageRecord> & { attempts: MessageRecord['attempts'] });
    const state = stateOf(dispatch, done, open);
    const held = heldByOpenAttemptsUsd(state, correlation, 'msg_other');
    if (held.correlationUsd === 0) return 'accepted';
    expect(held).toEqual({ correlationUsd: 2.5, dayUsd: 2.5 });
    // The consult its agent asks spends from the dispatch's allowance: the dispatch does not hold against it.
    const asked = message('msg_asked', { intent: 'aa_consult', chain: ['msg_dispatch'], askedIn: 1, attempts: [] } as Partial<MessageRecord> & { attempts: MessageRecord['attempts'] });
    expect(heldByOpenAttemptsUsd(stateOf(dispatch, done, open, asked), correlation, 'msg_asked')).toEqual({ correlationUsd: 0, dayUsd: 0 });
    return 'held';
  });

  attack("a claim that states no allowance (an older runner's) holds its message's budget less its earlier attempts; another correlation's holds only the day", 'library', 'held', () => {
    const older = message('msg_older', { attempts: [{ number: 1, attemptId: 'o1', claim: claim('o1'), receipt: receipt(2) }, { number: 2, attemptId: 'o2', claim: claim('o2'), receipt: null }] });
    const elsewhere = message('msg_elsewhere', { correlation: 'corr_other', attempts: [{ number: 1, attemptId: 'e1', claim: claim('e1', 1.25), receipt: null }] });
    const held = heldByOpenAttemptsUsd(stateOf(older, elsewhere), correlation, null);
    if (held.dayUsd === 0) return 'accepted';
    expect(held).toEqual({ correlationUsd: 3, dayUsd: 4.25 });
    return 'held';
  });

  attack('a claim written on a state where another runner claimed meanwhile is judged again counting that claim', 'library', 'not_claimed', () => {
    const mine = message('msg_mine', { attempts: [] });
    const judged = judgedSpend(stateOf(mine), correlation, day, 4, 'msg_mine');
    // Meanwhile another runner claimed an attempt of the correlation that may spend $16 of its $20.
    const theirs = message('msg_theirs', { attempts: [{ number: 1, attemptId: 't1', claim: claim('t1', 16), receipt: null }] });
    const refused = spendMovedSince(judged, stateOf(mine, theirs));
    if (refused === null) return 'accepted';
    expect(refused).toMatch(/no longer leaves the \$4/);
    // Its own open claim never holds against the attempt judged.
    expect(spendMovedSince(judged, stateOf(message('msg_mine', { attempts: [{ number: 1, attemptId: 'm1', claim: claim('m1', 4), receipt: null }] })))).toBeNull();
    return 'not_claimed';
  });
});

describe("a dispatch beside another runner's open attempt near the day's cap", () => {
  const place = hostilePlaces(dir, 'dispatch');

  attack("another host's dispatch attempt is open, allowed its whole $5 of the day's $5.01: a new dispatch is not claimed until its receipt lands", 'runner', 'held', async () => {
    const where = await place('held-day');
    const ledger = where.world.ledger;
    const open = await dispatchTo(where, 'held-open');
    const next = await dispatchTo(where, 'held-next');
    const policy = (await ledger.state()).policy!.doc;
    await appendTrustVersion(ledger, { role: 'policy', document: { ...policy, version: undefined, budgets: { ...policy.budgets, daily_cost_cap_usd: 5.01 } } }, where.world.actors.ceo, new Date());
    // A runner on another host claimed the first dispatch and may spend $5 of the day (no claim may state more than its message's budget).
    const record = (await ledger.state()).messages.get(open.messageId)!;
    const now = new Date();
    const claim = { schema_version: 'claim.v0', message_id: record.id, attempt_id: attemptIdOf(record, 1), attempt_number: 1, runner_id: 'run-elsewhere', transport_session_id: 'session-elsewhere', claimed_at: isoSeconds(now), allowance_usd: 5 };
    await ledger.append({ files: [{ path: claimPath(folderOf(record), 1), bytes: Buffer.from(toYaml(claim)) }], key: where.world.actors.coo, now, summary: `claim ${record.id} attempt 1` });
    const watch = watchOnce(where, agentScript(where.world.dir, FIX));
    expect(watch.hung).toBe(false);
    if ((await receiptsFor(where, next.messageId)).length > 0) return 'accepted';
    expect(watch.stdout).toMatch(/open attempts may still spend; the next pass judges it again/);
    // The open attempt is another host's: left to it, not recovered.
    expect(await receiptsFor(where, open.messageId)).toEqual([]);
    return 'held';
  });
});

describe("a takeover of another runner's expired attempt", () => {
  attack("a consult whose holder paid its call and went quiet past its lease: the takeover charges it as a call that ended unanswered, not $0", 'runner', 'charged', async () => {
    const world = await makeCase(dir, closers);
    const messageId = await world.consult();
    const first = await world.machine('holder');
    const second = await world.machine('taker');
    const frozen = new Date();
    const held = await holdingRunner(world, first, { clock: () => frozen });
    let tick = 0;
    const taker = second.runner({ monotonic: () => tick, clock: () => frozen, leaseGraceSeconds: 600 });
    await taker.runOnce();
    tick = 901_000;
    await taker.runOnce();
    held.release();
    await held.running;
    expect(second.events.map((event) => event.type)).toContain('takeover');
    const ledger = Ledger.open(world.served.gitdir);
    try {
      const record = (await ledger.state()).messages.get(messageId)!;
      const receipt = record.attempts[0]!.receipt!;
      expect(receipt.blockers).toEqual(['interrupted']);
      if (receipt.costUsd === 0) return 'accepted';
      const doc = readStrictYaml((await ledger.readFile(receipt.path))!, receipt.path) as { warnings: string[]; usage: { input_tokens: number; reported: boolean } };
      expect(doc.warnings).toContain('usage_unreported');
      expect(doc.usage).toMatchObject({ reported: false });
      expect(doc.usage.input_tokens).toBeGreaterThan(0);
      return 'charged';
    } finally {
      ledger.close();
    }
  });

  attack("a dispatch another machine claimed and never receipted: the takeover charges what its claim let it spend, not $0", 'runner', 'charged', async () => {
    const world = await makeCase(dir, closers);
    const coo = await world.machine('coo-dispatch');
    const key = loadPrivateKey(world.served.keys.coo);
    const enqueued = await coo.remote.write((ledger) =>
      enqueueDispatch({ ledger, key, now: new Date(), target: 'ea.codex', repo: world.served.target, task: 'Fix add().', scope: ['src/**'], accept: ['test.sh passes'], verify: ['sh test.sh'], timeoutSeconds: 60, maxRuntimeSeconds: 60 }),
    );
    const messageId = enqueued.result.messageId;
    // A runner on another machine claimed it, allowed $3.25, and went quiet.
    const record = (await coo.ledger.state()).messages.get(messageId)!;
    const now = new Date();
    const claim = { schema_version: 'claim.v0', message_id: messageId, attempt_id: attemptIdOf(record, 1), attempt_number: 1, runner_id: 'run-gone-machine', transport_session_id: 'session-gone', claimed_at: isoSeconds(now), allowance_usd: 3.25 };
    await coo.remote.append({ files: [{ path: claimPath(folderOf(record), 1), bytes: Buffer.from(toYaml(claim)) }], key, now, summary: `claim ${messageId} attempt 1` });
    const taker = await world.machine('taker-dispatch');
    let tick = 0;
    const runner = taker.runner({ monotonic: () => tick, clock: () => now, leaseGraceSeconds: 600 });
    await runner.runOnce();
    tick = 901_000;
    await runner.runOnce();
    expect(taker.events.map((event) => event.type)).toContain('takeover');
    const ledger = Ledger.open(world.served.gitdir);
    try {
      const receipt = (await ledger.state()).messages.get(messageId)!.attempts[0]!.receipt!;
      expect(receipt.blockers).toEqual(['interrupted']);
      if (receipt.costUsd === 0) return 'accepted';
      expect(receipt.costUsd).toBe(3.25);
      const doc = readStrictYaml((await ledger.readFile(receipt.path))!, receipt.path) as { warnings: string[] };
      expect(doc.warnings).toContain('usage_unreported');
      return 'charged';
    } finally {
      ledger.close();
    }
  });
});

describe("work under a CEO command's budget, queued before any of it ran", () => {
  attack("two consults under a $1 command, each asking the $1 it had left when written: the second is not paid while the first may spend the $1", 'runner', 'held', async () => {
    const world = await makeWorld(join(dir, 'command-budget'));
    closers.push(() => world.close());
    const command = await sendCommand({ ledger: world.ledger, key: world.actors.ceo, now: new Date(), text: 'Ask about add().', budgetUsd: 1 });
    // Both written before either ran: the envelope rule lets each ask the whole $1.
    const first = await world.consult({ parentMessageId: command.messageId });
    const second = await world.consult({ parentMessageId: command.messageId, question: 'And for Infinity?' });
    expect([first.envelope.budget.max_cost_usd, second.envelope.budget.max_cost_usd]).toEqual([1, 1]);
    // A runner elsewhere claimed the first and may spend its $1.
    const record = (await world.ledger.state()).messages.get(first.messageId)!;
    const now = new Date();
    const claim = { schema_version: 'claim.v0', message_id: record.id, attempt_id: attemptIdOf(record, 1), attempt_number: 1, runner_id: 'run-elsewhere', transport_session_id: 'session-elsewhere', claimed_at: isoSeconds(now), allowance_usd: 1 };
    await world.ledger.append({ files: [{ path: claimPath(folderOf(record), 1), bytes: Buffer.from(toYaml(claim)) }], key: world.actors.coo, now, summary: `claim ${record.id} attempt 1` });
    await world.runner().runOnce();
    if (world.server.requests.length > 0) return 'accepted';
    expect(await receiptsOf(world, second.messageId)).toEqual([]);
    expect(world.events).toContainEqual(expect.objectContaining({ type: 'skipped', messageId: second.messageId, reason: expect.stringMatching(/correlation's remaining budget .*open attempts may still spend/) }));
    return 'held';
  });
});

describe("a crashed runner's open claim beside new work near the day's cap", () => {
  attack("the older message's new attempt and a newer message's attempt whose runner died: one pass recovers the dead claim first, then runs the other", 'runner', 'ran', async () => {
    const world = await makeWorld(join(dir, 'crashed-hold'), { policy: (policy) => ({ ...policy, budgets: { ...policy.budgets, daily_cost_cap_usd: 0.5 } }) });
    closers.push(() => world.close());
    const older = await world.consult();
    const newer = await world.consult({ question: 'And for Infinity?' });
    // A runner of this host claimed the newer one, may spend the day's $0.50, and died (its process is gone) before its
    // attempt's files were written in the state folder it shared with the recovering runner: no call was made.
    mkdirSync(join(world.gitdir, 'coo', 'runners'), { recursive: true });
    mkdirSync(join(world.dir, 'state'), { recursive: true });
    writeFileSync(join(world.gitdir, 'coo', 'runners', 'run-dead.json'), JSON.stringify({ host: hostLabel(), pid: 2 ** 22 + 7, started: null, state: realpathSync(join(world.dir, 'state')) }));
    const record = (await world.ledger.state()).messages.get(newer.messageId)!;
    const now = new Date();
    const claim = { schema_version: 'claim.v0', message_id: record.id, attempt_id: attemptIdOf(record, 1), attempt_number: 1, runner_id: 'run-dead', transport_session_id: 'session-dead', claimed_at: isoSeconds(now), allowance_usd: 0.5 };
    await world.ledger.append({ files: [{ path: claimPath(folderOf(record), 1), bytes: Buffer.from(toYaml(claim)) }], key: world.actors.coo, now, summary: `claim ${record.id} attempt 1` });
    // One pass, as `coo watch --once` makes.
    await world.runner().runOnce();
    expect((await receiptsOf(world, newer.messageId))[0]?.['blockers']).toEqual([expect.objectContaining({ code: 'interrupted' })]);
    const ran = await receiptsOf(world, older.messageId);
    if (ran.length === 0) return 'left_queued';
    expect(ran[0]?.['status']).toBe('succeeded');
    return 'ran';
  });
});
