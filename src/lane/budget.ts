import type { AttemptRecord, LedgerState, MessageRecord } from '../authority/state.js';
import { modelPrice, type ActorPolicy } from '../schema/policy.js';
import type { ActorRegistry } from '../schema/registry.js';
import { consultHoldsUsd } from '../authority/dispatch-consults.js';

/** Cost arithmetic for one attempt of any lane: a model's price, the budgets that bound it. Pure. */

export type ModelPrice = ActorPolicy['models'][string];

/**
 * The price a policy's `models` gives `model`; undefined when it gives none. Only an entry of its own:
 * a name such as `constructor` (a model name by its form) read through the object's prototype was
 * taken for a price, and every figure made from it was NaN.
 */
export function priceOf(models: ActorPolicy['models'] | undefined, model: string): ModelPrice | undefined {
  return models !== undefined && Object.hasOwn(models, model) ? models[model] : undefined;
}

/** Whether two prices are the same in every field the policy gives a model. */
export function samePrice(a: ModelPrice, b: ModelPrice): boolean {
  return (Object.keys(modelPrice.shape) as Array<keyof ModelPrice>).every((field) => a[field] === b[field]);
}

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

/** Cents' fractions below this are the sums' rounding, not spend. */
const SPEND_EPSILON_USD = 1e-9;

/** Whether two sums of dollars are one figure, but for their rounding. */
export function sameUsd(a: number, b: number): boolean {
  return Math.abs(a - b) <= SPEND_EPSILON_USD;
}

/** Looks a message up in the ledger's state; a lookup that knows none (`noMessages`) suits a record that asks nothing of others (a consult). */
export type MessageLookup = (id: string) => MessageRecord | undefined;
export const noMessages: MessageLookup = () => undefined;

/**
 * What a claim of attempt `attempt` of `record` may let it spend (`allowance_usd`), as far as the
 * ledger knows it (the policy and registry in force, the message's earlier receipts and the
 * consults its agent asked in earlier attempts, found by `messageOf`): at least
 * what the least attempt a pre-flight admits may spend (MIN_OUTPUT_TOKENS of output at the price
 * of its target's model: either lane's pre-flight stops an attempt whose budget pays for less),
 * and at most what its message's budget has left. A claim stating less holds less than its
 * attempt may spend, so other runners' pre-flights would pass beside it and together spend past a
 * cap; one stating more holds back its correlation's and the day's other work for nothing.
 */
export function allowanceBoundsUsd(record: MessageRecord, attempt: number, policy: ActorPolicy | null, registry: ActorRegistry | null, messageOf: MessageLookup = noMessages): { readonly floorUsd: number; readonly ceilingUsd: number } {
  const actor = registry?.actors.find((item) => item.id === record.target);
  const model = actor?.transport?.model ?? actor?.executor?.model;
  const price = model === undefined ? undefined : priceOf(policy?.models, model);
  const floorUsd = price === undefined ? 0 : costUsd(0, MIN_OUTPUT_TOKENS, price);
  const perMessage = Math.min(record.maxCostUsd, policy?.budgets.max_cost_usd_per_message ?? Number.POSITIVE_INFINITY);
  return { floorUsd, ceilingUsd: Math.max(0, perMessage - spentOnMessageUsd(record, attempt, messageOf)) };
}

/** Why `allowanceUsd` is not an allowance a claim of `attempt` of `record` may state (allowanceBoundsUsd); null when it is. */
export function allowanceRefusal(record: MessageRecord, attempt: number, allowanceUsd: number, policy: ActorPolicy | null, registry: ActorRegistry | null, messageOf: MessageLookup): string | null {
  const { floorUsd, ceilingUsd } = allowanceBoundsUsd(record, attempt, policy, registry, messageOf);
  if (allowanceUsd + SPEND_EPSILON_USD < floorUsd) {
    return `an allowance of $${allowanceUsd} is less than the $${floorUsd} the least attempt a pre-flight admits may spend (${MIN_OUTPUT_TOKENS} output tokens at the price of ${record.target}'s model): it would hold less than its attempt may spend`;
  }
  if (allowanceUsd > ceilingUsd + SPEND_EPSILON_USD) {
    return `an allowance of $${allowanceUsd} is more than the $${ceilingUsd} the budget of ${record.id} has left: no attempt of it may spend that`;
  }
  return null;
}

