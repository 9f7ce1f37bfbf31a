import { z } from 'zod';
import { actorId, attemptId, messageId, nonNegativeInt, positiveInt, relativePath, sha256Ref, shortText, timestamp, usd } from './common.js';

/** Every reason a receipt can give for not succeeding. A closed set: receipts never carry free-text causes. */
export const BLOCKER_CODES = [
  // refused before any transport ran
  'stale_context',
  'expired',
  'deadline_passed',
  'hop_limit',
  'kill_switch',
  'policy_denied',
  'config_error',
  'budget_preflight',
  'correlation_budget_exhausted',
  'daily_cap_reached',
  // the AA could not be reached or would not answer
  'aa_unavailable:quota',
  'aa_unavailable:rate_limited',
  'aa_unavailable:auth',
  'aa_unavailable:transport',
  'aa_unavailable:timeout',
  'aa_unavailable:model',
  'aa_unavailable:unknown',
  // runtime budget
  'budget_runtime_breach',
  'budget_cost_breach',
  // the answer
  'output_missing',
  'output_invalid',
  'output_injection',
  'output_too_large',
  // the runner
  'interrupted',
  /** An error of the runner's own inside an attempt: the receipt records what is known, with the error's code. */
  'runner_error',
  // execution agents (ea_receipt.v0)
  'command_failed',
  'tests_failed',
  'permission_denied',
  'scope_violation',
  'needs_decision',
  'timeout',
  // the dispatch lane's fail-closed matrix (dispatch/outcome.ts)
  'stream_malformed',
  'stream_truncated',
  'stream_overflow',
  'worktree_dirty',
  'commit_partial',
  'attempt_mismatch',
  /** More work than the runner reads or a receipt records: the full list is the attempt's `changes.json`. */
  'work_too_large',
] as const;

export const blockerCode = z.enum(BLOCKER_CODES);
export type BlockerCode = z.infer<typeof blockerCode>;

export const blocker = z.strictObject({ code: blockerCode, detail: shortText });
export type Blocker = z.infer<typeof blocker>;

export const receiptStatus = z.enum(['succeeded', 'failed', 'blocked', 'timed_out']);
export type ReceiptStatus = z.infer<typeof receiptStatus>;

/** The header aa_receipt.v0 and ea_receipt.v0 share. */
const header = {
  message_id: messageId,
  attempt_id: attemptId,
  attempt_number: positiveInt.max(100),
  target_actor: actorId,
  status: receiptStatus,
  created_at: timestamp,
  blockers: z.array(blocker).max(20),
  /**
   * The earliest time the next attempt may start; null when no attempt follows on its own. A consult's
   * null ends it; a dispatch's (ea_receipt.v0) is always null, and its next attempt waits for the
   * CEO's retry approval.
   */
  next_attempt_at: timestamp.nullable(),
};

function checkStatus(
  receipt: { status: ReceiptStatus; blockers: Blocker[]; next_attempt_at: string | null },
  ctx: z.core.$RefinementCtx,
): void {
  if (receipt.status === 'succeeded' && receipt.next_attempt_at !== null) {
    ctx.addIssue({ code: 'custom', path: ['next_attempt_at'], message: 'a succeeded receipt ends its message' });
  }
  if (receipt.status === 'succeeded' && receipt.blockers.length > 0) {
    ctx.addIssue({ code: 'custom', path: ['blockers'], message: 'a succeeded receipt has no blockers' });
  }
  if (receipt.status !== 'succeeded' && receipt.blockers.length === 0) {
    ctx.addIssue({ code: 'custom', path: ['blockers'], message: 'a receipt that did not succeed names at least one blocker' });
  }
}

export const outputValidation = z.strictObject({
  schema_id: z.literal('aa_answer.v0'),
  status: z.enum(['pass', 'fail', 'not_run']),
  errors: z.array(shortText).max(50),
});

export const usage = z.strictObject({
  input_tokens: nonNegativeInt,
  output_tokens: nonNegativeInt,
  reasoning_tokens: nonNegativeInt,
  total_tokens: nonNegativeInt,
  reported: z.boolean(),
});

