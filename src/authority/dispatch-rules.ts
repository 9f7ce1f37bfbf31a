import type { EaDispatchMessage } from '../schema/message.js';
import { canonicalJson, sha256Ref } from '../util/hash.js';

/**
 * The dispatch lane's naming and approval rules, shared by the writer, the validator and the
 * runner. Pure.
 */

/**
 * A branch name git takes and the lane uses: ref-safe characters, no `..`, no empty, `.`-led or
 * `.lock` component, no leading `-` or `/`, no trailing `/`. The writer, the validator and the
 * worktree ask this one rule.
 */
export function isBranchName(name: string): boolean {
  return (
    /^[A-Za-z0-9._/-]{1,180}$/.test(name) &&
    !name.includes('..') &&
    !name.startsWith('-') &&
    name.split('/').every((part) => part !== '' && !part.startsWith('.') && !part.endsWith('.lock'))
  );
}

/** The branch a dispatch works on when the COO names none: one per message. */
export function defaultBranchFor(messageId: string): string {
  return `coo/${messageId.toLowerCase()}`;
}

/** Each attempt gets a branch of its own: the dispatch's branch for the first, a numbered one after. */
export function attemptBranchFor(branchName: string, attempt: number): string {
  return attempt === 1 ? branchName : `${branchName}-attempt-${attempt}`;
}

/** The dispatch fields that derive from the message id, left out wherever two submissions are compared. */
export function stableDispatchFields(message: Pick<EaDispatchMessage, 'message_id' | 'dispatch'>): Record<string, unknown> {
  const { attempt_id: _attemptId, branch_name: branch, ...rest } = message.dispatch;
  return branch === defaultBranchFor(message.message_id) ? rest : { ...rest, branch_name: branch };
}

/**
 * What a CEO approves for a new dispatch: the target, the work (task hash, base commit, context
 * pins, scope, acceptance, verification, timeout), its budget and whether a pull request opens.
 * Ids, times and the branch name are not part of it. `coo dispatch` prints it when the policy
 * asks for an approval; `coo approve --request` signs it.
 */
export function dispatchRequestHash(message: Pick<EaDispatchMessage, 'message_id' | 'target_actor' | 'dispatch' | 'payload_hash' | 'context_pin' | 'budget' | 'open_pr'>): string {
  const { branch_name: _branch, ...work } = stableDispatchFields(message);
  return sha256Ref(
    canonicalJson({
      target_actor: message.target_actor,
      dispatch: work,
      payload_hash: message.payload_hash,
      context_pin: message.context_pin === null ? null : { repo_commit_sha: message.context_pin.repo_commit_sha, files: message.context_pin.files },
      max_cost_usd: message.budget.max_cost_usd,
      max_runtime_seconds: message.budget.max_runtime_seconds,
      open_pr: message.open_pr === true,
    }),
  );
}