/**
 * What a message's attempts other than `attempt` cost, from their receipts, and for a dispatch what
 * the consults its agent asked in them cost or may still cost (consultHoldsUsd): the message's
 * budget covers all of them, retries included. The consults asked in `attempt` itself come out of
 * that attempt's allowance. Without them, a retry was allowed again what its earlier attempt's
 * consults had already spent of the budget.
 */
export function spentOnMessageUsd(record: Pick<MessageRecord, 'attempts' | 'consults'>, attempt: number, messageOf: MessageLookup): number {
  const attempts = record.attempts.reduce((sum, other) => sum + (other.number !== attempt && other.receipt !== null ? other.receipt.costUsd : 0), 0);
  return (record.consults ?? []).reduce((sum, asked) => sum + (asked.attempt === attempt ? 0 : consultHoldsUsd(asked.id, messageOf)), attempts);
}

/**
 * What other open attempts may still spend (their claims landed, their receipts not yet): each
 * holds what its claim let it spend (`allowance_usd`; a claim that does not state it, its
 * message's budget less what its earlier attempts cost) against its correlation, and against the
 * day, whatever day it was claimed on (its receipt lands today or later), until its receipt says
 * what it spent. A dispatch attempt's consults come out of its allowance: an open one holds what
 * is left of it once its consults' receipts landed, and a consult asked in an open attempt holds
 * nothing of its own. Not counted: the message judged (`judged`), and, for a consult its agent
 * asked, the attempt that asked it (the consult spends from that attempt's allowance).
 */
export function heldByOpenAttemptsUsd(state: Pick<LedgerState, 'messages'>, correlation: string, judged: string | null): { readonly correlationUsd: number; readonly dayUsd: number } {
  const messages = state.messages;
  const judgedRecord = judged === null ? undefined : messages.get(judged);
  const asker = judgedRecord?.askedIn === undefined ? undefined : judgedRecord.chain[judgedRecord.chain.length - 1];
  let correlationUsd = 0;
  let dayUsd = 0;
  for (const record of messages.values()) {
    const last = record.attempts[record.attempts.length - 1];
    if (last?.claim == null || last.receipt !== null || record.id === judged || record.id === asker) continue;
    const held = openAllowanceUsd(record, last, messages);
    if (held <= 0) continue;
    dayUsd += held;
    if (record.correlation === correlation) correlationUsd += held;
  }
  return { correlationUsd, dayUsd };
}

/**
 * What the claim of `attempt` let it spend: its `allowance_usd`, or, for a claim that does not
 * state it, its message's budget less what its earlier attempts cost. An open attempt holds this
 * (heldByOpenAttemptsUsd), and a consult taken over from a runner that died is charged it.
 */
export function claimAllowanceUsd(record: MessageRecord, attempt: AttemptRecord, messageOf: MessageLookup): number {
  return attempt.claim?.allowanceUsd ?? Math.max(0, record.maxCostUsd - spentOnMessageUsd(record, attempt.number, messageOf));
}

/**
 * The most output a call could have been allowed by a pre-flight that let its attempt spend
 * `allowanceUsd` with `inputTokens` of estimated input at `price` (planBudget's inverse): a consult
 * claim's allowance is its worst case, the estimated input and its whole output cap, so this is
 * that cap. Rounding of the allowance never takes a token off it.
 */
export function outputCapForUsd(allowanceUsd: number, inputTokens: number, price: ModelPrice): number {
  if (price.output_usd_per_million === 0) return price.max_output_tokens;
  const left = allowanceUsd - costUsd(inputTokens, 0, price);
  return Math.max(0, Math.floor((left * 1_000_000) / price.output_usd_per_million + 1e-6));
}

