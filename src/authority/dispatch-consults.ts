import { toMillis } from '../schema/common.js';
import { isTerminal, type AttemptRecord, type MessageRecord } from './state.js';

/** The consults a dispatch's agent asks (EA -> AA), as the validator and the runner both count them. Pure. */

/**
 * What a dispatch has left for the consults its agent asks (EA -> AA): its budget less what its
 * attempts cost and what its consults cost or may still cost (an open consult holds its whole
 * budget until its receipt says what it spent). The validator holds each new consult to it, the
 * runner offers it as the consult's default budget, and judges the dispatch's own cost against
 * the rest. Pure.
 */
export function dispatchBudgetLeftUsd(dispatch: MessageRecord, messageOf: (id: string) => MessageRecord | undefined): number {
  const spent = dispatch.attempts.reduce((sum, attempt) => sum + (attempt.receipt?.costUsd ?? 0), 0);
  const consults = (dispatch.consults ?? []).reduce((sum, asked) => sum + consultHoldsUsd(asked.id, messageOf), 0);
  return Math.max(0, dispatch.maxCostUsd - spent - consults);
}

/**
 * What attempt `attempt` of a dispatch has left for a new consult its agent asks: what the
 * dispatch's budget has left (dispatchBudgetLeftUsd), and no more than what the attempt's claim let
 * it spend (`allowance_usd`: its pre-flight holds it below the dispatch's budget when the
 * correlation, the day or the CEO's command has less left) less what the attempt's consults cost or
 * may still cost. A consult asked in an open attempt spends from that claim, and its own pre-flight
 * does not count the claim as held (lane/budget.ts heldByOpenAttemptsUsd): a consult allowed more
 * than the claim left would spend beside the executor what the claim held for both. The validator
 * holds each asked consult to it, and the runner offers it as the consult's default budget. A claim
 * that does not state what was spent before it (`spent_before_usd`) was written before this rule:
 * its consults are held to the dispatch's remainder alone, as they were then. Pure.
 */
export function attemptBudgetLeftUsd(dispatch: MessageRecord, attempt: number, messageOf: (id: string) => MessageRecord | undefined): number {
  const left = dispatchBudgetLeftUsd(dispatch, messageOf);
  const claim = dispatch.attempts[attempt - 1]?.claim;
  // A claim that does not state what was spent before it was written before this rule, and binds its consults as it did then.
  if (claim?.allowanceUsd === undefined || claim.spentBeforeUsd === undefined) return left;
  const allowance = claim.allowanceUsd;
  const consults = (dispatch.consults ?? []).filter((asked) => asked.attempt === attempt).reduce((sum, asked) => sum + consultHoldsUsd(asked.id, messageOf), 0);
  return Math.max(0, Math.min(left, allowance - consults));
}

/**
 * What one consult a dispatch's agent asked takes of the dispatch's budget (`max_cost_usd`, which
 * pays for every attempt's executor and consults): what its receipts cost, and while it may still
 * be paid, its whole budget. One whose asking attempt ended before it was claimed may be paid
 * nothing more (checkAskerWaits): it holds only what it cost. Pure.
 */
export function consultHoldsUsd(id: string, messageOf: (id: string) => MessageRecord | undefined): number {
  const consult = messageOf(id);
  if (consult === undefined) return 0;
  const spent = consult.attempts.reduce((sum, attempt) => sum + (attempt.receipt?.costUsd ?? 0), 0);
  if (isTerminal(consult)) return spent;
  const ended = askerEnded(consult, messageOf);
  const last = consult.attempts[consult.attempts.length - 1];
  const mayBePaid = ended === null || (last?.claim != null && last.receipt === null && last.claim.seq < ended.seq);
  return mayBePaid ? Math.max(spent, consult.maxCostUsd) : spent;
}

/**
 * When a dispatch attempt's time box ends, in milliseconds: its claim's time plus the dispatch's
 * timeout, and no later than the dispatch's deadline_at, which cuts the run short (the runner's
 * timeout is the time left until it). A consult its agent asks in it ends by then (its
 * deadline_at), so the attempt, which waits for the consult in flight, never outlives its time box
 * or its dispatch's deadline for advice. Null when the attempt is not claimed. The validator holds
 * each asked consult to it, and the runner plans one within it. A claim that does not state what
 * was spent before it (`spent_before_usd`) was written before the deadline counted here: its box is
 * its time box alone, as it was then, and none for a dispatch recorded before its timeout was kept.
 * Pure.
 */
