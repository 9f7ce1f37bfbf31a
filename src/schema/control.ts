import { z } from 'zod';
import { actorId, attemptId, gitSha, keyId, messageId, positiveInt, publicKeyLine, relativePath, sha256Ref, shortText, timestamp, usd, version } from './common.js';

/** trust_root.v0: the keys of the human authority that signs registries, policies and the next root. */
export const trustRoot = z.strictObject({
  schema_version: z.literal('trust_root.v0'),
  version,
  authorities: z
    .array(z.strictObject({ actor: actorId, key_id: keyId, public_key: publicKeyLine }))
    .min(1)
    .max(16)
    .refine((keys) => new Set(keys.map((key) => key.key_id)).size === keys.length, 'each authority key is listed once'),
  created_at: timestamp,
  /**
   * 128 random bits `coo init` draws for the ledger and writes into its first root: two ledgers made
   * with the same keys, registry and policy in the same second are then two genesis commits, and
   * what ties a commit to its genesis (the first trust files) tells them apart. Absent in ledgers
   * made before it; a later root may carry it or not, since the chain from the first root ties it.
   */
  ledger_id: z.string().regex(/^[0-9a-f]{32}$/, 'ledger_id is 32 lowercase hex digits').optional(),
});
export type TrustRoot = z.infer<typeof trustRoot>;

/** kill_switch.v0: while `state: on`, the runner starts no consult and blocks queued ones. */
export const killSwitch = z.strictObject({
  schema_version: z.literal('kill_switch.v0'),
  version,
  state: z.enum(['on', 'off']),
  reason: shortText.min(1),
  set_by: actorId,
  created_at: timestamp,
});
export type KillSwitch = z.infer<typeof killSwitch>;

/** claim.v0: a runner takes one attempt of one message before it pays for anything. */
export const claim = z.strictObject({
  schema_version: z.literal('claim.v0'),
  message_id: messageId,
  attempt_id: attemptId,
  attempt_number: positiveInt.max(100),
  runner_id: z.string().regex(/^[A-Za-z0-9._-]{1,80}$/),
  transport_session_id: z.string().regex(/^[a-z0-9-]{1,120}$/),
  claimed_at: timestamp,
  /**
   * What the attempt's pre-flight let it spend: until its receipt lands, other attempts' pre-flights
   * count it against its correlation and the day. Absent in claims written before it was recorded.
   */
  allowance_usd: usd.optional(),
  /**
   * What the message's other attempts cost and, for a dispatch, what the consults its agent asked in
   * them cost or still hold, on the ledger the claim lands on (lane/budget.ts spentOnMessageUsd). A
   * claim that states it is held to the rules that count them: its allowance within the budget less
   * this, and the consults its attempt asks within that allowance and the dispatch's deadline_at.
   * Absent in claims written before those rules, which the validator judges as it did then.
   */
  spent_before_usd: usd.optional(),
  /**
   * The budget of the CEO command whose correlation the message is in, on the ledger the claim lands
   * on (lane/budget.ts commandBudgetOf), null when none: a claim that states it is held, with its
   * correlation's other work, to that budget, though its chain does not start at the command (a
   * message with no parent that took the command's correlation_id). Absent in claims written before
   * it, which the validator holds to the command their chain starts at, as it did then.
   */
  command_budget_usd: usd.nullable().optional(),
});
export type Claim = z.infer<typeof claim>;

/** `apr_` and 26 Crockford base32 characters, as message ids. */
export const approvalId = z.string().regex(/^apr_[0-9A-HJKMNP-TV-Z]{26}$/, 'approval ids look like apr_ followed by 26 base32 characters');

/**
 * approval.v0: the CEO's signed consent to governed work the policy does not let the COO start
 * alone. `dispatch` approves one new dispatch, named by the hash of its request (the dispatch is
 * written after, naming this approval); `retry` approves the next attempt of a dispatch that ended.
 */
export const approval = z
  .strictObject({
    schema_version: z.literal('approval.v0'),
    approval_id: approvalId,
    approves: z.enum(['dispatch', 'retry']),
    /** dispatch: the request hash the dispatch must have (authority/approval.ts); null for a retry. */
    request_hash: sha256Ref.nullable(),
    /** retry: the dispatch and the attempt approved; null for a new dispatch. */
    message_id: messageId.nullable(),
    attempt_number: positiveInt.max(100).nullable(),
    reason: shortText.min(1),
    approved_by: actorId,
    created_at: timestamp,
    expires_at: timestamp,
  })
  .superRefine((doc, ctx) => {
    const retry = doc.approves === 'retry';
    if (retry !== (doc.message_id !== null) || retry !== (doc.attempt_number !== null) || retry === (doc.request_hash !== null)) {
      ctx.addIssue({ code: 'custom', path: ['approves'], message: 'a dispatch approval names request_hash only; a retry approval names message_id and attempt_number only' });
    }
    if (retry && doc.attempt_number !== null && doc.attempt_number < 2) {
      ctx.addIssue({ code: 'custom', path: ['attempt_number'], message: 'a retry approves attempt 2 or later' });
    }
    if (Date.parse(doc.expires_at) <= Date.parse(doc.created_at)) {
      ctx.addIssue({ code: 'custom', path: ['expires_at'], message: 'expires_at must be after created_at' });
    }
  });
export type Approval = z.infer<typeof approval>;

/** heartbeat.v0: a runner's signed statement that the ledger was live at `ledger_seq`, valid until `expires_at`. */
export const heartbeat = z.strictObject({
  schema_version: z.literal('heartbeat.v0'),
  runner_id: z.string().regex(/^[A-Za-z0-9._-]{1,80}$/),
  ledger_seq: positiveInt,
  created_at: timestamp,
  expires_at: timestamp,
});
export type Heartbeat = z.infer<typeof heartbeat>;

/** context_manifest.v0: the exact files a consult may see, pinned by commit and content hash. */
export const contextManifest = z.strictObject({
  schema_version: z.literal('context_manifest.v0'),
  repo_commit_sha: gitSha,
  /** A snapshot of this dispatch attempt's worktree (the pin's `snapshot_of`); absent: files at `repo_commit_sha`. */
  snapshot_of: attemptId.optional(),
  files: z
    .array(z.strictObject({ path: relativePath, sha256: sha256Ref, bytes: z.number().int().nonnegative() }))
    .max(1000),
});
export type ContextManifest = z.infer<typeof contextManifest>;
