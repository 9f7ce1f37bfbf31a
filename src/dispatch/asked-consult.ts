import { lstatSync, realpathSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { attemptBudgetLeftUsd, attemptEndsAtMillis } from '../authority/dispatch-consults.js';
import { scopeMatcher } from '../authority/scope.js';
import type { LedgerState } from '../authority/state.js';
import type { PrivateKey } from '../crypto/keys.js';
import { CooError } from '../errors.js';
import { appendRequest, type EnvelopeAppendResult } from '../ledger/append-envelope.js';
import { budgetAt, DEFAULT_RUNTIME_SECONDS, keyOrigin, planEnvelope } from '../ledger/envelope-plan.js';
import type { KeyOrigin } from '../ledger/append-envelope.js';
import { manifestPath, promptPath, snapshotFilePath } from '../ledger/layout.js';
import type { Ledger } from '../ledger/ledger.js';
import { contextManifestBytes } from '../lane/context-manifest.js';
import { oraclePathProblem } from '../lane/oracle-inputs.js';
import { refuseContextOverBounds, type ContextBounds, type PinnedFile } from '../lane/pins.js';
import { derivedRequestKey } from '../lane/request-key.js';
import { LIMITS } from '../limits.js';
import { relativePath } from '../schema/common.js';
import { parseDocument } from '../schema/documents.js';
import type { AaConsultMessage, EaDispatchMessage } from '../schema/message.js';
import { readBounded } from '../util/bounded-read.js';
import { isOwnFolder } from './work-walk.js';
import { sha256Ref } from '../util/hash.js';

/**
 * A consult an execution agent asks while it works (EA -> AA), written by the runner: the files the
 * agent names, read from its worktree as they stand now and stored in the ledger with their hashes
 * (a snapshot pin), its question, and a budget out of what the dispatch has left. The COO signs it on
 * the agent's behalf, with the agent as `source_actor` and the dispatch as its parent; the validator
 * (authority/rules/intents/consult-in-dispatch.ts) decides whether it may land.
 */

/** How long an asked consult may wait to start: the runner starts it at once, and nobody waits for one that starts later. */
export const ASKED_CONSULT_TTL_SECONDS = 60;

/** How far a dollar figure may differ from a sum of costs (floating point). */
const USD_TOLERANCE = 1e-9;

/**
 * The files `paths` names in the attempt's worktree, read now, each a regular file inside the
 * dispatch's scope reached through no link, within the size bound for one file and the policy's
 * `bounds` for them all. A path outside the scope, or files whose sizes already pass a bound, are
 * refused before anything is read, and each read stops at what is left of the bounds.
 */
export function snapshotFiles(worktree: string, paths: readonly string[], scope: readonly string[], bounds: ContextBounds): PinnedFile[] {
  if (paths.length === 0) throw new CooError('USAGE', 'name at least one file of the worktree as context (files)');
  const unique = [...new Set(paths)];
  if (unique.length > LIMITS.contextFiles) throw new CooError('CONTEXT_INVALID', `${unique.length} files exceed the ${LIMITS.contextFiles}-file limit`);
  for (const path of unique) {
    if (!relativePath.safeParse(path).success) throw new CooError('CONTEXT_INVALID', `${JSON.stringify(path)} is not a path relative to the worktree's root`);
    const problem = oraclePathProblem(path);
    if (problem !== null) throw new CooError('CONTEXT_INVALID', `${path}: ${problem}`);
  }
  const inScope = scopeMatcher(scope);
  const outside = unique.filter((path) => !inScope(path));
  if (outside.length > 0) throw new CooError('SCOPE_VIOLATION', `${outside.join(', ')} lie outside the dispatch's scope (${scope.join(', ')}): a consult's context is bounded by it`);
  // The worktree itself is looked at before its path is resolved (work-walk.ts): one the agent replaced by a link had the
  // consult's context read from the folder the link names, a file of another actor's work, say.
  if (!isOwnFolder(resolve(worktree))) throw new CooError('CONTEXT_INVALID', `the worktree ${worktree} is no longer a folder of its own (replaced by a link, a file, or gone): nothing in it is context`);
  const root = realpathSync(worktree);
  // Resolved, it is still the folder of that name: a link put in its place after the look is not followed.
  if (root !== join(realpathSync(dirname(resolve(worktree))), basename(resolve(worktree)))) throw new CooError('CONTEXT_INVALID', `the worktree ${worktree} is no longer a folder of its own (replaced by a link): nothing in it is context`);
  const sizes = unique.map((path) => {
    const size = sizeOf(join(root, path));
    if (size > LIMITS.contextFileBytes) throw new CooError('CONTEXT_INVALID', `${path}: ${size} bytes exceeds the ${LIMITS.contextFileBytes}-byte limit for one context file`);
    return size;
  });
  refuseContextOverBounds(sizes, bounds);
  let left = bounds.bytes;
  return unique.sort().map((path) => {
    const maxBytes = Math.min(LIMITS.contextFileBytes, left);
    const read = readBounded(join(root, path), { maxBytes, exact: true });
    switch (read.kind) {
      case 'file':
        left -= read.bytes.length;
        return { path, sha256: sha256Ref(read.bytes), bytes: read.bytes };
      case 'not_regular':
        throw new CooError('CONTEXT_INVALID', `${path} is a ${read.type} in the worktree (or lies behind one): only regular files are context`);
      case 'too_large':
        // The file grew since its size was taken.
        if (maxBytes < LIMITS.contextFileBytes) throw new CooError('POLICY_LIMIT', `${path} grew while it was read: the context passes the policy's ${bounds.bytes} bytes`);
        throw new CooError('CONTEXT_INVALID', `${path}: ${read.size} bytes exceeds the ${LIMITS.contextFileBytes}-byte limit for one context file`);
      case 'unreadable':
        throw new CooError('CONTEXT_INVALID', `${path} cannot be read in the worktree (${read.code})`);
    }
  });
}

/**
 * A path's size as lstat says it, following no link on the way; 0 for what is not there, not a
 * regular file or behind a linked folder (the read says why): a link never tells the size of a
 * file outside the worktree.
 */
function sizeOf(path: string): number {
  try {
    if (realpathSync(dirname(path)) !== dirname(path)) return 0;
    const stats = lstatSync(path);
    return stats.isFile() ? stats.size : 0;
  } catch {
    return 0;
  }
}

export interface AskedConsultRequest {
  readonly ledger: Ledger;
  readonly key: PrivateKey;
  readonly now: Date;
  /** The dispatch the agent works on, and the attempt it asks in. */
  readonly dispatch: EaDispatchMessage;
  readonly attempt: number;
  readonly attemptId: string;
  readonly target: string;
  readonly question: string;
  readonly files: readonly PinnedFile[];
  /** What the consult may cost; by default what the dispatch has left, within the policy's cap for one message. */
  readonly maxCostUsd?: number;
  /**
   * What the attempt's executor has cost so far, which the ledger learns only from the attempt's
   * receipt: the consult's budget comes out of what it left.
   */
  readonly executorSpentUsd?: number;
}

export interface AskedConsultEnqueued extends EnvelopeAppendResult {
  readonly envelope: AaConsultMessage;
}

/** What attempt `attempt` of the dispatch has left for its agent's consults, at `state` (attemptBudgetLeftUsd). */
export function askedConsultBudgetUsd(state: LedgerState, dispatchId: string, attempt: number): number {
  const record = state.messages.get(dispatchId);
  if (record === undefined) throw new CooError('MESSAGE_UNKNOWN', `${dispatchId} is not in the ledger`);
  return attemptBudgetLeftUsd(record, attempt, (id) => state.messages.get(id));
}

export interface AskedConsultPlan {
  /** The envelope as written at `head` (its correlation's remaining budget is the ledger's figure there). */
  readonly envelopeAt: (head: LedgerState) => AaConsultMessage;
  /** Its artifacts by name in its folder: prompt, manifest, and each snapshotted file as `context/<sha256 hex>`. */
  readonly artifacts: ReadonlyMap<string, Buffer>;
  /** Its idempotency key's origin: derived from the question, so the writer allows it (lane/request-key.ts derivedKeyRule). */
  readonly origin: KeyOrigin;
}

/**
 * The consult's time to live and runtime: a minute to start and the default runtime, within the
 * policy, and both within what is left of the attempt's time box at `now`, which the validator
 * holds its deadline to (authority/dispatch-consults.ts). Nothing is left: refused, unwritten.
 */
function askedConsultTimes(state: LedgerState, request: Pick<AskedConsultRequest, 'dispatch' | 'attempt' | 'now'>, maxTtlSeconds: number, maxRuntimeSeconds: number): { ttlSeconds: number; maxRuntimeSeconds: number } {
  const ttl = Math.min(ASKED_CONSULT_TTL_SECONDS, maxTtlSeconds);
  const runtime = Math.min(DEFAULT_RUNTIME_SECONDS, maxRuntimeSeconds);
  const record = state.messages.get(request.dispatch.message_id);
  const attempt = record?.attempts[request.attempt - 1];
  const ends = record === undefined || attempt === undefined ? null : attemptEndsAtMillis(record, attempt);
  if (ends === null) return { ttlSeconds: ttl, maxRuntimeSeconds: runtime };
  const left = Math.floor((ends - request.now.getTime()) / 1000);
  if (left < 2) throw new CooError('POLICY_LIMIT', `attempt ${request.attempt} of ${request.dispatch.message_id} has ${Math.max(0, left)} s left of its ${request.dispatch.dispatch.timeout_seconds} s time box, within its deadline_at ${request.dispatch.deadline_at}: no time for a consult; nothing was written or paid`);
  const ttlSeconds = Math.min(ttl, left - 1);
  return { ttlSeconds, maxRuntimeSeconds: Math.min(runtime, left - ttlSeconds) };
}

/** The consult's envelope and artifacts, planned at `state`; nothing is written. */
export function planAskedConsult(state: LedgerState, request: Omit<AskedConsultRequest, 'ledger'>): AskedConsultPlan {
  const { key, now, dispatch, files } = request;
  if (request.question.trim() === '') throw new CooError('USAGE', 'the question is empty');
  const policy = state.policy?.doc;
  if (policy === undefined) throw new CooError('TRUST_VERSION', 'the ledger has no policy');
  const running = request.executorSpentUsd ?? 0;
  const left = Math.max(0, askedConsultBudgetUsd(state, dispatch.message_id, request.attempt) - running);
  const maxCostUsd = request.maxCostUsd ?? Math.min(left, policy.budgets.max_cost_usd_per_message);
  if (maxCostUsd <= 0) throw new CooError('BUDGET_EXCEEDED', `${dispatch.message_id} has nothing left of its budget for a consult`);
  // The validator holds the consult to what the ledger says is left; the executor's cost so far is the runner's to count.
  if (running > 0 && maxCostUsd > left + USD_TOLERANCE) {
    throw new CooError('BUDGET_EXCEEDED', `max_cost_usd ${maxCostUsd} exceeds the ${left.toFixed(6)} USD ${dispatch.message_id} has left after its executor's ${running.toFixed(6)} USD so far`);
  }
  const asked = { lane: 'asked-consult', attempt: request.attemptId, target: request.target, question: request.question, files: files.map((file) => [file.path, file.sha256]), max_cost_usd: request.maxCostUsd ?? null };
  const times = askedConsultTimes(state, request, policy.limits.max_ttl_seconds, policy.budgets.max_runtime_seconds);
  const derivedKey = derivedRequestKey(asked);
  const plan = planEnvelope(state, key, request.target, { parentMessageId: dispatch.message_id, idempotencyKey: derivedKey, derivedKey, ...times }, now, 'asked-consult');
  const folder = plan.folder;
  const prompt = Buffer.from(request.question.endsWith('\n') ? request.question : `${request.question}\n`, 'utf8');
  const manifest = contextManifestBytes(dispatch.dispatch.base_ref, files, request.attemptId);
  const envelopeAt = (head: LedgerState): AaConsultMessage =>
    parseDocument(
      'coo_message.v0',
      {
        ...plan.headerAt(head),
        // The agent asks; the COO signs on its behalf and stays the principal.
        source_actor: dispatch.target_actor,
        intent: 'aa_consult',
        authority_class: 'advisory_only',
        budget: budgetAt(plan, head, maxCostUsd),
        prompt_template_version: 'aa_consult_v0',
        payload_ref: promptPath(folder),
        payload_hash: sha256Ref(prompt),
        context_pin: {
          repo_commit_sha: dispatch.dispatch.base_ref,
          snapshot_of: request.attemptId,
          context_manifest_ref: manifestPath(folder),
          context_manifest_hash: sha256Ref(manifest),
          files: files.map((file) => ({ path: file.path, sha256: file.sha256 })),
        },
        expected_receipt_schema: 'aa_receipt.v0',
        asked_in_attempt: request.attempt,
      },
      'envelope',
    ) as AaConsultMessage;
  const artifacts = new Map<string, Buffer>([
    ['prompt.md', prompt],
    ['context-manifest.yaml', manifest],
  ]);
  for (const file of files) artifacts.set(snapshotFilePath('', file.sha256).slice(1), file.bytes);
  return { envelopeAt, artifacts, origin: keyOrigin({ derivedKey }) };
}

/** Signs and appends the consult; the same question about the same bytes in the same attempt is the same message. */
export async function enqueueAskedConsult(request: AskedConsultRequest): Promise<AskedConsultEnqueued> {
  const plan = planAskedConsult(await request.ledger.state(), request);
  return appendRequest(request.ledger, plan.envelopeAt, plan.artifacts, request.key, request.now, plan.origin);
}
