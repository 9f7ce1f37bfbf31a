import type { ActorPolicy } from '../schema/policy.js';

/** Cost arithmetic for one attempt of any lane: a model's price, the budgets that bound it. Pure. */

export type ModelPrice = ActorPolicy['models'][string];

/** Fewest output tokens worth paying for; a budget that allows less blocks the consult. */
export const MIN_OUTPUT_TOKENS = 512;
export function costUsd(inputTokens: number, outputTokens: number, price: ModelPrice): number {
  return (inputTokens * price.input_usd_per_million + outputTokens * price.output_usd_per_million) / 1_000_000;
}

export interface BudgetFacts {
  readonly price: ModelPrice;
  readonly inputTokens: number;
  /** The message's budget less what its earlier attempts cost. */
  readonly messageMaxUsd: number;
  readonly correlationRemainingUsd: number;
  readonly dailyRemainingUsd: number;
  /**
   * Output tokens the transport asks for whatever cap it is given (Oracle sends Claude max_tokens
   * 2048): the budget must pay for that many, and the cap is that many. Absent: the cap is what the
   * budget pays for, within the model's.
   */
  readonly fixedOutputTokens?: number | null;
}

export type BudgetDecision =
  | { readonly ok: true; readonly maxOutputTokens: number; readonly limitUsd: number; readonly worstCaseUsd: number }
  | { readonly ok: false; readonly blocker: 'budget_preflight' | 'correlation_budget_exhausted' | 'daily_cap_reached'; readonly detail: string };

/**
 * The pre-flight check: the tightest of the message budget, the correlation's remainder and the
 * day's remainder must pay for the estimated input and at least MIN_OUTPUT_TOKENS of output. The
 * output cap handed to Oracle (`--max-output`) is what the rest pays for, within the model's cap.
 */
export function planBudget(facts: BudgetFacts): BudgetDecision {
  const limits: Array<[number, 'budget_preflight' | 'correlation_budget_exhausted' | 'daily_cap_reached', string]> = [
    [facts.messageMaxUsd, 'budget_preflight', "the message's remaining budget"],
    [facts.correlationRemainingUsd, 'correlation_budget_exhausted', "the correlation's remaining budget"],
    [facts.dailyRemainingUsd, 'daily_cap_reached', "the day's remaining cap"],
  ];
  const [limitUsd, blocker, name] = limits.reduce((tightest, next) => (next[0] < tightest[0] ? next : tightest));
  const inputUsd = costUsd(facts.inputTokens, 0, facts.price);
  const left = limitUsd - inputUsd;
  const affordable = facts.price.output_usd_per_million === 0 ? facts.price.max_output_tokens : Math.floor((left * 1_000_000) / facts.price.output_usd_per_million);
  const fixed = facts.fixedOutputTokens ?? null;
  if (fixed !== null) {
    // The worst case is what the transport asks for, not what the budget would have allowed.
    if (left <= 0 || affordable < fixed) {
      return { ok: false, blocker, detail: `${name} ($${limitUsd.toFixed(4)}) cannot pay for about ${facts.inputTokens} input tokens ($${inputUsd.toFixed(4)}) and the ${fixed} output tokens the provider is always asked for` };
    }
    return { ok: true, maxOutputTokens: fixed, limitUsd, worstCaseUsd: costUsd(facts.inputTokens, fixed, facts.price) };
  }
  const maxOutputTokens = Math.min(affordable, facts.price.max_output_tokens);
  if (left <= 0 || maxOutputTokens < MIN_OUTPUT_TOKENS) {
    return {
      ok: false,
      blocker,
      detail: `${name} ($${limitUsd.toFixed(4)}) cannot pay for about ${facts.inputTokens} input tokens ($${inputUsd.toFixed(4)}) and ${MIN_OUTPUT_TOKENS} output tokens`,
    };
  }
  return { ok: true, maxOutputTokens, limitUsd, worstCaseUsd: costUsd(facts.inputTokens, maxOutputTokens, facts.price) };
}

/** What a message's attempts other than `attempt` cost, from their receipts: the message's budget covers all of them. */
export function spentOnMessageUsd(attempts: ReadonlyArray<{ readonly number: number; readonly receipt: { readonly costUsd: number } | null }>, attempt: number): number {
  return attempts.reduce((sum, other) => sum + (other.number !== attempt && other.receipt !== null ? other.receipt.costUsd : 0), 0);
}
