import { afterAll, describe, expect, it } from 'vitest';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { enqueuePanel } from '../../src/consult/enqueue.js';
import { crashAllowanceUsd } from '../../src/dispatch/lane.js';
import type { EaDispatchMessage } from '../../src/schema/message.js';
import { attemptIdOf } from '../../src/authority/runnable.js';
import { folderOf, type LedgerState, type MessageRecord } from '../../src/authority/state.js';
import { judgedSpend, spendMovedSince } from '../../src/lane/budget.js';
import { defaultPolicy } from '../../src/ledger/init.js';
import { claimPath } from '../../src/ledger/layout.js';
import { toYaml } from '../../src/schema/strict-yaml.js';
import { isoSeconds } from '../../src/util/time.js';
import { attack, codeOf, makeKit } from '../helpers/attack-kit.js';
import { makeWorld, receiptsOf, type World } from '../helpers/lane.js';
import { hostLabel } from '../../src/util/process.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * Money, round 3: what a claim may say it holds, and that every open claim's hold ends.
 */

const dir = tempDir('money-redteam-3');
const closers: Array<() => Promise<void> | void> = [];
afterAll(async () => {
  for (const close of closers.reverse()) await close();
});

/** A claim of attempt 1 of `record`, COO-signed, as a runner elsewhere would write it. */
function claimOf(record: MessageRecord, runner: string, now: Date, allowanceUsd?: number): { path: string; doc: Record<string, unknown> } {
  const doc = {
    schema_version: 'claim.v0',
    message_id: record.id,
    attempt_id: attemptIdOf(record, 1),
    attempt_number: 1,
    runner_id: runner,
    transport_session_id: `session-${runner}`,
    claimed_at: isoSeconds(now),
    ...(allowanceUsd === undefined ? {} : { allowance_usd: allowanceUsd }),
  };
  return { path: claimPath(folderOf(record), 1), doc };
}

async function appendClaim(world: World, messageId: string, runner: string, allowanceUsd?: number, now = new Date()): Promise<string> {
  const record = (await world.ledger.state()).messages.get(messageId)!;
  const claim = claimOf(record, runner, now, allowanceUsd);
  return codeOf(() => world.ledger.append({ files: [{ path: claim.path, bytes: Buffer.from(toYaml(claim.doc)) }], key: world.actors.coo, now, summary: `claim ${record.id} attempt 1` }));
}

describe("a claim's allowance is what its attempt may spend, as the ledger knows it", () => {
  attack('a COO-signed claim of a priced consult stating an allowance of $0 (it would hold nothing beside other runners)', 'library', 'POLICY_LIMIT', async () => {
    const world = await makeWorld(join(dir, 'zero-allowance'));
    closers.push(() => world.close());
    const consult = await world.consult();
    return appendClaim(world, consult.messageId, 'run-elsewhere', 0);
  });

  attack('a COO-signed claim stating an allowance of a millionth of a dollar, far below the least attempt a pre-flight admits', 'library', 'POLICY_LIMIT', async () => {
    const world = await makeWorld(join(dir, 'tiny-allowance'));
    closers.push(() => world.close());
    const consult = await world.consult();
    return appendClaim(world, consult.messageId, 'run-elsewhere', 0.000001);
  });

  attack("a COO-signed claim stating more than its message's budget has left (it would hold the day's other work back for nothing)", 'library', 'POLICY_LIMIT', async () => {
    const world = await makeWorld(join(dir, 'huge-allowance'));
    closers.push(() => world.close());
    const consult = await world.consult({ maxCostUsd: 1 });
    return appendClaim(world, consult.messageId, 'run-elsewhere', 40);
  });

  attack('a claim stating $0 pushed past the pre-receive hook, which runs the same validator', 'hook', 'POLICY_LIMIT', async () => {
    const kit = await makeKit(join(dir, 'zero-allowance-hook'));
    closers.push(() => kit.world.close());
    const consult = await kit.world.consult();
    const record = (await kit.world.ledger.state()).messages.get(consult.messageId)!;
    const claim = claimOf(record, 'run-elsewhere', new Date(), 0);
    return kit.push({ [claim.path]: toYaml(claim.doc) }, { key: kit.keys.coo.file });
  });

  // Not an attack: the rule must leave honest claims alone.
  it('claims a runner writes still land: one that states no allowance (an older runner), and one within its bounds', async () => {
    const world = await makeWorld(join(dir, 'honest-allowance'));
    closers.push(() => world.close());
    const older = await world.consult();
    const newer = await world.consult({ question: 'And for Infinity?', maxCostUsd: 1 });
    expect(await appendClaim(world, older.messageId, 'run-older')).toBe('accepted');
    expect(await appendClaim(world, newer.messageId, 'run-newer', 0.75)).toBe('accepted');
  });
});

