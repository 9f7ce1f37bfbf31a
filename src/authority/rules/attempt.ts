import { CooError } from '../../errors.js';
import type { AaReceipt, EaReceipt } from '../../schema/receipt.js';
import { BACKOFF_CEILING_SECONDS } from '../../schema/policy.js';
import { toMillis } from '../../schema/common.js';
import { folderOf, isTerminal, type AttemptRecord, type MessageRecord } from '../state.js';
import type { CommitCheck } from '../commit-check.js';
import { chargedDay } from '../../lane/budget.js';
import { askerGone } from '../dispatch-consults.js';

/** What every intent's receipt does to its attempt: find the open one, reference its artifacts, close it. */

/** The claimed, still open attempt a receipt closes. */
export function openAttempt(record: MessageRecord, number: number, doc: AaReceipt | EaReceipt, where: string): AttemptRecord {
  const attempt = record.attempts[number - 1];
  if (doc.message_id !== record.id || doc.attempt_number !== number || attempt === undefined || attempt.claim === null) {
    throw new CooError('ATTEMPT_INVALID', `${where}: no claimed attempt ${number} of ${record.id} for this receipt`, { where });
  }
  if (attempt.receipt !== null) throw new CooError('ATTEMPT_INVALID', `${where}: attempt ${number} already has a receipt`, { where });
  if (doc.attempt_id !== attempt.attemptId) throw new CooError('ATTEMPT_INVALID', `${where}: attempt_id ${doc.attempt_id} is not the claimed ${attempt.attemptId}`, { where });
  if (doc.target_actor !== record.target) throw new CooError('ATTEMPT_INVALID', `${where}: target_actor differs from the envelope's`, { where });
  if (isTerminal(record)) throw new CooError('ATTEMPT_INVALID', `${where}: ${record.id} is already final`, { where });
  return attempt;
}

/** Artifacts a receipt names: each inside its attempt's folder, added by the same commit with the hash named. */
export function referenceAttemptArtifacts(check: CommitCheck, record: MessageRecord, attempt: number, refs: ReadonlyArray<{ readonly path: string; readonly sha256: string }>, where: string): void {
  const prefix = `${folderOf(record)}/artifacts/${String(attempt).padStart(3, '0')}/`;
  for (const ref of refs) {
    if (!ref.path.startsWith(prefix)) throw new CooError('PATH_INVALID', `${where}: ${ref.path} is outside ${prefix}`, { where });
    check.reference(ref.path, ref.sha256, where);
  }
}

/**
 * A receipt that says its message expired (`expired`) or its deadline passed (`deadline_passed`)
 * has its attempt claimed at or past that time: the claim fixes the time an attempt is judged by
 * (rules/claim.ts), and the runner dates it by the clock its gate judged those times with
 * (authority/runnable.ts gateAttempt), whatever that clock's skew. A claim dated before the time the
 * receipt names says the message was still live when it was ended unrun, which the ledger's own
 * times refute. `expires_at` bounds when a message may first start and nothing after it
 * (gateAttempt): a retry stays live until `deadline_at`, so `expired` ends attempt 1 alone. A
 * consult whose asking dispatch attempt ended (askerGone) ends `expired` at any time, and a panel's
 * members stop together, whatever attempt each is on, on the time of the member that stopped them.
 */
export function checkStopTime(check: CommitCheck, record: MessageRecord, attempt: AttemptRecord, doc: AaReceipt | EaReceipt, where: string): void {
  const claimedAt = attempt.claim?.at;
  if (claimedAt === undefined) return;
  for (const blocker of doc.blockers) {
    if (blocker.code !== 'expired' && blocker.code !== 'deadline_passed') continue;
    const members = record.panel === undefined ? [record] : (check.state.panels.get(record.panel)?.messages ?? [record.id]).map((id) => (id === record.id ? record : check.message(id)));
    const passed = (member: MessageRecord | undefined): boolean => {
      if (member === undefined) return true;
      if (blocker.code === 'deadline_passed') return toMillis(member.deadlineAt) <= toMillis(claimedAt);
      // A panel's members stop together (consult/lane.ts planPanel): a member past its expiry on its first start (no attempt
      // before the one this stop claims) stops every sibling the runner starts with it, whatever attempt a sibling is on.
      const firstStart = member === record ? attempt.number === 1 : member.attempts.every((one) => one.number === 1 && one.claim?.at === claimedAt);
      return (firstStart && toMillis(member.expiresAt) <= toMillis(claimedAt)) || askerGone(member, (id) => check.message(id)) !== null;
    };
    if (members.some(passed)) continue;
    const panel = record.panel === undefined ? '' : ' and of every member of its panel';
    const why =
      blocker.code === 'expired' && attempt.number > 1
        ? `attempt ${attempt.number} is a retry, which the expires_at of ${record.id} does not bound: a retry may start until the deadline_at ${record.deadlineAt}`
        : `attempt ${attempt.number} was claimed at ${claimedAt}, before the ${blocker.code === 'expired' ? `expires_at ${record.expiresAt}` : `deadline_at ${record.deadlineAt}`} of ${record.id}${panel}: by the claim's own time the message was still live`;
    throw new CooError('ATTEMPT_INVALID', `${where}: says ${blocker.code} but ${why}; nothing was written`, { where: `${where}:blockers` });
  }
}

export function closeAttempt(check: CommitCheck, record: MessageRecord, attempt: AttemptRecord, doc: AaReceipt | EaReceipt, keyId: string, where: string): void {
  checkStopTime(check, record, attempt, doc, where);
  // A retry waits no longer than any policy lets it (a second for the rounding of two times to whole seconds): one set a year ahead would hold its message queued for a year.
  if (doc.next_attempt_at !== null && toMillis(doc.next_attempt_at) - toMillis(doc.created_at) > (BACKOFF_CEILING_SECONDS + 1) * 1000) {
    throw new CooError('ATTEMPT_INVALID', `${where}: next_attempt_at ${doc.next_attempt_at} is more than ${BACKOFF_CEILING_SECONDS} s (the longest backoff a policy may set) after the receipt's created_at ${doc.created_at}`, { where: `${where}:next_attempt_at` });
  }
  const cost = 'actual_cost_usd' in doc ? doc.actual_cost_usd : 0;
  const proposals = 'proposals' in doc && doc.proposals !== undefined ? doc.proposals.map((item) => item.sha256) : [];
  const closed: AttemptRecord = {
    ...attempt,
    receipt: {
      path: where,
      status: doc.status,
      blockers: doc.blockers.map((blocker) => blocker.code),
      costUsd: cost,
      nextAttemptAt: doc.next_attempt_at,
      createdAt: doc.created_at,
      seq: check.seq,
      keyId,
      ...(proposals.length === 0 ? {} : { proposals }),
      ...('output_ref' in doc && doc.output_ref !== null && doc.output_hash !== null ? { output: { path: doc.output_ref, sha256: doc.output_hash } } : {}),
      ...(doc.schema_version === 'aa_receipt.v0' && doc.model !== null ? { model: doc.model } : {}),
    },
  };
  const attempts = [...record.attempts];
  attempts[attempt.number - 1] = closed;
  check.updateMessage(record, attempts);
  if (cost > 0) check.spend.push({ correlation: record.correlation, day: chargedDay(attempt.claim?.at ?? null, doc.created_at), usd: cost });
}
