import { checkEdge } from '../authority/policy-check.js';
import { withinHopLimit } from '../authority/runnable.js';
import type { MessageRecord } from '../authority/state.js';
import { CooError } from '../errors.js';
import type { KillSwitch } from '../schema/control.js';
import type { AaConsultMessage } from '../schema/message.js';
import type { ActorPolicy } from '../schema/policy.js';
import type { BlockerCode, ReceiptStatus } from '../schema/receipt.js';
import type { ActorRegistry } from '../schema/registry.js';
import { planBudget, type ModelPrice } from './budget.js';

/**
 * The consult lane's decisions. Pure: facts in, decision out. The runner gathers the facts
 * (ledger state, clock, pins, Oracle's outcome) and carries out what is decided here.
 */

export interface PreflightFacts {
  readonly now: Date;
  readonly message: AaConsultMessage;
  /** 1 for the first attempt: only it is bound by expires_at; every attempt is bound by deadline_at. */
  readonly attempt: number;
  readonly killSwitch: KillSwitch | null;
  readonly registry: ActorRegistry;
  readonly policy: ActorPolicy;
  /** What this message's earlier attempts cost: its budget is for the message, retries included. */
  readonly spentOnMessageUsd: number;
  readonly spentOnCorrelationUsd: number;
  readonly spentTodayUsd: number;
  readonly inputTokens: number;
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
    };

const stop = (status: ReceiptStatus, blocker: BlockerCode, detail: string): Preflight => ({ kind: 'stop', status, blocker, detail });

/**
 * Everything that must hold before a consult may cost anything, in the order it is checked. What
 * the call may spend is bounded here: Oracle's output cap is what the tightest remaining budget
 * pays for after the estimated input.
 */
export function preflight(facts: PreflightFacts): Preflight {
  const { now, message, policy, registry } = facts;
  if (facts.killSwitch?.state === 'on') return stop('blocked', 'kill_switch', `kill switch set by ${facts.killSwitch.set_by}: ${facts.killSwitch.reason}`);
  // expires_at bounds when a consult may first start; deadline_at bounds every attempt, retries included.
  if (facts.attempt === 1 && now.getTime() >= Date.parse(message.expires_at)) return stop('blocked', 'expired', `not started before it expired at ${message.expires_at}`);
  if (now.getTime() >= Date.parse(message.deadline_at)) return stop('blocked', 'deadline_passed', `deadline ${message.deadline_at} has passed`);
  if (!withinHopLimit(message)) return stop('blocked', 'hop_limit', `hop ${message.hop_count} of at most ${message.max_hops}`);
  try {
    checkEdge(registry, policy, message.source_actor, message.target_actor, message.intent, 'consult');
  } catch (error) {
    if (!(error instanceof CooError)) throw error;
    return stop('blocked', 'policy_denied', `the policy in force (v${policy.version}) no longer allows it: ${error.code}`);
  }
  const transport = registry.actors.find((actor) => actor.id === message.target_actor)?.transport;
  if (transport === undefined) return stop('failed', 'config_error', `${message.target_actor} has no transport in the registry`);
  const price = policy.models[transport.model];
  if (price === undefined) return stop('failed', 'config_error', `the policy has no price for model ${transport.model}: a consult cannot be budgeted`);
  const budget = planBudget({
    price,
    inputTokens: facts.inputTokens,
    messageMaxUsd: Math.max(0, Math.min(message.budget.max_cost_usd, policy.budgets.max_cost_usd_per_message) - facts.spentOnMessageUsd),
    correlationRemainingUsd: Math.max(0, policy.budgets.max_cost_usd_per_correlation - facts.spentOnCorrelationUsd),
    dailyRemainingUsd: Math.max(0, policy.budgets.daily_cost_cap_usd - facts.spentTodayUsd),
  });
  if (!budget.ok) return stop('blocked', budget.blocker, budget.detail);
  const untilDeadline = Math.floor((Date.parse(message.deadline_at) - now.getTime()) / 1000);
  const runtimeSeconds = Math.max(1, Math.min(message.budget.max_runtime_seconds, policy.budgets.max_runtime_seconds, untilDeadline));
  return { kind: 'run', model: transport.model, providerKeyEnv: transport.provider_key_env, price, maxOutputTokens: budget.maxOutputTokens, runtimeSeconds, budgetLimitUsd: budget.limitUsd };
}

/** Failures worth another attempt after a pause; each further attempt is claimed and receipted on its own. */
const TRANSIENT: ReadonlySet<BlockerCode> = new Set(['aa_unavailable:rate_limited', 'aa_unavailable:transport', 'aa_unavailable:timeout', 'interrupted']);
const MALFORMED: ReadonlySet<BlockerCode> = new Set(['output_invalid', 'output_missing']);

export interface RetryFacts {
  readonly now: Date;
  readonly blocker: BlockerCode;
  readonly record: MessageRecord;
  readonly message: AaConsultMessage;
  readonly policy: ActorPolicy;
}

/** When the next attempt may start, or null when this failure ends the message. */
export function nextAttemptAt(facts: RetryFacts): string | null {
  const { blocker, record, policy } = facts;
  const sameClass = TRANSIENT.has(blocker) ? TRANSIENT : MALFORMED.has(blocker) ? MALFORMED : null;
  if (sameClass === null) return null;
  const limit = sameClass === TRANSIENT ? policy.retries.transient_max_attempts : policy.retries.malformed_output_max_attempts;
  const earlier = record.attempts.filter((attempt) => attempt.receipt !== null && attempt.receipt.blockers.some((code) => sameClass.has(code))).length;
  const tries = earlier + 1;
  if (tries >= limit) return null;
  const delay = Math.min(policy.retries.backoff_base_seconds * 2 ** (tries - 1), policy.retries.backoff_max_seconds);
  const at = new Date(facts.now.getTime() + delay * 1000);
  if (at.getTime() >= Date.parse(facts.message.deadline_at)) return null;
  return at.toISOString().replace(/\.\d{3}Z$/, 'Z');
}

/** What the runner should do with one consult now. */
export type Work =
  | { readonly kind: 'attempt'; readonly number: number }
  | { readonly kind: 'recover'; readonly number: number }
  | { readonly kind: 'wait'; readonly until: string }
  | { readonly kind: 'none' };

/** From a message's attempts: start the next attempt, recover an open one, wait for a retry time, or nothing. */
export function nextWork(record: MessageRecord, now: Date): Work {
  if (record.duplicateOf !== null || record.intent !== 'aa_consult') return { kind: 'none' };
  const last = record.attempts[record.attempts.length - 1];
  if (last === undefined) return { kind: 'attempt', number: 1 };
  if (last.receipt === null) return { kind: 'recover', number: last.number };
  const at = last.receipt.nextAttemptAt;
  if (at === null) return { kind: 'none' };
  if (Date.parse(at) > now.getTime()) return { kind: 'wait', until: at };
  return { kind: 'attempt', number: last.number + 1 };
}
