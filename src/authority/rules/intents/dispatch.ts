import { CooError } from '../../../errors.js';
import { LIMITS } from '../../../limits.js';
import type { EaDispatchMessage } from '../../../schema/message.js';
import { toMillis } from '../../../schema/common.js';
import { canonicalJson, sha256Ref } from '../../../util/hash.js';
import { edgeRequires } from '../../policy-check.js';
import { proposalPath } from '../../../ledger/layout.js';
import { ADOPTION_FIELDS } from '../../../schema/message.js';
import type { Proposal } from '../../../schema/aa-answer.js';
import type { ActorPolicy } from '../../../schema/policy.js';
import { readDocument } from '../../../schema/documents.js';
import type { CommitCheck } from '../../commit-check.js';
import type { Revocation } from '../../state.js';
import { attemptIdOf } from '../../runnable.js';
import { attemptConsults } from '../../dispatch-consults.js';
import type { IntentRules } from '../intent.js';
import { checkManifest, checkTask } from '../message-artifacts.js';
import { closeAttempt, openAttempt, referenceAttemptArtifacts } from '../attempt.js';
import { requireTargetClass } from './target-class.js';
import { checkNotBehind } from '../clock.js';

/**
 * ea_dispatch: work for an execution agent. Its naming and approval rules are shared by the
 * writer (dispatch/enqueue.ts), the validator and the runner; the validator's rules for the
 * envelope and its receipts (ea_receipt.v0) follow them. Pure.
 */

/** First components that make a name resolve to another ref than the branch (`heads/main` is main). */
const SHADOWING = new Set(['refs', 'heads', 'tags', 'remotes']);

/**
 * A name for a new branch of the lane, whatever the repository holds: what `git check-ref-format
 * --branch` takes (ref-safe characters, no `..`, no empty, `.`-led, `.`-ended or `.lock` component,
 * no leading `-`), and no name that git would resolve to something else: not `HEAD` or another name
 * of git's pseudo-ref form (capitals and underscores), and no `refs/`, `heads/`, `tags/` or
 * `remotes/` prefix (`git rev-parse heads/main` is main, `refs/heads/main` would be made as
 * `refs/heads/refs/heads/main`). The writer, the validator and the worktree ask this one rule;
 * whether the name is free in the repository is asked when the dispatch is written (enqueue.ts).
 */
export function isBranchName(name: string): boolean {
  const parts = name.split('/');
  return (
    /^[A-Za-z0-9._/-]{1,180}$/.test(name) &&
    !name.includes('..') &&
    !name.startsWith('-') &&
    !/^[A-Z_]+$/.test(name) &&
    !SHADOWING.has(parts[0]!) &&
    parts.every((part) => part !== '' && !part.startsWith('.') && !part.endsWith('.') && !part.endsWith('.lock'))
  );
}

/** The branch a dispatch works on when the COO names none: one per message, named by its id as printed. */
export function defaultBranchFor(messageId: string): string {
  return `coo/${messageId}`;
}

/** Whether `branch` is the one a dispatch gets without naming any: by the id as printed, or lowercased as dispatches written before named it. */
function isDefaultBranch(branch: string, messageId: string): boolean {
  return branch === defaultBranchFor(messageId) || branch === `coo/${messageId.toLowerCase()}`;
}

/** Each attempt gets a branch of its own: the dispatch's branch for the first, a numbered one after. */
export function attemptBranchFor(branchName: string, attempt: number): string {
  return attempt === 1 ? branchName : `${branchName}-attempt-${attempt}`;
}

/** The dispatch fields that derive from the message id, left out wherever two submissions are compared. */
export function stableDispatchFields(message: Pick<EaDispatchMessage, 'message_id' | 'dispatch'>): Record<string, unknown> {
  const { attempt_id: _attemptId, branch_name: branch, ...rest } = message.dispatch;
  return isDefaultBranch(branch, message.message_id) ? rest : { ...rest, branch_name: branch };
}

