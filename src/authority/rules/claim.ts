import { CooError } from '../../errors.js';
import type { PathInfo } from '../../ledger/layout.js';
import { toMillis } from '../../schema/common.js';
import { attemptIdOf, isRunnerIntent } from '../runnable.js';
import { retryApproved } from '../state.js';
import { LIMITS } from '../../limits.js';
import { isoSeconds } from '../../util/time.js';
import type { CommitCheck, EntryFile } from '../commit-check.js';

/**
 * A claim (claim.v0) takes exactly the next attempt of a live message of an intent the runner
 * executes, at or after the time a retry may start, before anything is paid for. A claim the runner
 * would never make would hold the attempt open, and every later receipt for the message would be
 * refused.
 */
export function checkClaim(check: CommitCheck, entry: EntryFile, info: Extract<PathInfo, { kind: 'claim' }>, keyId: string): void {
  const where = entry.path;
  const doc = check.read('claim.v0', entry);
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
    const approval = [...check.approvals.values(), ...check.state.approvals.values()].find((item) => item.approves === 'retry' && item.messageId === record.id && item.attempt === next);
    if (approval === undefined || toMillis(doc.claimed_at) >= toMillis(approval.expiresAt)) {
      throw new CooError('ATTEMPT_INVALID', `${where}: the CEO's approval of attempt ${next} ${approval === undefined ? 'is missing' : `expired at ${approval.expiresAt}`}`, { where });
    }
  }
  if (last?.receipt?.nextAttemptAt != null && toMillis(doc.claimed_at) < toMillis(last.receipt.nextAttemptAt)) {
    throw new CooError('ATTEMPT_INVALID', `${where}: claimed at ${doc.claimed_at}, before attempt ${next} may start at ${last.receipt.nextAttemptAt}`, { where });
  }
  // A retry's claim rests on times (its start, the expiry of the CEO's approval): they are judged on a clock in step with the ledger.
  if (last !== undefined) checkClaimTime(check.state.newestAt, doc.claimed_at, where);
  const attemptId = attemptIdOf(record, next);
  if (doc.attempt_id !== attemptId) {
    throw new CooError('ATTEMPT_INVALID', `${where}: attempt_id must be ${attemptId}`, { where });
  }
  check.updateMessage(record, [
    ...record.attempts,
    { number: next, attemptId: doc.attempt_id, claim: { path: where, session: doc.transport_session_id, runner: doc.runner_id, at: doc.claimed_at, seq: check.seq }, receipt: null },
  ]);
}

/**
 * Times in the ledger only move forward, up to the skew allowed between machines: a claim is dated
 * no earlier than the newest time the ledger already holds (`newestAt`, its newest commit's) less
 * LIMITS.clockSkewSeconds. A retry's claim rests on times (its start, the expiry of the CEO's
 * approval of it) that a runner whose clock runs behind would judge in the past: its claim of a
 * retry after the approval expired would read as made before, and be paid for. The validator
 * holds retries to it; the runner holds every claim it makes to it before it pays (runner.ts), and
 * refuses to start with a clock that far behind (startup.ts).
 */
export function checkClaimTime(newestAt: number | null, claimedAt: string, where: string): void {
  if (newestAt === null) return;
  const behind = Math.floor((newestAt - toMillis(claimedAt)) / 1000);
  if (behind <= LIMITS.clockSkewSeconds) return;
  throw new CooError(
    'CLOCK_BEHIND',
    `${where}: claimed at ${claimedAt}, ${behind} s before ${isoSeconds(new Date(newestAt))}, the newest time the ledger holds (more than the ${LIMITS.clockSkewSeconds} s of skew allowed): the runner's clock runs behind; set it right (NTP) and run again`,
    { where },
  );
}
