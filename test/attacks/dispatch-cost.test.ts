import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { enqueueDispatch } from '../../src/dispatch/enqueue.js';
import { accountRun } from '../../src/dispatch/executor.js';
import { executorFactory } from '../../src/dispatch/executors.js';
import { runExecutorProcess } from '../../src/dispatch/process.js';
import { codexStreamState } from '../../src/dispatch/codex-events.js';
import { eaReceipt } from '../../src/schema/receipt.js';
import { MAX_USD } from '../../src/schema/common.js';
import { attack } from '../helpers/attack-kit.js';
import { agentScript, codesOf, dispatchTo, hostilePlaces, receiptsFor, watchOnce, type HostilePlace, claudeStandInReceipt, FIX } from '../helpers/hostile-agent.js';
import { makeTargetRepo } from '../helpers/dispatch-repo.js';
import { receiptsOf, worlds } from '../helpers/lane.js';
import { requireBubblewrap } from '../helpers/bubblewrap.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * A hostile execution agent (or a script in its place) that calls the model with the key it was
 * handed and then says nothing of what it spent, or says it spent nothing beside a million tokens:
 * the attempt's recorded cost is what the correlation and daily budgets count, so it is never
 * below what the runner can know: the floor the stated tokens give at the policy's price, or,
 * when nothing is stated, all the attempt was allowed to spend.
 */

const dir = tempDir('dispatch-cost');
const event = (value: unknown): string => `printf '%s\\n' '${JSON.stringify(value)}'`;

/** A Codex stream that finishes its turn with `usage` (omitted: no turn.completed at all). */
function codexStream(usage?: Record<string, unknown>): string {
  return [
    event({ type: 'thread.started', thread_id: 'thread-cost' }),
    event({ type: 'turn.started' }),
    event({ type: 'item.completed', item: { id: 'i1', type: 'agent_message', text: 'Done.' } }),
    ...(usage === undefined ? [] : [event({ type: 'turn.completed', usage })]),
  ].join('\n');
}

/** A Claude Code stream that ends in a successful result with `usage` and `total_cost_usd`. */
function claudeStream(usage: Record<string, unknown>, cost: unknown): string {
  return [
    event({ type: 'system', subtype: 'init', session_id: 'session-cost' }),
    event({ type: 'result', subtype: 'success', is_error: false, result: 'Done.', session_id: 'session-cost', usage, total_cost_usd: cost }),
  ].join('\n');
}

describe('a hostile agent that hides what its dispatch cost', () => {
  const place = hostilePlaces(dir, 'codex');

  async function codexReceipt(name: string, stream: string): Promise<{ receipt: Record<string, unknown>; where: HostilePlace; budget: number }> {
    const where = await place(name);
    const { messageId, envelope } = await dispatchTo(where, name);
    const watch = watchOnce(where, agentScript(where.world.dir, FIX, stream));
    expect(watch.hung).toBe(false);
    const [receipt] = await receiptsFor(where, messageId);
    expect(receipt, watch.stderr).toBeDefined();
    // Whatever it stated, the receipt is one its own schema takes.
    expect(eaReceipt.safeParse(receipt).success).toBe(true);
    return { receipt: receipt!, where, budget: envelope.budget.max_cost_usd };
  }

  attack('a hostile agent: a finished turn that states no usage at all', 'runner', 'charged', async () => {
    const { receipt, budget } = await codexReceipt('silent', codexStream({}));
    if (receipt['actual_cost_usd'] === 0) return 'accepted';
    expect(receipt['actual_cost_usd']).toBe(budget);
    expect(receipt['usage']).toBeNull();
    expect(receipt['warnings']).toContain('usage_unreported');
    // Charged what it was allowed: not over it.
    expect(codesOf(receipt)).not.toContain('budget_cost_breach');
    expect(receipt['status']).toBe('succeeded');
    return 'charged';
  });

  attack('a hostile agent: a stream with no terminal event and no usage', 'runner', 'charged', async () => {
    const { receipt, budget } = await codexReceipt('no-turn', codexStream());
    if (receipt['actual_cost_usd'] === 0) return 'accepted';
    expect(receipt['actual_cost_usd']).toBe(budget);
    expect(receipt['warnings']).toContain('usage_unreported');
    expect(codesOf(receipt)).not.toContain('budget_cost_breach');
    return 'charged';
  });

  attack('a runner SIGKILLed while its agent ran: the recovered attempt', 'runner', 'charged', async () => {
    const where = await place('crash');
    const { messageId, envelope } = await dispatchTo(where, 'crash');
    const agent = agentScript(where.world.dir, 'sleep 60', '');
    const first = watchOnce(where, agent, { env: { COO_FAILPOINT: 'during-executor' } });
    expect(first.signal).toBe('SIGKILL');
    const again = watchOnce(where, agent);
    expect(again.hung).toBe(false);
    const [receipt] = await receiptsFor(where, messageId);
    expect(codesOf(receipt)).toEqual(['interrupted']);
    expect(eaReceipt.safeParse(receipt).success).toBe(true);
    if (receipt!['actual_cost_usd'] === 0) return 'accepted';
    expect(receipt!['actual_cost_usd']).toBe(envelope.budget.max_cost_usd);
    expect(receipt!['warnings']).toContain('usage_unreported');
    return 'charged';
  });

  attack('a hostile agent: huge, negative and fractional token counts', 'runner', 'bounded', async () => {
    const { receipt } = await codexReceipt('huge', codexStream({ input_tokens: 1e300, cached_input_tokens: -5, output_tokens: 1.5, reasoning_output_tokens: Number.MAX_SAFE_INTEGER + 2 }));
    const usage = receipt['usage'] as Record<string, number>;
    expect(usage['input_tokens']).toBe(Number.MAX_SAFE_INTEGER);
    // A fraction of a token is read up: never under what it can be read as.
    expect(usage['output_tokens']).toBe(2);
    expect(usage['total_tokens']).toBe(Number.MAX_SAFE_INTEGER);
    expect(receipt['actual_cost_usd']).toBe(MAX_USD);
    expect(receipt['warnings']).toContain('usage_implausible');
    expect(codesOf(receipt)).toContain('budget_cost_breach');
    return 'bounded';
  });
});

