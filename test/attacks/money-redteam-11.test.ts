import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { LedgerState } from '../../src/authority/state.js';
import type { ActorPolicy } from '../../src/schema/policy.js';
import { allowanceBoundsUsd, costUsd } from '../../src/lane/budget.js';
import { enqueueDispatch } from '../../src/dispatch/enqueue.js';
import { executorFactory } from '../../src/dispatch/executors.js';
import { appendKillSwitch, appendTrustVersion } from '../../src/ledger/trust-update.js';
import type { Runner } from '../../src/runner/runner.js';
import { watchLedger, watchRemote } from '../../src/runner/watch.js';
import { until } from '../helpers/child.js';
import { makeTargetRepo } from '../helpers/dispatch-repo.js';
import { agentScript } from '../helpers/hostile-agent.js';
import { receiptsOf, worlds, type World } from '../helpers/lane.js';
import { claimedByAGoneRunner } from '../helpers/gone-runner.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * What a runner charges for an attempt it did not see end, and when the CEO's stops bind: a cost is
 * never stated lower than what may have been paid, and a stop the CEO writes reaches an attempt
 * already running.
 */

const dir = tempDir('money-redteam-11');
const fresh = worlds(dir);

/** Takes the quiet runner's attempt over: past its lease and its runtime budget plus the grace, on the taker's own clock. */
async function takeOver(w: World, at: Date): Promise<void> {
  let tick = 0;
  const taker = w.runner({ monotonic: () => tick, clock: () => at, leaseGraceSeconds: 600 });
  await taker.runOnce();
  tick = 2_000_000;
  await taker.runOnce();
  expect(w.events.map((event) => event.type)).toContain('takeover');
}

/** The policy's price of the model aa.chatgpt is routed to. */
function priceOf(state: LedgerState): ActorPolicy['models'][string] {
  return state.policy!.doc.models[state.registry!.doc.actors.find((actor) => actor.id === 'aa.chatgpt')!.transport!.model]!;
}

interface ChargedReceipt {
  actual_cost_usd: number;
  warnings: string[];
  blockers: Array<{ code: string; detail: string }>;
  usage: { input_tokens: number; output_tokens: number; reasoning_tokens: number; reported: boolean };
}

describe("a consult taken over from a runner whose lease ran out mid-call", () => {
  it("is charged the allowance its claim states: the worst case that runner's pre-flight let its call spend, its whole output cap", async () => {
    const w = await fresh();
    const { messageId } = await w.consult({ idempotencyKey: 'taken-over-stated' });
    const state = await w.ledger.state();
    // What a pre-flight that handed the call an output cap of 4096 tokens states, within what the ledger admits.
    const allowanceUsd = Math.round(costUsd(0, 4096, priceOf(state)) * 1e6) / 1e6;
    const { floorUsd, ceilingUsd } = allowanceBoundsUsd(state.messages.get(messageId)!, 1, state.policy!.doc, state.registry!.doc);
    expect(allowanceUsd).toBeGreaterThan(floorUsd);
    expect(allowanceUsd).toBeLessThan(ceilingUsd);
    const at = new Date();
    await claimedByAGoneRunner(w, messageId, allowanceUsd, at);
    await takeOver(w, at);

    const [receipt] = (await receiptsOf(w, messageId)) as unknown as ChargedReceipt[];
    expect(receipt!.blockers.map((blocker) => blocker.code)).toEqual(['interrupted']);
    // Not the question's input alone (as if the call had stopped before its first output token): all its claim let it spend.
    const price = priceOf(state);
    const oneToken = price.output_usd_per_million / 1e6;
    expect(receipt!.actual_cost_usd).toBeGreaterThan(allowanceUsd - oneToken - 1e-6);
    expect(receipt!.actual_cost_usd).toBeLessThanOrEqual(allowanceUsd + 1e-6);
    expect(receipt!.usage).toMatchObject({ output_tokens: 0, reported: false });
    expect(receipt!.usage.reasoning_tokens).toBeGreaterThan(0);
    expect(receipt!.warnings).toContain('usage_unreported');
    expect(receipt!.warnings).not.toContain('allowance_unstated');
    expect(receipt!.blockers[0]!.detail).toContain('from the allowance its claim states');
  }, 60_000);

  it("whose claim states no allowance is charged its model's whole output cap, within its message's budget, and says it bounded the cap", async () => {
    const w = await fresh();
    const { messageId } = await w.consult({ idempotencyKey: 'taken-over-unstated' });
    const state = await w.ledger.state();
    const at = new Date();
    await claimedByAGoneRunner(w, messageId, undefined, at);
    await takeOver(w, at);

    const [receipt] = (await receiptsOf(w, messageId)) as unknown as ChargedReceipt[];
    const price = priceOf(state);
    const budgetUsd = state.messages.get(messageId)!.maxCostUsd;
    const input = receipt!.usage.input_tokens;
    const affordable = Math.floor((budgetUsd * 1e6 - input * price.input_usd_per_million) / price.output_usd_per_million);
    expect(receipt!.usage.reasoning_tokens).toBe(Math.min(price.max_output_tokens, affordable));
    expect(receipt!.actual_cost_usd).toBeGreaterThan((input * price.input_usd_per_million) / 1e6);
    expect(receipt!.warnings).toEqual(expect.arrayContaining(['usage_unreported', 'allowance_unstated']));
    expect(receipt!.blockers.map((blocker) => blocker.code)).toEqual(['interrupted']);
  }, 60_000);
});

