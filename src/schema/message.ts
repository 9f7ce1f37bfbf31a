import { z } from 'zod';
import {
  actorId,
  attemptId,
  correlationId,
  gitSha,
  messageId,
  nonNegativeInt,
  MAX_HOPS,
  MAX_RUNTIME_SECONDS,
  positiveInt,
  relativePath,
  sha256Ref,
  shortText,
  timestamp,
  toMillis,
  usd,
} from './common.js';
import { approvalId } from './control.js';

export const MESSAGE_SCHEMA = 'coo_message.v0';

/**
 * An idempotency key as an envelope holds it: the one form every writer that takes a caller's key
 * checks it against (the MCP tools' schemas, the CLI's --idempotency-key).
 */
export const idempotencyKey = z.string().min(1).max(200).regex(/^[\x21-\x7e]+$/, 'printable ASCII without spaces');

export const contextPin = z.strictObject({
  repo_commit_sha: gitSha,
  /**
   * The second pin form, a snapshot: the files as they stood in this dispatch attempt's worktree
   * when its execution agent asked (each file's bytes stored beside the envelope as
   * `context/<sha256 hex>`), `repo_commit_sha` being the commit that worktree started from. Absent:
   * the files are read from `repo_commit_sha` itself.
   */
  snapshot_of: attemptId.optional(),
  context_manifest_ref: relativePath,
  context_manifest_hash: sha256Ref,
  files: z
    .array(z.strictObject({ path: relativePath, sha256: sha256Ref }))
    .max(1000)
    .refine((files) => new Set(files.map((file) => file.path)).size === files.length, 'context files must be unique'),
});

export const messageBudget = z.strictObject({
  max_cost_usd: usd,
  max_runtime_seconds: positiveInt.max(MAX_RUNTIME_SECONDS),
  /** The correlation's remaining budget as the writer saw it, when it states one (then it must be the ledger's figure); null or absent states none. */
  correlation_budget_remaining_usd: usd.nullable().optional(),
});

/** Fields every envelope carries, whatever its intent. */
const header = {
  schema_version: z.literal(MESSAGE_SCHEMA),
  message_id: messageId,
  correlation_id: correlationId,
  parent_message_id: messageId.nullable(),
  causality_chain: z.array(messageId).max(64),
  hop_count: nonNegativeInt.max(MAX_HOPS),
  max_hops: positiveInt.max(MAX_HOPS),
  expires_at: timestamp,
  deadline_at: timestamp,
  principal: actorId,
  source_actor: actorId,
  target_actor: actorId,
  idempotency_key: idempotencyKey,
  budget: messageBudget,
  status: z.literal('queued'),
  created_at: timestamp,
  /**
   * How the request reached the ledger when it was not typed at the CLI: `mcp` for a tool call to
   * `coo mcp`. Signed with the rest; absent in CLI requests and in entries written before the field.
   */
  submitted_via: z.literal('mcp').optional(),
};

/** `pnl_` and 26 Crockford base32 characters, as message ids. */
export const panelId = z.string().regex(/^pnl_[0-9A-HJKMNP-TV-Z]{26}$/, 'panel ids look like pnl_ followed by 26 base32 characters');

/**
 * One member's place in a panel: the same question to each member, each its own message with its
 * own attempts and receipts, all written in one commit. `name` is the policy panel that allows it.
 */
export const panelMembership = z.strictObject({
  id: panelId,
  name: z.string().regex(/^[a-z][a-z0-9_-]{0,31}$/),
  members: z
    .array(actorId)
    .min(2)
    .max(16)
    .refine((members) => new Set(members).size === members.length, 'a panel names each member once'),
});

const aaConsult = z.strictObject({
  ...header,
  intent: z.literal('aa_consult'),
  /** Present when the consult is one member of a panel. */
  panel: panelMembership.optional(),
  authority_class: z.literal('advisory_only'),
  prompt_template_version: z.literal('aa_consult_v0'),
  payload_ref: relativePath,
  payload_hash: sha256Ref,
  context_pin: contextPin,
  expected_receipt_schema: z.literal('aa_receipt.v0'),
  // --- A consult an execution agent asks while it works (EA -> AA), signed by the COO on its behalf.
  /**
   * The attempt of the parent dispatch this consult was asked in: its source is that dispatch's
   * execution agent, its context a snapshot of that attempt's worktree, its cost the dispatch's.
   * Absent for a consult the COO asks.
   */
  asked_in_attempt: positiveInt.max(100).optional(),
});

/**
 * What a cross-check challenges: one answer of the parent message (the receipt of its attempt that
 * succeeded, and that receipt's answer by path and hash). The answer goes to the target quoted as
 * untrusted data; the hash is what the auditor checks the sent prompt against.
 */
export const challenge = z.strictObject({
  receipt_ref: relativePath,
  answer_ref: relativePath,
  answer_hash: sha256Ref,
});

