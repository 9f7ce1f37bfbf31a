import { CooError } from '../../../errors.js';
import { snapshotFilePath } from '../../../ledger/layout.js';
import type { AaConsultMessage } from '../../../schema/message.js';
import type { AaReceipt } from '../../../schema/receipt.js';
import type { ActorRegistry } from '../../../schema/registry.js';
import { askerGone, attemptBudgetLeftUsd, attemptEndsAtMillis } from '../../dispatch-consults.js';
import { toMillis } from '../../../schema/common.js';
import { classOf } from '../../policy-check.js';
import { scopeMatcher } from '../../scope.js';
import type { AttemptRecord, MessageRecord } from '../../state.js';
import type { CommitCheck } from '../../commit-check.js';

/** How far a stated dollar figure may differ from the ledger's (floating-point sums of costs). */
const USD_TOLERANCE = 1e-9;

/**
 * A consult an execution agent asks while it works (EA -> AA). The agent holds no key for it: the
 * COO signs it on the agent's behalf, and the chain proves where that authority came from. It is a
 * child of the agent's own dispatch, asked inside one attempt of it that is still open; its context
 * is a snapshot of that attempt's worktree, each file inside the dispatch's scope, its bytes stored
 * beside the envelope; and what it may cost comes out of what the dispatch has left. A consult the
 * COO asks carries none of this, and no snapshot.
 */
export function checkAskedInDispatch(check: CommitCheck, doc: AaConsultMessage, registry: ActorRegistry, where: string): MessageRecord | null {
  const asked = doc.asked_in_attempt;
  const pin = doc.context_pin;
  if (asked === undefined) {
    if (pin.snapshot_of !== undefined) throw new CooError('CONTEXT_INVALID', `${where}: a snapshot pin belongs to a consult an execution agent asks inside its dispatch`, { where: `${where}:context_pin.snapshot_of` });
    if (classOf(registry, doc.source_actor) === 'execution_agent') {
      throw new CooError('POLICY_INTENT_NOT_ALLOWED', `${where}: an execution agent consults only inside one of its dispatch attempts (asked_in_attempt)`, { where });
    }
    return null;
  }
  if (classOf(registry, doc.source_actor) !== 'execution_agent') {
    throw new CooError('SCHEMA_INVALID', `${where}: asked_in_attempt names a dispatch attempt; the consult's source is then that dispatch's execution agent, not ${doc.source_actor}`, { where: `${where}:asked_in_attempt` });
  }
  const parent = doc.parent_message_id === null ? undefined : check.message(doc.parent_message_id);
  if (parent === undefined || parent.intent !== 'ea_dispatch' || parent.target !== doc.source_actor) {
    throw new CooError('ATTEMPT_INVALID', `${where}: a consult ${doc.source_actor} asks is a child of a dispatch to ${doc.source_actor}`, { where: `${where}:parent_message_id` });
  }
  const attempt = parent.attempts[asked - 1];
  if (attempt?.claim == null || attempt.receipt !== null) {
    throw new CooError('ATTEMPT_INVALID', `${where}: attempt ${asked} of ${parent.id} is not open: a consult is asked while its attempt runs`, { where: `${where}:asked_in_attempt` });
  }
  if (pin.snapshot_of !== attempt.attemptId || pin.repo_commit_sha !== parent.base) {
    throw new CooError('CONTEXT_INVALID', `${where}: the context is a snapshot of ${attempt.attemptId}'s worktree, which started from ${parent.base ?? '(unknown)'}`, { where: `${where}:context_pin` });
  }
  const ends = attemptEndsAtMillis(parent, attempt);
  if (ends !== null && toMillis(doc.deadline_at) > ends) {
    throw new CooError('POLICY_LIMIT', `${where}: deadline_at ${doc.deadline_at} is after attempt ${asked} of ${parent.id} ends (${new Date(ends).toISOString()}: its claim plus the ${parent.timeoutSeconds ?? 0} s time box, within the dispatch's deadline_at ${parent.deadlineAt}): a consult asked inside an attempt ends within it`, { where: `${where}:deadline_at` });
  }
  const inScope = scopeMatcher(parent.scope ?? []);
  const outside = pin.files.filter((file) => !inScope(file.path)).map((file) => file.path);
  if (outside.length > 0) {
    throw new CooError('SCOPE_VIOLATION', `${where}: ${outside.slice(0, 5).join(', ')}${outside.length > 5 ? ` and ${outside.length - 5} more` : ''} lie outside the scope of ${parent.id} (${(parent.scope ?? []).join(', ')})`, { where: `${where}:context_pin.files` });
  }
  const left = attemptBudgetLeftUsd(parent, asked, (id) => check.message(id));
  if (doc.budget.max_cost_usd > left + USD_TOLERANCE) {
    throw new CooError('BUDGET_EXCEEDED', `${where}: max_cost_usd ${doc.budget.max_cost_usd} exceeds the ${left} that attempt ${asked} of ${parent.id} has left (its dispatch's budget, within what its claim allowed it, less its consults)`, { where: `${where}:budget.max_cost_usd` });
  }
  return parent;
}

/** A snapshot's files: each stored beside the envelope under the name of its content's hash, at the size the manifest states. */
export function expectSnapshotFiles(check: CommitCheck, doc: AaConsultMessage, manifestFiles: ReadonlyArray<{ readonly path: string; readonly bytes: number }> | null, folder: string, where: string): void {
  if (doc.context_pin.snapshot_of === undefined) return;
  for (const file of doc.context_pin.files) {
    const path = snapshotFilePath(folder, file.sha256);
    check.expectArtifact(path, path, file.sha256, where);
    const stored = check.facts.blobs.get(path);
    const stated = manifestFiles?.find((item) => item.path === file.path)?.bytes;
    if (stored !== undefined && stated !== undefined && stored.length !== stated) {
      throw new CooError('CONTEXT_INVALID', `${where}: the manifest says ${file.path} is ${stated} bytes; its snapshot holds ${stored.length}`, { where });
    }
  }
}

/**
 * A consult claimed once the dispatch attempt it was asked in had ended answers no one: its
 * receipt says it ran nothing (not succeeded, nothing spent). Otherwise a queued consult the agent
 * left behind would be paid for by whichever runner took it up later, its cost outside the receipt
 * of the attempt that asked it.
 */
export function checkAskerWaits(check: CommitCheck, record: MessageRecord, attempt: AttemptRecord, doc: AaReceipt, where: string): void {
  const gone = askerGone(record, (id) => check.message(id));
  if (gone === null || attempt.claim === null) return;
  const parent = check.message(record.chain[record.chain.length - 1]!)!;
  const ended = parent.attempts[record.askedIn! - 1]!.receipt!;
  if (ended.seq > attempt.claim.seq) return;
  if (doc.status === 'succeeded' || doc.actual_cost_usd > 0) {
    throw new CooError('ATTEMPT_INVALID', `${where}: ${gone} before this attempt was claimed; its receipt runs and spends nothing`, { where: `${where}:status` });
  }
}
