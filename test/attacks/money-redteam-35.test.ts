import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { sandboxFor } from '../../src/consult/sandbox.js';
import { costUsd, type ModelPrice } from '../../src/lane/budget.js';
import { killedMidCall, recoveredAfterKill, startBounded, writeKey } from '../helpers/damage.js';
import { offlineEndpoints, receiptsOf, worlds, type World } from '../helpers/lane.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * One paid call per attempt, and an unanswered one charged what its claim allowed it to cost: a
 * runner SIGKILLed while the model held its call, its Oracle ended with it, and the attempt file (in
 * the sandbox Oracle may write) rewritten before the next start: a lower output cap, a cap that is
 * no number, another session's name; or Oracle's session record made to say it completed, with no
 * answer written. The ledger keeps the claim's allowance and session, and the recovered receipt
 * charges and names from those, whatever the sandbox says.
 */

const dir = tempDir('money-redteam-35-');
const fresh = worlds(join(dir, 'worlds'));
const env = { OPENAI_API_KEY: 'sk-test-key' };

type Receipt = Record<string, unknown> & { usage: { input_tokens: number; output_tokens: number; reasoning_tokens: number }; actual_cost_usd: number };

/**
 * A consult whose runner and Oracle were both SIGKILLed once the question reached the model, its
 * attempt file then rewritten by `edit`, and Oracle's session record (under the claim's session) by `session`.
 */
async function diedAndRewritten(world: World, edit: (recorded: Record<string, unknown>) => Record<string, unknown>, session?: object) {
  const died = await killedMidCall(world, env);
  const { sandbox, claim } = died;
  process.kill(-died.oracle, 'SIGKILL');
  const recorded = JSON.parse(readFileSync(sandbox.attemptPath, 'utf8')) as Record<string, unknown> & { max_output_tokens: number; price: Record<string, number> };
  expect(recorded.max_output_tokens).toBeGreaterThan(0);
  writeFileSync(sandbox.attemptPath, JSON.stringify(edit(recorded)));
  if (session !== undefined) {
    const folder = join(sandbox.oracleHome, 'sessions', claim.session);
    mkdirSync(folder, { recursive: true });
    writeFileSync(join(folder, 'meta.json'), JSON.stringify(session));
  }
  return { interrupted: await recoveredAfterKill<Receipt>(world, died, env), claim, recorded };
}

