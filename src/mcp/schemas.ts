import { z } from 'zod';
import { LIMITS } from '../limits.js';
import { actorId, correlationId, MAX_HOPS, MAX_RUNTIME_SECONDS, MAX_USD, messageId, timestamp } from '../schema/common.js';
import { MAX_SESSIONS_PAGE } from '../audit/sessions.js';
import { LANE_STATES } from '../authority/state.js';
import { idempotencyKey } from '../schema/message.js';

/**
 * The MCP tools' arguments and results. Arguments are strict objects: an unknown key (a path, a key,
 * a budget or authority field the CLI does not take from an agent) is refused before any rule runs.
 * There is no ledger, key, repository or output path among them: the server's configuration fixes those.
 */

/** The longest a tool call waits for a receipt. */
export const MAX_WAIT_SECONDS = 900;

/** A message's state (authority/state.ts LANE_STATES): a lane state for work the runner executes, `awaiting_ack`, `acknowledged` or `recorded` for what it never runs. */
const laneState = z.enum(LANE_STATES);

/** Where a number argument lies: above or at least a lower bound, at most `max`, whole or not. */
interface NumberRange {
  readonly above?: number;
  readonly min?: number;
  readonly max?: number;
  readonly int?: boolean;
}

/**
 * A number argument, refused in words that say what was read and what to send. A double bounds what
 * a JSON number can say: 1e400 is read as Infinity, which zod calls a value of another type
 * ("expected number, received Infinity"), and 1e-400 as 0, which it calls "expected >0" of a
 * client that sent more than 0. A number sent as a string is named as one. The tool a dispatch
 * attempt's agent is given (dispatch/consult-tool.ts) takes its numbers so too.
 */
export function numberArg(range: NumberRange) {
  const lower = range.above !== undefined ? `above ${range.above}` : `at least ${range.min ?? 0}`;
  const wanted = `${range.int === true ? 'a whole number' : 'a number'} ${lower}${range.max === undefined ? '' : ` and at most ${range.max}`}`;
  const error = (issue: { readonly input?: unknown }): string => {
    const input = issue.input;
    if (typeof input === 'number' && !Number.isFinite(input)) return `received a number too large in size for a double (such as 1e400), read as ${input}: send ${wanted}`;
    if (input === 0 && range.above === 0) return `received 0 (a number nearer 0 than a double holds, such as 1e-400, is read as 0): send ${wanted}`;
    if (typeof input === 'number' && !Number.isSafeInteger(input) && Number.isInteger(input)) return `received ${input}, past 2^53 - 1, where a double no longer holds every whole number: send ${wanted}`;
    if (typeof input === 'string') return `received the string ${JSON.stringify(input.length > 32 ? `${input.slice(0, 31)}…` : input)}: send ${wanted} as a JSON number, unquoted`;
    return `received ${typeof input === 'number' ? String(input) : (JSON.stringify(input) ?? typeof input)}: send ${wanted}`;
  };
  let schema = z.number({ error });
  if (range.int === true) schema = schema.int();
  schema = range.above !== undefined ? schema.gt(range.above) : schema.min(range.min ?? 0);
  return range.max === undefined ? schema.max(Number.MAX_SAFE_INTEGER) : schema.max(range.max);
}

const waitSeconds = numberArg({ min: 0, max: MAX_WAIT_SECONDS });

/** What a request to an advisory agent may say of its budget, its time, its idempotency and how long the call waits. */
function requestFields(what: string) {
  return {
    max_cost_usd: numberArg({ above: 0, max: MAX_USD }).optional().describe(`budget for this ${what} in USD (default: the policy's cap; more than the cap is refused)`),
    max_runtime_seconds: numberArg({ above: 0, max: MAX_RUNTIME_SECONDS, int: true }).optional().describe('runtime budget in seconds (default: 600 or the policy cap)'),
    ttl_seconds: numberArg({ above: 0, max: 604_800, int: true }).optional().describe(`how long the ${what} may wait to start (default 3600)`),
    idempotency_key: idempotencyKey
      .optional()
      .describe('the same key with the same request returns the message already there (default: derived from the request, so a retried call never pays twice); no "~", which joins a panel\'s key to each member\'s'),
    wait_seconds: waitSeconds.optional().describe(`wait up to this many seconds for the receipt (default 0: return once queued; at most ${MAX_WAIT_SECONDS})`),
  };
}

