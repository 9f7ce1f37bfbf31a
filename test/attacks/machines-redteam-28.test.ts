import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { attemptIdOf } from '../../src/authority/runnable.js';
import { folderOf } from '../../src/authority/state.js';
import { verifyLedger } from '../../src/audit/verify.js';
import { enqueueCrossCheck } from '../../src/consult/cross-check.js';
import { enqueueAskedConsult } from '../../src/dispatch/asked-consult.js';
import { approve } from '../../src/dispatch/approve.js';
import { enqueuePanel } from '../../src/consult/enqueue.js';
import { sendCommand } from '../../src/inbox/ceo-messages.js';
import { allowanceBoundsUsd } from '../../src/lane/budget.js';
import { claimPath, messageFolder } from '../../src/ledger/layout.js';
import type { EaDispatchMessage } from '../../src/schema/message.js';
import { sha256Ref } from '../../src/util/hash.js';
import { dispatchEnvelope, messageFiles } from '../helpers/ledger.js';
import type { ActorPolicy } from '../../src/schema/policy.js';
import { toYaml } from '../../src/schema/strict-yaml.js';
import { attemptIdFor, sessionSlugFor } from '../../src/util/ids.js';
import { isoSeconds } from '../../src/util/time.js';
import { claimedByAGoneRunner } from '../helpers/gone-runner.js';
import { blockersOf, receiptsOf, worlds, type World } from '../helpers/lane.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * Runners on machines, round 28: one runner claims work and dies mid-attempt; a runner on another
 * machine, its clock minutes to hours off the first's, takes it over. Whatever the work (a panel's
 * members, a cross-check of an answer), every attempt ends in a receipt, each call is paid once,
 * the budgets hold, and `coo verify` finds the ledger clean.
 */

const dir = tempDir('machines-redteam-28-');
const fresh = worlds(join(dir, 'worlds'));
const made: World[] = [];
afterAll(async () => {
  for (const world of made) await world.close();
});

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
/** Messages live a day: a clock hours ahead still reads them as open. */
const DAY_S = 86_400;
const REVIEW = (policy: ActorPolicy): ActorPolicy => ({ ...policy, panels: [{ name: 'review', from: 'coo.*', members: ['aa.chatgpt', 'aa.gemini'] }] });
const CROSS_CHECKS = (policy: ActorPolicy): ActorPolicy => ({ ...policy, edges: [...policy.edges, { from: 'aa.*', to: 'aa.*', intents: ['cross_check'], requires: [] }] });

async function world(options: Parameters<typeof fresh>[0] = {}): Promise<World> {
  const w = await fresh(options);
  made.push(w);
  return w;
}

/** Claims of attempt 1 of every message in `ids`, in one commit (as a panel is claimed), by a runner that then goes quiet, dated `at` by its clock; each states a third of what its message admits, so a retry has budget left. */
async function claimedTogetherByAGoneRunner(w: World, ids: readonly string[], at: Date): Promise<void> {
  const state = await w.ledger.state();
  const files = ids.map((id) => {
    const record = state.messages.get(id)!;
    const { ceilingUsd } = allowanceBoundsUsd(record, 1, state.policy!.doc, state.registry!.doc);
    const claim = { schema_version: 'claim.v0', message_id: id, attempt_id: attemptIdOf(record, 1), attempt_number: 1, runner_id: 'run-gone', transport_session_id: sessionSlugFor(id, 1), claimed_at: isoSeconds(at), allowance_usd: Number((ceilingUsd / 3).toFixed(6)) };
    return { path: claimPath(folderOf(record), 1), bytes: Buffer.from(toYaml(claim)) };
  });
  await w.ledger.append({ files, key: w.actors.coo, now: at, summary: `claim ${ids.join(' ')} attempt 1` });
}

/**
 * A runner on another machine, its wall clock `offsetMs` off real time, that sees the dead runner's
 * claims, waits out their lease on its own monotonic clock, and runs passes until nothing is left
 * to do (bounded): its clock moves with its monotonic one, so a retry's wait passes too.
 */
async function takeOver(w: World, offsetMs: number, options: Parameters<World['runner']>[0] = {}): Promise<void> {
  let tick = 0;
  const start = Date.now();
  const taker = w.runner({ monotonic: () => tick, clock: () => new Date(start + offsetMs + tick), leaseGraceSeconds: 600, ...options });
  await taker.runOnce();
  for (let pass = 0; pass < 4; pass += 1) {
    tick += 1_000_000;
    await taker.runOnce();
  }
}

