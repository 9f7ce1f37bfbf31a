import { CooError } from '../../../errors.js';
import type { CommitCheck } from '../../commit-check.js';
import { attemptArtifactPath } from '../../../ledger/layout.js';
import type { AaReceipt } from '../../../schema/receipt.js';
import { folderOf, type MessageRecord } from '../../state.js';
import type { IntentRules } from '../intent.js';
import { checkManifest, checkTask } from '../message-artifacts.js';
import { closeAttempt, openAttempt, referenceAttemptArtifacts } from '../attempt.js';
import { notePanelMember } from '../panel.js';
import { requireTargetClass } from './target-class.js';
import { checkAskedInDispatch, checkAskerWaits, expectSnapshotFiles } from './consult-in-dispatch.js';

/**
 * aa_consult: a question to an advisory agent. Its prompt and context manifest are added with it,
 * match their hashes, and the manifest matches the pin; its receipt (aa_receipt.v0) answers that
 * exact prompt and context.
 */
/**
 * Each proposal a receipt stores is an aa_proposal.v0 of this very message and attempt, in its
 * place: what a dispatch adopts by hash is advice with no field for authority.
 */
function checkStoredProposals(check: CommitCheck, refs: ReadonlyArray<{ readonly path: string; readonly sha256: string }>, messageId: string, attempt: number, where: string): void {
  refs.forEach((ref, index) => {
    const bytes = check.facts.blobs.get(ref.path);
    if (bytes === undefined) return;
    const stored = check.readArtifact('aa_proposal.v0', bytes, ref.path);
    if (stored.message_id !== messageId || stored.attempt_number !== attempt || stored.index !== index + 1) {
      throw new CooError('SCHEMA_INVALID', `${where}: ${ref.path} is proposal ${stored.index} of ${stored.message_id} attempt ${stored.attempt_number}, not proposal ${index + 1} of this attempt`, { where: `${where}:proposals` });
    }
  });
}

/**
 * The bundle a receipt keeps as sent (its prompt-sent.md) is the one its bundle_hash names: the
 * runner hashes and keeps the same bytes, and an auditor proves what the agent was shown from that
 * file. A receipt that keeps no such file (one written before it was kept, or by a runner that
 * never held the bytes) states what it states; one that keeps it states that file's hash.
 */
function checkSentBundle(doc: AaReceipt, record: MessageRecord, attempt: number, where: string): void {
  const path = attemptArtifactPath(folderOf(record), attempt, 'prompt-sent.md');
  const kept = doc.attachments.find((item) => item.path === path);
  if (kept !== undefined && kept.sha256 !== doc.bundle_hash) {
    throw new CooError('ARTIFACT_HASH_MISMATCH', `${where}: bundle_hash ${doc.bundle_hash ?? 'null'} is not the hash ${kept.sha256} of the bundle it keeps as sent (${path})`, { where: `${where}:bundle_hash` });
  }
}

export const consultRules: IntentRules<'aa_consult'> = {
  target(_check, doc, registry, where) {
    requireTargetClass(registry, doc, 'advisory_agent', 'an advisory agent', where);
  },
  /** The COO signs a consult on behalf of the execution agent that asked it inside its dispatch (consult-in-dispatch.ts proves it). */
  onBehalf(doc) {
    return doc.asked_in_attempt !== undefined;
  },
  envelope(check, doc, registry, policy, folder, where) {
    checkAskedInDispatch(check, doc, registry, where);
    checkTask(check, doc.payload_ref, doc.payload_hash, folder, where);
    const manifestFiles = checkManifest(check, doc.context_pin, folder, where);
    expectSnapshotFiles(check, doc, manifestFiles, folder, where);
    notePanelMember(check, doc, registry, policy, where);
  },
  record(doc) {
    return doc.asked_in_attempt === undefined ? {} : { askedIn: doc.asked_in_attempt };
  },
  /** A consult asked in a dispatch attempt is the dispatch's: listed there, its cost charged to the dispatch's budget. */
  accepted(check, doc, record) {
    if (doc.asked_in_attempt === undefined || doc.parent_message_id === null) return;
    const parent = check.message(doc.parent_message_id)!;
    check.messages.set(parent.id, { ...parent, consults: [...(parent.consults ?? []), { id: record.id, attempt: doc.asked_in_attempt }] });
  },
  receipt(check, entry, info, record, keyId) {
    const where = entry.path;
    const doc = check.read('aa_receipt.v0', entry);
    check.requireActiveCoo(keyId, where, 'receipts');
    const attempt = openAttempt(record, info.attempt, doc, where);
    checkAskerWaits(check, record, attempt, doc, where);
    // The agent that asked waits for this answer inside its attempt: one attempt, no retry later.
    if (record.askedIn !== undefined && doc.next_attempt_at !== null) {
      throw new CooError('ATTEMPT_INVALID', `${where}: a consult asked inside a dispatch attempt takes one attempt; next_attempt_at is null`, { where: `${where}:next_attempt_at` });
    }
    if (doc.prompt_hash !== record.payloadHash || doc.context_manifest_hash !== record.manifestHash) {
      throw new CooError('ARTIFACT_HASH_MISMATCH', `${where}: prompt_hash or context_manifest_hash differs from the envelope's`, { where });
    }
    const refs = [...(doc.output_ref !== null && doc.output_hash !== null ? [{ path: doc.output_ref, sha256: doc.output_hash }] : []), ...doc.attachments, ...(doc.proposals ?? [])];
    referenceAttemptArtifacts(check, record, info.attempt, refs, where);
    checkSentBundle(doc, record, info.attempt, where);
    checkStoredProposals(check, doc.proposals ?? [], record.id, info.attempt, where);
    closeAttempt(check, record, attempt, doc, keyId, where);
  },
};