export const consultInput = z.strictObject({
  to: z
    .union([actorId, z.array(actorId).min(2).max(16)])
    .optional()
    .describe('the advisory agent to consult, e.g. aa.chatgpt; or a list of several (a panel the policy allows): one question to each, each with its own receipt'),
  panel: z
    .string()
    .regex(/^[a-z][a-z0-9_-]{0,31}$/)
    .optional()
    .describe("a panel the policy names: all its members, or the listed ones among them (to). Without to or panel the call is refused"),
  files: z
    .array(z.string().min(1).max(500))
    .min(1)
    .max(LIMITS.contextPatterns)
    .describe('context files or globs, relative to the repository root, pinned at the commit (e.g. ["src/add.ts", "docs/**/*.md"])'),
  prompt: z.string().min(1).max(100_000).describe('the question for the advisory agent'),
  rev: z
    .string()
    .regex(/^[A-Za-z0-9][A-Za-z0-9._/~^-]{0,199}$/, 'a branch, tag or commit of the repository')
    .optional()
    .describe('the commit to pin the files at (default HEAD)'),
  ...requestFields('consult'),
  correlation_id: correlationId.optional().describe('correlation id (corr_...) shared by related messages'),
  parent_message_id: messageId.optional().describe('the message this one follows from'),
  max_hops: numberArg({ above: 0, max: MAX_HOPS, int: true }).optional().describe('how many hops a chain from this message may take'),
});

export const crossCheckInput = z.strictObject({
  answer: z
    .string()
    .min(1)
    .max(512)
    .describe("the answer to challenge: a consult's message id (its latest answer), or the path of the receipt that holds it"),
  to: actorId.describe('the advisory agent that challenges it, e.g. aa.claude'),
  prompt: z.string().min(1).max(100_000).optional().describe('what to ask about the answer (default: a standing request to challenge it against the pinned files)'),
  ...requestFields('challenge'),
});

const list = (what: string, example: string) => z.array(z.string().min(1).max(2000)).min(1).max(100).describe(`${what} (e.g. ${example})`);

export const dispatchInput = z.strictObject({
  to: actorId.describe('the execution agent, e.g. ea.codex'),
  task: z.string().min(1).max(100_000).describe('what the agent is to do'),
  scope: list('path globs the work may change, relative to the repository root, a folder covering what is under it; a change elsewhere fails the attempt', '["src/**", "test/**"]'),
  accept: list('acceptance criteria', '["add(NaN, 1) is NaN"]'),
  verify: list('commands the runner itself runs afterwards on a fresh checkout of the signed commit; every one must exit 0', '["npm test"]'),
  files: z.array(z.string().min(1).max(500)).max(LIMITS.contextPatterns).optional().describe('context files or globs to pin at the base commit'),
  rev: z
    .string()
    .regex(/^[A-Za-z0-9][A-Za-z0-9._/~^-]{0,199}$/, 'a branch, tag or commit of the repository')
    .optional()
    .describe('the base commit (default HEAD)'),
  timeout_seconds: numberArg({ above: 0, max: MAX_RUNTIME_SECONDS, int: true }).optional().describe("the agent's time box in seconds (default: the runtime budget)"),
  max_cost_usd: numberArg({ above: 0, max: MAX_USD }).optional().describe("budget for this dispatch in USD, all attempts (default: the policy's cap)"),
  ttl_seconds: numberArg({ above: 0, max: 604_800, int: true }).optional().describe('how long the dispatch may wait to start (default 3600)'),
  approval_id: z.string().regex(/^apr_[0-9A-HJKMNP-TV-Z]{26}$/).optional().describe("the CEO's approval of this exact request, when the policy asks for one (the refusal names the request hash to approve)"),
  idempotency_key: idempotencyKey
    .optional()
    .describe('the same key with the same request returns the message already there (default: derived from the request); no "~", which joins a panel\'s key to each member\'s'),
  correlation_id: correlationId.optional().describe('correlation id (corr_...) shared by related messages'),
  parent_message_id: messageId.optional().describe('the message this one follows from (never advisory traffic)'),
  wait_seconds: waitSeconds.optional().describe(`wait up to this many seconds for the receipt (default 0: return once queued; at most ${MAX_WAIT_SECONDS})`),
});

