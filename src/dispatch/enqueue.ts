import { basename, resolve } from 'node:path';
import { approvalRequired, defaultBranchFor, dispatchRequestHash, isBranchName } from '../authority/rules/intents/dispatch.js';
import { slowGlob } from '../authority/glob.js';
import { attemptIdOf } from '../authority/runnable.js';
import type { LedgerState } from '../authority/state.js';
import { contextManifestBytes } from '../lane/context-manifest.js';
import { contextBounds, pinFiles } from '../lane/pins.js';
import { resolveWorkCommit } from '../lane/work-repo.js';
import { CooError } from '../errors.js';
import { CLI_ARGUMENTS } from '../util/argument-names.js';
import { appendRequest, type EnvelopeAppendResult } from '../ledger/append-envelope.js';
import { budgetAt, keyOrigin, planEnvelope, type LaneRequest } from '../ledger/envelope-plan.js';
import { manifestPath, promptPath } from '../ledger/layout.js';
import { NUL_IN_PATH, relativePath } from '../schema/common.js';
import { parseDocument } from '../schema/documents.js';
import type { AdoptedProposal, EaDispatchMessage } from '../schema/message.js';
import { sha256Ref } from '../util/hash.js';
import { executorPromptProblem, renderTask } from './lane.js';
import { safeGit } from './worktree.js';

/** `target` is the execution agent (e.g. ea.codex); `repo` the repository the work is done in, whose `rev` is the base. */
export interface DispatchRequest extends LaneRequest {
  readonly task: string;
  readonly scope: readonly string[];
  readonly accept: readonly string[];
  readonly verify: readonly string[];
  /** Context files to pin at the base, as for a consult. */
  readonly patterns?: readonly string[];
  readonly branch?: string;
  readonly timeoutSeconds?: number;
  readonly issueNumber?: number;
  /** The forge repository (`owner/name`) a pull request opens in once the work succeeds. */
  readonly openPr?: string;
  /** The CEO's approval (approval.v0) of this exact request, when the policy asks for one. */
  readonly approvalId?: string;
  /** An advisory agent's proposal this dispatch adopts (dispatch/adopt.ts): its stored bytes and what names it; the parent is its consult. */
  readonly adoption?: { readonly proposal: Buffer; readonly adopted: AdoptedProposal };
}

export interface DispatchEnqueued extends EnvelopeAppendResult {
  readonly envelope: EaDispatchMessage;
}

/** The forge name a dispatch records when it opens no pull request: the repository's folder name. */
function localRepoName(repo: string): string {
  const name = basename(resolve(repo)).replace(/\.git$/, '').replace(/[^A-Za-z0-9_.-]/g, '-') || 'repo';
  return `local/${name}`;
}

/**
 * Refuses a branch name that is not a plain new branch of `repo`: one the lane's rule refuses
 * (authority/rules/intents/dispatch.ts), the repository's default branch, or any name git already resolves there (a
 * branch, a tag, a remote branch, an object). Asked before anything is written, so a name that
 * would only fail once the attempt is claimed is refused now.
 */
async function refuseTakenBranch(repo: string, name: string): Promise<void> {
  if (!isBranchName(name)) throw new CooError('USAGE', `--branch ${JSON.stringify(name)} is not a name for a new branch (git's branch rules; no HEAD, no refs/, heads/, tags/ or remotes/ prefix)`);
  const head = (await safeGit(['symbolic-ref', '--quiet', '--short', 'HEAD'], { cwd: repo }).catch(() => Buffer.alloc(0))).toString('utf8').trim();
  if (name === head) throw new CooError('USAGE', `--branch ${name} is the repository's default branch: the work gets a branch of its own`);
  const taken = await safeGit(['rev-parse', '--verify', '--quiet', '--end-of-options', name], { cwd: repo }).then(
    () => true,
    () => false,
  );
  if (taken) throw new CooError('USAGE', `--branch ${name} already names something in ${repo}: the work gets a new branch`);
}

/**
 * Builds, signs and appends an ea_dispatch envelope: the task as a hashed artifact, the base
 * pinned to the commit `rev` resolves to (with any context files, hashed as for a consult), the
 * scope, acceptance criteria and verification commands, and the executor the registry names for
 * the target. Where the policy asks for the CEO's approval and none is given, it is refused with
 * the request hash the CEO approves (`coo approve --request`); the validator decides the rest.
 */
