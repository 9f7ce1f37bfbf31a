import type { BlockerCode, ReceiptStatus } from '../schema/receipt.js';
import type { ActorPolicy } from '../schema/policy.js';
import type { ActorRegistry, OracleRoute } from '../schema/registry.js';
import type { KillSwitch, TrustRoot } from '../schema/control.js';
import { isRunnerIntent, type Intent } from '../schema/common.js';
import { messageFolder } from '../ledger/layout.js';
import { CooError } from '../errors.js';
import { isForCoo } from './rules/intents/ack.js';

/**
 * What the ledger says at one commit, derived by folding commits from genesis (authority/fold.ts).
 * Pure data: the validator reads it, the fold extends it, a checkpoint stores it.
 */

export interface TrustFile<T> {
  readonly version: number;
  readonly path: string;
  readonly sha256: string;
  readonly seq: number;
  readonly doc: T;
}

export interface AttemptRecord {
  readonly number: number;
  readonly attemptId: string;
  readonly claim: {
    readonly path: string;
    readonly session: string;
    readonly runner: string;
    readonly at: string;
    readonly seq: number;
    /** What the claim let the attempt spend (its `allowance_usd`): held against its correlation and the day until its receipt lands. Absent in claims that do not state it. */
    readonly allowanceUsd?: number;
    /** What its message's other attempts and their consults cost or held when it was claimed (its `spent_before_usd`). Absent in claims written before it was stated, which the rules that count an attempt's consults do not bind. */
    readonly spentBeforeUsd?: number;
    /** The model the registry in force gave an advisory agent when its attempt was claimed: the model its answer is being given by until its receipt lands (rules/panel.ts answeredModels). */
    readonly model?: string;
    /** That model's price in the policy in force at the claim: what the call is charged at when a runner recovers it, whatever a later policy or the attempt's own files say. Absent when no policy priced it, and in states cached before it was kept. */
    readonly price?: ActorPolicy['models'][string];
    /** The route the registry in force gave that model at the claim (schema/registry.ts routeOf): whether its provider's usage record counts the output is charged by it when a runner recovers the call, whatever the attempt's own files say. Absent in states cached before it was kept. */
    readonly route?: OracleRoute;
  } | null;
  readonly receipt: {
    readonly path: string;
    readonly status: ReceiptStatus;
    readonly blockers: readonly BlockerCode[];
    readonly costUsd: number;
    readonly nextAttemptAt: string | null;
    readonly createdAt: string;
    readonly seq: number;
    /** A consult's: the sha256 of each proposal its answer carried that passed judgement, in order (aa_proposal.v0 artifacts). */
    readonly proposals?: readonly string[];
    /** The answer an advisory receipt points at (output_ref and output_hash), when it has one: what a cross-check may challenge. */
    readonly output?: { readonly path: string; readonly sha256: string };
    /** The model an advisory receipt (aa_receipt.v0) says answered, when it names one: whose answer it is, whatever the registry says of its agent since (rules/intents/cross-check.ts). */
    readonly model?: string;
    /** The key that signed the receipt: a proposal it stores is adopted only while that key is not revoked (rules/intents/dispatch.ts checkAdoption). */
    readonly keyId?: string;
  } | null;
}

