import { describe, expect, it } from 'vitest';
import type { FakeMode } from '../../src/offline/fake-model-server.js';
import { blockersOf, receiptsOf, worlds, type World } from '../helpers/lane.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * aa.claude and aa.gemini through the real Oracle, each against a loopback model speaking its
 * provider's own API (Anthropic's Messages API through Oracle's Claude client, the Gemini API
 * through @google/genai): what each outcome leaves in the COO-signed receipt.
 */
const fresh = worlds(tempDir());

interface Provider {
  readonly actor: 'aa.claude' | 'aa.gemini';
  readonly model: string;
  readonly route: { readonly provider: string; readonly offline: boolean };
  /** Dollars per million tokens in and out: the default policy's price, which is Oracle's. */
  readonly price: readonly [number, number];
  /** Oracle's record leaves out output the provider bills (Gemini's thinking): the receipt charges the whole cap. */
  readonly partialUsage: boolean;
}

const providers: Provider[] = [
  { actor: 'aa.claude', model: 'claude-4.6-sonnet', route: { provider: 'anthropic', offline: true }, price: [3, 15], partialUsage: false },
  { actor: 'aa.gemini', model: 'gemini-3.1-pro', route: { provider: 'google', offline: true }, price: [2, 12], partialUsage: true },
];

async function run(w: World, provider: Provider, modes: FakeMode[], maxCostUsd = 1): Promise<Array<Record<string, unknown>>> {
  w.server.setModes(modes);
  const { messageId } = await w.consult({ target: provider.actor, maxCostUsd, idempotencyKey: `${provider.actor}-${modes.join('-')}-${maxCostUsd}` });
  await w.runner().runOnce();
  return receiptsOf(w, messageId);
}

describe.each(providers)('a consult to $actor through Oracle', (provider) => {
  it("succeeds with a receipt naming the model and the provider's route, priced from the provider's usage report", async () => {
    const w = await fresh();
    const [receipt] = await run(w, provider, ['ok']);
    expect(receipt).toMatchObject({ status: 'succeeded', target_actor: provider.actor, model: provider.model, route: provider.route, authority_class: 'advisory_only' });
    const usage = receipt!['usage'] as { input_tokens: number; output_tokens: number; reasoning_tokens: number; reported: boolean };
    expect(usage.output_tokens).toBeGreaterThan(0);
    expect(w.server.requests).toHaveLength(1);
    if (provider.partialUsage) {
      // The thinking Oracle's record leaves out is charged up to the cap the request asked for, and the usage is marked unreported.
      expect(usage.reported).toBe(false);
      expect(receipt!['warnings']).toContain('usage_partial');
      expect(usage.output_tokens + usage.reasoning_tokens).toBe(w.server.requests[0]!.maxTokens);
    } else {
      expect(usage.reported).toBe(true);
    }
    expect(receipt!['actual_cost_usd']).toBeCloseTo((usage.input_tokens * provider.price[0] + (usage.output_tokens + usage.reasoning_tokens) * provider.price[1]) / 1e6, 6);
  });

  it('ends on a quota error with aa_unavailable:quota, not retried, priced at the input estimate marked unreported', async () => {
    const w = await fresh();
    const receipts = await run(w, provider, ['quota']);
    expect(receipts).toHaveLength(1);
    expect(receipts[0]).toMatchObject({ status: 'failed', next_attempt_at: null, output_ref: null, usage: { reported: false, output_tokens: 0 } });
    expect(receipts[0]!['warnings']).toContain('usage_unreported');
    expect(blockersOf(receipts[0]!)).toEqual(['aa_unavailable:quota']);
  });

  it('retries a 5xx as aa_unavailable:transport, each attempt with its own receipt', async () => {
    const w = await fresh();
    const receipts = await run(w, provider, ['server-error', 'ok']);
    expect(receipts.map((receipt) => receipt['status'])).toEqual(['failed', 'succeeded']);
    expect(blockersOf(receipts[0]!)).toEqual(['aa_unavailable:transport']);
    expect(w.server.requests).toHaveLength(2);
  });

  it('fails an answer without its aa_answer block as output_invalid, within the malformed-output retries', async () => {
    const w = await fresh();
    const receipts = await run(w, provider, ['malformed']);
    expect(receipts.map((receipt) => blockersOf(receipt))).toEqual([['output_invalid'], ['output_invalid']]);
    expect(receipts.every((receipt) => receipt['output_ref'] !== null && (receipt['actual_cost_usd'] as number) > 0)).toBe(true);
  });

  it('fails an answer over the artifact limit as output_too_large, and stores none of it', async () => {
    const w = await fresh();
    const [receipt] = await run(w, provider, ['huge'], 5);
    expect(receipt!['status']).toBe('failed');
    expect(blockersOf(receipt!)).toContain('output_too_large');
    expect(receipt!['output_ref']).toBeNull();
    expect(receipt!['next_attempt_at']).toBeNull();
  });

  it('fails an answer that stopped at the output cap as output_too_large, though Oracle called it completed, and keeps it unjudged', async () => {
    const w = await fresh();
    const [receipt] = await run(w, provider, ['cut']);
    expect(receipt).toMatchObject({ status: 'failed', next_attempt_at: null, output_validation: { status: 'not_run' } });
    expect(blockersOf(receipt!)).toEqual(['output_too_large']);
    expect((receipt!['blockers'] as Array<{ detail: string }>)[0]!.detail).toMatch(/^the answer reached the \d+-token output cap and was cut there/);
    expect(receipt!['output_ref']).not.toBeNull();
  });
});

describe("Claude's fixed output size", () => {
  it('budgets for the 2048 output tokens Oracle always asks Claude for: a budget that pays only for less blocks before anything is paid', async () => {
    const w = await fresh();
    // About 1,600 input tokens at $3 and 2,048 output tokens at $15 per million: about $0.036.
    const [blocked] = await run(w, providers[0]!, ['ok'], 0.03);
    expect(blocked).toMatchObject({ status: 'blocked' });
    expect(blockersOf(blocked!)).toEqual(['budget_preflight']);
    expect(String((blocked!['blockers'] as Array<{ detail: string }>)[0]!.detail)).toContain('2048 output tokens');
    // The same budget pays for a Gemini consult, whose cap the budget sets.
    const [gemini] = await run(w, providers[1]!, ['ok'], 0.03);
    expect(gemini!['status']).toBe('succeeded');
    expect(w.server.requests).toHaveLength(1);
    const [ran] = await run(w, providers[0]!, ['ok'], 0.05);
    expect(ran!['status']).toBe('succeeded');
    expect(w.server.requests[1]!.maxTokens).toBe(2048);
  });
});
