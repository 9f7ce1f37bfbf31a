import { gateAttempt, type GateFacts } from '../authority/runnable.js';
import { panelRefusal } from '../authority/rules/panel.js';
import { challengerTwin } from '../authority/rules/intents/cross-check.js';
import type { MessageRecord } from '../authority/state.js';
import type { AdvisoryMessage } from '../schema/message.js';
import type { ActorPolicy } from '../schema/policy.js';
import type { BlockerCode, ReceiptStatus } from '../schema/receipt.js';
import { correlationCapUsd, planBudget, priceOf, type ModelPrice } from '../lane/budget.js';

/**
 * The consult lane's decisions. Pure: facts in, decision out. The runner gathers the facts
 * (ledger state, clock, pins, Oracle's outcome) and carries out what is decided here.
 */

export interface PreflightFacts extends GateFacts {
  readonly message: AdvisoryMessage;
  /** The message's earlier attempts: a retry must still be one the policy in force allows (retryRefusal). */
  readonly earlier: MessageRecord['attempts'];
  /** What this message's earlier attempts cost: its budget is for the message, retries included. */
  readonly spentOnMessageUsd: number;
  readonly spentOnCorrelationUsd: number;
  /** The budget of the CEO command the message's chain starts at, when it has one: a cap on the correlation's spend beside the policy's. */
  readonly commandBudgetUsd?: number | null;
  readonly spentTodayUsd: number;
  readonly inputTokens: number;
  /** Output tokens the route always asks for (Claude through Oracle: 2048), or null when it sends the cap (providers/provider.ts). */
  readonly fixedOutputTokens: number | null;
  /** The models that gave (or, in an open attempt, are giving) the answers the message is told apart from, by agent (rules/panel.ts answeredModels). */
  readonly answered: ReadonlyMap<string, string>;
}

export type Preflight =
  | { readonly kind: 'stop'; readonly status: ReceiptStatus; readonly blocker: BlockerCode; readonly detail: string }
  | {
      readonly kind: 'run';
      readonly model: string;
      readonly providerKeyEnv: string;
      readonly price: ModelPrice;
      readonly maxOutputTokens: number;
      readonly runtimeSeconds: number;
      readonly budgetLimitUsd: number;
      /** What this attempt may cost at most: the estimated input and its whole output cap. */
      readonly worstCaseUsd: number;
    };

const stop = (status: ReceiptStatus, blocker: BlockerCode, detail: string): Preflight => ({ kind: 'stop', status, blocker, detail });

/**
 * Everything that must hold before a consult may cost anything, in the order it is checked. What
 * the call may spend is bounded here: Oracle's output cap is what the tightest remaining budget
 * pays for after the estimated input.
 */