export interface MessageRecord {
  readonly id: string;
  readonly intent: Intent;
  readonly source: string;
  readonly target: string;
  readonly correlation: string;
  readonly createdAt: string;
  readonly chain: readonly string[];
  /** The envelope's max_hops: a reply may declare no more than this (hop limits only tighten down a chain). */
  readonly maxHops: number;
  readonly idempotencyKey: string;
  readonly fingerprint: string;
  readonly payloadHash: string | null;
  readonly manifestHash: string | null;
  readonly maxCostUsd: number;
  /** The envelope's expires_at and deadline_at: a receipt that says the message expired or its deadline passed is claimed past them (rules/attempt.ts checkStopTime). */
  readonly expiresAt: string;
  readonly deadlineAt: string;
  readonly seq: number;
  /** The earlier message with the same idempotency key and request, when this one repeats it. */
  readonly duplicateOf: string | null;
  readonly attempts: readonly AttemptRecord[];
  /** The envelope's `submitted_via` when it has one (`mcp`); absent for CLI requests and older entries. */
  readonly submittedVia?: 'mcp';
  /** Dispatches: the attempt numbers the CEO approved as retries (approval.v0), each reopening an ended dispatch once. */
  readonly approvedRetries?: readonly number[];
  /** True when the message was to or from an advisory agent as the registry stood when it was written: advice, whoever the registry lists later. */
  readonly advisory?: true;
  /** True when the message was addressed to the active COO as the registry stood when it was written: its successor's to read, once the CEO names another. */
  readonly toCoo?: true;
  /** True when the message was the active COO's own as the registry stood when it was written (a consult it asked). */
  readonly fromCoo?: true;
  /** The panel the message is a member of (its envelope's `panel.id`), when it is one. */
  readonly panel?: string;
  // --- Consults an execution agent asks inside a dispatch attempt (rules/intents/consult-in-dispatch.ts).
  /** Dispatches: the commit the work starts from and the paths it may change; a consult its agent asks is bounded by both. */
  readonly base?: string;
  readonly scope?: readonly string[];
  /** Dispatches: each attempt's time box (`timeout_seconds`); a consult its agent asks ends within it. */
  readonly timeoutSeconds?: number;
  /** Dispatches: the executor the envelope names and its branch (`branch_name`): what each attempt's receipt names as its own. Absent in a state cached before they were kept. */
  readonly executor?: 'codex' | 'claude_code';
  readonly branchName?: string;
  /** Dispatches: the consults its agent asked, with the attempt each was asked in, in the order asked. */
  readonly consults?: ReadonlyArray<{ readonly id: string; readonly attempt: number }>;
  /** Consults: the attempt of the parent dispatch this consult was asked in (`asked_in_attempt`). */
  readonly askedIn?: number;
  /** Dispatches: the consult whose proposal this dispatch adopted (`adopted_proposal`), its parent. */
  readonly adopted?: string;
  // --- CEO -> COO: commands, rejections and the COO's acknowledgements (rules/intents/ceo-*.ts, ack.ts).
  /** Acks and rejections: the message they are about (`about_message_id`). */
  readonly about?: string;
  /** Rejections: the request hash rejected (`request_hash`). */
  readonly rejectsRequest?: string;
  /** Messages addressed to the COO, and the COO's consults: the ack that acknowledged it. */
  readonly ackedBy?: string;
  /** Commands: what the CEO allows the work it asks for to cost (`budget_usd`), when it says. */
  readonly budgetUsd?: number;
  /** Commands: set once the COO took it up (its ack, or a message naming it as its parent): one never taken up lapses at its expires_at (rules/intents/ceo-command.ts checkCommandStands). */
  readonly takenUp?: true;
  /** The key that signed the envelope: a runner starts no attempt of a message whose key a registry revoked since (runnable.ts gateAttempt); a CEO's command or rejection speaks while it stands (rules/intents/ceo-authority.ts). Absent in a state cached before it was kept. */
  readonly keyId?: string;
  /** Commands and rejections: set when a registry revoked that key before the COO acknowledged it: no longer the CEO's word, nothing for the COO to act on (rules/intents/ceo-authority.ts voidCeoMessagesOf). */
  readonly revoked?: true;
  /** Cross-checks: the receipt whose answer it challenges (`challenge.receipt_ref`); once that receipt's key is revoked, no attempt of it is claimed to run (rules/intents/cross-check.ts revokedChallengeOf). */
  readonly challenges?: string;
}

/** A panel the ledger holds: one question to several advisory agents (rules/panel.ts). */
export interface PanelRecord {
  readonly name: string;
  readonly messages: readonly string[];
}