/** What one open attempt may still spend (heldByOpenAttemptsUsd). */
function openAllowanceUsd(record: MessageRecord, attempt: AttemptRecord, messages: LedgerState['messages']): number {
  if (record.askedIn !== undefined) {
    const parentId = record.chain[record.chain.length - 1];
    const parent = parentId === undefined ? undefined : messages.get(parentId);
    const asking = parent?.attempts[record.askedIn - 1];
    if (asking !== undefined && asking.claim !== null && asking.receipt === null) return 0;
  }
  const allowance = claimAllowanceUsd(record, attempt, (id) => messages.get(id));
  const consults = (record.consults ?? [])
    .filter((asked) => asked.attempt === attempt.number)
    .reduce((sum, asked) => sum + (messages.get(asked.id)?.attempts.reduce((total, item) => total + (item.receipt?.costUsd ?? 0), 0) ?? 0), 0);
  return Math.max(0, allowance - consults);
}

/** What a pre-flight judged an attempt's shared budgets on: what its correlation and its day had spent or held for open attempts, and the policy's budgets. */
export interface JudgedSpend {
  readonly correlation: string;
  readonly day: string;
  /** The message judged: its own attempts never hold against it. */
  readonly message: string | null;
  /** What the correlation spent, and what other open attempts of it may still spend (heldByOpenAttemptsUsd). */
  readonly spentOnCorrelationUsd: number;
  /** What the day spent, and what every other open attempt may still spend. */
  readonly spentTodayUsd: number;
  readonly budgets: ActorPolicy['budgets'] | null;
  /** The budget of the CEO command whose correlation the message's is, when it has one (`budget_usd`; commandBudgetOf): it caps the correlation's spend beside the policy. */
  readonly commandBudgetUsd: number | null;
  /** What the pre-flight let the attempt spend (its claim records it): the claim stands while the shared budgets still leave that much. */
  readonly limitUsd: number;
}

/**
 * The spend and budgets a pre-flight on `state` judges an attempt of `message` (of `correlation`),
 * on `day` (YYYY-MM-DD), letting it spend `limitUsd`: what was spent, and what other open attempts
 * may still spend, which the ledger knows as well as a receipt.
 */
export function judgedSpend(state: Pick<LedgerState, 'spendByCorrelation' | 'spendByDay' | 'policy' | 'messages'>, correlation: string, day: string, limitUsd: number, message: string | null = null, scope: CommandScope = 'correlation'): JudgedSpend {
  const held = heldByOpenAttemptsUsd(state, correlation, message);
  return {
    correlation,
    day,
    message,
    spentOnCorrelationUsd: (state.spendByCorrelation.get(correlation) ?? 0) + held.correlationUsd,
    spentTodayUsd: (state.spendByDay.get(day) ?? 0) + held.dayUsd,
    budgets: state.policy?.doc.budgets ?? null,
    commandBudgetUsd: commandBudgetOf(state, message, scope),
    limitUsd,
  };
}

/**
 * Which CEO command's budget binds a message: `correlation`, every command whose own correlation is
 * the message's (the one its chain starts at, and the one a message with no parent that took the
 * command's `correlation_id` never reaches); `chain`, only the one its chain starts at, as claims
 * written before `command_budget_usd` was stated were judged (rules/claim.ts).
 */
export type CommandScope = 'correlation' | 'chain';

/**
 * The budget (`budget_usd`) of the CEO command that binds `message` (CommandScope), when one does:
 * it caps the correlation's spend beside the policy (correlationCapUsd). A command's budget caps
 * what its correlation spends in all, whoever's work spends it, so work that took its
 * `correlation_id` without a parent is held to it too. Of two commands in one correlation (a
 * hand-written one can share it), the lesser budget binds: both count the same spend.
 */
export function commandBudgetOf(state: Pick<LedgerState, 'messages'>, message: string | null, scope: CommandScope = 'correlation'): number | null {
  const record = state.messages.get(message ?? '');
  if (record === undefined) return null;
  if (scope === 'chain') {
    // A record built without its chain (by hand, as a test of crashAllowanceUsd does) starts at no command, as before.
    const chain: readonly string[] | undefined = record.chain;
    const root = state.messages.get(chain?.[0] ?? '');
    return root?.intent === 'ceo_command' && root.budgetUsd !== undefined ? root.budgetUsd : null;
  }
  let least: number | null = null;
  for (const other of state.messages.values()) {
    if (other.intent !== 'ceo_command' || other.budgetUsd === undefined || other.correlation !== record.correlation) continue;
    least = least === null ? other.budgetUsd : Math.min(least, other.budgetUsd);
  }
  return least;
}

