import { CooError } from '../../errors.js';
import { LIMITS } from '../../limits.js';
import type { PathInfo } from '../../ledger/layout.js';
import { toMillis } from '../../schema/common.js';
import { attemptIdOf, isRunnerIntent, revokedWord, stopBeforeAll } from '../runnable.js';
import { retryApproved, type ApprovalRecord, type MessageRecord } from '../state.js';
import { retryApprovals } from './approval.js';
import { allowanceRefusal, commandBudgetOf, noMessages, priceOf, samePrice, sameUsd, sharedAllowanceRefusal, spentOnMessageUsd, type MessageLookup, type ModelPrice } from '../../lane/budget.js';
import type { ActorPolicy } from '../../schema/policy.js';
import type { CommitCheck, EntryFile } from '../commit-check.js';
import { checkNotBehind } from './clock.js';
import { routeOf, type ActorRegistry, type OracleRoute } from '../../schema/registry.js';

/**
 * A claim (claim.v0) takes exactly the next attempt of a live message of an intent the runner
 * executes, at or after the time a retry may start, before anything is paid for. A claim the runner
 * would never make would hold the attempt open, and every later receipt for the message would be
 * refused. What it states it lets the attempt spend (`allowance_usd`) is held against the shared
 * budgets until its receipt lands, so it must lie within what the ledger knows the attempt may
 * spend (lane/budget.ts allowanceRefusal). What it states was spent before it (`spent_before_usd`)
 * must be what the ledger counts, the consults of a dispatch's earlier attempts included. Such a
 * claim's allowance must also fit what its correlation (within its CEO command's budget) and its
 * day have left, with what other open attempts hold (lane/budget.ts sharedAllowanceRefusal). What it
 * states its command's budget is (`command_budget_usd`) must be the ledger's, the command whose
 * correlation it is; a claim that does not state it is held to the command its chain starts at.
 */