/** Each attempt of `ids`: its status and blockers, or `open` for one claimed and never receipted. */
async function attemptsOf(w: World, ids: readonly string[]): Promise<string[]> {
  const state = await w.ledger.state();
  return ids.map((id) =>
    state.messages
      .get(id)!
      .attempts.map((attempt) => (attempt.receipt === null ? 'open' : `${attempt.receipt.status}:${attempt.receipt.blockers.join(',')}`))
      .join(' '),
  );
}

async function clean(w: World): Promise<void> {
  expect((await verifyLedger(w.gitdir, { full: true })).findings).toEqual([]);
}

/** What every day and correlation spent stays within the policy's caps. */
async function withinBudgets(w: World): Promise<void> {
  const state = await w.ledger.state();
  const budgets = state.policy!.doc.budgets;
  for (const spent of state.spendByDay.values()) expect(spent).toBeLessThanOrEqual(budgets.daily_cost_cap_usd + 1e-9);
  for (const spent of state.spendByCorrelation.values()) expect(spent).toBeLessThanOrEqual(budgets.max_cost_usd_per_correlation + 1e-9);
}

/** The taker's clock against the dead runner's: hours ahead, minutes behind (within the skew), and minutes ahead past it. */
const OFFSETS: Array<[string, number, number]> = [
  ['three hours ahead of the dead runner’s', 0, 3 * HOUR],
  ['four minutes behind the dead runner’s (within the skew)', 4 * MINUTE, 0],
  ['ten minutes ahead of the dead runner’s (past the skew)', 0, 10 * MINUTE],
];

describe('a panel whose claiming runner died, taken over by a runner on another machine', { timeout: 180_000 }, () => {
  for (const [name, deadAhead, takerAhead] of OFFSETS) {
    it(`its clock ${name}: each member's attempt is receipted interrupted and charged, the panel is asked again whole, each call paid once`, async () => {
      const w = await world({ policy: REVIEW });
      const panel = await enqueuePanel({ ledger: w.ledger, key: w.actors.coo, now: new Date(), repo: w.target, patterns: ['src/add.ts'], question: 'Is add() correct for NaN?', maxRuntimeSeconds: 60, ttlSeconds: DAY_S });
      const ids = panel.members.map((member) => member.messageId);
      await claimedTogetherByAGoneRunner(w, ids, new Date(Date.now() + deadAhead));
      await takeOver(w, takerAhead);
      expect(w.events.filter((event) => event.type === 'takeover')).toHaveLength(2);
      expect(await attemptsOf(w, ids)).toEqual(['failed:interrupted succeeded:', 'failed:interrupted succeeded:']);
      expect(w.server.requests).toHaveLength(2);
      for (const id of ids) expect(((await receiptsOf(w, id))[0]!['actual_cost_usd'] as number) > 0).toBe(true);
      await withinBudgets(w);
      await clean(w);
    });
  }
});

describe('a cross-check whose claiming runner died, taken over by a runner on another machine', { timeout: 180_000 }, () => {
  for (const [name, deadAhead, takerAhead] of OFFSETS) {
    it(`its clock ${name}: the cross-check's attempt is receipted interrupted and charged, then asked again once, and the answer it challenges stays as it was`, async () => {
      const w = await world({ policy: CROSS_CHECKS });
      const asked = await w.consult({ ttlSeconds: DAY_S });
      await w.runner({ monotonic: () => 0 }).runOnce();
      expect((await receiptsOf(w, asked.messageId)).map((receipt) => receipt['status'])).toEqual(['succeeded']);
      const check = await enqueueCrossCheck({ ledger: w.ledger, key: w.actors.coo, now: new Date(), of: asked.messageId, target: 'aa.claude', maxRuntimeSeconds: 60, ttlSeconds: DAY_S });
      const state = await w.ledger.state();
      const { ceilingUsd } = allowanceBoundsUsd(state.messages.get(check.messageId)!, 1, state.policy!.doc, state.registry!.doc);
      await claimedByAGoneRunner(w, check.messageId, Number((ceilingUsd / 3).toFixed(6)), new Date(Date.now() + deadAhead));
      await takeOver(w, takerAhead);
      expect(w.events.filter((event) => event.type === 'takeover')).toHaveLength(1);
      expect(await attemptsOf(w, [asked.messageId, check.messageId])).toEqual(['succeeded:', 'failed:interrupted succeeded:']);
      expect(w.server.requests).toHaveLength(2);
      expect(blockersOf((await receiptsOf(w, check.messageId))[0]!)).toEqual(['interrupted']);
      await withinBudgets(w);
      await clean(w);
    });
  }
});