export const adoptInput = z.strictObject({
  message_id: messageId.describe('the consult whose answer carried the proposal'),
  proposal: numberArg({ min: 1, max: 5, int: true }).describe('which of its stored proposals (show lists them), from 1'),
  to: actorId.describe('the execution agent that does the work, e.g. ea.codex (a proposal names none)'),
  attempt: numberArg({ min: 1, max: 100, int: true }).optional().describe("the consult's attempt that answered (default: its latest succeeded one)"),
  task: z.string().min(1).max(100_000).optional().describe("the task, in place of the proposal's"),
  scope: list("path globs the work may change, in place of the proposal's", '["src/**"]').optional(),
  accept: list("acceptance criteria, in place of the proposal's", '["add(NaN, 1) is NaN"]').optional(),
  verify: list("commands the runner itself runs afterwards, in place of the proposal's", '["npm test"]').optional(),
  rev: z
    .string()
    .regex(/^[A-Za-z0-9][A-Za-z0-9._/~^-]{0,199}$/, 'a branch, tag or commit of the repository')
    .optional()
    .describe("the base commit (default: the commit the consult's context was pinned at)"),
  timeout_seconds: numberArg({ above: 0, max: MAX_RUNTIME_SECONDS, int: true }).optional().describe("the agent's time box in seconds (default: the runtime budget)"),
  max_cost_usd: numberArg({ above: 0, max: MAX_USD }).optional().describe("budget for this dispatch in USD, all attempts (default: the policy's cap)"),
  approval_id: z.string().regex(/^apr_[0-9A-HJKMNP-TV-Z]{26}$/).optional().describe("the CEO's approval of this exact adoption, when the policy asks for one (the refusal names the request hash to approve)"),
  idempotency_key: idempotencyKey
    .optional()
    .describe('the same key with the same request returns the message already there (default: derived from the request); no "~", which joins a panel\'s key to each member\'s'),
  wait_seconds: waitSeconds.optional().describe(`wait up to this many seconds for the receipt (default 0: return once queued; at most ${MAX_WAIT_SECONDS})`),
});

export const waitInput = z.strictObject({
  message_id: messageId.describe('the consult to wait for'),
  timeout_seconds: waitSeconds.describe(`how long to wait for a final receipt, in seconds (at most ${MAX_WAIT_SECONDS})`),
});

export const sessionsInput = z.strictObject({
  correlation_id: correlationId.optional().describe('only messages of this correlation'),
  state: laneState.optional().describe('only messages in this state (a lane state; awaiting_ack, acknowledged or recorded for messages no runner executes)'),
  since: timestamp.optional().describe('only messages created at or after this UTC time, e.g. 2026-12-01T00:00:00Z'),
  until: timestamp.optional().describe('only messages created before this UTC time'),
  before: numberArg({ above: 0, int: true }).optional().describe('the next_before of the previous page'),
  limit: numberArg({ min: 1, max: MAX_SESSIONS_PAGE, int: true }).optional().describe(`messages per page (default 20, at most ${MAX_SESSIONS_PAGE})`),
});

export const messageInput = z.strictObject({
  message_id: messageId.describe('a message id (msg_...)'),
});

export const verifyInput = z.strictObject({});

const receiptSummary = z
  .strictObject({
    attempt: z.number().int(),
    status: z.string(),
    blockers: z.array(z.string()),
    cost_usd: z.number(),
    created_at: z.string(),
    path: z.string(),
  })
  .nullable();

export const outcomeOutput = z.strictObject({
  message_id: z.string(),
  existing: z.boolean().optional(),
  state: laneState,
  terminal: z.boolean(),
  attempts: z.number().int(),
  receipt: receiptSummary,
  answers_for: z.string().nullable(),
  submitted_via: z.string().nullable(),
  next: z.string(),
});

