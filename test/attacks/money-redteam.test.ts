import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import type { LedgerState, MessageRecord } from '../../src/authority/state.js';
import { readSession } from '../../src/consult/oracle.js';
import { buildReceipt } from '../../src/consult/receipt.js';
import { accountRun, type DispatchCost } from '../../src/dispatch/executor.js';
import { parseClaudeStream } from '../../src/dispatch/claude-events.js';
import { parseCodexStream } from '../../src/dispatch/codex-events.js';
import { repeatsAKey } from '../../src/dispatch/stream-state.js';
import { crashAllowanceUsd } from '../../src/dispatch/lane.js';
import type { EaDispatchMessage } from '../../src/schema/message.js';
import { defaultPolicy } from '../../src/ledger/init.js';
import type { RunnerRemote } from '../../src/runner/runner.js';
import { attack } from '../helpers/attack-kit.js';
import { receiptMessage, receiptPrice } from '../helpers/consult-receipt.js';
import { claudeStandInReceipt } from '../helpers/hostile-agent.js';
import { makeWorld, receiptsOf, worlds } from '../helpers/lane.js';
import { finished, startRunner } from '../helpers/runner-process.js';
import { makeCase, remoteReceipts } from '../helpers/remote-runners.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * Money under hostile usage figures: an agent (or a provider behind it) that states what it spent
 * as strings, negatives, fractions, numbers past what a count can be, or a key twice. No honest
 * stream states a figure so; the run is charged as the runner charges one that stated nothing (all
 * it was allowed), never below what the figures can be read as, and the receipt says the usage is
 * implausible.
 */

const dir = tempDir('money-redteam');
const PRICE = { inputPerMillion: 3, outputPerMillion: 15 };
const ALLOWANCE = 4;

const line = (value: unknown): string => JSON.stringify(value);
const claudeResult = (usage: unknown, cost: unknown): string => line({ type: 'result', subtype: 'success', is_error: false, result: 'Done.', session_id: 's', usage, total_cost_usd: cost });
const codexTurn = (usage: unknown): string => line({ type: 'turn.completed', usage });
const codexStream = (...turns: string[]): string => [line({ type: 'thread.started', thread_id: 't' }), line({ type: 'turn.started' }), ...turns, ''].join('\n');
const claudeStream = (...events: string[]): string => [line({ type: 'system', subtype: 'init', session_id: 's' }), ...events, ''].join('\n');

const chargeClaude = (stream: string): DispatchCost => accountRun({ started: true, facts: parseClaudeStream(stream) }, PRICE, ALLOWANCE);
const chargeCodex = (stream: string): DispatchCost => accountRun({ started: true, facts: parseCodexStream(stream) }, PRICE, ALLOWANCE);

/** 'charged' when the run is charged at least its allowance and marked implausible; 'accepted' when the lie lowered its charge. */
function verdict(cost: DispatchCost): string {
  if (cost.costUsd < ALLOWANCE) return 'accepted';
  expect(cost.warning).toBe('usage_implausible');
  return 'charged';
}