/**
 * What a correlation may spend in all: the policy's cap, or less, the budget of the CEO command whose
 * correlation it is (commandBudgetOf). The envelope rule holds each message whose chain starts at the
 * command to what the command has left when it is written; messages written before any of them ran
 * each passed that, and one without a parent in the command's correlation passed no such rule, so the
 * pre-flight holds them all together to it.
 */
export function correlationCapUsd(budgets: ActorPolicy['budgets'], commandBudgetUsd: number | null | undefined): number {
  return Math.min(budgets.max_cost_usd_per_correlation, commandBudgetUsd ?? Number.POSITIVE_INFINITY);
}

/** What a correlation and a day have spent, from receipts alone: a pre-flight stops an attempt only on that. */
export function spentOnly(state: Pick<LedgerState, 'spendByCorrelation' | 'spendByDay'>, correlation: string, day: string): { readonly spentOnCorrelationUsd: number; readonly spentTodayUsd: number } {
  return { spentOnCorrelationUsd: state.spendByCorrelation.get(correlation) ?? 0, spentTodayUsd: state.spendByDay.get(day) ?? 0 };
}

/**
 * The pre-flight of an attempt judged with what other open attempts may still spend (`judged`):
 * its decision, and whether it stopped the attempt for those open attempts alone (judged on what
 * was spent, it runs). Such an attempt is not receipted (what they hold may come back unspent): it
 * stays unclaimed, and the next pass judges it again. An attempt stopped on what was spent too is
 * stopped as what was spent stops it.
 */
export function judgeWithHeld<D extends { readonly kind: string }>(judged: JudgedSpend, state: Pick<LedgerState, 'spendByCorrelation' | 'spendByDay'>, judge: (spent: ReturnType<typeof spentOnly>) => D): { readonly decision: D; readonly heldBack: boolean } {
  const decision = judge(judged);
  if (decision.kind !== 'stop') return { decision, heldBack: false };
  const spent = spentOnly(state, judged.correlation, judged.day);
  if (spent.spentOnCorrelationUsd === judged.spentOnCorrelationUsd && spent.spentTodayUsd === judged.spentTodayUsd) return { decision, heldBack: false };
  const plain = judge(spent);
  return plain.kind === 'stop' ? { decision: plain, heldBack: false } : { decision, heldBack: true };
}

/** Why an attempt `judgeWithHeld` held back was not claimed: said by either lane, for the runner to report. */
export function heldBackDetail(attempt: number, detail: string): string {
  return `attempt ${attempt} was not claimed: ${detail}, counting what other open attempts may still spend; the next pass judges it again`;
}

/**
 * Why the claim of an attempt, written on `state`, is no longer admitted by the pre-flight that
 * judged it on `judged`; null when what it judged still holds. A claim is built on the state it
 * finally lands on (through a remote, the head the push is rebuilt on), which can hold what the
 * pre-flight did not see: another runner's receipt that spent from the same correlation or day,
 * another runner's claim whose attempt may still spend from them,
 * or a policy with a lower budget. The claim is then not written, nothing is paid, and the next
 * pass judges the attempt again on what the ledger holds now.
 */
export function spendMovedSince(judged: JudgedSpend, state: SpendState): string | null {
  return allowanceMoved(judged, state) ?? sharedSpendMoved(judged, state);
}

/**
 * Why the claims of attempts paid for together (a panel's members, each `judged` by its own
 * pre-flight on one correlation and day), written in one commit on `state`, are no longer admitted;
 * null when they are. Each allowance must still be one its message admits, and what the
 * correlation and the day have left must still cover them all together.
 */
export function jointSpendMovedSince(judged: readonly JudgedSpend[], state: SpendState): string | null {
  for (const item of judged) {
    const refused = allowanceMoved(item, state);
    if (refused !== null) return refused;
  }
  const first = judged[0];
  return first === undefined ? null : sharedSpendMoved({ ...first, limitUsd: judged.reduce((sum, item) => sum + item.limitUsd, 0) }, state);
}

