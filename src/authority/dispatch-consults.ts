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
  const spentOn = (record: MessageRecord): number => record.attempts.reduce((sum, attempt) => sum + (attempt.receipt?.costUsd ?? 0), 0);
  const consults = (dispatch.consults ?? []).reduce((sum, asked) => {
    const consult = messageOf(asked.id);
    if (consult === undefined) return sum;
    const spent = spentOn(consult);
    return sum + (isTerminal(consult) ? spent : Math.max(spent, consult.maxCostUsd));
  }, 0);
  return Math.max(0, dispatch.maxCostUsd - spentOn(dispatch) - consults);
}

/**
 * When a dispatch attempt's time box ends, in milliseconds: its claim's time plus the dispatch's
 * timeout. A consult its agent asks in it ends by then (its deadline_at), so the attempt, which
 * waits for the consult in flight, never outlives its time box for advice. Null when the attempt is
 * not claimed, or the dispatch was recorded before its timeout was kept. The validator holds each
 * asked consult to it, and the runner plans one within it. Pure.
 */
export function attemptEndsAtMillis(dispatch: MessageRecord, attempt: AttemptRecord): number | null {
  if (attempt.claim === null || dispatch.timeoutSeconds === undefined) return null;
  return toMillis(attempt.claim.at) + dispatch.timeoutSeconds * 1000;
}

/** What the consults asked in one attempt of a dispatch cost, from their receipts. */
export function consultsCostUsd(dispatch: MessageRecord, attempt: number, messageOf: (id: string) => MessageRecord | undefined): number {
  return (dispatch.consults ?? [])
    .filter((asked) => asked.attempt === attempt)
    .reduce((sum, asked) => sum + (messageOf(asked.id)?.attempts.reduce((total, item) => total + (item.receipt?.costUsd ?? 0), 0) ?? 0), 0);
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
  if (consult.askedIn === undefined) return null;
  const parentId = consult.chain[consult.chain.length - 1];
  const parent = parentId === undefined ? undefined : messageOf(parentId);
  const ended = parent?.attempts[consult.askedIn - 1]?.receipt;
  if (parent === undefined || ended == null) return null;
  return `attempt ${consult.askedIn} of ${parent.id}, which asked it, ended (${ended.path}): no agent waits for its answer`;
}
