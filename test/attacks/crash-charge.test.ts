import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { startBounded, watchArgs, writeKey } from '../helpers/damage.js';
import { blockersOf, receiptsOf, worlds } from '../helpers/lane.js';
import { agentScript, codesOf, dispatchTo, hostilePlaces, receiptsFor, watchOnce } from '../helpers/hostile-agent.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * A runner SIGKILLed right after its claim landed, before it started Oracle or its executor (the
 * `after-claim` failpoint), its state folder left as it was: the next start finds no attempt files
 * because none were made, and charges the attempt nothing, as the record shows no start. The same
 * crash with the state folder then removed and made again is charged from the claim, as a call
 * whose files went with the folder may have been paid.
 */

const dir = tempDir('crash-charge-');
const fresh = worlds(join(dir, 'worlds'));
const env = { OPENAI_API_KEY: 'sk-test-key' };

describe('a consult runner SIGKILLed after its claim, before Oracle started', () => {
  for (const removed of [false, true]) {
    it(`the next start receipts it interrupted, charged ${removed ? 'from its claim (its state folder removed)' : '$0 (its state folder intact: no call was made)'}; the model is called once, for the retry`, async () => {
      const world = await fresh();
      const { messageId } = await world.consult();
      const state = join(world.dir, 'watch-state');
      const args = [...watchArgs(world, writeKey(world.dir, 'coo', world.actors.coo), state), '--once'];
      const killed = await startBounded(args, { ...env, COO_FAILPOINT: 'after-claim' }).ended;
      expect(killed.status).not.toBe(0);
      expect(world.server.requests).toHaveLength(0);
      if (removed) rmSync(state, { recursive: true, force: true });
      expect((await startBounded(args, env).ended).status).toBe(0);
      const [first, second] = await receiptsOf(world, messageId);
      expect(blockersOf(first!)).toEqual(['interrupted']);
      if (removed) expect(first!['actual_cost_usd']).toBeGreaterThan(0);
      else expect(first!['actual_cost_usd']).toBe(0);
      expect(second!['status']).toBe('succeeded');
      expect(world.server.requests).toHaveLength(1);
    });
  }
});

describe('a dispatch runner SIGKILLed after its claim, before its executor started', () => {
  const place = hostilePlaces(join(dir, 'dispatch'), 'charge');

  for (const removed of [false, true]) {
    it(`the next start receipts it interrupted, charged ${removed ? 'what it was allowed (its state folder removed)' : '$0 (its state folder intact: nothing ran)'}`, async () => {
      const where = await place(removed ? 'removed' : 'intact');
      const { messageId, envelope } = await dispatchTo(where, removed ? 'removed' : 'intact');
      const agent = agentScript(where.world.dir, 'true', '');
      expect(watchOnce(where, agent, { env: { COO_FAILPOINT: 'after-claim' } }).signal).toBe('SIGKILL');
      if (removed) rmSync(where.stateDir, { recursive: true, force: true });
      expect(watchOnce(where, agent).hung).toBe(false);
      const [receipt] = await receiptsFor(where, messageId);
      expect(codesOf(receipt)).toEqual(['interrupted']);
      if (removed) {
        expect(receipt!['actual_cost_usd']).toBe(envelope.budget.max_cost_usd);
        expect(receipt!['warnings']).toContain('usage_unreported');
      } else {
        expect(receipt!['actual_cost_usd']).toBe(0);
        expect(receipt!['warnings']).not.toContain('usage_unreported');
      }
    });
  }
});