describe('an execution agent that states its usage figures as no honest stream does', () => {
  attack('a Claude Code result whose input_tokens is the string "900000" beside a plain output count', 'runner', 'charged', () =>
    verdict(chargeClaude(claudeStream(claudeResult({ input_tokens: '900000', output_tokens: 10 }, 0.0002)))),
  );

  attack('a Claude Code model call whose usage states its tokens as strings', 'runner', 'charged', () =>
    verdict(chargeClaude(claudeStream(line({ type: 'assistant', message: { id: 'm1', content: [{ type: 'text', text: 'hi' }], usage: { input_tokens: '9000000', output_tokens: 1 } } }), claudeResult({ input_tokens: 1, output_tokens: 1 }, 0)))),
  );

  attack('a Claude Code result whose total_cost_usd is the string "50"', 'runner', 'charged', () => verdict(chargeClaude(claudeStream(claudeResult({ input_tokens: 10, output_tokens: 10 }, '50')))));

  attack('a Claude Code result whose total_cost_usd is negative', 'runner', 'charged', () => verdict(chargeClaude(claudeStream(claudeResult({ input_tokens: 10, output_tokens: 10 }, -3)))));

  attack('a Codex turn with a negative input count', 'runner', 'charged', () => verdict(chargeCodex(codexStream(codexTurn({ input_tokens: -900000, cached_input_tokens: 0, output_tokens: 10 })))));

  attack('a Codex turn with a fraction of a token', 'runner', 'charged', () => verdict(chargeCodex(codexStream(codexTurn({ input_tokens: 0.5, cached_input_tokens: 0, output_tokens: 10 })))));

  attack('a Codex turn with NaN-like and exponent strings', 'runner', 'charged', () =>
    verdict(chargeCodex(codexStream(codexTurn({ input_tokens: 'NaN', cached_input_tokens: 'Infinity', output_tokens: '1e1', reasoning_output_tokens: 0 })))),
  );

  attack('a Codex turn whose usage is an array', 'runner', 'charged', () => verdict(chargeCodex(codexStream(codexTurn([900000, 10]), codexTurn({ input_tokens: 10, output_tokens: 10 })))));

  attack('a Codex turn with more cached input than input', 'runner', 'charged', () => verdict(chargeCodex(codexStream(codexTurn({ input_tokens: 10, cached_input_tokens: 900000, output_tokens: 10 })))));

  attack('a Codex turn that states input_tokens twice, the spent count first', 'runner', 'charged', () =>
    verdict(chargeCodex(codexStream('{"type":"turn.completed","usage":{"input_tokens":900000,"cached_input_tokens":0,"output_tokens":10,"input_tokens":1}}'))),
  );

  attack('a Codex turn that states input_tokens twice, once spelled with an escape', 'runner', 'charged', () =>
    verdict(chargeCodex(codexStream('{"type":"turn.completed","usage":{"input_tokens":900000,"cached_input_tokens":0,"output_tokens":10,"input\\u005ftokens":1}}'))),
  );

  it('a count stated as a string is charged no less than it reads as, past the allowance', () => {
    const cost = chargeClaude(claudeStream(claudeResult({ input_tokens: '9000000', output_tokens: 0 }, 0)));
    // 9M input tokens at $3 a million: more than the $4 it was allowed.
    expect(cost.costUsd).toBeCloseTo(27, 9);
    expect(cost.warning).toBe('usage_implausible');
  });

  it('usage spread over many model calls is charged their sum, whatever the result states', () => {
    const calls = Array.from({ length: 20 }, (_, index) => line({ type: 'assistant', message: { id: `m${index}`, content: [{ type: 'text', text: 'x' }], usage: { input_tokens: 100_000, output_tokens: 0 } } }));
    const cost = chargeClaude(claudeStream(...calls, claudeResult({ input_tokens: 1, output_tokens: 1 }, 0.0001)));
    // 2M input tokens at $3 a million, and the result's one output token.
    expect(cost.costUsd).toBeCloseTo(6 + 15 / 1e6, 9);
  });

  it('honest streams are charged what they state, with no warning: nulls are figures not stated', () => {
    const claude = chargeClaude(
      claudeStream(
        line({ type: 'assistant', message: { id: 'm1', content: [{ type: 'text', text: 'a' }, { type: 'tool_use', id: 't1', name: 'Bash', input: { command: 'ls', type: 'x' } }], usage: { input_tokens: 100, cache_creation_input_tokens: null, output_tokens: 20 } } }),
        claudeResult({ input_tokens: 100, cache_read_input_tokens: 0, output_tokens: 20, server_tool_use: { web_search_requests: 0 } }, 0.01),
      ),
    );
    expect(claude).toMatchObject({ costUsd: 0.01, warning: null });
    const codex = chargeCodex(codexStream(codexTurn({ input_tokens: 1000, cached_input_tokens: 200, output_tokens: 100, reasoning_output_tokens: 50 })));
    expect(codex.warning).toBeNull();
    expect(codex.costUsd).toBeCloseTo((1000 * 3 + 150 * 15) / 1e6, 12);
  });

  it('a key stated twice is told apart from the same key in different objects', () => {
    expect(repeatsAKey('{"a":{"type":1},"b":[{"type":2},{"type":3}],"type":"x"}')).toBe(false);
    expect(repeatsAKey('{"s":"{\\"a\\":1,\\"a\\":2}","a":1}')).toBe(false);
    expect(repeatsAKey('{"a":[1,{"b":2}],"c":3,"a":4}')).toBe(true);
    expect(repeatsAKey('[{"x":1,"y":{"x":2},"x":3}]')).toBe(true);
  });
});