export function checkClaim(check: CommitCheck, entry: EntryFile, info: Extract<PathInfo, { kind: 'claim' }>, keyId: string): void {
  const where = entry.path;
  const doc = check.read('claim.v0', entry);
  if (check.clock !== null && check.landing) checkNotBehind(check.clock, 'claimed_at', doc.claimed_at, where);
  check.requireActiveCoo(keyId, where, 'claims');
  const record = check.messageAt(info, where);
  if (doc.message_id !== record.id) {
    throw new CooError('MESSAGE_UNKNOWN', `${where}: claim for ${doc.message_id}, which is not the message of this folder`, { where });
  }
  if (!isRunnerIntent(record.intent)) throw new CooError('ATTEMPT_INVALID', `${where}: the runner does not execute ${record.intent} messages; they take no claims`, { where });
  if (record.duplicateOf !== null) throw new CooError('ATTEMPT_INVALID', `${where}: ${record.id} repeats ${record.duplicateOf} and is never run`, { where });
  const next = record.attempts.length + 1;
  const last = record.attempts[record.attempts.length - 1];
  if (info.attempt !== next || doc.attempt_number !== next) {
    throw new CooError('ATTEMPT_INVALID', `${where}: attempt ${doc.attempt_number} where ${next} comes next`, { where });
  }
  if (last !== undefined && (last.receipt === null || (last.receipt.nextAttemptAt === null && !retryApproved(record)))) {
    throw new CooError('ATTEMPT_INVALID', `${where}: attempt ${last.number} is ${last.receipt === null ? 'still open' : 'final'}`, { where });
  }
  if (last?.receipt?.nextAttemptAt === null) {
    const approval = retryApprovals(check, record.id, next).at(-1);
    if (approval === undefined || toMillis(doc.claimed_at) >= toMillis(approval.expiresAt)) {
      throw new CooError('ATTEMPT_INVALID', `${where}: the CEO's approval of attempt ${next} ${approval === undefined ? 'is missing' : `expired at ${approval.expiresAt}`}`, { where });
    }
    checkClaimedAfter(record, approval, doc.claimed_at, where);
  } else {
    checkClaimedAfter(record, undefined, doc.claimed_at, where);
  }
  if (last?.receipt?.nextAttemptAt != null && toMillis(doc.claimed_at) < toMillis(last.receipt.nextAttemptAt)) {
    throw new CooError('ATTEMPT_INVALID', `${where}: claimed at ${doc.claimed_at}, before attempt ${next} may start at ${last.receipt.nextAttemptAt}`, { where });
  }
  const attemptId = attemptIdOf(record, next);
  if (doc.attempt_id !== attemptId) {
    throw new CooError('ATTEMPT_INVALID', `${where}: attempt_id must be ${attemptId}`, { where });
  }
  // A claim that states what was spent before it is held to the rules that count its message's earlier consults too; one written
  // before it was stated is judged as it was then, so that history an earlier build wrote honestly still verifies.
  const messageOf: MessageLookup = doc.spent_before_usd === undefined ? noMessages : (id) => check.message(id);
  const spentBefore = spentOnMessageUsd(record, next, messageOf);
  if (doc.spent_before_usd !== undefined && !sameUsd(doc.spent_before_usd, spentBefore)) {
    throw new CooError('POLICY_LIMIT', `${where}: spent_before_usd ${doc.spent_before_usd} is not the $${spentBefore} that the other attempts of ${record.id} and their consults cost or hold; nothing was claimed`, { where: `${where}:spent_before_usd` });
  }
  const refused = doc.allowance_usd === undefined ? null : allowanceRefusal(record, next, doc.allowance_usd, check.policy?.doc ?? null, check.registry?.doc ?? null, messageOf);
  if (refused !== null) throw new CooError('POLICY_LIMIT', `${where}: ${refused}; nothing was claimed`, { where: `${where}:allowance_usd` });
  // A claim that states its command's budget is held to the command whose correlation it is; one written before that was
  // stated, to the command its chain starts at, as its runner's pre-flight held it then (lane/budget.ts CommandScope).
  const scope = doc.command_budget_usd === undefined ? 'chain' : 'correlation';
  let soFar: ReturnType<CommitCheck['spendSoFar']> | undefined;
  const spendSoFar = (): ReturnType<CommitCheck['spendSoFar']> => (soFar ??= check.spendSoFar());
  if (doc.command_budget_usd !== undefined) {
    // The figure is copied from the command's envelope, never summed: it is the same number or another.
    const commandBudget = commandBudgetOf(spendSoFar(), record.id);
    if (doc.command_budget_usd !== commandBudget) {
      const actual = commandBudget === null ? `null: no CEO command with a budget has ${record.correlation} as its correlation` : `${commandBudget}, the budget of the CEO command whose correlation ${record.correlation} is`;
      throw new CooError('POLICY_LIMIT', `${where}: command_budget_usd ${doc.command_budget_usd} is not ${actual}; nothing was claimed`, { where: `${where}:command_budget_usd` });
    }
  }
  // The shared budgets bind a claim that states what was spent before it: claims written before it was stated were judged by their runner alone.
  const shared = doc.allowance_usd === undefined || doc.spent_before_usd === undefined ? null : sharedAllowanceRefusal(spendSoFar(), record.correlation, doc.claimed_at.slice(0, 10), doc.allowance_usd, record.id, scope);
  if (shared !== null) throw new CooError('POLICY_LIMIT', `${where}: ${shared}; nothing was claimed`, { where: `${where}:allowance_usd` });
  // Judged as new only (the writers, the hook), and once every other rule let the claim through (one refusal a claim):
  // builds before this rule let such a claim land, and history holding one still verifies.
  if (check.clock !== null) {
    const refusal = unrunRefusal(check, record, next, where);
    if (refusal !== null) check.unrunClaims.set(record.id, { attempt: next, refusal });
  }
  const model = claimedModel(check.registry?.doc ?? null, record.target);
  const price = model === undefined ? undefined : priceOf(check.policy?.doc.models, model);
  const route = claimedRouteOf(check.registry?.doc ?? null, record.target);
  check.updateMessage(record, [
    ...record.attempts,
    {
      number: next,
      attemptId: doc.attempt_id,
      claim: { path: where, session: doc.transport_session_id, runner: doc.runner_id, at: doc.claimed_at, seq: check.seq, ...(doc.allowance_usd === undefined ? {} : { allowanceUsd: doc.allowance_usd }), ...(doc.spent_before_usd === undefined ? {} : { spentBeforeUsd: doc.spent_before_usd }), ...(model === undefined ? {} : { model }), ...(price === undefined ? {} : { price }), ...(route === null ? {} : { route }) },
      receipt: null,
    },
  ]);
}

/**
 * The model a claim of an attempt of a message to `target` is made on, which the ledger keeps with it
 * (MessageRecord claim `model`): the target's Oracle model in the registry in force where the claim
 * lands; undefined when that registry gives the target none.
 */
export function claimedModel(registry: ActorRegistry | null, target: string): string | undefined {
  return registry?.actors.find((actor) => actor.id === target)?.transport?.model;
}

/** The route a claim of an attempt of a message to `target` records (MessageRecord claim `route`): the one the registry in force gives the target's transport; null when it gives none. */
export function claimedRouteOf(registry: ActorRegistry | null, target: string): OracleRoute | null {
  const transport = registry?.actors.find((actor) => actor.id === target)?.transport;
  return transport === undefined ? null : routeOf(transport);
}

/** What a consult's pre-flight decided to ask: the claim records the same model, price and route (recovery names, charges and counts output by them). */
export interface ClaimedCall {
  readonly model: string;
  readonly price: ModelPrice;
  readonly route: OracleRoute | null;
}

/**
 * Why the claim of an attempt of `record` whose pre-flight decided to ask `call.model` at `call.price` by `call.route`,
 * written on a state whose registry and policy are `registry` and `policy`, is not to be written; null
 * when it would be made on that model at that price. The claim records the model its registry gives the
 * target (claimedModel) and that model's price in its policy, and a recovered receipt names and charges
 * those, and counts a recovered call's uncounted output by the claim's route: a registry or policy that changed them between the pre-flight and the claim's landing would have
 * Oracle asked one model and the claim name another, which did not answer, or a recovered call charged at
 * another price than the live one.
 */