type SpendState = Pick<LedgerState, 'spendByCorrelation' | 'spendByDay' | 'policy' | 'messages'> & Partial<Pick<LedgerState, 'registry'>>;

/** The validator refuses a claim whose allowance the ledger it lands on does not admit (a dearer model now, a lower budget): not written, judged again. */
function allowanceMoved(judged: JudgedSpend, state: SpendState): string | null {
  const record = judged.message === null ? undefined : state.messages.get(judged.message);
  return record === undefined ? null : allowanceRefusal(record, record.attempts.length + 1, judged.limitUsd, state.policy?.doc ?? null, state.registry?.doc ?? null, (id) => state.messages.get(id));
}

/**
 * Why the shared budgets on `state` do not leave `allowanceUsd` to a new claim of `message` (of
 * `correlation`) dated on `day`; null when they do. What the correlation (within the budget of the
 * CEO command that binds it, by `scope`: correlationCapUsd) and the day (and every later day, where its receipt may
 * land) have spent, with what other open attempts may still spend, must leave the whole allowance:
 * the one test every pre-flight passed on the state its claim is written on (judgeWithHeld,
 * spendMovedSince), held by the claim rule too, so that a claim no pre-flight admits (a second
 * runner's beside the first's, a panel member's, a retry's, a consult's) is refused where it lands.
 */
export function sharedAllowanceRefusal(state: SpendState, correlation: string, day: string, allowanceUsd: number, message: string, scope: CommandScope = 'correlation'): string | null {
  const budgets = state.policy?.doc.budgets;
  if (budgets === undefined) return null;
  const now = judgedSpend(state, correlation, day, allowanceUsd, message, scope);
  const left = (capUsd: number, spentUsd: number): number => capUsd - spentUsd + SPEND_EPSILON_USD;
  const correlationCap = correlationCapUsd(budgets, now.commandBudgetUsd);
  if (left(correlationCap, now.spentOnCorrelationUsd) < allowanceUsd) {
    return `an allowance of $${allowanceUsd} is more than the $${Math.max(0, correlationCap - now.spentOnCorrelationUsd)} ${correlation} has left of its $${correlationCap} (${now.commandBudgetUsd === null ? 'the policy\'s cap' : 'its CEO command\'s budget within the policy\'s cap'}), counting what its other open attempts may still spend`;
  }
  const held = now.spentTodayUsd - (state.spendByDay.get(day) ?? 0);
  for (const [other, spentUsd] of [[day, state.spendByDay.get(day) ?? 0] as const, ...[...state.spendByDay].filter(([other]) => other > day)]) {
    if (left(budgets.daily_cost_cap_usd, spentUsd + held) < allowanceUsd) {
      return `an allowance of $${allowanceUsd} is more than the $${Math.max(0, budgets.daily_cost_cap_usd - spentUsd - held)} the daily cap leaves ${other}, counting what other open attempts may still spend`;
    }
  }
  return null;
}

