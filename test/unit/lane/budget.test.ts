import { describe, expect, it } from 'vitest';
import { MIN_OUTPUT_TOKENS, costUsd, jointSpendMovedSince, judgeWithHeld, judgedSpend, planBudget, spendMovedSince } from '../../../src/lane/budget.js';
import type { LedgerState, MessageRecord } from '../../../src/authority/state.js';
import type { ActorPolicy } from '../../../src/schema/policy.js';
import { estimateInputTokens } from '../../../src/consult/input-tokens.js';

const price = { input_usd_per_million: 5, output_usd_per_million: 30, max_output_tokens: 32_000 };

describe('consult budgets', () => {
  it('prices tokens per million', () => {
    expect(costUsd(1_000_000, 0, price)).toBe(5);
    expect(costUsd(1234, 56, price)).toBeCloseTo(0.00785, 8);
  });

  it('estimates input high: three bytes a token plus Oracle overhead', () => {
    expect(estimateInputTokens(300, 3000)).toBe(1100 + 1500);
  });

  it('caps output by the tightest of message, correlation and day, and by the model', () => {
    const plan = planBudget({ price, inputTokens: 2000, messageMaxUsd: 1, correlationRemainingUsd: 0.1, dailyRemainingUsd: 50 });
    expect(plan).toMatchObject({ ok: true, limitUsd: 0.1 });
    if (plan.ok) expect(plan.maxOutputTokens).toBe(Math.floor(((0.1 - 0.01) * 1e6) / 30));
    const roomy = planBudget({ price, inputTokens: 2000, messageMaxUsd: 100, correlationRemainingUsd: 100, dailyRemainingUsd: 100 });
    expect(roomy.ok && roomy.maxOutputTokens).toBe(32_000);
  });

  it.each([
    ['the message budget', { messageMaxUsd: 0.001, correlationRemainingUsd: 10, dailyRemainingUsd: 10 }, 'budget_preflight'],
    ["the correlation's remainder", { messageMaxUsd: 5, correlationRemainingUsd: 0.001, dailyRemainingUsd: 10 }, 'correlation_budget_exhausted'],
    ["the day's remainder", { messageMaxUsd: 5, correlationRemainingUsd: 10, dailyRemainingUsd: 0 }, 'daily_cap_reached'],
  ])('blocks when %s cannot pay for the input and %i output tokens', (_name, limits, blocker) => {
    expect(planBudget({ price, inputTokens: 2000, ...limits })).toMatchObject({ ok: false, blocker });
  });

  it('blocks below the minimum useful output', () => {
    const justUnder = costUsd(2000, MIN_OUTPUT_TOKENS - 1, price);
    expect(planBudget({ price, inputTokens: 2000, messageMaxUsd: justUnder, correlationRemainingUsd: 10, dailyRemainingUsd: 10 }).ok).toBe(false);
    const enough = costUsd(2000, MIN_OUTPUT_TOKENS, price);
    expect(planBudget({ price, inputTokens: 2000, messageMaxUsd: enough + 1e-9, correlationRemainingUsd: 10, dailyRemainingUsd: 10 }).ok).toBe(true);
  });
});

describe('a claim judged again on the state it is written on', () => {
  const budgets = { max_cost_usd_per_message: 1, max_cost_usd_per_correlation: 5, daily_cost_cap_usd: 50, max_runtime_seconds: 600 };
  const at = (correlationUsd: number, dayUsd: number, caps: ActorPolicy['budgets'] = budgets): Pick<LedgerState, 'spendByCorrelation' | 'spendByDay' | 'policy' | 'messages'> => ({
    messages: new Map(),
    spendByCorrelation: new Map([['corr_a', correlationUsd]]),
    spendByDay: new Map([['2026-12-03', dayUsd]]),
    policy: { doc: { budgets: caps } } as unknown as LedgerState['policy'],
  });
  const judged = judgedSpend(at(1, 10), 'corr_a', '2026-12-03', 1);

  it('stands when nothing moved, or when what landed meanwhile still leaves what the attempt may spend', () => {
    expect(spendMovedSince(judged, at(1, 10))).toBeNull();
    // Other runners' receipts of the day, and of its correlation, well within both budgets: the attempt is still admitted.
    expect(spendMovedSince(judged, at(3.5, 40))).toBeNull();
    expect(spendMovedSince(judged, at(4, 49))).toBeNull();
  });

  it('is refused when what landed meanwhile leaves the correlation or the day less than the attempt may spend, or the policy lowered a budget', () => {
    expect(spendMovedSince(judged, at(4.5, 10))).toMatch(/corr_a spent \$4\.5 .* no longer leaves the \$1/);
    expect(spendMovedSince(judged, at(1, 49.5))).toMatch(/2026-12-03 spent \$49\.5 .* no longer leaves the \$1/);
    expect(spendMovedSince(judged, at(1, 10, { ...budgets, daily_cost_cap_usd: 20 }))).toMatch(/lower budgets/);
  });

  it("judges a panel's claims together: what landed meanwhile may leave room for each member and not for all of them", () => {
    // The correlation has $1.5 left: either $1 member alone is admitted, the two together are not.
    expect(spendMovedSince(judged, at(3.5, 10))).toBeNull();
    expect(jointSpendMovedSince([judged, judged], at(3.5, 10))).toMatch(/corr_a spent \$3\.5 .* no longer leaves the \$2/);
    expect(jointSpendMovedSince([judged, judged], at(1, 10))).toBeNull();
  });
});