/**
 * What a CEO approves for a new dispatch: the target, the work (task hash, base commit, context
 * pins, scope, acceptance, verification, timeout, and the branch when one is named), its budget
 * and whether a pull request opens. Ids and times are not part of it, nor the default branch, which
 * derives from the id. `coo dispatch` prints it when the policy asks for an approval; `coo approve
 * --request` signs it.
 */
export function dispatchRequestHash(message: Pick<EaDispatchMessage, 'message_id' | 'target_actor' | 'dispatch' | 'payload_hash' | 'context_pin' | 'budget' | 'open_pr' | 'parent_message_id' | 'adopted_proposal'>): string {
  const work = stableDispatchFields(message);
  return sha256Ref(
    canonicalJson({
      target_actor: message.target_actor,
      dispatch: work,
      payload_hash: message.payload_hash,
      context_pin: message.context_pin === null ? null : { repo_commit_sha: message.context_pin.repo_commit_sha, files: message.context_pin.files },
      max_cost_usd: message.budget.max_cost_usd,
      max_runtime_seconds: message.budget.max_runtime_seconds,
      open_pr: message.open_pr === true,
      // An adoption is approved as the adoption of that proposal of that consult, with what the COO changed.
      ...(message.adopted_proposal === undefined ? {} : { adopted_proposal: { consult: message.parent_message_id, ...message.adopted_proposal } }),
    }),
  );
}

/**
 * Why a dispatch needs the CEO's approval of its exact request, or null: the policy's edge gives
 * dispatches to its target to the CEO (`ceo_approval`), or it adopts an advisory agent's proposal
 * and the policy does not say adoptions go without (`adoptions.ceo_approval`, true when absent).
 * The writer (`coo dispatch`, `coo adopt`) and the validator ask this one rule.
 */
export function approvalRequired(policy: ActorPolicy, source: string, target: string, adopting: boolean): string | null {
  if (edgeRequires(policy, source, target, 'ea_dispatch', 'ceo_approval')) return `the policy (v${policy.version}) gives dispatches to ${target} to the CEO`;
  if (adopting && policy.adoptions?.ceo_approval !== false) return `the policy (v${policy.version}) gives the adoption of an advisory agent's proposal to the CEO`;
  return null;
}

/** The fields of an adopted proposal the dispatch states differently, as `adopted_proposal.changed` must name them. */
export function adoptionChanges(adopted: Proposal, dispatch: { readonly task: string; readonly scope: readonly string[]; readonly acceptance: readonly string[]; readonly verification: readonly string[] }): Array<(typeof ADOPTION_FIELDS)[number]> {
  const same = (a: readonly string[], b: readonly string[]): boolean => canonicalJson(a) === canonicalJson(b);
  return ADOPTION_FIELDS.filter((field) => (field === 'task' ? adopted.task.trimEnd() !== dispatch.task.trimEnd() : !same(adopted[field], dispatch[field])));
}

/**
 * Why a proposal a consult's receipt stores is no one's advice any more, or null: the key that signed
 * the receipt was revoked since (a revocation ends what the key said that nothing used yet; a key
 * rotated out is retired, not revoked, and its proposals stand). The writer (`coo adopt`, the MCP
 * adopt tool), before it asks the CEO to approve the adoption, and the validator ask this one rule.
 */
export function revokedProposal(consultId: string, attempt: number, index: number, keyId: string | undefined, revocation: (keyId: string) => Revocation | undefined): string | null {
  const revoked = keyId === undefined ? undefined : revocation(keyId);
  if (revoked === undefined) return null;
  return `${consultId} attempt ${attempt} stores proposal ${index} by a receipt signed by ${keyId}, revoked at Ledger-Seq ${revoked.seq} by ${revoked.by} (${JSON.stringify(revoked.reason)}): a revoked key's receipt vouches for nothing adopted after it; ask the consult again`;
}

