import { describe, expect, it } from 'vitest';
import { attemptIdOf } from '../../src/authority/runnable.js';
import { folderOf, type LedgerState } from '../../src/authority/state.js';
import type { ActorPolicy } from '../../src/schema/policy.js';
import { allowanceBoundsUsd, costUsd } from '../../src/lane/budget.js';
import { claimPath } from '../../src/ledger/layout.js';
import { toYaml } from '../../src/schema/strict-yaml.js';
import { sessionSlugFor } from '../../src/util/ids.js';
import { isoSeconds } from '../../src/util/time.js';
import { receiptsOf, worlds, type World } from '../helpers/lane.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * What a runner charges for an attempt it did not see end, and when the CEO's stops bind: a cost is
 * never stated lower than what may have been paid, and a stop the CEO writes reaches an attempt
 * already running.
 */

const dir = tempDir('money-redteam-11');
const fresh = worlds(dir);

/** A claim of attempt 1 of `messageId` by a runner this host knows nothing of, which then went quiet. */
async function claimedByAGoneRunner(w: World, messageId: string, allowanceUsd: number | undefined, at: Date): Promise<void> {
  const record = (await w.ledger.state()).messages.get(messageId)!;
  const claim = {
    schema_version: 'claim.v0',
    message_id: messageId,
    attempt_id: attemptIdOf(record, 1),
    attempt_number: 1,
    runner_id: 'run-gone',
    transport_session_id: sessionSlugFor(messageId, 1),
    claimed_at: isoSeconds(at),
    ...(allowanceUsd === undefined ? {} : { allowance_usd: allowanceUsd }),
  };
  await w.ledger.append({ files: [{ path: claimPath(folderOf(record), 1), bytes: Buffer.from(toYaml(claim)) }], key: w.actors.coo, now: at, summary: `claim ${messageId} attempt 1` });
}

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