/** A CEO approval the ledger holds (approval.v0). */
export interface ApprovalRecord {
  readonly id: string;
  readonly path: string;
  readonly approves: 'dispatch' | 'retry';
  readonly requestHash: string | null;
  readonly messageId: string | null;
  readonly attempt: number | null;
  readonly approvedBy: string;
  readonly createdAt: string;
  readonly expiresAt: string;
  readonly seq: number;
  /** A dispatch approval is used once: the message that named it. */
  readonly usedBy: string | null;
  /** The key that signed it. */
  readonly keyId: string;
  /** Set when a registry revoked that key before anything used the approval: it approves nothing any more (rules/approval.ts voidApprovalsOf). */
  readonly revoked?: true;
}

/** What the chain says of one key any root or registry ever gave. */
export interface KeyRecord {
  readonly actor: string;
  readonly publicKey: string;
  /** A trust root named it at some point: from then on only the root in force gives it a role. */
  readonly rootNamed: boolean;
  /** The trust change that last took it out of force without revoking it (a rotation), if one did. */
  readonly retired: { readonly seq: number; readonly by: readonly string[] } | null;
}

/** A registry's revocation of a key: final, whatever later trust files say. */
export interface Revocation {
  readonly seq: number;
  readonly reason: string;
  /** The registry version that first revoked it. */
  readonly by: string;
}

export interface LedgerState {
  readonly seq: number;
  readonly head: string | null;
  readonly genesis: string | null;
  readonly root: TrustFile<TrustRoot> | null;
  readonly registry: TrustFile<ActorRegistry> | null;
  readonly policy: TrustFile<ActorPolicy> | null;
  readonly killSwitch: TrustFile<KillSwitch> | null;
  /** Every key any root or registry ever allowed, with the actor it was given to (retired keys stay). */
  readonly everKeys: ReadonlyMap<string, KeyRecord>;
  /** Every key any registry revoked, known or not, from the first registry that did: revocation is final. */
  readonly revocations: ReadonlyMap<string, Revocation>;
  readonly messages: ReadonlyMap<string, MessageRecord>;
  /** `${source_actor} ${idempotency_key}` -> the first message that used it. */
  readonly idempotency: ReadonlyMap<string, string>;
  readonly spendByCorrelation: ReadonlyMap<string, number>;
  readonly spendByDay: ReadonlyMap<string, number>;
  readonly lastHeartbeat: { readonly seq: number; readonly expiresAt: string; readonly runner: string } | null;
  /** Each runner's newest heartbeat: it renews the lease on that runner's open claims (authority/lease.ts). */
  readonly runnerHeartbeats: ReadonlyMap<string, { readonly seq: number; readonly createdAt: string; readonly expiresAt: string }>;
  readonly approvals: ReadonlyMap<string, ApprovalRecord>;
  /** Each panel: the policy panel that allowed it, and its member messages in the order the panel names them. */
  readonly panels: ReadonlyMap<string, PanelRecord>;
  /** How many messages of a runner intent (work) name each message as their parent: its fan-out. */
  readonly children: ReadonlyMap<string, number>;
  /** Per correlation, its messages of a runner intent not yet known to have ended: the in-flight limit counts those still open. */
  readonly openByCorrelation: ReadonlyMap<string, readonly string[]>;
}

/** The folder of a message, derived from its id and creation time. Kept out of the record: a large ledger holds many. */
export function folderOf(record: Pick<MessageRecord, 'id' | 'createdAt'>): string {
  return messageFolder(record.id, record.createdAt);
}

export function emptyState(): LedgerState {
  return {
    seq: 0,
    head: null,
    genesis: null,
    root: null,
    registry: null,
    policy: null,
    killSwitch: null,
    everKeys: new Map(),
    revocations: new Map(),
    messages: new Map(),
    idempotency: new Map(),
    spendByCorrelation: new Map(),
    spendByDay: new Map(),
    lastHeartbeat: null,
    runnerHeartbeats: new Map(),
    approvals: new Map(),
    panels: new Map(),
    children: new Map(),
    openByCorrelation: new Map(),
  };
}