describe('every open claim on a local ledger has a lease that ends', () => {
  attack("a claim whose runner left no record on this host (pushed from a clone, its record gone) holds the day's cap: its lease runs out and the next pass recovers it", 'runner', 'recovered', async () => {
    const world = await makeWorld(join(dir, 'no-record'), { policy: (policy) => ({ ...policy, budgets: { ...policy.budgets, daily_cost_cap_usd: 0.5 } }) });
    closers.push(() => world.close());
    const older = await world.consult();
    const newer = await world.consult({ question: 'And for Infinity?' });
    // A runner this host knows nothing of claimed the newer one and may spend the day's $0.50.
    expect(await appendClaim(world, newer.messageId, 'run-from-a-clone', 0.5)).toBe('accepted');
    let tick = 0;
    const runner = world.runner({ monotonic: () => tick, leaseGraceSeconds: 600 });
    await runner.runOnce();
    // Within its lease and its runtime budget it is left to its runner, and nothing is paid beside it.
    expect(await receiptsOf(world, newer.messageId)).toEqual([]);
    expect(world.server.requests).toHaveLength(0);
    tick = 901_000;
    await runner.runOnce();
    const recovered = await receiptsOf(world, newer.messageId);
    if (recovered.length === 0) return 'held_for_good';
    expect(recovered[0]?.['blockers']).toEqual([expect.objectContaining({ code: 'interrupted' })]);
    expect(world.events).toContainEqual(expect.objectContaining({ type: 'takeover', messageId: newer.messageId, runner: 'run-from-a-clone' }));
    // Its hold ends, and the older consult is judged: against what the taken-over call may have spent, its whole
    // output cap within the $0.50 its claim allowed, which is the day's cap. It is blocked, unpaid, not held for good.
    expect(recovered[0]?.['actual_cost_usd']).toBeGreaterThan(0.49);
    expect((await receiptsOf(world, older.messageId)).map((receipt) => [receipt['status'], (receipt['blockers'] as Array<{ code: string }>).map((blocker) => blocker.code)])).toEqual([['blocked', ['daily_cap_reached']]]);
    expect(world.server.requests).toHaveLength(0);
    return 'recovered';
  });

  attack("runners started for one pass at a time (coo watch --once from cron) beside a claim whose runner this host knows nothing of: a later pass takes it over", 'runner', 'recovered', async () => {
    const world = await makeWorld(join(dir, 'no-record-cron'));
    closers.push(() => world.close());
    const consult = await world.consult();
    expect(await appendClaim(world, consult.messageId, 'run-from-a-clone', 0.5)).toBe('accepted');
    // Each pass is a new process with the same state folder, on the machine's one monotonic clock.
    await world.runner({ monotonic: () => 1_000, leaseGraceSeconds: 600 }).runOnce();
    expect(await receiptsOf(world, consult.messageId)).toEqual([]);
    await world.runner({ monotonic: () => 902_000, leaseGraceSeconds: 600 }).runOnce();
    const recovered = await receiptsOf(world, consult.messageId);
    if (recovered.length === 0) return 'held_for_good';
    expect(recovered[0]?.['blockers']).toEqual([expect.objectContaining({ code: 'interrupted' })]);
    return 'recovered';
  });

  attack("a claim of a live runner of this host is left to it, however long it runs", 'runner', 'left_alone', async () => {
    const world = await makeWorld(join(dir, 'live-record'));
    closers.push(() => world.close());
    const consult = await world.consult();
    // This test's own process stands for the live runner.
    mkdirSync(join(world.gitdir, 'coo', 'runners'), { recursive: true });
    writeFileSync(join(world.gitdir, 'coo', 'runners', 'run-alive.json'), JSON.stringify({ host: hostLabel(), pid: process.pid, started: null }));
    expect(await appendClaim(world, consult.messageId, 'run-alive', 0.5)).toBe('accepted');
    let tick = 0;
    const runner = world.runner({ monotonic: () => tick, leaseGraceSeconds: 600 });
    await runner.runOnce();
    tick = 901_000;
    await runner.runOnce();
    if ((await receiptsOf(world, consult.messageId)).length > 0) return 'taken_over';
    return 'left_alone';
  });
});