/** A dispatch adopting a proposal of its parent consult: the proposal the consult's receipt stores, its bytes beside the envelope, and exactly what the COO changed. */
function checkAdoption(check: CommitCheck, doc: EaDispatchMessage, folder: string, where: string): void {
  const adopted = doc.adopted_proposal!;
  const consult = doc.parent_message_id === null ? undefined : check.message(doc.parent_message_id);
  if (consult === undefined || consult.intent !== 'aa_consult') {
    throw new CooError('POLICY_PROPOSAL_TO_DISPATCH', `${where}: adopted_proposal adopts a proposal of the dispatch's parent, which must be a consult`, { where: `${where}:adopted_proposal` });
  }
  const receipt = consult.attempts[adopted.attempt_number - 1]?.receipt;
  if (receipt?.status !== 'succeeded' || receipt.proposals?.[adopted.index - 1] !== adopted.sha256) {
    throw new CooError('POLICY_PROPOSAL_TO_DISPATCH', `${where}: ${consult.id} attempt ${adopted.attempt_number} stores no succeeded proposal ${adopted.index} with hash ${adopted.sha256}`, { where: `${where}:adopted_proposal` });
  }
  const revoked = revokedProposal(consult.id, adopted.attempt_number, adopted.index, receipt.keyId, (keyId) => check.revocation(keyId));
  if (revoked !== null) throw new CooError('POLICY_PROPOSAL_TO_DISPATCH', `${where}: ${revoked}`, { where: `${where}:adopted_proposal` });
  const path = proposalPath(folder);
  check.expectArtifact(path, path, adopted.sha256, where);
  const bytes = check.facts.blobs.get(path);
  const task = doc.payload_ref === null ? undefined : check.facts.blobs.get(doc.payload_ref);
  if (bytes === undefined || task === undefined) return;
  // Read only the bytes the consult's receipt names: the change is judged against the proposal adopted, never another.
  if (sha256Ref(bytes) !== adopted.sha256) throw new CooError('ARTIFACT_HASH_MISMATCH', `${where}: ${path} is not the proposal ${adopted.sha256} it adopts`, { where: path });
  const stored = readDocument('aa_proposal.v0', bytes, path);
  const changed = adoptionChanges(stored, { task: task.toString('utf8'), scope: doc.dispatch.scope_paths, acceptance: doc.dispatch.acceptance_criteria, verification: doc.dispatch.verification_commands });
  if (canonicalJson([...adopted.changed].sort()) !== canonicalJson([...changed].sort())) {
    throw new CooError('SCHEMA_INVALID', `${where}: adopted_proposal.changed names ${JSON.stringify(adopted.changed)}; what the dispatch changed of the proposal is ${JSON.stringify(changed)}`, { where: `${where}:adopted_proposal.changed` });
  }
}

