import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { sandboxFor } from '../../src/consult/sandbox.js';
import { costUsd } from '../../src/lane/budget.js';
import { appendTrustVersion } from '../../src/ledger/trust-update.js';
import type { ActorPolicy } from '../../src/schema/policy.js';
import { startBounded, watchArgs, writeKey } from '../helpers/damage.js';
import { receiptsOf, worlds, type World } from '../helpers/lane.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * One paid call per attempt, and every paid call in a receipt that names its cost, when what prices
 * the call changed between the claim and its recovery: a runner killed with its Oracle's answer in
 * hand, or with its files gone, and meanwhile a policy that drops or cuts its model's price, a
 * registry that moves its agent to a model no policy prices, or an attempt file (in the sandbox
 * Oracle may write) that names a cheaper model or a price of 0.
 */

const dir = tempDir('money-redteam-33-');
const fresh = worlds(join(dir, 'worlds'));
const env = { OPENAI_API_KEY: 'sk-test-key' };

/** A fresh world with one consult queued, its runner (`args`, its state folder `state`) SIGKILLed at `failpoint`. */
async function killedAt(failpoint: 'after-answer' | 'after-claim'): Promise<{ world: World; messageId: string; state: string; args: string[] }> {
  const world = await fresh();
  const { messageId } = await world.consult();
  const state = join(world.dir, 'watch-state');
  const args = [...watchArgs(world, writeKey(world.dir, 'coo', world.actors.coo), state), '--once'];
  const killed = await startBounded(args, { ...env, COO_FAILPOINT: failpoint }).ended;
  expect(killed.status).not.toBe(0);
  return { world, messageId, state, args };
}

describe('a consult whose runner died after its paid answer, the policy changed before its recovery', () => {
  const changes: Array<[string, (models: ActorPolicy['models'], model: string) => ActorPolicy['models']]> = [
    ['its model dropped from the policy', (models, model) => Object.fromEntries(Object.entries(models).filter(([name]) => name !== model))],
    ['its model priced a thousand times lower', (models, model) => ({ ...models, [model]: { ...models[model]!, input_usd_per_million: models[model]!.input_usd_per_million / 1000, output_usd_per_million: models[model]!.output_usd_per_million / 1000 } })],
  ];
  for (const [change, edit] of changes) {
    it(`(${change}) is harvested at the price it was claimed at: its receipt names the answer's cost, and the model is called once`, async () => {
      const { world, messageId, args } = await killedAt('after-answer');
      expect(world.server.requests).toHaveLength(1);
      const before = await world.ledger.state();
      const model = before.messages.get(messageId)!.attempts[0]!.claim!.model!;
      const policy = before.policy!.doc;
      const price = policy.models[model]!;
      await appendTrustVersion(world.ledger, { role: 'policy', document: { ...policy, version: undefined, models: edit(policy.models, model) } }, world.actors.ceo, new Date());
      const restarted = await startBounded(args, env).ended;
      expect(restarted.status, restarted.stderr).toBe(0);
      const receipts = await receiptsOf(world, messageId);
      expect(receipts).toHaveLength(1);
      const [harvested] = receipts;
      expect(harvested!['status'], JSON.stringify(harvested!['blockers'])).toBe('succeeded');
      const usage = harvested!['usage'] as { input_tokens: number; output_tokens: number; reasoning_tokens: number };
      expect(usage.input_tokens + usage.output_tokens).toBeGreaterThan(0);
      const paid = costUsd(usage.input_tokens, usage.output_tokens + usage.reasoning_tokens, price);
      expect(harvested!['actual_cost_usd']).toBeCloseTo(paid, 6);
      expect(world.server.requests).toHaveLength(1);
    });
  }
});

describe('a consult whose runner died after its paid answer, its attempt file rewritten in the sandbox Oracle may write', () => {
  const rewrites: Array<[string, (recorded: { model: string; price: Record<string, number> }) => object]> = [
    ['a price of 0', (recorded) => ({ ...recorded, price: { ...recorded.price, input_usd_per_million: 0, output_usd_per_million: 0 } })],
    ['a cheaper model, and no price', (recorded) => ({ ...recorded, model: 'gemini-3.1-pro', price: undefined })],
  ];
  for (const [rewrite, edit] of rewrites) {
    it(`is charged at no less than the policy prices the model its claim was made on: ${rewrite} written into the file charges nothing less`, async () => {
      const { world, messageId, state, args } = await killedAt('after-answer');
      const ledgerState = await world.ledger.state();
      const attempt = ledgerState.messages.get(messageId)!.attempts[0]!;
      const file = sandboxFor(state, attempt.attemptId).attemptPath;
      const recorded = JSON.parse(readFileSync(file, 'utf8')) as { model: string; price: Record<string, number> };
      expect(recorded.price['output_usd_per_million']).toBeGreaterThan(0);
      writeFileSync(file, JSON.stringify(edit(recorded)));
      const restarted = await startBounded(args, env).ended;
      expect(restarted.status, restarted.stderr).toBe(0);
      const [harvested] = await receiptsOf(world, messageId);
      expect(harvested!['status']).toBe('succeeded');
      const usage = harvested!['usage'] as { input_tokens: number; output_tokens: number; reasoning_tokens: number };
      const price = ledgerState.policy!.doc.models[attempt.claim!.model!]!;
      expect(harvested!['actual_cost_usd']).toBeCloseTo(costUsd(usage.input_tokens, usage.output_tokens + usage.reasoning_tokens, price), 6);
      expect(harvested!['actual_cost_usd']).toBeGreaterThan(0);
    });
  }
});