describe("a consult under a CEO command's budget whose claiming runner died, taken over by a runner on another machine", { timeout: 180_000 }, () => {
  for (const [name, deadAhead, takerAhead] of OFFSETS) {
    it(`its clock ${name}: the attempt is charged what its claim let it spend, the retry is paid once, and the command's correlation spends no more than its budget`, async () => {
      const w = await world();
      const command = await sendCommand({ ledger: w.ledger, key: w.actors.ceo, now: new Date(), text: 'Is add() right?', budgetUsd: 0.5, ttlSeconds: DAY_S });
      const asked = await w.consult({ parentMessageId: command.messageId, maxCostUsd: 0.5, ttlSeconds: DAY_S });
      const state = await w.ledger.state();
      const { ceilingUsd } = allowanceBoundsUsd(state.messages.get(asked.messageId)!, 1, state.policy!.doc, state.registry!.doc);
      const allowanceUsd = Number((ceilingUsd / 3).toFixed(6));
      await claimedByAGoneRunner(w, asked.messageId, allowanceUsd, new Date(Date.now() + deadAhead));
      await takeOver(w, takerAhead);
      expect(w.events.filter((event) => event.type === 'takeover')).toHaveLength(1);
      expect(await attemptsOf(w, [asked.messageId])).toEqual(['failed:interrupted succeeded:']);
      expect(w.server.requests).toHaveLength(1);
      const after = await w.ledger.state();
      const record = after.messages.get(asked.messageId)!;
      // Charged the whole output cap the allowance pays for (to within a token's price).
      expect(record.attempts[0]!.receipt!.costUsd).toBeGreaterThan(allowanceUsd * 0.99);
      expect(record.attempts[0]!.receipt!.costUsd).toBeLessThanOrEqual(allowanceUsd + 1e-9);
      expect(after.spendByCorrelation.get(record.correlation)!).toBeLessThanOrEqual(0.5 + 1e-9);
      await withinBudgets(w);
      await clean(w);
    });
  }
});

/** A dispatch whose attempt 1 a runner that then died claimed at `at` (allowed $1), and a consult its agent asked in it then ($0.30 budget), claimed by that runner too when `consultClaimed`. */
async function dispatchWithAskedConsult(w: World, at: Date, consultClaimed: boolean): Promise<{ dispatchId: string; consultId: string }> {
  const dispatch = dispatchEnvelope({}, new Date()) as EaDispatchMessage;
  await w.ledger.append({ files: messageFiles(dispatch), key: w.actors.coo, summary: 'dispatch', now: new Date() });
  const attemptId = attemptIdFor(dispatch.message_id, 1, 'ea');
  const claim = { schema_version: 'claim.v0', message_id: dispatch.message_id, attempt_id: attemptId, attempt_number: 1, runner_id: 'run-gone', transport_session_id: 'session-gone', claimed_at: isoSeconds(at), allowance_usd: 1 };
  await w.ledger.append({ files: [{ path: claimPath(messageFolder(dispatch.message_id, dispatch.created_at), 1), bytes: Buffer.from(toYaml(claim)) }], key: w.actors.coo, summary: 'claim', now: at });
  const bytes = Buffer.from('export const add = (a: number, b: number) => a + b;\n');
  const asked = await enqueueAskedConsult({ ledger: w.ledger, key: w.actors.coo, now: at, dispatch, attempt: 1, attemptId, target: 'aa.chatgpt', question: 'Is add() right for NaN?', files: [{ path: 'src/add.ts', sha256: sha256Ref(bytes), bytes }], maxCostUsd: 0.3 });
  if (consultClaimed) await claimedByAGoneRunner(w, asked.messageId, 0.3, new Date(at.getTime() + 1000));
  return { dispatchId: dispatch.message_id, consultId: asked.messageId };
}

/** This runner runs no executor: a dispatch's next attempt waits for one that does (and for the CEO). */
const NO_CODEX = { waiting: new Map([['ea.codex', { code: 'EXECUTOR_CONFIG' as const, message: 'codex is not on PATH' }]]) };

