import type { AdvisoryMessage } from '../schema/message.js';
import type { AaReceipt } from '../schema/receipt.js';

/**
 * A consult as `coo show` and the MCP `show` tool present it: what was asked, over which pinned
 * context, within which budget, and per attempt what the receipt says and where the answer is.
 * Read from parsed documents; a document of another kind gives nothing.
 */

export interface ConsultView {
  /** The question as the COO wrote it (prompt.md); null when the ledger does not hold it. */
  readonly question: string | null;
  readonly question_ref: string;
  readonly question_hash: string;
  readonly repo_commit: string;
  readonly files: ReadonlyArray<{ readonly path: string; readonly sha256: string }>;
  readonly context_manifest_hash: string;
  readonly max_cost_usd: number;
  readonly max_runtime_seconds: number;
  readonly expires_at: string;
  readonly deadline_at: string;
  /** A cross-check's challenged answer: whose it is, its receipt, its path and the hash the envelope pins; absent for a consult. */
  readonly challenges?: { readonly author: string; readonly receipt_ref: string; readonly answer_ref: string; readonly answer_hash: string };
}

export interface ConsultAttemptView {
  readonly status: string;
  readonly blockers: ReadonlyArray<{ readonly code: string; readonly detail: string }>;
  readonly model: string | null;
  readonly route: AaReceipt['route'];
  readonly cost_usd: number;
  readonly budget_remaining_usd: number;
  /** Where the answer is in the ledger, and its hash; null when the attempt kept none. */
  readonly answer_ref: string | null;
  readonly answer_hash: string | null;
  readonly validation: AaReceipt['output_validation'];
  readonly next_attempt_at: string | null;
  readonly attachments: ReadonlyArray<{ readonly path: string; readonly sha256: string }>;
  /** The answer's proposals that passed judgement, stored as aa_proposal.v0 artifacts: advice `coo adopt` can turn into work. */
  readonly proposals: ReadonlyArray<{ readonly path: string; readonly sha256: string }>;
  readonly warnings: readonly string[];
}

export function consultOf(envelope: unknown, question: string | null): ConsultView | undefined {
  const intent = envelope === null || typeof envelope !== 'object' ? undefined : (envelope as { intent?: unknown }).intent;
  if (intent !== 'aa_consult' && intent !== 'cross_check') return undefined;
  const message = envelope as AdvisoryMessage;
  return {
    question,
    question_ref: message.payload_ref,
    question_hash: message.payload_hash,
    repo_commit: message.context_pin.repo_commit_sha,
    files: message.context_pin.files,
    context_manifest_hash: message.context_pin.context_manifest_hash,
    max_cost_usd: message.budget.max_cost_usd,
    max_runtime_seconds: message.budget.max_runtime_seconds,
    expires_at: message.expires_at,
    deadline_at: message.deadline_at,
    ...(message.intent === 'cross_check' ? { challenges: { author: message.source_actor, ...message.challenge } } : {}),
  };
}

export function consultAttemptOf(document: unknown): ConsultAttemptView | undefined {
  if (document === null || typeof document !== 'object' || (document as { schema_version?: unknown }).schema_version !== 'aa_receipt.v0') return undefined;
  const receipt = document as AaReceipt;
  return {
    status: receipt.status,
    blockers: receipt.blockers,
    model: receipt.model,
    route: receipt.route,
    cost_usd: receipt.actual_cost_usd,
    budget_remaining_usd: receipt.budget_remaining_usd,
    answer_ref: receipt.output_ref,
    answer_hash: receipt.output_hash,
    validation: receipt.output_validation,
    next_attempt_at: receipt.next_attempt_at,
    attachments: receipt.attachments,
    proposals: receipt.proposals ?? [],
    warnings: receipt.warnings,
  };
}