describe('a dispatch taken over from a runner whose claim states no allowance', () => {
  it('is charged what the ledger let it spend at its claim, and its receipt says the allowance was not stated', async () => {
    const w = await fresh();
    const repo = join(w.dir, 'work');
    makeTargetRepo(repo);
    const { messageId, envelope } = await enqueueDispatch({ ledger: w.ledger, key: w.actors.coo, now: new Date(), repo, target: 'ea.codex', task: 'Fix add() so that test.sh passes.', scope: ['src/**'], accept: ['test.sh passes'], verify: ['sh test.sh'], timeoutSeconds: 60, maxRuntimeSeconds: 60 });
    const at = new Date();
    await claimedByAGoneRunner(w, messageId, undefined, at);
    let tick = 0;
    const taker = w.runner({ repo, monotonic: () => tick, clock: () => at, leaseGraceSeconds: 600 });
    await taker.runOnce();
    tick = 2_000_000;
    await taker.runOnce();
    expect(w.events.map((event) => event.type)).toContain('takeover');
    const [receipt] = await receiptsOf(w, messageId);
    expect(receipt).toMatchObject({ status: 'failed', blockers: [expect.objectContaining({ code: 'interrupted' })] });
    expect(receipt!['actual_cost_usd']).toBe(envelope.budget.max_cost_usd);
    expect(receipt!['warnings']).toEqual(expect.arrayContaining(['usage_unreported', 'allowance_unstated']));
  }, 60_000);
});