describe('a Claude Code stand-in that states a cost below its tokens', () => {
  const fresh = worlds(join(dir, 'claude'));

  const claudeReceipt = (stream: string, budget?: number, timeoutSeconds?: number): Promise<Record<string, unknown>> => claudeStandInReceipt(fresh, stream, budget, timeoutSeconds);

  attack('a hostile agent: a million input tokens with total_cost_usd 0', 'runner', 'raised', async () => {
    const receipt = await claudeReceipt(claudeStream({ input_tokens: 1_000_000, output_tokens: 1000 }, 0));
    if (receipt['actual_cost_usd'] === 0) return 'accepted';
    // claude-4.6-sonnet at the default policy's $3 / $15 per million.
    expect(receipt['actual_cost_usd']).toBeCloseTo(3.015, 9);
    expect(receipt['warnings']).toContain('usage_implausible');
    expect((receipt['usage'] as Record<string, number>)['input_tokens']).toBe(1_000_000);
    return 'raised';
  });

  attack('a hostile agent: a stated cost over the schema bound', 'runner', 'bounded', async () => {
    const receipt = await claudeReceipt(claudeStream({ input_tokens: 10, output_tokens: 10 }, 1e300));
    expect(receipt['actual_cost_usd']).toBe(MAX_USD);
    expect(codesOf(receipt)).toContain('budget_cost_breach');
    return 'bounded';
  });

  attack('a hostile agent: a stated cost of 0 beside tokens over the budget, then it keeps running', 'runner', 'killed_at_cost', async () => {
    // The live bound counts the floor: the run is stopped for its cost, not left to its time box.
    const receipt = await claudeReceipt(`${claudeStream({ input_tokens: 1_000_000, output_tokens: 0 }, 0)}\nsleep 30`, 1, 10);
    const codes = codesOf(receipt);
    if (codes.includes('budget_runtime_breach')) return 'ran to its time box';
    expect(codes).toContain('budget_cost_breach');
    return 'killed_at_cost';
  });

  it('cache reads are left out of the floor: an honest cached run carries no warning', async () => {
    const receipt = await claudeReceipt(claudeStream({ input_tokens: 100, cache_read_input_tokens: 1_000_000, output_tokens: 100 }, 0.31));
    expect(receipt['actual_cost_usd']).toBe(0.31);
    expect(receipt['warnings']).not.toContain('usage_implausible');
    expect(receipt['status']).toBe('succeeded');
  });
});