export function idempotencySlot(source: string, key: string): string {
  return `${source} ${key}`;
}

/** Whether no further attempt of this message will run: none ever runs of a message no runner executes. */
export function isTerminal(record: MessageRecord): boolean {
  if (record.duplicateOf !== null || !isRunnerIntent(record.intent)) return true;
  const last = record.attempts[record.attempts.length - 1];
  return last?.receipt != null && last.receipt.nextAttemptAt === null && !retryApproved(record);
}

/** Whether the CEO approved the attempt after an ended one: the next attempt may start now. */
export function retryApproved(record: MessageRecord): boolean {
  const last = record.attempts[record.attempts.length - 1];
  return last?.receipt != null && last.receipt.status !== 'succeeded' && (record.approvedRetries ?? []).includes(last.number + 1);
}

/**
 * The state a COO or an auditor sees for one message. Work the runner executes (consults,
 * dispatches, cross-checks) has a lane state derived from its attempts: `queued`, `claimed`,
 * `retry_wait`, then how its last attempt ended. A message no runner executes is never queued: one
 * the active COO acknowledges (a CEO's command or rejection, a blocker or notice addressed to it) is
 * `awaiting_ack` until its ack lands, then `acknowledged`; anything else (an ack itself, a status
 * query, a notice to anyone else) is `recorded`. A repeat of an earlier request is `duplicate`.
 */
export const LANE_STATES = ['queued', 'claimed', 'retry_wait', 'succeeded', 'failed', 'blocked', 'timed_out', 'aa_unavailable', 'stale_context', 'duplicate', 'awaiting_ack', 'acknowledged', 'recorded'] as const;
export type LaneState = (typeof LANE_STATES)[number];

/** The CEO's approvals of attempt `attempt` of dispatch `messageId` among `approvals` that a revocation did not void, oldest first: the last is the one in force. */
export function retryApprovalsOf(approvals: Iterable<ApprovalRecord>, messageId: string, attempt: number): ApprovalRecord[] {
  return [...approvals].filter((item) => item.approves === 'retry' && item.messageId === messageId && item.attempt === attempt && item.revoked !== true).sort((a, b) => a.seq - b.seq);
}

/**
 * The state of `record` (LANE_STATES). `registry` (the ledger's, `state.registry?.doc`) says who the
 * active COO is, whose acknowledgement a message waits for; without it such a message reads `recorded`
 * until acknowledged, so every reader of a ledger passes it.
 */
export function laneStateOf(record: MessageRecord, registry?: ActorRegistry): LaneState {
  if (record.duplicateOf !== null) return 'duplicate';
  if (!isRunnerIntent(record.intent)) {
    if (record.ackedBy !== undefined) return 'acknowledged';
    return registry !== undefined && isForCoo(registry, record) ? 'awaiting_ack' : 'recorded';
  }
  const last = record.attempts[record.attempts.length - 1];
  if (last === undefined) return 'queued';
  if (last.receipt === null) return 'claimed';
  if (last.receipt.nextAttemptAt !== null || retryApproved(record)) return 'retry_wait';
  const { status, blockers } = last.receipt;
  if (status === 'succeeded') return 'succeeded';
  if (blockers.some((code) => code.startsWith('aa_unavailable:'))) return 'aa_unavailable';
  if (blockers.includes('stale_context')) return 'stale_context';
  return status;
}