describe('a kill switch the CEO turns on while an attempt runs', () => {
  it('stops a dispatch whose agent is working, at the heartbeat that reads it: receipted interrupted by the kill switch, charged what it was allowed', async () => {
    const w = await fresh();
    const repo = join(w.dir, 'work');
    makeTargetRepo(repo);
    const { messageId, envelope } = await enqueueDispatch({ ledger: w.ledger, key: w.actors.coo, now: new Date(), repo, target: 'ea.codex', task: 'Fix add() so that test.sh passes.', scope: ['src/**'], accept: ['test.sh passes'], verify: ['sh test.sh'], timeoutSeconds: 600, maxRuntimeSeconds: 600 });
    const marker = join(w.dir, 'agent-works');
    // An agent that works for minutes: only a stop ends it before its timeout.
    const agent = agentScript(w.dir, '', `touch '${marker}'\nsleep 600`);
    const executors = executorFactory({ command: [agent], hide: [w.gitdir], isolation: 'none', env: { PATH: process.env['PATH'], OPENAI_API_KEY: 'sk-test' } });
    const runner = w.runner({ repo, executors });
    const pass = runner.runOnce();
    await expect.poll(() => existsSync(marker), { timeout: 30_000, interval: 50 }).toBe(true);

    await appendKillSwitch(w.ledger, 'on', 'the agents spend too much', 'ceo', w.actors.ceo, new Date());
    // The watch's next heartbeat lands on the head that holds the switch.
    await runner.heartbeat();
    await pass;

    const [receipt] = await receiptsOf(w, messageId);
    expect(receipt).toMatchObject({ status: 'failed', blockers: [expect.objectContaining({ code: 'interrupted', detail: expect.stringContaining('the kill switch ceo set: the agents spend too much') })] });
    // Cut short, its stream said nothing of its spend: charged what it was allowed, as a run the operator's stop ends.
    expect(receipt!['actual_cost_usd']).toBe(envelope.budget.max_cost_usd);
    expect(receipt!['warnings']).toContain('usage_unreported');

    // The switch stops what runs; it does not stop the runner: with the switch off again, the next work runs.
    await appendKillSwitch(w.ledger, 'off', 'resume', 'ceo', w.actors.ceo, new Date());
    const { messageId: later } = await w.consult({ idempotencyKey: 'after-the-switch', repo, patterns: ['src/add.js'] });
    await runner.runOnce();
    expect((await receiptsOf(w, later)).map((item) => item['status'])).toEqual(['succeeded']);
  }, 120_000);

  it('stops a dispatch in its verification, at the heartbeat that reads it: receipted interrupted, its work not judged, no further command started, its stream\'s spend charged', async () => {
    const w = await fresh();
    const repo = join(w.dir, 'work-verifying');
    makeTargetRepo(repo);
    const marker = join(w.dir, 'verification-runs');
    const after = join(w.dir, 'second-command-ran');
    // The agent fixes the work and ends; the first verification command runs for minutes, the second marks that it ran.
    const { messageId } = await enqueueDispatch({ ledger: w.ledger, key: w.actors.coo, now: new Date(), repo, target: 'ea.codex', task: 'Fix add() so that test.sh passes.', scope: ['src/**'], accept: ['test.sh passes'], verify: [`touch '${marker}'; sleep 600`, `touch '${after}'`], timeoutSeconds: 600, maxRuntimeSeconds: 600, idempotencyKey: 'stopped-in-verification' });
    const agent = agentScript(w.dir, "sed -i 's/a - b/a + b/' src/add.js");
    const executors = executorFactory({ command: [agent], hide: [w.gitdir], isolation: 'none', env: { PATH: process.env['PATH'], OPENAI_API_KEY: 'sk-test' } });
    const runner = w.runner({ repo, executors });
    const pass = runner.runOnce();
    await expect.poll(() => existsSync(marker), { timeout: 30_000, interval: 50 }).toBe(true);

    await appendKillSwitch(w.ledger, 'on', 'stop what runs', 'ceo', w.actors.ceo, new Date());
    await runner.heartbeat();
    await pass;

    const [receipt] = (await receiptsOf(w, messageId)) as unknown as ChargedReceipt[];
    expect(receipt!.blockers).toEqual([{ code: 'interrupted', detail: expect.stringMatching(/the kill switch ceo set: stop what runs\) while the verification ran; 0 of 2 commands ran to their end/) }]);
    expect(existsSync(after)).toBe(false);
    // The agent's stream ended by itself and said what it spent: that is what is charged, not its allowance.
    expect(receipt!.usage.reported).toBe(true);
    expect(receipt!.warnings).not.toContain('usage_unreported');
  }, 120_000);

  it("stops a consult whose model is still answering: receipted interrupted by the kill switch, charged the call's whole output cap", async () => {
    const w = await fresh({ modes: ['hang'] });
    const { messageId } = await w.consult({ idempotencyKey: 'killed-mid-call' });
    const runner = w.runner();
    const pass = runner.runOnce();
    await until(() => w.server.requests.length === 1, 'the model request');

    await appendKillSwitch(w.ledger, 'on', 'stop every consult', 'ceo', w.actors.ceo, new Date());
    await runner.checkKillSwitch();
    await pass;

    const [receipt] = (await receiptsOf(w, messageId)) as unknown as ChargedReceipt[];
    expect(receipt!.blockers.map((blocker) => blocker.code)).toEqual(['interrupted']);
    expect(receipt!.blockers[0]!.detail).toContain('the kill switch ceo set: stop every consult');
    expect(receipt!.usage.reasoning_tokens).toBeGreaterThan(0);
    expect(receipt!.warnings).toContain('usage_unreported');
    // Its retry meets the switch at its pre-flight: blocked, unpaid.
    await runner.runOnce();
    expect(w.server.requests).toHaveLength(1);
  }, 60_000);
});