describe('a Claude Code stand-in that states its tokens as a string', () => {
  const fresh = worlds(join(dir, 'claude'));

  attack('a hostile agent: "input_tokens": "900000" beside a plain output count and a cost of $0.0002', 'runner', 'charged', async () => {
    const print = (json: string): string => `printf '%s\\n' '${json}'`;
    const receipt = await claudeStandInReceipt(fresh, [print(line({ type: 'system', subtype: 'init', session_id: 's' })), print(claudeResult({ input_tokens: '900000', output_tokens: 10 }, 0.0002))].join('\n'), 5);
    if ((receipt['actual_cost_usd'] as number) < 5) return 'accepted';
    // Charged what it was allowed: the $2.70 the string reads as is less.
    expect(receipt['actual_cost_usd']).toBe(5);
    expect((receipt['usage'] as Record<string, number>)['input_tokens']).toBe(900_000);
    expect(receipt['warnings']).toContain('usage_implausible');
    return 'charged';
  });
});

describe('a provider whose usage figures Oracle records as they lie', () => {
  const home = join(dir, 'oracle-home');
  let sessions = 0;

  /**
   * The consult receipt for an answer of 300 bytes to 4,500 bytes sent (about 3,000 tokens as the
   * runner estimated them), whose provider reported `usage` as Oracle's session record keeps it.
   */
  function consultReceipt(usage: unknown): ReturnType<typeof buildReceipt> {
    sessions += 1;
    const slug = `lying-${sessions}`;
    mkdirSync(join(home, 'sessions', slug), { recursive: true });
    writeFileSync(join(home, 'sessions', slug, 'meta.json'), JSON.stringify({ status: 'completed', model: 'gpt-5.5', usage }));
    const meta = readSession(home, slug).meta;
    const sha = `sha256:${'a'.repeat(64)}`;
    return buildReceipt({
      now: new Date('2026-11-30T08:00:00Z'),
      message: receiptMessage,
      record: { id: receiptMessage.message_id, attempts: [] } as unknown as MessageRecord,
      attempt: 1,
      status: 'succeeded',
      blockers: [],
      nextAttemptAt: null,
      policyRef: 'trust/policy/000001.yaml@x',
      transport: { sessionId: slug, model: 'gpt-5.5', route: { provider: 'openai-compatible', offline: true }, meta, price: receiptPrice, estimatedInputTokens: 3000, sentBytes: 4500, answerBytes: 300, uncountedOutputCap: null, bundleHash: sha },
      output: { path: 'messages/2026-11/30/08/m/artifacts/001/answer.md', sha256: sha },
      validation: { status: 'pass', errors: [] },
      warnings: [],
    });
  }

  /** 900,000 input tokens at gpt-5.5's $5 a million. */
  const STATED_USD = 4.5;
  const verdictOf = (receipt: ReturnType<typeof buildReceipt>): string => {
    if (receipt.actual_cost_usd < STATED_USD) return 'accepted';
    expect(receipt.usage?.input_tokens).toBeGreaterThanOrEqual(900_000);
    expect(receipt.blockers.map((blocker) => blocker.code)).toContain('budget_cost_breach');
    return 'charged';
  };

  attack('a provider whose input_tokens is the string "900000" (Oracle adds it to a total as a string)', 'runner', 'charged', () => {
    const receipt = consultReceipt({ inputTokens: '900000', outputTokens: 100, reasoningTokens: 0, totalTokens: '900000100' });
    expect(receipt.warnings).toContain('usage_implausible');
    return verdictOf(receipt);
  });

  attack('a provider that states 900,000 input tokens and a total of 0', 'runner', 'charged', () => verdictOf(consultReceipt({ inputTokens: 900_000, outputTokens: 100, reasoningTokens: 0, totalTokens: 0 })));

  attack('a provider that states a negative output count beside its input', 'runner', 'charged', () => {
    const receipt = consultReceipt({ inputTokens: 900_000, outputTokens: -900_000, reasoningTokens: 0, totalTokens: 100 });
    expect(receipt.warnings).toContain('usage_implausible');
    return verdictOf(receipt);
  });

  attack('a provider whose cost Oracle records as the string "4.5"', 'runner', 'charged', () => {
    const receipt = consultReceipt({ inputTokens: 3000, outputTokens: 100, reasoningTokens: 0, totalTokens: 3100, cost: '4.5' });
    if (receipt.actual_cost_usd < STATED_USD) return 'accepted';
    expect(receipt.warnings).toContain('usage_implausible');
    return 'charged';
  });

  attack('a provider whose usage is a string', 'runner', 'implausible', () => {
    const receipt = consultReceipt('900000');
    return receipt.warnings.includes('usage_implausible') ? 'implausible' : 'accepted';
  });

  it('an honest provider is charged what it states, with no warning', () => {
    const receipt = consultReceipt({ inputTokens: 3000, outputTokens: 100, reasoningTokens: 0, totalTokens: 3100 });
    expect(receipt.warnings).toEqual([]);
    expect(receipt.usage).toMatchObject({ input_tokens: 3000, output_tokens: 100, reported: true });
    expect(receipt.actual_cost_usd).toBeCloseTo(0.018, 9);
  });
});