describe("a consult whose runner's files went with its state folder, then its model left unpriced", () => {
  // The policy drops the model the claim was made on; or the registry moves the agent to a model the policy never priced.
  const changes: Array<[string, (world: World, model: string) => Promise<void>]> = [
    [
      'the policy drops its model',
      async (world, model) => {
        const policy = (await world.ledger.state()).policy!.doc;
        const models = Object.fromEntries(Object.entries(policy.models).filter(([name]) => name !== model));
        await appendTrustVersion(world.ledger, { role: 'policy', document: { ...policy, version: undefined, models } }, world.actors.ceo, new Date());
      },
    ],
    [
      'the registry moves the agent to a model the policy never priced',
      async (world) => {
        const state = await world.ledger.state();
        const registry = state.registry!.doc;
        const unpriced = 'gpt-5.6';
        expect(state.policy!.doc.models[unpriced]).toBeUndefined();
        const actors = registry.actors.map((actor) => (actor.id === 'aa.chatgpt' ? { ...actor, transport: { ...actor.transport!, model: unpriced } } : actor));
        await appendTrustVersion(world.ledger, { role: 'registry', document: { ...registry, version: undefined, actors } }, world.actors.ceo, new Date());
      },
    ],
  ];
  for (const [change, apply] of changes) {
    it(`(${change}) is charged the allowance its claim states, as any call whose files are gone, and the model is not called again`, async () => {
      const { world, messageId, state, args } = await killedAt('after-claim');
      rmSync(state, { recursive: true, force: true });
      const claim = (await world.ledger.state()).messages.get(messageId)!.attempts[0]!.claim!;
      expect(claim.allowanceUsd).toBeGreaterThan(0);
      await apply(world, claim.model!);
      const restarted = await startBounded(args, env).ended;
      expect(restarted.status, restarted.stderr).toBe(0);
      const [charged] = await receiptsOf(world, messageId);
      expect(charged!['status']).toBe('failed');
      expect(charged!['actual_cost_usd'], JSON.stringify(charged)).toBeCloseTo(claim.allowanceUsd!, 4);
      expect(world.server.requests).toHaveLength(0);
    });
  }
});

describe('a consult whose runner died after its paid answer, its price changed by a later policy, the one its claim was judged by kept in the ledger', () => {
  const scaled = (price: Record<string, number>, factor: number): Record<string, number> => ({ ...price, input_usd_per_million: price['input_usd_per_million']! * factor, output_usd_per_million: price['output_usd_per_million']! * factor });
  const cases: Array<[string, number, boolean]> = [
    ['priced ten times lower since, and the attempt file rewritten to that lower price', 0.1, true],
    ['priced ten times higher since (an honest recovery)', 10, false],
  ];
  for (const [change, factor, rewrite] of cases) {
    it(`(${change}) is charged at the price its claim was judged at, neither less nor more`, async () => {
      const { world, messageId, state, args } = await killedAt('after-answer');
      const before = await world.ledger.state();
      const attempt = before.messages.get(messageId)!.attempts[0]!;
      const model = attempt.claim!.model!;
      const policy = before.policy!.doc;
      const price = policy.models[model]!;
      const later = scaled(price as unknown as Record<string, number>, factor);
      await appendTrustVersion(world.ledger, { role: 'policy', document: { ...policy, version: undefined, models: { ...policy.models, [model]: { ...price, ...later } } } }, world.actors.ceo, new Date());
      if (rewrite) {
        const file = sandboxFor(state, attempt.attemptId).attemptPath;
        const recorded = JSON.parse(readFileSync(file, 'utf8')) as { price: Record<string, number> };
        writeFileSync(file, JSON.stringify({ ...recorded, price: scaled(recorded.price, factor) }));
      }
      const restarted = await startBounded(args, env).ended;
      expect(restarted.status, restarted.stderr).toBe(0);
      const [harvested] = await receiptsOf(world, messageId);
      expect(harvested!['status']).toBe('succeeded');
      const usage = harvested!['usage'] as { input_tokens: number; output_tokens: number; reasoning_tokens: number };
      expect(harvested!['actual_cost_usd']).toBeCloseTo(costUsd(usage.input_tokens, usage.output_tokens + usage.reasoning_tokens, price), 6);
      expect(world.server.requests).toHaveLength(1);
    });
  }
});