describe('a kill switch turned on while a local watch without heartbeats runs a consult', () => {
  it('is seen when the head moves, and stops the call in flight with a receipt naming it', async () => {
    const w = await fresh({ modes: ['hang'] });
    const { messageId } = await w.consult({ idempotencyKey: 'killed-under-watch' });
    const runner = w.runner();
    const controller = new AbortController();
    const watching = watchLedger(runner, w.gitdir, { signal: controller.signal });
    try {
      await until(() => w.server.requests.length === 1, 'the model request');
      await appendKillSwitch(w.ledger, 'on', 'pause everything', 'ceo', w.actors.ceo, new Date());
      // The stopped attempt's receipt; its retry, if the watch's next pass reached it, meets the switch at its pre-flight.
      await expect.poll(async () => (await receiptsOf(w, messageId)).length, { timeout: 30_000, interval: 100 }).toBeGreaterThanOrEqual(1);
    } finally {
      controller.abort();
      await watching;
    }
    const [receipt, ...retries] = (await receiptsOf(w, messageId)) as unknown as ChargedReceipt[];
    expect(receipt!.blockers.map((blocker) => blocker.code)).toEqual(['interrupted']);
    expect(receipt!.blockers[0]!.detail).toContain('the kill switch ceo set: pause everything');
    for (const retry of retries) expect(retry.actual_cost_usd).toBe(0);
    expect(w.server.requests).toHaveLength(1);
  }, 60_000);
});

describe('a heartbeat interval the CEO changes while a watch runs', () => {
  it('is the one the runner states after its next heartbeat, from the policy of the head the heartbeat landed on', async () => {
    const w = await fresh();
    const runner = w.runner();
    await runner.heartbeat();
    const policy = (await w.ledger.state()).policy!.doc;
    expect(runner.heartbeatSeconds).toBe(policy.heartbeat.interval_seconds);
    const shorter = Math.floor(policy.heartbeat.interval_seconds / 10);
    await appendTrustVersion(w.ledger, { role: 'policy', document: { ...policy, version: undefined, heartbeat: { ...policy.heartbeat, interval_seconds: shorter } } }, w.actors.ceo, new Date());
    await runner.heartbeat();
    expect(runner.heartbeatSeconds).toBe(shorter);
  }, 60_000);

  describe('a watch', () => {
    afterEach(() => {
      vi.useRealTimers();
    });

    it('beats at the interval of the policy its last heartbeat was written under, not the one it started with', async () => {
      vi.useFakeTimers();
      const beats: number[] = [];
      let interval = 300;
      // A runner whose policy shortens the interval to 30 s after its first beat.
      const runner = {
        cutOffAt: null,
        get heartbeatSeconds(): number {
          return interval;
        },
        heartbeat: (): Promise<number> => {
          beats.push(Date.now());
          if (beats.length === 1) interval = 30;
          return Promise.resolve(beats.length);
        },
        runOnce: () => Promise.resolve({ receipts: 0, waiting: [], held: [] }),
      } as unknown as Runner;
      const controller = new AbortController();
      const watching = watchRemote(runner, { remote: { remoteHead: () => Promise.resolve('a'.repeat(40)) }, signal: controller.signal, heartbeatSeconds: 300, pollSeconds: 1000, maxPollSeconds: 1000 });
      await vi.advanceTimersByTimeAsync(0);
      expect(beats).toHaveLength(1);
      await vi.advanceTimersByTimeAsync(30_000);
      expect(beats).toHaveLength(2);
      await vi.advanceTimersByTimeAsync(30_000);
      expect(beats).toHaveLength(3);
      controller.abort();
      await vi.advanceTimersByTimeAsync(0);
      await watching;
      expect(beats.slice(1).map((at, index) => (at - beats[index]!) / 1000)).toEqual([30, 30]);
    });
  });
});