export function preflight(facts: PreflightFacts): Preflight {
  const { now, message, policy, registry } = facts;
  const gate = gateAttempt(facts);
  if (gate !== null) return { kind: 'stop', ...gate };
  const retry = retryRefusal(facts.earlier, policy);
  if (retry !== null) return stop('blocked', 'policy_denied', retry);
  if (message.intent === 'aa_consult' && message.panel !== undefined) {
    const panel = panelRefusal(message.panel, message.source_actor, registry, policy, `panel ${message.panel.id}`, facts.answered);
    if (panel !== null) return stop('blocked', 'policy_denied', `${panel.code}: ${panel.message}`);
  }
  if (message.intent === 'cross_check') {
    const twin = challengerTwin(registry, message.source_actor, message.target_actor, 'the cross-check', facts.answered.get(message.source_actor));
    if (twin !== null) return stop('blocked', 'policy_denied', `${twin.code}: ${twin.message}`);
  }
  const transport = registry.actors.find((actor) => actor.id === message.target_actor)?.transport;
  if (transport === undefined) return stop('failed', 'config_error', `${message.target_actor} has no transport in the registry`);
  const price = priceOf(policy.models, transport.model);
  if (price === undefined) return stop('failed', 'config_error', `the policy has no price for model ${transport.model}: a consult cannot be budgeted`);
  if (facts.fixedOutputTokens !== null && facts.fixedOutputTokens > price.max_output_tokens) {
    return stop('failed', 'config_error', `the route always asks ${transport.model} for ${facts.fixedOutputTokens} output tokens, over the ${price.max_output_tokens} the policy allows it`);
  }
  const budget = planBudget({
    fixedOutputTokens: facts.fixedOutputTokens,
    price,
    inputTokens: facts.inputTokens,
    messageMaxUsd: Math.max(0, Math.min(message.budget.max_cost_usd, policy.budgets.max_cost_usd_per_message) - facts.spentOnMessageUsd),
    correlationRemainingUsd: Math.max(0, correlationCapUsd(policy.budgets, facts.commandBudgetUsd) - facts.spentOnCorrelationUsd),
    dailyRemainingUsd: Math.max(0, policy.budgets.daily_cost_cap_usd - facts.spentTodayUsd),
  });
  if (!budget.ok) return stop('blocked', budget.blocker, budget.detail);
  const untilDeadline = Math.floor((Date.parse(message.deadline_at) - now.getTime()) / 1000);
  const runtimeSeconds = Math.max(1, Math.min(message.budget.max_runtime_seconds, policy.budgets.max_runtime_seconds, untilDeadline));
  return { kind: 'run', model: transport.model, providerKeyEnv: transport.provider_key_env, price, maxOutputTokens: budget.maxOutputTokens, runtimeSeconds, budgetLimitUsd: budget.limitUsd, worstCaseUsd: budget.worstCaseUsd };
}

/** Failures worth another attempt after a pause; each further attempt is claimed and receipted on its own. */
const TRANSIENT: ReadonlySet<BlockerCode> = new Set(['aa_unavailable:rate_limited', 'aa_unavailable:transport', 'aa_unavailable:timeout', 'interrupted']);
const MALFORMED: ReadonlySet<BlockerCode> = new Set(['output_invalid', 'output_missing']);

export interface RetryFacts {
  readonly now: Date;
  readonly blocker: BlockerCode;
  readonly record: MessageRecord;
  readonly message: AdvisoryMessage;
  readonly policy: ActorPolicy;
}

/** How many attempts of `attempts` failed in the retry class of `blocker`, and how many such attempts `policy` allows; null when it is no class that retries. */
function retryCount(blocker: BlockerCode, attempts: MessageRecord['attempts'], policy: ActorPolicy): { readonly tries: number; readonly limit: number } | null {
  const sameClass = TRANSIENT.has(blocker) ? TRANSIENT : MALFORMED.has(blocker) ? MALFORMED : null;
  if (sameClass === null) return null;
  const limit = sameClass === TRANSIENT ? policy.retries.transient_max_attempts : policy.retries.malformed_output_max_attempts;
  return { tries: attempts.filter((attempt) => attempt.receipt !== null && attempt.receipt.blockers.some((code) => sameClass.has(code))).length, limit };
}

/** When the next attempt may start, or null when this failure ends the message. */
export function nextAttemptAt(facts: RetryFacts): string | null {
  const { blocker, record, policy } = facts;
  // The agent that asked waits for this answer inside its attempt: one attempt; it may ask again.
  if (facts.message.intent === 'aa_consult' && facts.message.asked_in_attempt !== undefined) return null;
  const count = retryCount(blocker, record.attempts, policy);
  if (count === null) return null;
  const tries = count.tries + 1;
  if (tries >= count.limit) return null;
  const delay = Math.min(policy.retries.backoff_base_seconds * 2 ** (tries - 1), policy.retries.backoff_max_seconds);
  const at = new Date(facts.now.getTime() + delay * 1000);
  if (at.getTime() >= Date.parse(facts.message.deadline_at)) return null;
  return at.toISOString().replace(/\.\d{3}Z$/, 'Z');
}

/**
 * Why the retry the last receipt set is no longer one the policy in force allows, or null. The
 * receipt set its time under the policy of its day; a policy that since lowered the retries of its
 * failure's class ends the message before the retry is paid for, counted as nextAttemptAt counts.
 */