describe("two runners through one remote at the edge of the day's cap", () => {
  const closers: Array<() => Promise<void> | void> = [];
  afterAll(async () => {
    for (const close of closers.reverse()) await close();
  });

  attack("another runner's receipt lands between a pre-flight and the claim it judged: the claim is judged again on the head it is written on", 'runner', 'not_paid', async () => {
    const base = defaultPolicy();
    const world = await makeCase(dir, closers, { ...base, budgets: { ...base.budgets, daily_cost_cap_usd: 1 } });
    // The first call answers with eight million input tokens ($40): the day's $1 cap is spent by it.
    world.model.setModes(['costly', 'ok']);
    const first = await world.consult();
    const second = await world.consult();
    const a = await world.machine('a');
    const b = await world.machine('b');
    const random = vi.spyOn(Math, 'random');
    try {
      let landed = false;
      // Runner b's whole pass (claim, the costly call, its receipt) lands on the remote after a's
      // pre-flight and before a's claim reaches it: a's push is refused and rebuilt on b's receipt.
      const remote: RunnerRemote = {
        url: a.remote.url,
        sync: () => a.remote.sync(),
        append: async (options) => {
          if (!landed && options.summary.startsWith('claim ')) {
            landed = true;
            random.mockReturnValue(0);
            // b stops after its one receipt: the second message is a's.
            const runner = b.runner({ onEvent: (event) => event.type === 'receipt' && runner.interrupt('one receipt') });
            await runner.runOnce();
          }
          return a.remote.append(options);
        },
      };
      // a picks the second message, b the first (the oldest of the ready ones).
      random.mockReturnValue(0.99);
      await a.runner({ remote }).runOnce();
      expect(landed).toBe(true);
    } finally {
      random.mockRestore();
    }
    expect((await remoteReceipts(world.served, first))[0]?.blockers).toContain('budget_cost_breach');
    if (world.model.requests.length > 1) return 'accepted';
    // Nothing of the second was claimed or paid; the next pass judges it on the spent day.
    expect(await remoteReceipts(world.served, second)).toEqual([]);
    await a.runner().runOnce();
    expect(await remoteReceipts(world.served, second)).toEqual([{ attempt: 1, status: 'blocked', blockers: ['daily_cap_reached'] }]);
    expect(world.model.requests).toHaveLength(1);
    return 'not_paid';
  });
});