export const dispatchRules: IntentRules<'ea_dispatch'> = {
  target(_check, doc, registry, where) {
    requireTargetClass(registry, doc, 'execution_agent', 'an execution agent', where);
  },
  /**
   * Advice becomes work only through the COO's adoption: every message of the chain that is to or
   * from an advisory agent is followed by a dispatch that adopted a proposal of it (this one, for
   * its parent).
   */
  ancestry(check, doc, _registry, where) {
    doc.causality_chain.forEach((id, index) => {
      const ancestor = check.message(id);
      if (ancestor === undefined) return;
      // Advice as the registry stood when it was written: an advisory agent the registry has since dropped still gave it.
      if (ancestor.advisory !== true) return;
      const nextId = doc.causality_chain[index + 1];
      const adopted = nextId === undefined ? doc.adopted_proposal !== undefined : check.message(nextId)?.adopted === id;
      if (!adopted) {
        throw new CooError('POLICY_PROPOSAL_TO_DISPATCH', `${where}: a dispatch descends from advisory traffic (${id}) only by adopting a proposal of it (coo adopt), which names the proposal by hash`, { where });
      }
    });
  },
  /**
   * A dispatch the runner can execute: its executor is the one the registry gives its target, it is
   * pinned to a full base commit (the context pin, when it has one, at the same commit), it carries
   * its task, its first attempt id is the lane's, and its timeout is within the policy. Where the
   * policy's edge asks for the CEO, it names an unused, unexpired approval of its exact request
   * whose key was not revoked since.
   */
  envelope(check, doc, registry, policy, folder, where) {
    const executor = registry.actors.find((actor) => actor.id === doc.target_actor)?.executor;
    if (executor === undefined) throw new CooError('POLICY_INTENT_NOT_ALLOWED', `${where}: ${doc.target_actor} has no executor in the registry`, { where });
    if (doc.dispatch.executor !== executor.kind) {
      throw new CooError('SCHEMA_INVALID', `${where}: ${doc.target_actor} runs ${executor.kind}, not ${doc.dispatch.executor}`, { where: `${where}:dispatch.executor` });
    }
    if (!/^[0-9a-f]{40}$/.test(doc.dispatch.base_ref)) {
      throw new CooError('SCHEMA_INVALID', `${where}: base_ref must be the full commit the work starts from`, { where: `${where}:dispatch.base_ref` });
    }
    if (!isBranchName(doc.dispatch.branch_name) || !isBranchName(attemptBranchFor(doc.dispatch.branch_name, 100))) {
      throw new CooError('SCHEMA_INVALID', `${where}: branch_name ${JSON.stringify(doc.dispatch.branch_name)} is not a branch name git takes`, { where: `${where}:dispatch.branch_name` });
    }
    if (doc.context_pin?.snapshot_of !== undefined) {
      throw new CooError('CONTEXT_INVALID', `${where}: a dispatch's context is pinned at its base commit, never a snapshot`, { where: `${where}:context_pin.snapshot_of` });
    }
    if (doc.context_pin !== null && doc.context_pin.repo_commit_sha !== doc.dispatch.base_ref) {
      throw new CooError('SCHEMA_INVALID', `${where}: the context pin and base_ref name different commits`, { where: `${where}:context_pin.repo_commit_sha` });
    }
    if (doc.payload_ref === null || doc.payload_hash === null) throw new CooError('SCHEMA_INVALID', `${where}: a dispatch carries its task (payload_ref)`, { where: `${where}:payload_ref` });
    checkTask(check, doc.payload_ref, doc.payload_hash, folder, where);
    if (doc.context_pin !== null) checkManifest(check, doc.context_pin, folder, where);
    const attemptId = attemptIdOf({ id: doc.message_id, intent: doc.intent }, 1);
    if (doc.dispatch.attempt_id !== attemptId) throw new CooError('ATTEMPT_INVALID', `${where}: dispatch.attempt_id must be ${attemptId}`, { where: `${where}:dispatch.attempt_id` });
    if (doc.dispatch.timeout_seconds > policy.budgets.max_runtime_seconds || doc.dispatch.timeout_seconds > doc.budget.max_runtime_seconds) {
      throw new CooError('POLICY_LIMIT', `${where}: timeout_seconds ${doc.dispatch.timeout_seconds} exceeds the runtime budget`, { where: `${where}:dispatch.timeout_seconds` });
    }
    if (doc.adopted_proposal !== undefined) checkAdoption(check, doc, folder, where);
    const required = approvalRequired(policy, doc.source_actor, doc.target_actor, doc.adopted_proposal !== undefined);
    if (doc.approval_id === undefined) {
      if (required !== null) throw new CooError('APPROVAL_REQUIRED', `${where}: ${required}: it needs the CEO's approval of request ${dispatchRequestHash(doc)}`, { where });
      return;
    }
    const approval = check.approval(doc.approval_id);
    const hash = dispatchRequestHash(doc);
    if (approval === undefined || approval.approves !== 'dispatch') throw new CooError('APPROVAL_INVALID', `${where}: ${doc.approval_id} is not a dispatch approval in the ledger`, { where: `${where}:approval_id` });
    if (approval.requestHash !== hash) throw new CooError('APPROVAL_INVALID', `${where}: ${doc.approval_id} approves another request than ${hash}`, { where: `${where}:approval_id` });
    if (approval.usedBy !== null) throw new CooError('APPROVAL_INVALID', `${where}: ${doc.approval_id} was used by ${approval.usedBy}`, { where: `${where}:approval_id` });
    if (approval.revoked === true) {
      const revocation = check.revocation(approval.keyId)!;
      throw new CooError('APPROVAL_INVALID', `${where}: ${doc.approval_id} was signed by ${approval.keyId}, revoked at Ledger-Seq ${revocation.seq} by ${revocation.by} (${JSON.stringify(revocation.reason)}) before anything used it: it approves nothing; ask the CEO to approve request ${hash} again`, { where: `${where}:approval_id` });
    }
    // Times are the writers' statements, as everywhere in the ledger: the dispatch is dated within the approval's life.
    // The two are dated by two machines' clocks (the CEO's, the COO's): one that runs behind the other by up to the
    // skew allowed between machines dates a dispatch written right after the approval a little before it.
    if (toMillis(doc.created_at) >= toMillis(approval.expiresAt) || toMillis(doc.created_at) < toMillis(approval.createdAt) - LIMITS.clockSkewSeconds * 1000) {
      throw new CooError('APPROVAL_INVALID', `${where}: ${doc.approval_id} holds from ${approval.createdAt} (less the ${LIMITS.clockSkewSeconds} s allowed between machines' clocks) until ${approval.expiresAt}, not at ${doc.created_at}`, { where: `${where}:approval_id` });
    }
    // Within the approval's life by the clock of the hook that takes it too: a COO clock behind by less than the approval's age would use one that expired.
    if (check.clock !== null && check.landing) checkNotBehind(check.clock, 'created_at', doc.created_at, where);
    check.approvals.set(approval.id, { ...approval, usedBy: doc.message_id });
  },
  /** What a consult its agent asks is bounded by: the base its worktree starts from, the scope it may change and its attempts' time box. */
  record(doc) {
    return { base: doc.dispatch.base_ref, scope: doc.dispatch.scope_paths, timeoutSeconds: doc.dispatch.timeout_seconds, executor: doc.dispatch.executor, branchName: doc.dispatch.branch_name, ...(doc.adopted_proposal === undefined || doc.parent_message_id === null ? {} : { adopted: doc.parent_message_id }) };
  },
  /**
   * An EA receipt closes the claimed attempt, as a consult's does: written by the active COO from
   * the evidence its runner gathered, its attachments inside the attempt's own artifact folder, and
   * listing exactly the consults its agent asked in that attempt, each with its receipt. It never
   * schedules a retry: the next attempt of a dispatch is the CEO's to approve.
   */
  receipt(check, entry, info, record, keyId) {
    const where = entry.path;
    const doc = check.read('ea_receipt.v0', entry);
    check.requireActiveCoo(keyId, where, 'receipts');
    const attempt = openAttempt(record, info.attempt, doc, where);
    // The executor and branch are the envelope's: an attestation names them as the work's, and a runner lands the work on the branch a receipt names.
    if (record.executor !== undefined && doc.executor !== record.executor) {
      throw new CooError('SCHEMA_INVALID', `${where}: executor ${doc.executor} is not the ${record.executor} that ${record.id} names`, { where: `${where}:executor` });
    }
    const branch = record.branchName === undefined ? undefined : attemptBranchFor(record.branchName, info.attempt);
    if (branch !== undefined && doc.branch !== null && doc.branch !== branch) {
      throw new CooError('SCHEMA_INVALID', `${where}: branch ${doc.branch} is not ${branch}, attempt ${info.attempt}'s branch of ${record.id}: an attempt's work is on its own branch`, { where: `${where}:branch` });
    }
    // The work starts from the base the envelope pins: an attestation and `coo show` name the receipt's base as the work's.
    if (record.base !== undefined && doc.base_sha !== record.base) {
      throw new CooError('CONTEXT_INVALID', `${where}: base_sha ${doc.base_sha} is not the base_ref ${record.base} that ${record.id} pins: an attempt's work starts from its dispatch's base`, { where: `${where}:base_sha` });
    }
    const asked = attemptConsults(record, info.attempt, (id) => check.message(id));
    if (canonicalJson(doc.consults ?? []) !== canonicalJson(asked)) {
      throw new CooError('ATTEMPT_INVALID', `${where}: consults must list the ${asked.length} consult(s) the agent asked in attempt ${info.attempt}, in order, each with its latest receipt`, { where: `${where}:consults` });
    }
    referenceAttemptArtifacts(check, record, info.attempt, doc.attachments, where);
    closeAttempt(check, record, attempt, doc, keyId, where);
  },
};