export function retryRefusal(earlier: MessageRecord['attempts'], policy: ActorPolicy): string | null {
  const last = earlier[earlier.length - 1]?.receipt;
  if (last == null || last.nextAttemptAt === null) return null;
  for (const blocker of last.blockers) {
    const count = retryCount(blocker, earlier, policy);
    if (count === null) continue;
    return count.tries >= count.limit ? `the policy in force (v${policy.version}) retries a failure such as ${blocker} until ${count.limit} attempts have failed so, and ${count.tries} have: no retry is paid for` : null;
  }
  return null;
}


/** Blockers that say a budget cannot pay. */
const BUDGET_STOPS: ReadonlySet<BlockerCode> = new Set(['budget_preflight', 'correlation_budget_exhausted', 'daily_cap_reached']);

/** A panel member as its runner found it before any claim: its pre-flight, or why it may not start here now. */
export type PanelMemberFacts = {
  readonly actor: string;
  readonly decision:
    | Preflight
    /** Held back by what other open attempts may still spend: the next pass judges it again. */
    | { readonly kind: 'wait'; readonly detail: string }
    /** Its lane cannot run it on this runner (a provider key, a route, Oracle): another runner may. */
    | { readonly kind: 'unreachable'; readonly detail: string };
};

export interface PanelFacts {
  /** The panel's members ready to start now, each as its runner found it. */
  readonly members: ReadonlyArray<PanelMemberFacts>;
  /** What the correlation (every member's) and the day have left. */
  readonly correlationRemainingUsd: number;
  readonly dailyRemainingUsd: number;
}

export type PanelPlan =
  /** Every member ready now ends in this receipt, unpaid: one of them can never run as the ledger stands. */
  | { readonly kind: 'stop'; readonly status: ReceiptStatus; readonly blocker: BlockerCode; readonly detail: string }
  /** No member is claimed here: one of them cannot start on this runner now; they stay queued, together. */
  | { readonly kind: 'wait'; readonly detail: string };

/**
 * A panel is paid for whole or not at all: before any member is claimed, every member must be one
 * this runner can start now, and their worst cases together must fit what the correlation and the
 * day have left. A member the ledger stops (its pre-flight: a budget, a price, the policy, a
 * revoked key, the kill switch, its pins) stops every member, unpaid, with its status and blocker.
 * A member this runner cannot run (its lane's local lack) or that waits on what other open
 * attempts may spend leaves every member unclaimed, for a runner that can run them all. Null when
 * the members may start.
 */
export function planPanel(facts: PanelFacts): PanelPlan | null {
  for (const member of facts.members) {
    const decision = member.decision;
    if (decision.kind !== 'stop') continue;
    const why = BUDGET_STOPS.has(decision.blocker) ? `cannot be paid for (${decision.detail})` : `cannot be run (${decision.blocker}: ${decision.detail})`;
    return { kind: 'stop', status: decision.status, blocker: decision.blocker, detail: `panel member ${member.actor} ${why}: no member of the panel is paid` };
  }
  for (const member of facts.members) {
    const decision = member.decision;
    if (decision.kind === 'unreachable') return { kind: 'wait', detail: `panel member ${member.actor} cannot be run by this runner (${decision.detail}): no member of the panel is claimed here, and they wait together for a runner that can run every member` };
    if (decision.kind === 'wait') return { kind: 'wait', detail: `panel member ${member.actor} waits (${decision.detail}): no member of the panel is claimed` };
  }
  const running = facts.members.flatMap((member) => (member.decision.kind === 'run' ? [member.decision.worstCaseUsd] : []));
  if (running.length < 2) return null;
  const together = running.reduce((sum, usd) => sum + usd, 0);
  const [limit, blocker, name]: [number, BlockerCode, string] =
    facts.dailyRemainingUsd < facts.correlationRemainingUsd ? [facts.dailyRemainingUsd, 'daily_cap_reached', "the day's remaining cap"] : [facts.correlationRemainingUsd, 'correlation_budget_exhausted', "the correlation's remaining budget"];
  if (together <= limit) return null;
  return { kind: 'stop', status: 'blocked', blocker, detail: `the panel's ${running.length} members may cost up to $${together.toFixed(4)} together, over ${name} ($${limit.toFixed(4)}): no member of the panel is paid` };
}
