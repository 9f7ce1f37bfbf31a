import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { sandboxFor, type Sandbox } from '../../src/consult/sandbox.js';
import { costUsd, type ModelPrice } from '../../src/lane/budget.js';
import { formatProcessRecord, processStartTime } from '../../src/util/process.js';
import { killedMidCall, recoveredAfterKill, startBounded, until, watchArgs, writeKey } from '../helpers/damage.js';
import { blockersOf, offlineEndpoints, receiptsOf, worlds, type World } from '../helpers/lane.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * One paid call per attempt, and an unanswered one charged what its claim allowed it to cost, when
 * what the sandbox (which Oracle may write) says of the call is not what was: Oracle's pid file
 * removed, made unreadable or pointed at another process, its attempt record removed with it; the
 * attempt file's route renamed to one whose usage record counts the output, or taken out; its
 * runtime budget or its start moved on so that a recovering runner waits past what the envelope
 * allowed. The ledger keeps the claim's allowance, model and route, and the envelope its runtime.
 */

const dir = tempDir('money-redteam-36-');
const fresh = worlds(join(dir, 'worlds'));
const env = { OPENAI_API_KEY: 'sk-test-key' };

type Receipt = Record<string, unknown> & { usage: { input_tokens: number; output_tokens: number; reasoning_tokens: number }; actual_cost_usd: number };

/** The same, its Oracle then SIGKILLed too and its sandbox changed by `edit`; the next start's receipts. */
async function bothDiedAndChanged(world: World, edit: (sandbox: Sandbox) => void) {
  const died = await killedMidCall(world, env);
  process.kill(-died.oracle, 'SIGKILL');
  const recorded = JSON.parse(readFileSync(died.sandbox.attemptPath, 'utf8')) as { max_output_tokens: number; price: ModelPrice };
  edit(died.sandbox);
  return { interrupted: await recoveredAfterKill<Receipt>(world, died, env), claim: died.claim, recorded };
}

describe("a consult whose runner and Oracle died while the model held its call, Oracle's pid file changed", () => {
  const changes: Array<[string, (sandbox: Sandbox) => void]> = [
    ['removed', (sandbox) => rmSync(sandbox.pidPath)],
    ['made words no pid reads from', (sandbox) => writeFileSync(sandbox.pidPath, 'not a pid\n')],
    ['pointed at pid 1, which no runner takes for an Oracle', (sandbox) => writeFileSync(sandbox.pidPath, formatProcessRecord({ pid: 1, start: processStartTime(1) }))],
    ['removed with the attempt file', (sandbox) => (rmSync(sandbox.pidPath), rmSync(sandbox.attemptPath))],
  ];
  for (const [change, edit] of changes) {
    it(`is charged as a call ended unanswered, the whole cap its claim's allowance pays for: its pid file ${change} charges nothing less`, async () => {
      const { interrupted, claim, recorded } = await bothDiedAndChanged(await fresh({ modes: ['hang', 'ok'] }), edit);
      expect(interrupted.usage.output_tokens + interrupted.usage.reasoning_tokens).toBe(recorded.max_output_tokens);
      expect(interrupted.actual_cost_usd).toBeCloseTo(claim.allowanceUsd!, 6);
      expect(interrupted['warnings']).toContain('usage_unreported');
    });
  }

  it('is charged as a call ended unanswered when its pid file names a pid above any Linux gives (none holds it): a record of a start that is gone, charged as before', async () => {
    const { interrupted, claim } = await bothDiedAndChanged(await fresh({ modes: ['hang', 'ok'] }), (sandbox) => writeFileSync(sandbox.pidPath, formatProcessRecord({ pid: 9_999_999, start: '1' })));
    expect(interrupted.actual_cost_usd).toBeCloseTo(claim.allowanceUsd!, 6);
  });
});

describe('a consult on a route whose usage record leaves output out, its runner dead after the paid answer, its attempt file naming another route', () => {
  const rewrites: Array<[string, (route: { name: string; provider: string; offline: boolean }) => object]> = [
    ['renamed to a route whose record counts the output', (route) => ({ route: { ...route, name: 'openai' } })],
    ['taken out', () => ({ route: undefined })],
  ];
  for (const [rewrite, edit] of rewrites) {
    it(`is harvested as answered and charged up to its whole cap, as the route its claim was made on leaves the rest uncounted: its route ${rewrite} charges nothing less`, async () => {
      const world = await fresh();
      const { messageId } = await world.consult({ target: 'aa.gemini' });
      const state = join(world.dir, 'watch-state');
      const args = ['watch', '--ledger', world.gitdir, '--key', writeKey(world.dir, 'coo', world.actors.coo), '--repo', world.target, '--state-dir', state, '--oracle-base-url', `${world.server.url}/v1`, '--oracle-gemini-url', offlineEndpoints(world.server).google!, '--once'];
      const geminiEnv = { GEMINI_API_KEY: 'gemini-test-key' };
      expect((await startBounded(args, { ...geminiEnv, COO_FAILPOINT: 'after-answer' }).ended).status).not.toBe(0);
      expect(world.server.requests).toHaveLength(1);
      const attempt = (await world.ledger.state()).messages.get(messageId)!.attempts[0]!;
      expect(attempt.claim!.route).toBe('google');
      const file = sandboxFor(state, attempt.attemptId).attemptPath;
      const recorded = JSON.parse(readFileSync(file, 'utf8')) as { max_output_tokens: number; route: { name: string; provider: string; offline: boolean }; price: ModelPrice };
      expect(recorded.route.name).toBe('google');
      writeFileSync(file, JSON.stringify({ ...recorded, ...edit(recorded.route) }));
      const restarted = await startBounded(args, geminiEnv).ended;
      expect(restarted.status, restarted.stderr).toBe(0);
      const [harvested] = (await receiptsOf(world, messageId)) as Receipt[];
      expect(harvested!['status'], JSON.stringify(harvested!['blockers'])).toBe('succeeded');
      expect(harvested!.usage.output_tokens + harvested!.usage.reasoning_tokens).toBe(recorded.max_output_tokens);
      expect(harvested!.actual_cost_usd).toBeCloseTo(costUsd(harvested!.usage.input_tokens, recorded.max_output_tokens, recorded.price), 6);
      expect(world.server.requests).toHaveLength(1);
    });
  }
});