describe('a panel whose members two runners claim', () => {
  attack("another runner claimed one member of a two-member panel and may spend the day's $0.50: the other member, judged alone by this runner, is not paid beside it", 'runner', 'held', async () => {
    const world = await makeWorld(join(dir, 'panel-split'), { policy: (policy) => ({ ...policy, panels: [{ name: 'review', from: 'coo.*', members: ['aa.chatgpt', 'aa.claude'] }], budgets: { ...policy.budgets, daily_cost_cap_usd: 0.5 } }) });
    closers.push(() => world.close());
    const panel = await enqueuePanel({ ledger: world.ledger, key: world.actors.coo, now: new Date(), repo: world.target, patterns: ['src/add.ts'], question: 'Is add() correct for NaN?', maxRuntimeSeconds: 60 });
    const [first, second] = panel.members.map((member) => member.messageId) as [string, string];
    expect(await appendClaim(world, first, 'run-from-a-clone', 0.5)).toBe('accepted');
    await world.runner({ monotonic: () => 0 }).runOnce();
    if (world.server.requests.length > 0) return 'accepted';
    expect(await receiptsOf(world, second)).toEqual([]);
    expect(world.events).toContainEqual(expect.objectContaining({ type: 'skipped', messageId: second, reason: expect.stringMatching(/open attempts may still spend/) }));
    return 'held';
  });
});

describe("a retry's claim", () => {
  attack("the claim of a retry stating the message's whole budget, after its first attempt's answer was paid for and malformed", 'library', 'POLICY_LIMIT', async () => {
    const world = await makeWorld(join(dir, 'retry-allowance'), { modes: ['malformed', 'ok'], policy: (policy) => ({ ...policy, retries: { ...policy.retries, backoff_base_seconds: 60, backoff_max_seconds: 60 } }) });
    closers.push(() => world.close());
    const consult = await world.consult({ maxCostUsd: 1 });
    // The first attempt is paid for; its answer is malformed, and a retry may start.
    await world.runner({ monotonic: () => 0, clock: () => new Date() }).runOnce();
    const record = (await world.ledger.state()).messages.get(consult.messageId)!;
    const first = record.attempts[0]!.receipt!;
    expect(first.costUsd).toBeGreaterThan(0);
    expect(record.attempts).toHaveLength(1);
    const now = new Date(Math.max(Date.now(), Date.parse(first.nextAttemptAt ?? first.createdAt)));
    const claim = { ...claimOf(record, 'run-elsewhere', now, 1).doc, attempt_id: attemptIdOf(record, 2), attempt_number: 2 };
    return codeOf(() => world.ledger.append({ files: [{ path: claimPath(folderOf(record), 2), bytes: Buffer.from(toYaml(claim)) }], key: world.actors.coo, now, summary: `claim ${record.id} attempt 2` }));
  });
});