/**
 * cross_check: the COO puts one advisory agent's answer to another to challenge. Written and signed
 * by the COO on behalf of the challenged agent (`source_actor`, which holds no key), along a policy
 * edge aa.* -> aa.*; its parent is the message the answer belongs to, its context that message's
 * pin. Its question and receipt are a consult's.
 */
const crossCheck = z.strictObject({
  ...header,
  parent_message_id: messageId,
  intent: z.literal('cross_check'),
  authority_class: z.literal('advisory_only'),
  prompt_template_version: z.literal('cross_check_v0'),
  payload_ref: relativePath,
  payload_hash: sha256Ref,
  context_pin: contextPin,
  challenge,
  expected_receipt_schema: z.literal('aa_receipt.v0'),
});

/** LifeOS's COO->EA dispatch request fields (coo_ea_dispatch_request.v0), carried inside the shared envelope. */
export const dispatchRequest = z.strictObject({
  repo: z.string().regex(/^[A-Za-z0-9_.-]+\/[A-Za-z0-9_.-]+$/, 'owner/name'),
  /** The forge issue the work answers, when there is one. */
  issue_number: positiveInt.nullable(),
  attempt_id: attemptId,
  executor: z.enum(['codex', 'claude_code']),
  base_ref: z.string().min(1).max(200).regex(/^[A-Za-z0-9._/-]+$/, 'git ref-safe characters'),
  branch_name: z.string().min(1).max(200).regex(/^[A-Za-z0-9._/-]+$/, 'git ref-safe characters'),
  scope_paths: z.array(relativePath).min(1).max(200),
  acceptance_criteria: z.array(shortText.min(1)).min(1).max(100),
  verification_commands: z.array(shortText.min(1)).min(1).max(100),
  timeout_seconds: positiveInt.max(MAX_RUNTIME_SECONDS),
});

/** The fields of a proposal a COO may change when it adopts it: the work is what the COO signs. */
export const ADOPTION_FIELDS = ['task', 'scope', 'acceptance', 'verification'] as const;

export const adoptedProposal = z.strictObject({
  attempt_number: positiveInt.max(100),
  index: positiveInt.max(5),
  sha256: sha256Ref,
  changed: z
    .array(z.enum(ADOPTION_FIELDS))
    .max(ADOPTION_FIELDS.length)
    .refine((fields) => new Set(fields).size === fields.length, 'each field is named once'),
});

const eaDispatch = z.strictObject({
  ...header,
  intent: z.literal('ea_dispatch'),
  authority_class: z.literal('governed_execution'),
  dispatch: dispatchRequest,
  payload_ref: relativePath.nullable(),
  payload_hash: sha256Ref.nullable(),
  context_pin: contextPin.nullable(),
  expected_receipt_schema: z.literal('ea_receipt.v0'),
  /** The CEO's approval (approval.v0) when the policy's edge requires one; absent otherwise. */
  approval_id: approvalId.optional(),
  /** Push the attempt's branch to the forge repository `dispatch.repo` and open a pull request once it succeeds. */
  open_pr: z.boolean().optional(),
  // --- AA -> COO -> EA: the COO adopts an advisory agent's proposal (`coo adopt`).
  /**
   * The proposal this dispatch adopts, by hash: one the parent consult's receipt stores (its bytes
   * are beside this envelope as `proposal.yaml`), and what the COO changed of it. A dispatch that
   * descends from advisory traffic is only ever such an adoption.
   */
  adopted_proposal: adoptedProposal.optional(),
});

const statusQuery = z.strictObject({
  ...header,
  intent: z.literal('status_query'),
  authority_class: z.literal('informational'),
  about_message_id: messageId,
  expected_receipt_schema: z.null(),
});

const retry = z.strictObject({
  ...header,
  intent: z.literal('retry'),
  authority_class: z.enum(['advisory_only', 'governed_execution']),
  retry_of: messageId,
  reason: shortText.min(1),
  expected_receipt_schema: z.enum(['aa_receipt.v0', 'ea_receipt.v0']),
});

const receiptNotice = z.strictObject({
  ...header,
  intent: z.literal('receipt_notice'),
  authority_class: z.literal('evidence'),
  receipt_ref: z.strictObject({ path: relativePath, sha256: sha256Ref }),
  expected_receipt_schema: z.null(),
});

const blocker = z.strictObject({
  ...header,
  intent: z.literal('blocker'),
  authority_class: z.literal('evidence'),
  about_message_id: messageId.nullable(),
  blocker: z.strictObject({ code: z.string().regex(/^[a-z_:]{1,64}$/), detail: shortText }),
  expected_receipt_schema: z.null(),
});

// --- CEO -> COO: the CEO's commands and rejections, and the COO's acknowledgements of what reached it.

