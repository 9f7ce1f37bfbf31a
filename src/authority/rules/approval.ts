import { CooError } from '../../errors.js';
import { approvalPath } from '../../ledger/layout.js';
import { toMillis } from '../../schema/common.js';
import type { CommitCheck, EntryFile } from '../commit-check.js';
import { retryApprovalsOf, type ApprovalRecord, type AttemptRecord, type MessageRecord } from '../state.js';

/** A dispatch's last attempt when it ended without success and nothing will retry it on its own: what a retry approval (or a rejection) is about; else null. */
export function endedWithoutSuccess(record: MessageRecord): AttemptRecord | null {
  const last = record.attempts[record.attempts.length - 1];
  if (last?.receipt == null || last.receipt.status === 'succeeded' || last.receipt.nextAttemptAt !== null || record.duplicateOf !== null) return null;
  return last;
}

/** Whether a dispatch waits for the CEO's word on its next attempt: ended without success, and no approval of the next attempt yet. */
export function awaitsRetryApproval(record: MessageRecord): boolean {
  const last = record.intent === 'ea_dispatch' ? endedWithoutSuccess(record) : null;
  return last !== null && !(record.approvedRetries ?? []).includes(last.number + 1);
}

/**
 * The CEO's rejection (ceo_reject) of `about`, when the ledger holds one: a request hash, or a
 * dispatch whose next attempt it refused (by message id). A rejection is final: nothing approves what
 * it refused, and it is given once.
 */
export function rejectionOf(check: CommitCheck, about: string): MessageRecord | undefined {
  // A rejection whose key was revoked since refuses nothing: lifting it lets only the CEO, by a key in force, approve.
  return [...check.state.messages.values(), ...check.messages.values()].find(
    (record) => record.intent === 'ceo_reject' && record.duplicateOf === null && (record.about ?? record.rejectsRequest) === about && (record.keyId === undefined || check.revocation(record.keyId) === undefined),
  );
}

/** The approvals the ledger holds with this commit's entries so far: each once, as this commit last left it (used, voided). */
export function approvalsNow(check: CommitCheck): Iterable<ApprovalRecord> {
  return new Map([...check.state.approvals, ...check.approvals]).values();
}

/** The CEO's approvals of attempt `attempt` of dispatch `messageId` that stand, oldest first. */
export function retryApprovals(check: CommitCheck, messageId: string, attempt: number): ApprovalRecord[] {
  return retryApprovalsOf(approvalsNow(check), messageId, attempt);
}

/**
 * A CEO approval (approval.v0): signed by a trust-root authority in its own name, living under
 * the hour of its creation, within the policy's time-to-live. A retry approval reopens a dispatch
 * whose last attempt ended without success, for exactly the next attempt, once. What the CEO
 * rejected (rules/intents/ceo-reject.ts) it never approves afterwards: the rejection stands. An
 * approval speaks while its key is not revoked (voidApprovalsOf).
 */