describe('a dispatch whose runner died, recovered after others spent', () => {
  attack("receipts of the correlation's other messages landed after its claim: it is charged what its pre-flight allowed, not what is left now", 'library', 'charged', () => {
    const policy = defaultPolicy();
    const correlation = 'corr_0123456789abcdef0123';
    const day = '2026-12-03';
    const receipt = (seq: number, costUsd: number) => ({ path: 'r', status: 'succeeded', blockers: [], costUsd, nextAttemptAt: null, createdAt: `${day}T09:00:00Z`, seq });
    const other = (id: string, seq: number, costUsd: number) => ({ id, correlation, attempts: [{ number: 1, attemptId: `${id}-1`, claim: null, receipt: receipt(seq, costUsd) }] });
    // Claimed at seq 10, when the correlation had spent $16 of its $20: its pre-flight allowed $4.
    const record = { id: 'msg_crashed', correlation, attempts: [{ number: 1, attemptId: 'msg_crashed-1', claim: { path: 'c', session: 's', runner: 'run-gone', at: `${day}T10:00:00Z`, seq: 10 }, receipt: null }] };
    const messages = new Map<string, unknown>([
      ['msg_before', other('msg_before', 5, 16)],
      // Another runner's receipt after the claim: the correlation has now spent $34.
      ['msg_after', other('msg_after', 12, 18)],
      ['msg_crashed', record],
    ]);
    const state = { policy: { doc: policy }, messages, spendByCorrelation: new Map([[correlation, 34]]), spendByDay: new Map([[day, 34]]) } as unknown as LedgerState;
    const message = { correlation_id: correlation, budget: { max_cost_usd: 5 } } as unknown as EaDispatchMessage;
    const allowed = crashAllowanceUsd({ state, record: record as unknown as MessageRecord, message, attempt: 1, consultsUsd: 0, today: '2026-12-04' });
    if (allowed < 4) return 'accepted';
    expect(allowed).toBe(4);
    return 'charged';
  });
});

describe('a consult whose runner died while its provider held the call', () => {
  attack('the recovered attempt whose Oracle never finished: charged as the live lane charges a call that ended unanswered, not $0', 'runner', 'charged', async () => {
    const world = await makeWorld(join(dir, 'consult-crash'), { modes: ['hang'] });
    try {
      const { messageId } = await world.consult({ maxRuntimeSeconds: 3 });
      const first = await finished(startRunner(world, { failpoint: 'during-oracle', realOracle: true }));
      expect(first.signal).toBe('SIGKILL');
      // The next runner waits the hanging Oracle out to its time box, ends it and records the attempt interrupted.
      const again = await finished(startRunner(world, { realOracle: true }));
      expect(again.code, again.stderr).toBe(0);
      const [receipt] = await receiptsOf(world, messageId);
      expect(receipt?.['blockers']).toEqual([expect.objectContaining({ code: 'interrupted' })]);
      if (receipt!['actual_cost_usd'] === 0) return 'accepted';
      expect(receipt!['warnings']).toContain('usage_unreported');
      return 'charged';
    } finally {
      await world.close();
    }
  });
});