describe('an agent that runs on until the operator stops the runner', () => {
  const fresh = worlds(join(dir, 'stopped'));

  /** A Codex dispatch whose agent prints `stream`, then waits to be stopped: the runner is interrupted once it waits. */
  async function stoppedReceipt(stream: string): Promise<{ receipt: Record<string, unknown>; budget: number }> {
    const w = await fresh();
    const repo = join(w.dir, 'work');
    makeTargetRepo(repo);
    const { messageId, envelope } = await enqueueDispatch({ ledger: w.ledger, key: w.actors.coo, now: new Date(), repo, target: 'ea.codex', task: 'Fix add() so that test.sh passes.', scope: ['src/**'], accept: ['test.sh passes'], verify: ['sh test.sh'], timeoutSeconds: 60, maxRuntimeSeconds: 60 });
    const marker = join(w.dir, 'agent-waits');
    const agent = agentScript(w.dir, '', `${stream}\ntouch '${marker}'\nsleep 60`);
    const executors = executorFactory({ command: [agent], hide: [w.gitdir], isolation: 'none', env: { PATH: process.env['PATH'], OPENAI_API_KEY: 'sk-test' } });
    const runner = w.runner({ repo, executors });
    const pass = runner.runOnce();
    // The agent has printed all it will once it waits: the stop comes after, whenever the runner sees it.
    await expect.poll(() => existsSync(marker), { timeout: 30_000, interval: 50 }).toBe(true);
    runner.interrupt('SIGINT');
    await pass;
    const [receipt] = await receiptsOf(w, messageId);
    expect(receipt).toBeDefined();
    expect(codesOf(receipt)).toEqual(['interrupted']);
    expect(eaReceipt.safeParse(receipt).success).toBe(true);
    return { receipt: receipt!, budget: envelope.budget.max_cost_usd };
  }

  attack('a hostile agent: states its tokens, then runs until the runner is stopped', 'runner', 'charged', async () => {
    const { receipt } = await stoppedReceipt(codexStream({ input_tokens: 100_000, cached_input_tokens: 0, output_tokens: 1000 }));
    if (receipt['actual_cost_usd'] === 0) return 'accepted';
    // gpt-5.5 at the default policy's $5 / $30 per million.
    expect(receipt['actual_cost_usd']).toBeCloseTo(0.53, 9);
    expect((receipt['usage'] as Record<string, number>)['input_tokens']).toBe(100_000);
    return 'charged';
  });

  attack('a hostile agent: states nothing, then runs until the runner is stopped', 'runner', 'charged', async () => {
    const { receipt, budget } = await stoppedReceipt(codexStream());
    if (receipt['actual_cost_usd'] === 0) return 'accepted';
    expect(receipt['actual_cost_usd']).toBe(budget);
    expect(receipt['usage']).toBeNull();
    expect(receipt['warnings']).toContain('usage_unreported');
    return 'charged';
  });
});

describe('what a run is charged', () => {
  const price = { inputPerMillion: 3, outputPerMillion: 15 };
  const facts = (usage: Parameters<typeof accountRun>[0]['facts']['usage']) => ({ usage, observedUsage: null }) as Parameters<typeof accountRun>[0]['facts'];

  it('an executor that never started cost nothing and says nothing of usage', async () => {
    const run = await runExecutorProcess({ executor: 'codex', attemptId: 'ea_attempt_X_1', argv: [join(dir, 'no-such-executor')], cwd: dir, env: {}, isolation: 'none', writable: [], readOnly: [], hide: [], timeoutSeconds: 5, state: codexStreamState() });
    expect(run.started).toBe(false);
    expect(accountRun(run, price, 4)).toEqual({ usage: null, costUsd: 0, warning: null });
  });

  it('an executor whose sandbox could not be set up ran nothing and cost nothing; one whose sandbox stood started', async () => {
    requireBubblewrap('running an executor in its sandbox');
    const script = join(dir, 'silent-executor.sh');
    writeFileSync(script, '#!/bin/sh\nexit 1\n', { mode: 0o755 });
    const plan = { executor: 'codex' as const, attemptId: 'ea_attempt_X_1', argv: [script], cwd: dir, env: {}, isolation: 'bwrap' as const, readOnly: [], hide: [], timeoutSeconds: 5, state: codexStreamState() };
    // bubblewrap itself starts, and fails before the executor runs: a writable path that is not there.
    const failed = await runExecutorProcess({ ...plan, writable: [dir, join(dir, 'gone-before-the-sandbox-stood')] });
    expect(failed.stderrTail).toMatch(/^bwrap: /m);
    expect(failed.started).toBe(false);
    expect(accountRun(failed, price, 4)).toEqual({ usage: null, costUsd: 0, warning: null });
    const stood = await runExecutorProcess({ ...plan, writable: [dir], state: codexStreamState() });
    expect(stood.exitCode).toBe(1);
    expect(stood.started).toBe(true);
    expect(accountRun(stood, price, 4)).toEqual({ usage: null, costUsd: 4, warning: 'usage_unreported' });
  });

  it('a run that started and stated nothing is charged its allowance, a cost under the floor is raised to it', () => {
    expect(accountRun({ started: true, facts: facts(null) }, price, 4)).toEqual({ usage: null, costUsd: 4, warning: 'usage_unreported' });
    const low = { inputTokens: 2_000_000, cachedInputTokens: 1_000_000, outputTokens: 0, reasoningTokens: 0, costUsd: 1 };
    expect(accountRun({ started: true, facts: facts(low) }, price, 4)).toMatchObject({ costUsd: 3, warning: 'usage_implausible' });
    expect(accountRun({ started: true, facts: facts({ ...low, costUsd: 3.5 }) }, price, 4)).toMatchObject({ costUsd: 3.5, warning: null });
  });
});