describe('a consult an agent asked inside a dispatch attempt, both claimed by a runner that died, taken over by a runner on another machine', { timeout: 180_000 }, () => {
  for (const [name, deadAhead, takerAhead] of OFFSETS) {
    it(`its clock ${name}: the consult and the dispatch attempt are each receipted interrupted, the consult's charge out of the dispatch claim's allowance, not beside it`, async () => {
      const w = await world();
      const { dispatchId, consultId } = await dispatchWithAskedConsult(w, new Date(Date.now() + deadAhead), true);
      await takeOver(w, takerAhead, NO_CODEX);
      expect(w.events.filter((event) => event.type === 'takeover')).toHaveLength(2);
      expect(await attemptsOf(w, [dispatchId, consultId])).toEqual(['failed:interrupted', 'failed:interrupted']);
      const state = await w.ledger.state();
      const [dispatchCost, consultCost] = [dispatchId, consultId].map((id) => state.messages.get(id)!.attempts[0]!.receipt!.costUsd) as [number, number];
      // The consult's call may have been paid: it is charged what its claim let it spend, out of the dispatch claim's $1.
      expect(consultCost).toBeGreaterThan(0.29);
      expect(dispatchCost + consultCost).toBeLessThanOrEqual(1 + 1e-9);
      expect(dispatchCost).toBeGreaterThanOrEqual(0.7 - 1e-9);
      expect(w.server.requests).toHaveLength(0);
      await withinBudgets(w);
      await clean(w);
    });
  }

  it('the consult not yet claimed when the runner died: it is receipted expired and unpaid, and the dispatch attempt is charged its whole allowance (a guard)', async () => {
    const w = await world();
    const { dispatchId, consultId } = await dispatchWithAskedConsult(w, new Date(), false);
    await takeOver(w, 3 * HOUR, NO_CODEX);
    expect(await attemptsOf(w, [dispatchId, consultId])).toEqual(['failed:interrupted', 'blocked:expired']);
    const state = await w.ledger.state();
    expect(state.messages.get(dispatchId)!.attempts[0]!.receipt!.costUsd).toBeCloseTo(1, 9);
    expect(state.messages.get(consultId)!.attempts[0]!.receipt!.costUsd).toBe(0);
    expect(w.server.requests).toHaveLength(0);
    await clean(w);
  });
});

/** A claim of attempt `attempt` of `messageId` by a runner that then goes quiet, dated `at`, allowed `allowanceUsd`. */
async function claimAttemptByAGoneRunner(w: World, messageId: string, attempt: number, allowanceUsd: number, at: Date): Promise<void> {
  const record = (await w.ledger.state()).messages.get(messageId)!;
  const claim = { schema_version: 'claim.v0', message_id: messageId, attempt_id: attemptIdOf(record, attempt), attempt_number: attempt, runner_id: `run-gone-${attempt}`, transport_session_id: `session-gone-${attempt}`, claimed_at: isoSeconds(at), allowance_usd: allowanceUsd };
  await w.ledger.append({ files: [{ path: claimPath(folderOf(record), attempt), bytes: Buffer.from(toYaml(claim)) }], key: w.actors.coo, now: at, summary: `claim ${messageId} attempt ${attempt}` });
}

/**
 * Within the skew only: a receipt the taker dates ahead of a right clock by more than the skew is an
 * entry no right clock's claim may follow (rules/claim.ts claimFloor), on a ledger no hook judges.
 */
const WITHIN_SKEW: Array<[string, number, number]> = [
  ['four minutes behind the dead runner’s', 4 * MINUTE, 0],
  ['four minutes ahead of the dead runner’s', 0, 4 * MINUTE],
];

describe('a dispatch retry the CEO approved, claimed by a runner that died, taken over by a runner on another machine', { timeout: 180_000 }, () => {
  for (const [name, deadAhead, takerAhead] of WITHIN_SKEW) {
    it(`its clock ${name}: each attempt is receipted interrupted and charged what its claim let it spend, no third attempt starts without the CEO, and the dispatch's budget holds`, async () => {
      const w = await world();
      const dispatch = dispatchEnvelope({ budget: { max_cost_usd: 3, max_runtime_seconds: 600, correlation_budget_remaining_usd: null } }, new Date()) as EaDispatchMessage;
      await w.ledger.append({ files: messageFiles(dispatch), key: w.actors.coo, summary: 'dispatch', now: new Date() });
      const id = dispatch.message_id;
      await claimAttemptByAGoneRunner(w, id, 1, 1, new Date(Date.now() + deadAhead));
      await takeOver(w, takerAhead, NO_CODEX);
      expect(await attemptsOf(w, [id])).toEqual(['failed:interrupted']);
      // The time by a right clock once the taker's passes ran (its clock ran on with its monotonic one).
      const then = Date.parse((await w.ledger.state()).messages.get(id)!.attempts[0]!.receipt!.createdAt) - takerAhead;
      await approve({ ledger: w.ledger, key: w.actors.ceo, now: new Date(then + 1000), reason: 'try again', messageId: id });
      await claimAttemptByAGoneRunner(w, id, 2, 1.5, new Date(then + deadAhead + 2000));
      // The taker's clock goes on from where its passes left it.
      await takeOver(w, then + takerAhead - Date.now(), NO_CODEX);
      expect(w.events.filter((event) => event.type === 'takeover')).toHaveLength(2);
      expect(await attemptsOf(w, [id])).toEqual(['failed:interrupted failed:interrupted']);
      const record = (await w.ledger.state()).messages.get(id)!;
      expect(record.attempts.map((attempt) => attempt.receipt!.costUsd)).toEqual([1, 1.5]);
      await withinBudgets(w);
      await clean(w);
    });
  }
});
