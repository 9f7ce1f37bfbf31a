import type { EaDispatchMessage } from '../schema/message.js';
import { canonicalJson, sha256Ref } from '../util/hash.js';

/**
 * The dispatch lane's naming and approval rules, shared by the writer, the validator and the
 * runner. Pure.
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
export function dispatchRequestHash(message: Pick<EaDispatchMessage, 'message_id' | 'target_actor' | 'dispatch' | 'payload_hash' | 'context_pin' | 'budget' | 'open_pr'>): string {
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
    }),
  );
}
