import { folderOf, laneStateOf, type ApprovalRecord, type AttemptRecord, type LaneState, type LedgerState, type MessageRecord } from '../authority/state.js';
import { commandLapsed } from '../authority/rules/intents/ceo-command.js';
import { envelopePath } from '../ledger/layout.js';
import type { Ledger } from '../ledger/ledger.js';
import { consultAttemptOf, consultOf, type ConsultAttemptView, type ConsultView } from './consult-view.js';
import type { PanelComparison } from './panel-comparison.js';
import { viewPanel } from './panel-view.js';
import type { Approval } from '../schema/control.js';
import { ADVISORY_INTENTS } from '../schema/common.js';
import type { EaDispatchMessage } from '../schema/message.js';
import { eaCommands, type EaReceipt } from '../schema/receipt.js';
import { readStrictYaml } from '../schema/strict-yaml.js';

/** A CEO approval (approval.v0) as `coo show` presents it, with the message that used it. */
export interface ApprovalView {
  readonly approval_id: string;
  readonly path: string;
  readonly approves: 'dispatch' | 'retry';
  readonly request_hash: string | null;
  readonly message_id: string | null;
  readonly attempt_number: number | null;
  readonly approved_by: string;
  readonly reason: string;
  readonly created_at: string;
  readonly expires_at: string;
  /** A dispatch approval: the dispatch that named it; null while unused (and for a retry). */
  readonly used_by: string | null;
}

/** A command of a dispatch attempt, in the receipt's order: the executor's own, then the runner's verification. */
export interface CommandView {
  readonly command: string;
  readonly exit_code: number;
  readonly by: 'executor' | 'verification';
}

/** What an ea_receipt.v0 says about one attempt, laid out for reading. */
export interface DispatchAttemptView {
  readonly status: string;
  readonly blockers: ReadonlyArray<{ readonly code: string; readonly detail: string }>;
  readonly executor: string;
  readonly executor_session_id: string | null;
  readonly model: string | null;
  readonly base_sha: string;
  readonly branch: string | null;
  readonly head_sha: string | null;
  /** Each changed file with its sha256 at the head (null: deleted). */
  readonly files: ReadonlyArray<{ readonly path: string; readonly sha256: string | null }>;
  readonly commands: readonly CommandView[];
  readonly cost_usd: number;
  readonly usage: EaReceipt['usage'];
  readonly attachments: ReadonlyArray<{ readonly path: string; readonly sha256: string }>;
  readonly warnings: readonly string[];
}

/**
 * The key that signed an entry, the actor the trust files gave it to, and the revocation a registry made of it
 * since, if one did: whatever a revoked key signed may be a thief's, and a reader is told so.
 */
export interface SignerView {
  readonly key_id: string;
  readonly actor: string | null;
  readonly revoked: { readonly seq: number; readonly reason: string } | null;
}

/** The signer of an entry signed by `keyId`; null when the state does not know the key (a state cached before keys were kept). */
export function signerOf(state: LedgerState, keyId: string | undefined): SignerView | null {
  if (keyId === undefined) return null;
  const revocation = state.revocations.get(keyId);
  return { key_id: keyId, actor: state.everKeys.get(keyId)?.actor ?? null, revoked: revocation === undefined ? null : { seq: revocation.seq, reason: revocation.reason } };
}

/** One attempt of a message as `coo show` and the MCP `show` tool present it. */
export interface AttemptView {
  readonly number: number;
  readonly attempt_id: string;
  readonly claim: AttemptRecord['claim'];
  readonly receipt: { readonly path: string; readonly document: unknown; readonly signer: SignerView | null } | null;
  /** Dispatches: the receipt's evidence, when the attempt has an ea_receipt.v0. */
  readonly dispatch?: DispatchAttemptView;
  /** Dispatches: the CEO's approval of this attempt as a retry. */
  readonly approval?: ApprovalView;
  /** Consults: the receipt's outcome and where the answer is, when the attempt has an aa_receipt.v0. */
  readonly consult?: ConsultAttemptView;
}