describe('a claim judged again after a CEO command landed in its correlation', () => {
  const budgets = { max_cost_usd_per_message: 1, max_cost_usd_per_correlation: 5, daily_cost_cap_usd: 50, max_runtime_seconds: 600 };
  const record = (id: string, fields: Record<string, unknown>): [string, MessageRecord] => [id, { id, correlation: 'corr_a', chain: [id], attempts: [], ...fields } as unknown as MessageRecord];
  const at = (commandBudgetUsd: number | null): Pick<LedgerState, 'spendByCorrelation' | 'spendByDay' | 'policy' | 'messages'> => ({
    messages: new Map([record('msg_consult', { intent: 'aa_consult' }), ...(commandBudgetUsd === null ? [] : [record('msg_command', { intent: 'ceo_command', budgetUsd: commandBudgetUsd })])]),
    spendByCorrelation: new Map([['corr_a', 1]]),
    spendByDay: new Map([['2026-12-03', 1]]),
    policy: { doc: { budgets } } as unknown as LedgerState['policy'],
  });
  const judged = judgedSpend(at(null), 'corr_a', '2026-12-03', 1, 'msg_consult');

  it('is refused when the command binds the correlation to less than the attempt may spend, and stands when it leaves enough', () => {
    expect(judged.commandBudgetUsd).toBeNull();
    expect(jointSpendMovedSince([judged], at(1.5))).toMatch(/corr_a is bound by a CEO command's budget of \$1\.5 .* not the none its pre-flight judged, and no longer leaves the \$1/);
    expect(jointSpendMovedSince([judged], at(2))).toBeNull();
    expect(jointSpendMovedSince([judged], at(null))).toBeNull();
    // A command whose budget is above the policy's cap lowers nothing: spend that grew meanwhile is named as the reason.
    const spent = { ...at(9), spendByCorrelation: new Map([['corr_a', 4.5]]) };
    expect(jointSpendMovedSince([judged], spent)).toMatch(/^corr_a spent \$4\.5 /);
  });
});

describe('a pre-flight judged with what open attempts hold', () => {
  const state = { spendByCorrelation: new Map([['corr_a', 2]]), spendByDay: new Map([['2026-12-03', 10]]) };
  const judged = { correlation: 'corr_a', day: '2026-12-03', message: null, spentOnCorrelationUsd: 4.5, spentTodayUsd: 12.5, budgets: null, commandBudgetUsd: null, limitUsd: 0 };
  const judgeAt = (caps: { correlation: number; day: number }) => (spent: { spentOnCorrelationUsd: number; spentTodayUsd: number }) =>
    spent.spentOnCorrelationUsd >= caps.correlation ? ({ kind: 'stop', blocker: 'correlation_budget_exhausted' } as const) : spent.spentTodayUsd >= caps.day ? ({ kind: 'stop', blocker: 'daily_cap_reached' } as const) : ({ kind: 'run' } as const);

  it('holds back an attempt stopped only for what open attempts hold', () => {
    expect(judgeWithHeld(judged, state, judgeAt({ correlation: 4, day: 50 }))).toEqual({ decision: { kind: 'stop', blocker: 'correlation_budget_exhausted' }, heldBack: true });
  });

  it('stops an attempt that what was spent stops, as what was spent stops it', () => {
    expect(judgeWithHeld(judged, state, judgeAt({ correlation: 4, day: 10 }))).toEqual({ decision: { kind: 'stop', blocker: 'daily_cap_reached' }, heldBack: false });
  });

  it('runs an attempt that fits beside what open attempts hold', () => {
    expect(judgeWithHeld(judged, state, judgeAt({ correlation: 20, day: 50 }))).toEqual({ decision: { kind: 'run' }, heldBack: false });
  });
});