export function attemptEndsAtMillis(dispatch: MessageRecord, attempt: AttemptRecord): number | null {
  if (attempt.claim === null) return null;
  if (attempt.claim.spentBeforeUsd === undefined) return dispatch.timeoutSeconds === undefined ? null : toMillis(attempt.claim.at) + dispatch.timeoutSeconds * 1000;
  // A dispatch recorded before its timeout was kept is bounded by its deadline alone.
  const box = dispatch.timeoutSeconds === undefined ? Number.POSITIVE_INFINITY : toMillis(attempt.claim.at) + dispatch.timeoutSeconds * 1000;
  return Math.min(box, toMillis(dispatch.deadlineAt));
}

/** What the consults asked in one attempt of a dispatch cost, from their receipts. */
export function consultsCostUsd(dispatch: MessageRecord, attempt: number, messageOf: (id: string) => MessageRecord | undefined): number {
  return (dispatch.consults ?? [])
    .filter((asked) => asked.attempt === attempt)
    .reduce((sum, asked) => sum + (messageOf(asked.id)?.attempts.reduce((total, item) => total + (item.receipt?.costUsd ?? 0), 0) ?? 0), 0);
}

/**
 * What the consults asked in one attempt of a dispatch cost or may still cost once that attempt's
 * receipt lands: what their receipts cost, and for one whose claim is open (a runner of it that died
 * is taken over, and its call charged), what it holds (consultHoldsUsd). One not yet claimed is never
 * paid after its attempt ended (checkAskerWaits), and holds only what it cost. An attempt whose
 * runner died is charged what its claim let it spend less this: were it charged less only what the
 * consults' receipts cost, a consult still open would be paid for twice, by the dispatch's receipt
 * and, once taken over, by its own. Pure.
 */
export function consultsTakeAtEndUsd(dispatch: MessageRecord, attempt: number, messageOf: (id: string) => MessageRecord | undefined): number {
  return (dispatch.consults ?? [])
    .filter((asked) => asked.attempt === attempt)
    .reduce((sum, asked) => {
      const consult = messageOf(asked.id);
      const last = consult?.attempts[consult.attempts.length - 1];
      const open = consult !== undefined && !isTerminal(consult) && last?.claim != null && last.receipt === null;
      const spent = consult?.attempts.reduce((total, item) => total + (item.receipt?.costUsd ?? 0), 0) ?? 0;
      return sum + (open ? Math.max(spent, consult.maxCostUsd) : spent);
    }, 0);
}

/** The consults asked in one attempt of a dispatch, in the order asked, each with its latest receipt: what that attempt's ea_receipt lists. */
export function attemptConsults(dispatch: MessageRecord, attempt: number, messageOf: (id: string) => MessageRecord | undefined): Array<{ message_id: string; receipt: string | null }> {
  return (dispatch.consults ?? [])
    .filter((asked) => asked.attempt === attempt)
    .map((asked) => {
      const consult = messageOf(asked.id);
      return { message_id: asked.id, receipt: consult?.attempts[consult.attempts.length - 1]?.receipt?.path ?? null };
    });
}

/**
 * Why no one waits for a consult an agent asked any more: the dispatch attempt it was asked in has
 * its receipt (the agent is gone, its tool closed). Such a consult is receipted without running,
 * never paid for. Null when it is no asked consult, or its attempt is still open. Pure.
 */
export function askerGone(consult: MessageRecord, messageOf: (id: string) => MessageRecord | undefined): string | null {
  const ended = askerEnded(consult, messageOf);
  return ended === null ? null : `attempt ${consult.askedIn} of ${ended.dispatch}, which asked it, ended (${ended.path}): no agent waits for its answer`;
}

/** The receipt of the dispatch attempt that asked `consult`, once it landed; null while that attempt is open, or for a consult no agent asked. */
function askerEnded(consult: MessageRecord, messageOf: (id: string) => MessageRecord | undefined): { readonly dispatch: string; readonly path: string; readonly seq: number } | null {
  if (consult.askedIn === undefined) return null;
  const parentId = consult.chain[consult.chain.length - 1];
  const parent = parentId === undefined ? undefined : messageOf(parentId);
  const ended = parent?.attempts[consult.askedIn - 1]?.receipt;
  if (parent === undefined || ended == null) return null;
  return { dispatch: parent.id, path: ended.path, seq: ended.seq };
}