export function claimedCallMoved(record: Pick<MessageRecord, 'target'>, call: ClaimedCall, registry: ActorRegistry | null, policy: ActorPolicy | null): string | null {
  const model = claimedModel(registry, record.target);
  if (model !== call.model) return `the registry in force when the claim was written gives ${record.target} ${model === undefined ? 'no model' : `the model ${model}`}, not the ${call.model} its pre-flight judged`;
  const route = claimedRouteOf(registry, record.target);
  if (route !== call.route) return `the registry in force when the claim was written routes ${model} by ${route ?? 'no route'}, not the ${call.route ?? 'no route'} its pre-flight judged`;
  const price = priceOf(policy?.models, model);
  const same = price !== undefined && samePrice(price, call.price);
  return same ? null : `the policy in force when the claim was written ${price === undefined ? `gives ${model} no price` : `prices ${model} otherwise`} than its pre-flight judged`;
}

/**
 * A claim is dated no earlier than the entries it builds on, less the skew allowed between machines
 * (LIMITS.clockSkewSeconds): the message's envelope, the attempt before it (its claim and receipt)
 * and the CEO's approval of the retry. The ledger's commits put those before the claim, so a claim
 * dated before them was written by a clock that runs behind, and by such a clock a message past
 * its deadline, or a retry past its approval's expiry, reads as still live. Only times the ledger
 * holds decide; no one's wall clock.
 */
export function checkClaimedAfter(record: MessageRecord, approval: Pick<ApprovalRecord, 'id' | 'createdAt'> | undefined, claimedAt: string, where: string): void {
  const floor = claimFloor(record, approval);
  const behind = Math.floor((toMillis(floor.at) - toMillis(claimedAt)) / 1000);
  if (behind <= LIMITS.clockSkewSeconds) return;
  throw new CooError(
    'CLOCK_SKEW',
    `${where}: claimed at ${claimedAt}, ${behind} s before ${floor.what} (${floor.at}), which the ledger holds before the claim: the clock of the machine that claims (or of that entry's writer) is off by more than the ${LIMITS.clockSkewSeconds} s allowed between machines, and nothing was claimed; set that machine's clock right (NTP) and run the runner again`,
    { where },
  );
}

/** The newest entry the claim of the next attempt of `record` builds on (checkClaimedAfter): what it is, and its time. */
export function claimFloor(record: MessageRecord, approval: Pick<ApprovalRecord, 'id' | 'createdAt'> | undefined): { readonly what: string; readonly at: string } {
  const last = record.attempts[record.attempts.length - 1];
  const anchors: Array<readonly [string, string]> = [[`the envelope of ${record.id}`, record.createdAt]];
  if (last?.claim != null) anchors.push([`the claim of attempt ${last.number}`, last.claim.at]);
  if (last?.receipt != null) anchors.push([`the receipt of attempt ${last.number}`, last.receipt.createdAt]);
  if (approval !== undefined) anchors.push([`the CEO's approval ${approval.id}`, approval.createdAt]);
  const [what, at] = anchors.reduce((latest, anchor) => (toMillis(anchor[1]) > toMillis(latest[1]) ? anchor : latest));
  return { what, at };
}

/**
 * Why attempt `attempt` of `record` may be claimed only to be ended unrun: the runner's gate's first
 * two steps (runnable.ts stopBeforeAll: the kill switch in force, or a revoked key's word the attempt
 * would stand on, revokedWord: what the key queued, the dispatch only its approval allowed, a
 * cross-check of an answer whose receipt it signed); else null.
 */
function unrunRefusal(check: CommitCheck, record: MessageRecord, attempt: number, where: string): CooError | null {
  const killSwitch = check.killSwitch?.doc ?? null;
  const stop = stopBeforeAll(killSwitch, killSwitch?.state === 'on' ? null : revokedWord(check.state, record));
  if (stop === null) return null;
  return new CooError(
    stop.blocker === 'kill_switch' ? 'KILL_SWITCH' : 'SIGNER_REVOKED',
    `${where}: claims attempt ${attempt} of ${record.id}, which the runner's gate ends unrun (${stop.detail}): its claim lands only with the blocked receipt that ends it; nothing was claimed`,
    { where },
  );
}

/**
 * A claim of an attempt the runner's gate would stop (unrunRefusal) lands only closed, unrun, in its
 * own commit: with the blocked receipt the gate writes beside it. Alone, it would let a runner that
 * judged the queue before the kill switch or a revocation landed (its claim rebuilt on the head that
 * holds it) run and pay for work no one may start now, or what may be a thief's. Run once every entry
 * of the commit is read.
 */
export function checkUnrunClaims(check: CommitCheck): void {
  for (const [id, { attempt, refusal }] of check.unrunClaims) {
    if (check.message(id)?.attempts[attempt - 1]?.receipt?.status !== 'blocked') check.report(refusal);
  }
}