describe('a consult whose runner died while its Oracle waits on the model, its attempt file moving its end on', () => {
  const rewrites: Array<[string, (recorded: Record<string, unknown>) => Record<string, unknown>]> = [
    ['a runtime budget of 10^9 seconds', (recorded) => ({ ...recorded, runtime_seconds: 1e9 })],
    ['a start a year on, on the wall clock alone', ({ started_monotonic_ms: _monotonic, ...rest }) => ({ ...rest, started_at: new Date(Date.now() + 365 * 86_400_000).toISOString() })],
  ];
  for (const [rewrite, edit] of rewrites) {
    it(`the next start waits for the Oracle no longer than its envelope's runtime from now, and charges the call: ${rewrite} holds it no longer`, async () => {
      const world = await fresh({ modes: ['hang', 'ok'] });
      const { messageId, envelope, args, claim, sandbox, oracle } = await killedMidCall(world, env);
      writeFileSync(sandbox.attemptPath, JSON.stringify(edit(JSON.parse(readFileSync(sandbox.attemptPath, 'utf8')) as Record<string, unknown>)));
      const next = startBounded([...args, '--json'], env);
      let stdout = '';
      next.child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
      try {
        await until('the orphan event', () => stdout.includes('"oracle_orphan"'));
        // Read after the event was written: whatever time the wait was set at, it was no later than this.
        const seen = Date.now();
        const event = JSON.parse(stdout.split('\n').find((line) => line.includes('"oracle_orphan"'))!) as { messageId: string; pid: number; until: string };
        expect(event).toMatchObject({ messageId, pid: oracle });
        expect(Date.parse(event.until)).toBeLessThanOrEqual(seen + envelope.budget.max_runtime_seconds * 1000);
      } finally {
        process.kill(-oracle, 'SIGKILL');
      }
      expect((await next.ended).status).toBe(0);
      const [interrupted] = (await receiptsOf(world, messageId)) as Receipt[];
      expect(blockersOf(interrupted!)).toEqual(['interrupted']);
      expect(interrupted!.actual_cost_usd).toBeCloseTo(claim.allowanceUsd!, 6);
    });
  }
});

describe('a consult whose runner died after the paid answer, the canary in its attempt file rewritten', () => {
  const rewrites: Array<[string, string]> = [
    ['emptied', ''],
    ['made another', `canary-${'0'.repeat(24)}`],
  ];
  for (const [rewrite, canary] of rewrites) {
    it(`judges the harvested answer against the file's canary, which the answer does not carry: ${rewrite}, the answer fails (output_injection), charged what it cost, and the model is called once`, async () => {
      const world = await fresh();
      const { messageId } = await world.consult();
      const state = join(world.dir, 'watch-state');
      const args = [...watchArgs(world, writeKey(world.dir, 'coo', world.actors.coo), state), '--once'];
      expect((await startBounded(args, { ...env, COO_FAILPOINT: 'after-answer' }).ended).status).not.toBe(0);
      const attempt = (await world.ledger.state()).messages.get(messageId)!.attempts[0]!;
      const file = sandboxFor(state, attempt.attemptId).attemptPath;
      const recorded = JSON.parse(readFileSync(file, 'utf8')) as { canary: string; price: ModelPrice };
      expect(recorded.canary).toMatch(/^canary-[0-9a-f]{24}$/);
      writeFileSync(file, JSON.stringify({ ...recorded, canary }));
      const restarted = await startBounded(args, env).ended;
      expect(restarted.status, restarted.stderr).toBe(0);
      const receipts = (await receiptsOf(world, messageId)) as Receipt[];
      expect(receipts).toHaveLength(1);
      expect(blockersOf(receipts[0]!)).toEqual(['output_injection']);
      expect(receipts[0]!.usage.input_tokens + receipts[0]!.usage.output_tokens).toBeGreaterThan(0);
      expect(receipts[0]!.actual_cost_usd).toBeCloseTo(costUsd(receipts[0]!.usage.input_tokens, receipts[0]!.usage.output_tokens + receipts[0]!.usage.reasoning_tokens, recorded.price), 6);
      expect(world.server.requests).toHaveLength(1);
    });
  }
});