/** A dispatch's request: what the COO asked for, where, and how the runner checks it. */
export interface DispatchView {
  readonly repo: string;
  readonly task: string | null;
  readonly task_ref: string | null;
  readonly task_hash: string | null;
  readonly executor: string;
  readonly base_sha: string;
  readonly branch_name: string;
  readonly scope_paths: readonly string[];
  readonly acceptance_criteria: readonly string[];
  readonly verification_commands: readonly string[];
  readonly timeout_seconds: number;
  readonly open_pr: boolean;
  /** The CEO's approval of the dispatch itself, when the policy asked for one. */
  readonly approval: ApprovalView | null;
  /** The CEO's approvals of further attempts (retries), in attempt order, whether or not they have run. */
  readonly retry_approvals: readonly ApprovalView[];
}

/** A message with its envelope, lane state, claims and receipts, read from one ledger state. */
export interface MessageView {
  readonly message_id: string;
  readonly lane_state: LaneState;
  readonly duplicate_of: string | null;
  /** How the request reached the ledger (`mcp`), or null when it was typed at the CLI or predates the field. */
  readonly submitted_via: string | null;
  readonly envelope: unknown;
  /** The key that signed the envelope (null in a state cached before it was kept). */
  readonly envelope_signer: SignerView | null;
  readonly attempts: readonly AttemptView[];
  /** Dispatches: the request and its approval. */
  readonly dispatch?: DispatchView;
  /** Consults: the question, its pinned context and its budget. */
  readonly consult?: ConsultView;
  /** A panel member: every member of its panel side by side (audit/panel-comparison.ts). */
  readonly panel?: PanelComparison;
  readonly original_lane_state?: LaneState;
  readonly original_attempts?: readonly AttemptRecord[];
  /** A message the active COO acknowledged (lane state `acknowledged`): its ack. */
  readonly acknowledged_by?: string;
  /** A CEO command the COO never took up, lapsed by the reader's clock: its expires_at. No ack of it and no work under it is taken any more; the CEO sends it again. */
  readonly lapsed_at?: string;
}

/** The envelope's `submitted_via`, or null; read from the parsed document, so old entries without it read as null. */
export function submittedViaOf(envelope: unknown): string | null {
  if (envelope === null || typeof envelope !== 'object') return null;
  const via = (envelope as Record<string, unknown>)['submitted_via'];
  return typeof via === 'string' ? via : null;
}

/** An approval the ledger holds, read from its entry. */
export async function viewApproval(ledger: Ledger, record: ApprovalRecord): Promise<ApprovalView> {
  const bytes = await ledger.readFile(record.path);
  const doc = (bytes === null ? {} : readStrictYaml(bytes, record.path)) as Partial<Approval>;
  return {
    approval_id: record.id,
    path: record.path,
    approves: record.approves,
    request_hash: record.requestHash,
    message_id: record.messageId,
    attempt_number: record.attempt,
    approved_by: record.approvedBy,
    reason: doc.reason ?? '',
    created_at: doc.created_at ?? '',
    expires_at: record.expiresAt,
    used_by: record.usedBy,
  };
}

/** The receipt's evidence, when it is an ea_receipt.v0: commands paired with their exit codes and labelled by who ran them. */
export function dispatchAttemptOf(document: unknown): DispatchAttemptView | undefined {
  if (document === null || typeof document !== 'object' || (document as { schema_version?: unknown }).schema_version !== 'ea_receipt.v0') return undefined;
  const receipt = document as EaReceipt;
  return {
    status: receipt.status,
    blockers: receipt.blockers,
    executor: receipt.executor,
    executor_session_id: receipt.executor_session_id,
    model: receipt.model,
    base_sha: receipt.base_sha,
    branch: receipt.branch,
    head_sha: receipt.head_sha,
    files: receipt.file_hashes,
    commands: eaCommands(receipt).map(({ command, exitCode, by }) => ({ command, exit_code: exitCode, by })),
    cost_usd: receipt.actual_cost_usd,
    usage: receipt.usage,
    attachments: receipt.attachments,
    warnings: receipt.warnings,
  };
}

