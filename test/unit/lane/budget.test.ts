import { describe, expect, it } from 'vitest';
import { MIN_OUTPUT_TOKENS, costUsd, planBudget } from '../../../src/lane/budget.js';
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