export async function enqueueDispatch(request: DispatchRequest): Promise<DispatchEnqueued> {
  const { ledger, key, now } = request;
  const state = await ledger.state();
  const plan = planEnvelope(state, key, request.target, request, now, 'dispatch');
  const { policy } = plan;
  const executor = state.registry!.doc.actors.find((actor) => actor.id === request.target)?.executor;
  if (executor === undefined) throw new CooError('POLICY_INTENT_NOT_ALLOWED', `${request.target} is not an execution agent with an executor in the registry`);
  if (request.task.trim() === '') throw new CooError('USAGE', 'the task is empty');
  const names = request.names ?? CLI_ARGUMENTS;
  for (const [list, flag] of [[request.scope, names.scope], [request.accept, names.accept], [request.verify, names.verify]] as const) {
    if (list.length === 0) throw new CooError('USAGE', `give at least one ${flag}`);
  }
  // Said as the caller's mistake in its own words, not as the envelope's schema failing after the fact.
  for (const path of request.scope) {
    if (path.includes('\0')) throw new CooError('USAGE', `${names.scope} ${JSON.stringify(path)} ${NUL_IN_PATH}: remove it`);
    if (!relativePath.safeParse(path).success) throw new CooError('USAGE', `${names.scope} ${JSON.stringify(path)} is not a path relative to the repository root (no leading "/", no "\\", no ".", ".." or empty segment)`);
    const slow = slowGlob(path);
    if (slow !== null) throw new CooError('USAGE', `${names.scope} ${JSON.stringify(path)} ${slow}`);
  }
  if (request.branch !== undefined) await refuseTakenBranch(request.repo, request.branch);
  const resolved = await resolveWorkCommit(request.ledger.gitdir, request.repo, request.rev ?? 'HEAD', names);
  const files = request.patterns === undefined || request.patterns.length === 0 ? [] : await pinFiles(request.repo, resolved, request.patterns, contextBounds(policy.limits), names);
  const task = Buffer.from(request.task.endsWith('\n') ? request.task : `${request.task}\n`, 'utf8');
  const manifest = files.length === 0 ? null : contextManifestBytes(resolved.commit, files);
  const timeout = request.timeoutSeconds ?? plan.runtimeSeconds;
  const envelopeAt = (head: LedgerState): EaDispatchMessage =>
    parseDocument(
      'coo_message.v0',
      {
        ...plan.headerAt(head),
        intent: 'ea_dispatch',
        authority_class: 'governed_execution',
        budget: budgetAt(plan, head, request.maxCostUsd),
        dispatch: {
          repo: request.openPr ?? localRepoName(request.repo),
          issue_number: request.issueNumber ?? null,
          attempt_id: attemptIdOf({ id: plan.messageId, intent: 'ea_dispatch' }, 1),
          executor: executor.kind,
          base_ref: resolved.commit,
          branch_name: request.branch ?? defaultBranchFor(plan.messageId),
          scope_paths: [...request.scope],
          acceptance_criteria: [...request.accept],
          verification_commands: [...request.verify],
          timeout_seconds: timeout,
        },
        payload_ref: promptPath(plan.folder),
        payload_hash: sha256Ref(task),
        context_pin:
          manifest === null
            ? null
            : {
                repo_commit_sha: resolved.commit,
                context_manifest_ref: manifestPath(plan.folder),
                context_manifest_hash: sha256Ref(manifest),
                files: files.map((file) => ({ path: file.path, sha256: file.sha256 })),
              },
        expected_receipt_schema: 'ea_receipt.v0',
        ...(request.approvalId === undefined ? {} : { approval_id: request.approvalId }),
        ...(request.openPr === undefined ? {} : { open_pr: true }),
        ...(request.adoption === undefined ? {} : { adopted_proposal: request.adoption.adopted }),
      },
      'envelope',
    ) as EaDispatchMessage;
  const first = envelopeAt(state);
  // The executor takes the task as one argument: one over the bound, or holding a NUL, would fail only after the claim.
  // Judged as the executor gets it, with the consult tool's line, whether its attempts will offer the tool or not.
  const promptProblem = executorPromptProblem(renderTask(first, task.toString('utf8'), files.map((file) => file.path), true));
  if (promptProblem !== null) throw new CooError('USAGE', promptProblem);
  const required = request.approvalId === undefined ? approvalRequired(policy, plan.actor, request.target, request.adoption !== undefined) : null;
  if (required !== null) {
    const hash = dispatchRequestHash(first);
    throw new CooError('APPROVAL_REQUIRED', `${required}: ask the CEO for \`coo approve --request ${hash} --ceo-key CEO.key --reason TEXT\`, then ${names.again} with ${names.approval} APPROVAL_ID`, {
      where: hash,
    });
  }
  const artifacts = new Map<string, Buffer>([['prompt.md', task]]);
  if (request.adoption !== undefined) artifacts.set('proposal.yaml', request.adoption.proposal);
  if (manifest !== null) artifacts.set('context-manifest.yaml', manifest);
  return appendRequest(ledger, envelopeAt, artifacts, key, now, keyOrigin(request));
}
