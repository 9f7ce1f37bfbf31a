import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { costUsd } from '../../src/lane/budget.js';
import { cooBounded, httpOracle, startBounded, until, watchArgs, writeKey } from '../helpers/damage.js';
import { receiptPrice } from '../helpers/consult-receipt.js';
import { blockersOf, receiptsOf, worlds } from '../helpers/lane.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * The runner's state folder removed while Oracle runs, after the model was called: the attempt is
 * receipted `interrupted` and retried, and the call it made was paid for. Oracle's session record
 * went with the folder, so nothing says what the model wrote: the call is charged as a recovery
 * charges a call whose record is unseen (the estimated input and the whole output cap), never as a
 * call that cost nothing, which let every removal buy one more paid call the budget did not count.
 */

const dir = tempDir('consult-vanished-cost-');
const fresh = worlds(dir);
const env = { OPENAI_API_KEY: 'sk-test-key' };

type Receipt = Record<string, unknown> & { usage: { input_tokens: number; output_tokens: number; reasoning_tokens: number }; actual_cost_usd: number; budget_remaining_usd: number };

describe("the runner's state folder removed while the model answers", () => {
  it('charges the interrupted attempt its estimated input and whole output cap, counted against the budget its retry runs under; coo verify accepts the ledger', async () => {
    const world = await fresh({ modes: ['slow'] });
    const { messageId } = await world.consult();
    const state = join(world.dir, 'watch-state');
    const args = [...watchArgs(world, writeKey(world.dir, 'coo', world.actors.coo), state, httpOracle(world.dir)), '--once'];
    const runner = startBounded(args, env);
    await until('the model called', () => world.server.requests.length === 1);
    rmSync(state, { recursive: true, force: true });
    expect((await runner.ended).status).toBe(0);
    const [first, second] = (await receiptsOf(world, messageId)) as Receipt[];
    expect(blockersOf(first!)).toEqual(['interrupted']);
    expect(first!.usage.output_tokens + first!.usage.reasoning_tokens).toBe(receiptPrice.max_output_tokens);
    const charged = costUsd(first!.usage.input_tokens, receiptPrice.max_output_tokens, receiptPrice);
    expect(first!.actual_cost_usd).toBeGreaterThan(0);
    expect(first!.actual_cost_usd).toBeCloseTo(charged, 6);
    expect(first!['warnings']).toContain('usage_unreported');
    // The retry (same run: its next attempt was due at once) answered, under what the first call left.
    expect(second!['status']).toBe('succeeded');
    expect(second!.budget_remaining_usd).toBeCloseTo(first!.budget_remaining_usd - second!.actual_cost_usd, 6);
    expect(cooBounded(['verify', '--ledger', world.gitdir, '--no-checkpoint', '--json']).status).toBe(0);
  });
});