describe('a consult whose runner and Oracle died while the model held its call, its attempt file rewritten', () => {
  const rewrites: Array<[string, (recorded: Record<string, unknown>) => Record<string, unknown>]> = [
    ['its output cap lowered to 0', (recorded) => ({ ...recorded, max_output_tokens: 0 })],
    ['its output cap made negative', (recorded) => ({ ...recorded, max_output_tokens: -1_000_000 })],
    ['its output cap made a string', (recorded) => ({ ...recorded, max_output_tokens: 'none' })],
    ['its output cap taken out', ({ max_output_tokens: _cap, ...rest }) => rest],
  ];
  for (const [rewrite, edit] of rewrites) {
    it(`is charged the estimated input and the whole cap its claim's allowance pays for: ${rewrite} charges nothing less`, async () => {
      const { interrupted, claim, recorded } = await diedAndRewritten(await fresh({ modes: ['hang', 'ok'] }), edit);
      expect(interrupted.usage.output_tokens + interrupted.usage.reasoning_tokens).toBe(recorded.max_output_tokens);
      expect(interrupted.actual_cost_usd).toBeCloseTo(costUsd(interrupted.usage.input_tokens, recorded.max_output_tokens, recorded.price as never), 6);
      expect(interrupted.actual_cost_usd).toBeCloseTo(claim.allowanceUsd!, 6);
      expect(interrupted['warnings']).toContain('usage_unreported');
    });
  }

  it("is charged the cap its file records when that is more than the claim allowed, up to the model's own cap: the file can raise a charge that far", async () => {
    const { interrupted, recorded } = await diedAndRewritten(await fresh({ modes: ['hang', 'ok'] }), (file) => ({ ...file, max_output_tokens: (file['max_output_tokens'] as number) * 2 }));
    const modelCap = (recorded.price as unknown as { max_output_tokens: number }).max_output_tokens;
    expect(interrupted.usage.output_tokens + interrupted.usage.reasoning_tokens).toBe(Math.max(recorded.max_output_tokens, Math.min(recorded.max_output_tokens * 2, modelCap)));
  });

  it("is charged no more than the claim's or the model's own cap when the file records a cap of 10^12: the charge stays within what any pre-flight hands Oracle", async () => {
    const world = await fresh({ modes: ['hang', 'ok'] });
    const { interrupted, recorded } = await diedAndRewritten(world, (file) => ({ ...file, max_output_tokens: 1e12 }));
    const modelCap = (recorded.price as unknown as { max_output_tokens: number }).max_output_tokens;
    const charged = interrupted.usage.output_tokens + interrupted.usage.reasoning_tokens;
    expect(charged).toBe(Math.max(recorded.max_output_tokens, modelCap));
    expect(interrupted.actual_cost_usd).toBeLessThan(100);
  });

  it('left as its runner wrote it, is charged what its claim allowed, as before', async () => {
    const { interrupted, claim, recorded } = await diedAndRewritten(await fresh({ modes: ['hang', 'ok'] }), (file) => file);
    expect(interrupted.usage.output_tokens + interrupted.usage.reasoning_tokens).toBe(recorded.max_output_tokens);
    expect(interrupted.actual_cost_usd).toBeCloseTo(claim.allowanceUsd!, 6);
  });

  const records: Array<[string, object]> = [
    ['completed, with no usage', { status: 'completed', model: 'gpt-5.5' }],
    ['completed, with its input alone counted', { status: 'completed', model: 'gpt-5.5', usage: { inputTokens: 600, outputTokens: 0, reasoningTokens: 0, totalTokens: 600 } }],
  ];
  for (const [said, record] of records) {
    it(`is charged the whole cap its claim allowed when Oracle's session record says it ${said}: no answer was written, so nothing says the output stopped`, async () => {
      const { interrupted, recorded } = await diedAndRewritten(await fresh({ modes: ['hang', 'ok'] }), (file) => file, record);
      expect(interrupted.usage.output_tokens + interrupted.usage.reasoning_tokens).toBe(recorded.max_output_tokens);
      // The input is as the record counts it, when credible (receipt.ts accountUsage); the output is the whole cap.
      expect(interrupted.actual_cost_usd).toBeCloseTo(costUsd(interrupted.usage.input_tokens, recorded.max_output_tokens, recorded.price as never), 6);
    });
  }

  it("names the session its claim names, not another the file was made to name", async () => {
    const { interrupted, claim } = await diedAndRewritten(await fresh({ modes: ['hang', 'ok'] }), (file) => ({ ...file, slug: 'forged-session' }));
    expect(interrupted['transport_session_id']).toBe(claim.session);
    expect(interrupted.actual_cost_usd).toBeCloseTo(claim.allowanceUsd!, 6);
  });
});

describe("a consult on a route whose usage record leaves output out, its runner dead after the paid answer, its attempt file's cap lowered", () => {
  it("is harvested as answered, charged up to the cap its claim's allowance pays for, as the route's record leaves the rest of the output uncounted", async () => {
    const world = await fresh();
    const { messageId } = await world.consult({ target: 'aa.gemini' });
    const state = join(world.dir, 'watch-state');
    const args = ['watch', '--ledger', world.gitdir, '--key', writeKey(world.dir, 'coo', world.actors.coo), '--repo', world.target, '--state-dir', state, '--oracle-base-url', `${world.server.url}/v1`, '--oracle-gemini-url', offlineEndpoints(world.server).google!, '--once'];
    const geminiEnv = { GEMINI_API_KEY: 'gemini-test-key' };
    const killed = await startBounded(args, { ...geminiEnv, COO_FAILPOINT: 'after-answer' }).ended;
    expect(killed.status).not.toBe(0);
    expect(world.server.requests).toHaveLength(1);
    const attempt = (await world.ledger.state()).messages.get(messageId)!.attempts[0]!;
    const file = sandboxFor(state, attempt.attemptId).attemptPath;
    const recorded = JSON.parse(readFileSync(file, 'utf8')) as { max_output_tokens: number; route: { name: string }; price: ModelPrice };
    expect(recorded.route.name).toBe('google');
    writeFileSync(file, JSON.stringify({ ...recorded, max_output_tokens: 0 }));
    const restarted = await startBounded(args, geminiEnv).ended;
    expect(restarted.status, restarted.stderr).toBe(0);
    const [harvested] = (await receiptsOf(world, messageId)) as Receipt[];
    // Judged against the cap the call was handed: a cap of 0 in the file made a paid answer within it output_too_large, never retried.
    expect(harvested!['status'], JSON.stringify(harvested!['blockers'])).toBe('succeeded');
    expect(harvested!.usage.output_tokens + harvested!.usage.reasoning_tokens).toBe(recorded.max_output_tokens);
    expect(harvested!.actual_cost_usd).toBeCloseTo(costUsd(harvested!.usage.input_tokens, recorded.max_output_tokens, recorded.price), 6);
    expect(world.server.requests).toHaveLength(1);
  });
});