/**
 * A CEO's command to the active COO: its text (`prompt.md`, by hash) and, optionally, what the CEO
 * allows the work it asks for to cost. Signed by the CEO; nothing runs it: the COO reads it in its
 * inbox, acts through its own lanes, and acknowledges it.
 */
const ceoCommand = z.strictObject({
  ...header,
  intent: z.literal('ceo_command'),
  authority_class: z.literal('directive'),
  payload_ref: relativePath,
  payload_hash: sha256Ref,
  /** What the CEO allows the work this command asks for to cost, in USD; null: the policy's caps. */
  budget_usd: usd.nullable(),
  expected_receipt_schema: z.null(),
});

/**
 * The CEO's refusal of a request that waits for its approval, with the reason: a new dispatch or
 * adoption by its request hash, or the next attempt of a dispatch that ended without success.
 */
const ceoReject = z
  .strictObject({
    ...header,
    intent: z.literal('ceo_reject'),
    authority_class: z.literal('directive'),
    /** The request hash `coo dispatch` or `coo adopt` was refused with; null when a dispatch's next attempt is rejected. */
    request_hash: sha256Ref.nullable(),
    /** The dispatch whose next attempt is rejected; null when a request hash is. */
    about_message_id: messageId.nullable(),
    reason: shortText.min(1),
    expected_receipt_schema: z.null(),
  })
  .refine((doc) => (doc.request_hash === null) !== (doc.about_message_id === null), { path: ['request_hash'], message: 'a rejection names a request_hash or an about_message_id, one of them' });

/** The COO has read a message addressed to it (or a consult's answer): signed by the COO, to the CEO, once per message. */
const ack = z.strictObject({
  ...header,
  intent: z.literal('ack'),
  authority_class: z.literal('evidence'),
  about_message_id: messageId,
  /** What the COO makes of it, when it says. */
  note: shortText,
  expected_receipt_schema: z.null(),
});

/** coo_message.v0: the single envelope of every lane; `intent` discriminates. */
export const cooMessage = z
  .discriminatedUnion('intent', [aaConsult, eaDispatch, statusQuery, retry, receiptNotice, blocker, ceoCommand, ceoReject, ack, crossCheck])
  .superRefine((message, ctx) => {
    const created = toMillis(message.created_at);
    if (toMillis(message.expires_at) <= created) {
      ctx.addIssue({ code: 'custom', path: ['expires_at'], message: 'expires_at must be after created_at' });
    }
    if (toMillis(message.deadline_at) < toMillis(message.expires_at)) {
      ctx.addIssue({ code: 'custom', path: ['deadline_at'], message: 'deadline_at must not be before expires_at' });
    }
    if (message.causality_chain.length !== message.hop_count) {
      ctx.addIssue({ code: 'custom', path: ['hop_count'], message: 'hop_count must equal the length of causality_chain' });
    }
    const last = message.causality_chain[message.causality_chain.length - 1] ?? null;
    if (last !== message.parent_message_id) {
      ctx.addIssue({ code: 'custom', path: ['parent_message_id'], message: 'parent_message_id must be the last entry of causality_chain' });
    }
    if (message.causality_chain.includes(message.message_id)) {
      ctx.addIssue({ code: 'custom', path: ['causality_chain'], message: 'a message cannot be its own ancestor' });
    }
    if (message.hop_count > message.max_hops) {
      ctx.addIssue({ code: 'custom', path: ['hop_count'], message: 'hop_count exceeds max_hops' });
    }
    if (message.source_actor === message.target_actor) {
      ctx.addIssue({ code: 'custom', path: ['target_actor'], message: 'an actor cannot message itself' });
    }
    if (message.intent === 'aa_consult' && message.panel !== undefined && !message.panel.members.includes(message.target_actor)) {
      ctx.addIssue({ code: 'custom', path: ['panel', 'members'], message: 'a panel member is one of the panel\'s members' });
    }
    if (message.intent === 'ea_dispatch' && (message.payload_ref === null) !== (message.payload_hash === null)) {
      ctx.addIssue({ code: 'custom', path: ['payload_hash'], message: 'payload_ref and payload_hash go together' });
    }
  });

export type CooMessage = z.infer<typeof cooMessage>;
export type AaConsultMessage = Extract<CooMessage, { intent: 'aa_consult' }>;
export type CrossCheckMessage = Extract<CooMessage, { intent: 'cross_check' }>;
/** A message the consult lane runs: a question to an advisory agent, answered by aa_receipt.v0. */
export type AdvisoryMessage = AaConsultMessage | CrossCheckMessage;
export type EaDispatchMessage = Extract<CooMessage, { intent: 'ea_dispatch' }>;
export type AdoptedProposal = z.infer<typeof adoptedProposal>;
export type CeoCommandMessage = Extract<CooMessage, { intent: 'ceo_command' }>;
export type CeoRejectMessage = Extract<CooMessage, { intent: 'ceo_reject' }>;
export type AckMessage = Extract<CooMessage, { intent: 'ack' }>;