/** A copy whose maps a speculative replay may extend without touching the original. */
export function cloneState(state: LedgerState): LedgerState {
  return {
    ...state,
    everKeys: new Map(state.everKeys),
    revocations: new Map(state.revocations),
    messages: new Map(state.messages),
    idempotency: new Map(state.idempotency),
    spendByCorrelation: new Map(state.spendByCorrelation),
    spendByDay: new Map(state.spendByDay),
    runnerHeartbeats: new Map(state.runnerHeartbeats),
    approvals: new Map(state.approvals),
    panels: new Map(state.panels),
    children: new Map(state.children),
    openByCorrelation: new Map(state.openByCorrelation),
  };
}

/**
 * What the policy in force leaves a correlation after what its receipts have cost: the figure an
 * envelope's `correlation_budget_remaining_usd` must state, when it states one.
 */
export function correlationRemainingUsd(policy: ActorPolicy, spentUsd: number): number {
  return Math.max(0, policy.budgets.max_cost_usd_per_correlation - spentUsd);
}

/**
 * What a CEO command's budget leaves the work that descends from it, or null when the chain does
 * not start at a command with a budget: its `budget_usd` less what its correlation has cost (a
 * reply keeps its parent's correlation, so the command's descendants are its correlation).
 */
export function commandBudgetLeftUsd(state: Pick<LedgerState, 'spendByCorrelation'>, message: (id: string) => MessageRecord | undefined, chain: readonly string[]): { readonly command: string; readonly left: number } | null {
  const root = chain[0] === undefined ? undefined : message(chain[0]);
  if (root?.intent !== 'ceo_command' || root.budgetUsd === undefined) return null;
  return { command: root.id, left: Math.max(0, root.budgetUsd - (state.spendByCorrelation.get(root.correlation) ?? 0)) };
}

/** The shape of a state a checkpoint holds; a checkpoint of another shape is not read (the fold starts over). */
const STATE_SHAPE = 19;

/** A checkpoint's JSON form of a state. */
export function stateToJson(state: LedgerState): unknown {
  return {
    shape: STATE_SHAPE,
    ...state,
    everKeys: [...state.everKeys],
    revocations: [...state.revocations],
    messages: [...state.messages.values()],
    idempotency: [...state.idempotency],
    spendByCorrelation: [...state.spendByCorrelation],
    spendByDay: [...state.spendByDay],
    runnerHeartbeats: [...state.runnerHeartbeats],
    approvals: [...state.approvals],
    panels: [...state.panels],
    children: [...state.children],
    openByCorrelation: [...state.openByCorrelation],
  };
}

export function stateFromJson(value: unknown): LedgerState {
  const { shape, ...raw } = value as Record<string, unknown> & {
    shape?: unknown;
    everKeys: Array<[string, KeyRecord]>;
    revocations: Array<[string, Revocation]>;
    messages: MessageRecord[];
    idempotency: Array<[string, string]>;
    spendByCorrelation: Array<[string, number]>;
    spendByDay: Array<[string, number]>;
    runnerHeartbeats: Array<[string, { seq: number; createdAt: string; expiresAt: string }]>;
    approvals: Array<[string, ApprovalRecord]>;
    panels: Array<[string, PanelRecord]>;
    children: Array<[string, number]>;
    openByCorrelation: Array<[string, string[]]>;
  };
  if (shape !== STATE_SHAPE) throw new CooError('INTERNAL', `a checkpoint of state shape ${String(shape)}, not ${STATE_SHAPE}`);
  return {
    ...(raw as unknown as LedgerState),
    everKeys: new Map(raw.everKeys),
    revocations: new Map(raw.revocations),
    messages: new Map(raw.messages.map((record) => [record.id, record])),
    idempotency: new Map(raw.idempotency),
    spendByCorrelation: new Map(raw.spendByCorrelation),
    spendByDay: new Map(raw.spendByDay),
    runnerHeartbeats: new Map(raw.runnerHeartbeats),
    approvals: new Map(raw.approvals),
    panels: new Map(raw.panels),
    children: new Map(raw.children),
    openByCorrelation: new Map(raw.openByCorrelation),
  };
}