/** A consult's outcome; for a panel, the first member's, with every member's beside it. */
export const consultOutput = outcomeOutput.extend({
  panel: z
    .strictObject({
      panel_id: z.string(),
      name: z.string(),
      members: z.array(outcomeOutput.extend({ target: z.string() })),
    })
    .optional(),
});

const sessionSummary = z.strictObject({
  message_id: z.string(),
  intent: z.string(),
  target: z.string(),
  correlation_id: z.string(),
  created_at: z.string(),
  state: laneState,
  attempts: z.number().int(),
  cost_usd: z.number(),
  receipt: z.strictObject({ status: z.string(), path: z.string() }).nullable(),
  duplicate_of: z.string().nullable(),
  submitted_via: z.string().nullable(),
  seq: z.number().int(),
});

export const sessionsOutput = z.strictObject({
  sessions: z.array(sessionSummary),
  next_before: z.number().int().nullable(),
});

export const untrustedAnswer = z.strictObject({
  advisory: z.literal(true),
  untrusted: z.literal(true),
  notice: z.string(),
  boundary: z.string(),
  path: z.string(),
  text: z.string(),
});

/** The key that signed an entry, its actor, and a registry's revocation of it since (audit/message-view.ts SignerView). */
const signer = z.strictObject({
  key_id: z.string(),
  actor: z.string().nullable(),
  revoked: z.strictObject({ seq: z.number().int(), reason: z.string() }).nullable(),
});

export const showOutput = z.strictObject({
  message_id: z.string(),
  lane_state: laneState,
  duplicate_of: z.string().nullable(),
  submitted_via: z.string().nullable(),
  envelope: z.unknown(),
  envelope_signer: signer.nullable(),
  attempts: z.array(z.unknown()),
  /** A dispatch's request, its approval and the CEO's approved retries (audit/message-view.ts). */
  dispatch: z.unknown().optional(),
  /** A consult's question, pinned context and budget (audit/consult-view.ts). */
  consult: z.unknown().optional(),
  /** A panel member's panel: every member side by side (audit/panel-comparison.ts). */
  panel: z.unknown().optional(),
  original_lane_state: laneState.optional(),
  original_attempts: z.array(z.unknown()).optional(),
  /** A message the active COO acknowledged: its ack. */
  acknowledged_by: z.string().optional(),
  /** A CEO command the COO never took up, lapsed by the server's clock: its expires_at. */
  lapsed_at: z.string().optional(),
  answer: untrustedAnswer.nullable(),
});

export const citeOutput = z.strictObject({
  message_id: z.string(),
  advisory: z.literal(true),
  untrusted: z.literal(true),
  notice: z.string(),
  boundary: z.string(),
  verified: z.boolean(),
  findings: z.array(z.unknown()),
  other_refs: z.array(z.string()),
  markdown: z.string(),
});

export const verifyOutput = z.strictObject({
  ok: z.boolean(),
  head: z.string().nullable(),
  seq: z.number().int(),
  commits: z.number().int(),
  replayed: z.number().int(),
  incremental: z.boolean(),
  findings: z.array(z.unknown()),
  other_refs: z.array(z.string()),
  kill_switch: z.enum(['on', 'off']),
  heartbeat: z.strictObject({ seq: z.number().int(), runner: z.string(), expires_at: z.string(), fresh: z.boolean() }).nullable(),
});

// --- CEO -> COO: the COO's inbox and its acknowledgements.
export const inboxInput = z.strictObject({});

export const inboxOutput = z.strictObject({
  items: z.array(
    z
      .object({
        message_id: messageId,
        kind: z.enum(['command', 'rejection', 'blocker', 'receipt_notice', 'answer']),
        from: actorId,
        created_at: timestamp,
        correlation_id: correlationId,
        ceo_text: z.string().nullable(),
      })
      .passthrough(),
  ),
});

export const ackInput = z.strictObject({
  message_id: messageId.describe('the inbox item to acknowledge (inbox lists them)'),
  note: z.string().max(2000).optional().describe('what you make of it, for the CEO'),
});

export const ackOutput = z.strictObject({
  message_id: messageId.describe("the acknowledgement's own id"),
  acknowledges: messageId,
  existing: z.boolean(),
});