function dispatchOf(envelope: unknown, task: string | null, approval: ApprovalView | null, retries: readonly ApprovalView[]): DispatchView | undefined {
  if (envelope === null || typeof envelope !== 'object' || (envelope as { intent?: unknown }).intent !== 'ea_dispatch') return undefined;
  const message = envelope as EaDispatchMessage;
  const request = message.dispatch;
  return {
    repo: request.repo,
    task,
    task_ref: message.payload_ref,
    task_hash: message.payload_hash,
    executor: request.executor,
    base_sha: request.base_ref,
    branch_name: request.branch_name,
    scope_paths: request.scope_paths,
    acceptance_criteria: request.acceptance_criteria,
    verification_commands: request.verification_commands,
    timeout_seconds: request.timeout_seconds,
    open_pr: message.open_pr === true,
    approval,
    retry_approvals: retries,
  };
}

/** Reads what `coo show` prints for one message: every document comes from the ledger at its current head. */
/** `now`, the reader's clock, says whether a CEO command the COO never took up has lapsed (`lapsed_at`). */
export async function viewMessage(ledger: Ledger, state: LedgerState, record: MessageRecord, now?: Date): Promise<MessageView> {
  const read = async (path: string): Promise<unknown> => {
    const bytes = await ledger.readFile(path);
    return bytes === null ? null : readStrictYaml(bytes, path);
  };
  const retryApprovals = new Map<number, ApprovalRecord>();
  for (const approval of state.approvals.values()) if (approval.approves === 'retry' && approval.messageId === record.id && approval.attempt !== null) retryApprovals.set(approval.attempt, approval);
  const retries = new Map<number, ApprovalView>();
  for (const [attempt, approval] of [...retryApprovals].sort(([a], [b]) => a - b)) retries.set(attempt, await viewApproval(ledger, approval));
  const attempts: AttemptView[] = [];
  for (const attempt of record.attempts) {
    const document = attempt.receipt === null ? null : await read(attempt.receipt.path);
    const dispatch = dispatchAttemptOf(document);
    const consult = consultAttemptOf(document);
    const approval = retries.get(attempt.number);
    attempts.push({
      number: attempt.number,
      attempt_id: attempt.attemptId,
      claim: attempt.claim,
      receipt: attempt.receipt === null ? null : { path: attempt.receipt.path, document, signer: signerOf(state, attempt.receipt.keyId) },
      ...(dispatch === undefined ? {} : { dispatch }),
      ...(consult === undefined ? {} : { consult }),
      ...(approval === undefined ? {} : { approval }),
    });
  }
  const duplicateOf = record.duplicateOf === null ? null : state.messages.get(record.duplicateOf) ?? null;
  const envelope = await read(envelopePath(folderOf(record)));
  let dispatch: DispatchView | undefined;
  let consult: ConsultView | undefined;
  if (ADVISORY_INTENTS.has(record.intent)) {
    const ref = (envelope as { payload_ref?: unknown } | null)?.payload_ref;
    const question = typeof ref === 'string' ? await ledger.readFile(ref) : null;
    consult = consultOf(envelope, question === null ? null : question.toString('utf8'));
  }
  if (record.intent === 'ea_dispatch') {
    const message = envelope as EaDispatchMessage | null;
    const taskBytes = message?.payload_ref == null ? null : await ledger.readFile(message.payload_ref);
    const approved = message?.approval_id === undefined ? undefined : state.approvals.get(message.approval_id);
    dispatch = dispatchOf(envelope, taskBytes === null ? null : taskBytes.toString('utf8'), approved === undefined ? null : await viewApproval(ledger, approved), [...retries.values()]);
  }
  const panel = record.panel === undefined || !state.panels.has(record.panel) ? undefined : await viewPanel(ledger, state, record.panel);
  return {
    message_id: record.id,
    lane_state: laneStateOf(record, state.registry?.doc),
    duplicate_of: record.duplicateOf,
    submitted_via: submittedViaOf(envelope),
    envelope,
    envelope_signer: signerOf(state, record.keyId),
    attempts,
    ...(dispatch === undefined ? {} : { dispatch }),
    ...(consult === undefined ? {} : { consult }),
    ...(panel === undefined ? {} : { panel }),
    ...(duplicateOf === null ? {} : { original_lane_state: laneStateOf(duplicateOf, state.registry?.doc), original_attempts: duplicateOf.attempts }),
    ...(record.ackedBy === undefined ? {} : { acknowledged_by: record.ackedBy }),
    ...(now !== undefined && commandLapsed(record, now) ? { lapsed_at: record.expiresAt } : {}),
  };
}