describe('a claim and receipts that straddle midnight (UTC)', () => {
  const correlation = 'corr_0123456789abcdef0123';
  const message = (id: string, fields: Partial<MessageRecord> & { attempts: MessageRecord['attempts'] }): MessageRecord => ({ id, correlation, chain: [], maxCostUsd: 50, intent: 'ea_dispatch', target: 'ea.codex', ...fields }) as unknown as MessageRecord;
  const budgets = { ...defaultPolicy().budgets, max_cost_usd_per_message: 50, max_cost_usd_per_correlation: 1000, daily_cost_cap_usd: 50 };
  const stateOf = (spendByDay: Array<[string, number]>, ...records: MessageRecord[]) =>
    ({ messages: new Map(records.map((record) => [record.id, record])), spendByCorrelation: new Map(), spendByDay: new Map(spendByDay), policy: { doc: { ...defaultPolicy(), budgets } } }) as unknown as LedgerState;

  attack("judged at 23:59:59 with the day's $50 left; meanwhile another runner's $50 receipt landed after midnight: the claim, whose attempt spends after midnight, is not written", 'library', 'not_claimed', () => {
    const mine = message('msg_mine', { attempts: [] });
    const judged = judgedSpend(stateOf([], mine), correlation, '2026-12-03', 50, 'msg_mine');
    // The other runner claimed after this pre-flight and before this claim; its receipt is dated the next day.
    const theirs = message('msg_theirs', { correlation: 'corr_other', attempts: [{ number: 1, attemptId: 't1', claim: { path: 'c', session: 's', runner: 'run-x', at: '2026-12-03T23:59:59Z', seq: 10, allowanceUsd: 50 }, receipt: { path: 'r', status: 'succeeded', blockers: [], costUsd: 50, nextAttemptAt: null, createdAt: '2026-12-04T00:00:02Z', seq: 11 } }] });
    const refused = spendMovedSince(judged, stateOf([['2026-12-04', 50]], mine, theirs));
    if (refused === null) return 'accepted';
    expect(refused).toMatch(/2026-12-04 spent \$50/);
    // A later day that still leaves what the attempt was allowed moves nothing.
    expect(spendMovedSince(judgedSpend(stateOf([], mine), correlation, '2026-12-03', 49, 'msg_mine'), stateOf([['2026-12-04', 0.5]], mine))).toBeNull();
    return 'not_claimed';
  });
});

describe("a crashed dispatch under a CEO command's budget", () => {
  attack("an older runner's claim (no allowance) of a dispatch under a $3 command died: it is charged what the command let its correlation spend, not the policy's per-correlation budget", 'library', 'charged', () => {
    const correlation = 'corr_0123456789abcdef0123';
    const day = '2026-12-03';
    const command = { id: 'msg_command', intent: 'ceo_command', correlation, chain: [], attempts: [], budgetUsd: 3 };
    const record = { id: 'msg_crashed', intent: 'ea_dispatch', correlation, chain: ['msg_command'], attempts: [{ number: 1, attemptId: 'msg_crashed-1', claim: { path: 'c', session: 's', runner: 'run-gone', at: `${day}T10:00:00Z`, seq: 10 }, receipt: null }] };
    // The correlation had spent $1 of the command's $3 when it was claimed; the message's own budget is $5.
    const spent = { id: 'msg_spent', intent: 'aa_consult', correlation, chain: ['msg_command'], attempts: [{ number: 1, attemptId: 'msg_spent-1', claim: null, receipt: { path: 'r', status: 'succeeded', blockers: [], costUsd: 1, nextAttemptAt: null, createdAt: `${day}T09:00:00Z`, seq: 5 } }] };
    const messages = new Map<string, unknown>([['msg_command', command], ['msg_spent', spent], ['msg_crashed', record]]);
    const state = { policy: { doc: defaultPolicy() }, messages, spendByCorrelation: new Map([[correlation, 1]]), spendByDay: new Map([[day, 1]]) } as unknown as LedgerState;
    const message = { correlation_id: correlation, budget: { max_cost_usd: 5 } } as unknown as EaDispatchMessage;
    const charged = crashAllowanceUsd({ state, record: record as unknown as MessageRecord, message, attempt: 1, consultsUsd: 0, today: day });
    if (charged > 2) return 'overcharged';
    expect(charged).toBe(2);
    return 'charged';
  });
});