/** Why what the correlation and the day have left on `state` no longer leaves `judged.limitUsd`, where its pre-flight judged it did; null when it still does. */
function sharedSpendMoved(judged: JudgedSpend, state: SpendState): string | null {
  const now = judgedSpend(state, judged.correlation, judged.day, judged.limitUsd, judged.message);
  const [before, after] = [judged.budgets, now.budgets];
  if (before !== null && (after === null || after.max_cost_usd_per_message < before.max_cost_usd_per_message || after.max_cost_usd_per_correlation < before.max_cost_usd_per_correlation || after.daily_cost_cap_usd < before.daily_cost_cap_usd)) {
    return 'the policy in force when the claim was written has lower budgets than the one its pre-flight judged';
  }
  const left = (capUsd: number, spentUsd: number): number => capUsd - spentUsd + SPEND_EPSILON_USD;
  // A CEO command that landed meanwhile in the correlation and lowered its cap moves the claim when the cap no longer leaves the allowance.
  if (after !== null && correlationCapUsd(after, now.commandBudgetUsd) < correlationCapUsd(after, judged.commandBudgetUsd) && left(correlationCapUsd(after, now.commandBudgetUsd), now.spentOnCorrelationUsd) < judged.limitUsd) {
    return `${judged.correlation} is bound by a CEO command's budget of $${now.commandBudgetUsd} by the time the claim was written, not the ${judged.commandBudgetUsd === null ? 'none' : `$${judged.commandBudgetUsd}`} its pre-flight judged, and no longer leaves the $${judged.limitUsd} it allowed the attempt`;
  }
  // Spend that landed meanwhile moves the claim only when what is left no longer covers what the attempt may spend:
  // other work of the day, spending well within its budgets, never sends an admitted attempt back to the queue.
  if (after !== null && now.spentOnCorrelationUsd > judged.spentOnCorrelationUsd && left(correlationCapUsd(after, now.commandBudgetUsd), now.spentOnCorrelationUsd) < judged.limitUsd) {
    return `${judged.correlation} spent $${now.spentOnCorrelationUsd} (with what its other open attempts may still spend) by the time the claim was written, not the $${judged.spentOnCorrelationUsd} its pre-flight judged, and no longer leaves the $${judged.limitUsd} it allowed the attempt`;
  }
  if (after !== null && now.spentTodayUsd > judged.spentTodayUsd && left(after.daily_cost_cap_usd, now.spentTodayUsd) < judged.limitUsd) {
    return `${judged.day} spent $${now.spentTodayUsd} (with what other open attempts may still spend) by the time the claim was written, not the $${judged.spentTodayUsd} its pre-flight judged, and no longer leaves the $${judged.limitUsd} it allowed the attempt`;
  }
  // The attempt's receipt, and so its spend, lands on its claim's day or later: a later day the pre-flight never saw (midnight passed meanwhile) must leave it as much.
  for (const [day, spentUsd] of state.spendByDay) {
    if (after === null || day <= judged.day) continue;
    const total = spentUsd + (now.spentTodayUsd - (state.spendByDay.get(judged.day) ?? 0));
    if (left(after.daily_cost_cap_usd, total) < judged.limitUsd) {
      return `${day} spent $${total} (with what other open attempts may still spend) by the time the claim was written, after the ${judged.day} its pre-flight judged; the attempt's spend counts on the day its receipt lands (chargedDay), and ${day} no longer leaves the $${judged.limitUsd} it allowed the attempt`;
    }
  }
  return null;
}

/**
 * The day (YYYY-MM-DD) an attempt's cost counts on: its receipt's, or its claim's when the claim's
 * is later. A pre-flight lets an attempt spend from the day it claims on, and its open claim holds
 * that on every day until its receipt lands, so the cost lands on that day or later: a receipt whose
 * writer's clock reads the day before (a clock behind the claimer's across midnight, within the skew
 * allowed between machines, or one that jumped back during the call) would otherwise move the cost
 * to a day that is over, and the claim's day would have all of its cap left to spend again.
 */
export function chargedDay(claimedAt: string | null, receiptCreatedAt: string): string {
  const receiptDay = receiptCreatedAt.slice(0, 10);
  const claimDay = claimedAt?.slice(0, 10) ?? receiptDay;
  return claimDay > receiptDay ? claimDay : receiptDay;
}

/**
 * What a correlation and a day had spent when the ledger was at `seq` (an attempt's claim): what
 * they have spent now, less the receipts committed after it. An attempt's pre-flight judged it on
 * that; what other runners spent after its claim does not shrink what it was allowed.
 */
export function spendAsOf(state: Pick<LedgerState, 'messages' | 'spendByCorrelation' | 'spendByDay'>, correlation: string, day: string, seq: number): { spentOnCorrelationUsd: number; spentTodayUsd: number } {
  let correlationUsd = state.spendByCorrelation.get(correlation) ?? 0;
  let dayUsd = state.spendByDay.get(day) ?? 0;
  for (const record of state.messages.values()) {
    for (const { claim, receipt } of record.attempts) {
      if (receipt === null || receipt.seq <= seq || receipt.costUsd <= 0) continue;
      if (record.correlation === correlation) correlationUsd -= receipt.costUsd;
      if (chargedDay(claim?.at ?? null, receipt.createdAt) === day) dayUsd -= receipt.costUsd;
    }
  }
  return { spentOnCorrelationUsd: Math.max(0, correlationUsd), spentTodayUsd: Math.max(0, dayUsd) };
}