export const aaReceipt = z
  .strictObject({
    schema_version: z.literal('aa_receipt.v0'),
    ...header,
    authority_class: z.literal('advisory_only'),
    transport: z.literal('oracle'),
    transport_session_id: z.string().max(120).nullable(),
    engine: z.literal('api'),
    model: z.string().max(120).nullable(),
    route: z.strictObject({ provider: z.string().max(60), offline: z.boolean() }).nullable(),
    prompt_hash: sha256Ref,
    context_manifest_hash: sha256Ref,
    bundle_hash: sha256Ref.nullable(),
    output_ref: relativePath.nullable(),
    output_hash: sha256Ref.nullable(),
    output_validation: outputValidation,
    /** Further files of this attempt (the exact bundle sent, the transport's session record). */
    attachments: z.array(z.strictObject({ path: relativePath, sha256: sha256Ref })).max(10),
    policy_decision_ref: z.string().max(300),
    usage: usage.nullable(),
    actual_cost_usd: usd,
    budget_remaining_usd: usd,
    warnings: z.array(z.string().regex(/^[a-z_:]{1,64}$/)).max(20),
    /**
     * The answer's proposals that passed judgement, each stored as an aa_proposal.v0 artifact of
     * this attempt, in order: advice a dispatch can adopt by hash, never work by itself. Absent
     * when there are none, and in receipts written before the field.
     */
    proposals: z.array(z.strictObject({ path: relativePath, sha256: sha256Ref })).max(5).optional(),
  })
  .superRefine((receipt, ctx) => {
    checkStatus(receipt, ctx);
    if (receipt.status === 'succeeded') {
      if (receipt.output_ref === null || receipt.output_hash === null) {
        ctx.addIssue({ code: 'custom', path: ['output_ref'], message: 'a succeeded receipt points at its output and its hash' });
      }
      if (receipt.output_validation.status !== 'pass') {
        ctx.addIssue({ code: 'custom', path: ['output_validation', 'status'], message: 'a succeeded receipt passed output validation' });
      }
    }
    if ((receipt.output_ref === null) !== (receipt.output_hash === null)) {
      ctx.addIssue({ code: 'custom', path: ['output_hash'], message: 'output_ref and output_hash go together' });
    }
  });
export type AaReceipt = z.infer<typeof aaReceipt>;

const attachment = z.strictObject({ path: relativePath, sha256: sha256Ref });

/**
 * ea_receipt.v0: LifeOS's seven fields and their rules (runtime/receipts/ea_receipt.py), with the
 * evidence the runner gathers itself: the executor and its session, the base and the attempt's
 * branch, each changed file's hash (null: deleted), usage and cost, and the raw event stream and
 * verification output as hashed attachments. commands_run holds the EA's commands, then the
 * verification commands, in order.
 */
export const eaReceipt = z
  .strictObject({
    schema_version: z.literal('ea_receipt.v0'),
    ...header,
    /** A dispatch never retries on its own: its next attempt is the CEO's to approve (a retry approval), never the receipt's to schedule. */
    next_attempt_at: z.null(),
    commands_run: z.array(shortText).max(200),
    inner_exit_codes: z.array(z.number().int().min(-255).max(255)).max(200),
    files_changed: z.array(relativePath).max(10_000),
    tests_run: z.array(shortText).max(1000),
    head_sha: z.string().regex(/^[0-9a-f]{40}$/).nullable(),
    executor: z.enum(['codex', 'claude_code']),
    executor_session_id: z.string().max(120).nullable(),
    model: z.string().max(120).nullable(),
    base_sha: z.string().regex(/^[0-9a-f]{40}$/),
    /** The attempt's branch in the target repository; null when nothing was committed. */
    branch: z.string().max(200).nullable(),
    file_hashes: z.array(z.strictObject({ path: relativePath, sha256: sha256Ref.nullable() })).max(10_000),
    attachments: z.array(attachment).max(120),
    policy_decision_ref: z.string().max(300),
    usage: usage.nullable(),
    actual_cost_usd: usd,
    warnings: z.array(z.string().regex(/^[a-z_:]{1,64}$/)).max(20),
    /**
     * The consults the agent asked during this attempt (EA -> AA), each a message of its own with
     * its own receipt and cost, in the order asked. Absent in receipts written before the field.
     */
    consults: z.array(z.strictObject({ message_id: messageId, receipt: relativePath.nullable() })).max(100).optional(),
  })
  .superRefine((receipt, ctx) => {
    checkStatus(receipt, ctx);
    if (receipt.commands_run.length !== receipt.inner_exit_codes.length) {
      ctx.addIssue({ code: 'custom', path: ['inner_exit_codes'], message: 'commands_run and inner_exit_codes have equal length' });
    }
    if (receipt.inner_exit_codes.some((code) => code !== 0) && receipt.status !== 'failed' && receipt.status !== 'timed_out') {
      ctx.addIssue({ code: 'custom', path: ['status'], message: 'a nonzero inner exit code forces status failed' });
    }
    if (receipt.file_hashes.length !== receipt.files_changed.length || receipt.file_hashes.some((file, index) => file.path !== receipt.files_changed[index])) {
      ctx.addIssue({ code: 'custom', path: ['file_hashes'], message: 'file_hashes names the files of files_changed, in order' });
    }
    if (receipt.status === 'succeeded' && (receipt.tests_run.length === 0 || receipt.head_sha === null)) {
      ctx.addIssue({ code: 'custom', path: ['tests_run'], message: 'a succeeded receipt ran its verification and names its head' });
    }
  });
export type EaReceipt = z.infer<typeof eaReceipt>;

/** An ea_receipt's commands with their exit codes, as the lane writes them: the executor's own first, then the runner's verification (`tests_run`). */
export function eaCommands(receipt: EaReceipt): Array<{ readonly command: string; readonly exitCode: number; readonly by: 'executor' | 'verification' }> {
  const executorCommands = receipt.commands_run.length - receipt.tests_run.length;
  return receipt.commands_run.map((command, index) => ({ command, exitCode: receipt.inner_exit_codes[index] ?? 0, by: index < executorCommands ? 'executor' : 'verification' }));
}