export function checkApproval(check: CommitCheck, entry: EntryFile, keyId: string): void {
  const where = entry.path;
  const doc = check.read('approval.v0', entry);
  const { registry, policy } = check.requireTrust(where);
  if (approvalPath(doc.approval_id, doc.created_at) !== where) {
    throw new CooError('PATH_INVALID', `${where}: an approval lives at ${approvalPath(doc.approval_id, doc.created_at)}`, { where });
  }
  const holder = check.signerHolder(keyId, where);
  if (!holder.rootAuthority) throw new CooError('TRUST_AUTHORITY', `${where}: approvals are signed by a trust-root authority (the CEO), not ${holder.actor}`, { where });
  if (holder.actor !== doc.approved_by) throw new CooError('SIGNER_WRONG_ACTOR', `${where}: approved_by ${doc.approved_by} but signed by a key of ${holder.actor}`, { where });
  if (check.approval(doc.approval_id) !== undefined) throw new CooError('MESSAGE_DUPLICATE', `${where}: approval ${doc.approval_id} already exists`, { where });
  if ((toMillis(doc.expires_at) - toMillis(doc.created_at)) / 1000 > policy.limits.max_ttl_seconds) {
    throw new CooError('POLICY_LIMIT', `${where}: an approval lives at most ${policy.limits.max_ttl_seconds} s (policy v${policy.version})`, { where });
  }
  const rejected = rejectionOf(check, doc.approves === 'retry' ? doc.message_id! : doc.request_hash!);
  if (rejected !== undefined) {
    const what = doc.approves === 'retry' ? `the next attempt of ${doc.message_id!}` : `request ${doc.request_hash!}`;
    throw new CooError('APPROVAL_REJECTED', `${where}: the CEO rejected ${what} (${rejected.id}), and a rejection is final: the CEO's rejection stands at ${rejected.id}; write a new request for the work instead`, { where });
  }
  if (doc.approves === 'retry') {
    const record = check.message(doc.message_id!);
    if (record === undefined) throw new CooError('MESSAGE_UNKNOWN', `${where}: ${doc.message_id} does not exist`, { where });
    if (record.intent !== 'ea_dispatch') throw new CooError('ATTEMPT_INVALID', `${where}: only dispatches take retry approvals; ${record.id} is ${record.intent}`, { where });
    // A former COO's dispatch starts no attempt (runnable.ts gateAttempt): an approval of its retry would approve nothing.
    const coo = registry.active_coo;
    if (record.source !== coo) {
      throw new CooError('NOT_ACTIVE_COO', `${where}: ${record.id} was sent by ${record.source}, no longer the active COO (${coo}): a former COO's dispatch starts no attempt; ask ${coo} to dispatch the work again`, { where });
    }
    const last = endedWithoutSuccess(record);
    if (last === null) throw new CooError('ATTEMPT_INVALID', `${where}: ${record.id} has no ended, unsuccessful attempt to retry`, { where });
    // Once, unless every earlier approval of that attempt had expired when this one was given (both dated by the CEO's
    // clock): an approval no runner claimed in time would otherwise leave the dispatch waiting for ever.
    const earlier = retryApprovals(check, record.id, last.number + 1);
    if (doc.attempt_number !== last.number + 1 || earlier.some((item) => toMillis(item.expiresAt) > toMillis(doc.created_at))) {
      throw new CooError('ATTEMPT_INVALID', `${where}: a retry approval names attempt ${last.number + 1} of ${record.id}, once while it holds`, { where });
    }
    if (!(record.approvedRetries ?? []).includes(last.number + 1)) check.messages.set(record.id, { ...record, approvedRetries: [...(record.approvedRetries ?? []), last.number + 1] });
  }
  check.approvals.set(doc.approval_id, {
    id: doc.approval_id,
    path: where,
    approves: doc.approves,
    requestHash: doc.request_hash,
    messageId: doc.message_id,
    attempt: doc.attempt_number,
    approvedBy: doc.approved_by,
    createdAt: doc.created_at,
    expiresAt: doc.expires_at,
    seq: check.seq,
    usedBy: null,
    keyId,
  });
}

/**
 * A revocation ends what the revoked key approved and nothing has used yet: a dispatch approval no
 * runner acted on (no dispatch named it, or the one that did has no attempt claimed), a retry
 * approval of an attempt no runner claimed. A thief's approvals do not outlive the key; what was
 * used stands, and a rotation (no revocation) leaves approvals standing. The dispatch whose retry
 * only such an approval reopened waits for the CEO's word again; one whose first attempt only such
 * an approval allowed starts none (runnable.ts revokedWord).
 */
export function voidApprovalsOf(check: CommitCheck, keyId: string): void {
  for (const approval of approvalsNow(check)) {
    if (approval.keyId !== keyId || approval.revoked === true) continue;
    const record = approval.messageId === null ? undefined : check.message(approval.messageId);
    const dispatch = approval.usedBy === null ? undefined : check.message(approval.usedBy);
    const used = approval.approves === 'dispatch' ? approval.usedBy !== null && (dispatch === undefined || dispatch.attempts.length > 0) : record === undefined || record.attempts.length >= approval.attempt!;
    if (used) continue;
    check.approvals.set(approval.id, { ...approval, revoked: true });
    if (record !== undefined && retryApprovals(check, record.id, approval.attempt!).length === 0) {
      check.messages.set(record.id, { ...record, approvedRetries: (record.approvedRetries ?? []).filter((attempt) => attempt !== approval.attempt) });
    }
  }
}
