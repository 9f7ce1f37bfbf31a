import type { LedgerState, MessageRecord } from '../authority/state.js';
import type { PrivateKey } from '../crypto/keys.js';
import { isCooError, type ErrorCode } from '../errors.js';
import type { Ledger, NewFile } from '../ledger/ledger.js';
import type { BlockerCode, ReceiptStatus } from '../schema/receipt.js';
import type { AaTransportEntry } from '../schema/registry.js';
import type { Scrubber } from '../util/scrub.js';
import type { PinnedRepo } from './pins.js';
import type { JudgedSpend } from './budget.js';
import type { ClaimedCall } from '../authority/rules/claim.js';
import type { LoopbackAddress } from './endpoint.js';

/**
 * The port between the runner and a lane. The runner is the loop, the claim rule, the one receipt
 * path (with its journal) and the leases; it asks the lane registered for a message's intent to
 * run one attempt or to recover one a gone runner left open. Both lanes (consult/runner-lane.ts,
 * dispatch/runner-lane.ts) implement it over the same context.
 */
export interface RunnerLane {
  /** One new attempt of `record`: pre-flight, claim, run, receipt. False when another runner has it. */
  attempt(state: LedgerState, record: MessageRecord): Promise<boolean>;
  /**
   * The open attempt of `record`, claimed by a runner that is gone (or whose lease ran out): the
   * runner has decided it is this one's to close. Finishes it from what is left, or records it
   * interrupted. False when nothing was written. `takenOver`: the claim is another runner's whose
   * lease ran out (through a remote), whose files are in its own state folder, maybe on another
   * machine: what it started and paid this runner cannot see, so an attempt of which this state
   * folder holds nothing is charged as one whose call started and whose runner died.
   */
  recover(state: LedgerState, record: MessageRecord, takenOver?: boolean): Promise<boolean>;
  /** A receipt of this lane that waited in the runner's journal and is now published: what follows a receipt, done now. */
  afterJournaledReceipt?(record: MessageRecord, attempt: number, receiptFile: NewFile): Promise<void>;
}

/** Why a target's attempts cannot run here, found at start (runner/startup.ts). */
export interface Problem {
  readonly code: ErrorCode;
  readonly message: string;
}

/** A coded error as a start-up problem; anything else is a bug, and thrown on. */
export function toProblem(error: unknown): Problem {
  if (isCooError(error)) return { code: error.code, message: error.message };
  throw error;
}

/** A target the policy lets the active COO reach, as its lane's start-up check sees it. */
export interface LaneTarget {
  readonly actor: string;
  readonly providerKeyEnv: string;
  /** The registry's executor of an execution agent. */
  readonly executor?: { readonly kind: 'codex' | 'claude_code'; readonly model: string };
  /** The registry's transport of an advisory agent: its model, route and key. */
  readonly transport?: AaTransportEntry;
}

/** What a lane reports at start, before anything is claimed: why a target of it cannot run here. */
export interface LaneReadiness {
  problems(target: LaneTarget): Problem[];
  /**
   * The endpoints on this machine a target's attempts call (an offline model, a gateway on
   * loopback), with where a client connects to each: the start probes them (runner/startup.ts).
   */
  localEndpoints(target: LaneTarget): LocalEndpoint[];
}

/** An endpoint on this machine: its URL as configured, and the address and port a client connects to. */
export interface LocalEndpoint {
  readonly url: string;
  readonly address: LoopbackAddress;
}

/** Where a receipt went: on the ledger, into the journal (the remote is away), or kept as late (another runner closed the attempt). */
export type ReceiptOutcome = 'published' | 'journaled' | 'late';

/**
 * What the runner lends every lane, the same for each: its ledger, key, clock and state folder, the
 * pinned repository, the paths no child may see, the scrubber every output passes, the claim rule,
 * the receipt path and its events.
 */
export interface LaneContext<E> {
  readonly ledger: Ledger;
  readonly key: PrivateKey;
  /** Where attempts keep their files across restarts (sandboxes, worktrees), so a crashed attempt can be recovered. */
  readonly stateDir: string;
  /** The repository consults pin their context in and dispatches work in (the runner's `--repo`). */
  readonly repo: string;
  readonly pins: PinnedRepo;
  /** Paths no transport, executor or verification command sees (the ledger, the key's folder, the runner's state). */
  readonly hide: readonly string[];
  readonly clock: () => Date;
  readonly runnerId: string;
  /** The runner's scrubber: whatever a child left passes it before it is judged, hashed, signed or committed. */
  readonly scrubber: Scrubber;
  /** Keep an attempt's sandbox or worktree after its receipt (for inspection); removed by default. */
  readonly keepAttemptFiles: boolean;
  /** The remote the runner publishes through, for messages; null on a local ledger. */
  readonly remoteUrl: string | null;
  /**
   * The one claim rule: commits the claim of `attempt` (with a receipt decided before anything ran);
   * false when another runner has it. An attempt about to be paid for is claimed with what its
   * pre-flight `judged`: the claim records the allowance it let the attempt spend (held against its
   * correlation and day until its receipt lands), and is not written when the state it is finally
   * written on no longer admits the attempt (budget.ts, jointSpendMovedSince).
   */
  claim(record: MessageRecord, attempt: number, now: Date, receipt?: { readonly file: NewFile; readonly summary: string }, judged?: JudgedSpend): Promise<boolean>;
  /**
   * The claims of attempts paid for together (a panel's members, each with what its pre-flight
   * judged), in one commit: all of them or none. They are judged again together on the state they
   * are written on (budget.ts, jointSpendMovedSince); one another runner claimed meanwhile is that
   * runner's to run, and the others are claimed without it. An attempt with its `receipt` (a panel
   * stopped before anything runs) is closed in the same commit, so that no member is left queued
   * beside a sibling stopped for it. An attempt with the `call` its pre-flight decided (the model Oracle
   * is asked, at its price) is not claimed, nor any claimed with it, when the registry or policy on the
   * state its claim is written on gives its target another model or price (rules/claim.ts
   * claimedCallMoved): the claim records those. The ids of the messages claimed.
   */
  claimTogether(attempts: ReadonlyArray<{ readonly record: MessageRecord; readonly attempt: number; readonly judged?: JudgedSpend; readonly call?: ClaimedCall; readonly receipt?: NewFile }>, now: Date, summary?: string): Promise<ReadonlySet<string>>;
  /** An attempt left unclaimed this pass, with why: the next pass judges it again. */
  onSkipped(messageId: string, reason: string): void;
  /** The one receipt path: commits a receipt and its artifacts, or journals or keeps it (runner.ts publishReceipt). */
  publishReceipt(files: NewFile[], summary: string, now: Date): Promise<ReceiptOutcome>;
  /** A plain signed commit of the runner's. */
  commit(files: NewFile[], summary: string, now: Date): Promise<void>;
  /** A write of the lane's own built on `Ledger.append` (an envelope): on the ledger, or published through the remote. */
  write<R>(write: (ledger: Ledger) => Promise<R>): Promise<R>;
  /** A receipt landed on the ledger. */
  onReceipt(messageId: string, attempt: number, status: ReceiptStatus, blockers: readonly BlockerCode[], retryAt: string | null): void;
  onEvent(event: E): void;
  /** Why the operator stopped the runner, once they did (Runner.interrupt): the attempt in flight then ends interrupted. */
  stoppedBy(): string | null;
  /** Why the runner holds new attempts to `target` (its lane cannot run it here: runner/startup.ts), or null: held ones are not started. */
  heldHere(target: string): Problem | null;
  /** Whether the retry of message `id` still waits on the runner's own clock, though its wall clock reads it as due (runner.ts observeRetries): it is not started. */
  waitsForRetry(id: string): boolean;
}

/**
 * The consult lane as a dispatch attempt's consult tool uses it, lent by the runner (the dispatch
 * lane does not import the consult lane): a consult the agent asked runs at once, through the
 * consult lane's own attempt, while the agent waits for its answer.
 */
export interface AskedConsults {
  /** Runs the first attempt of consult `messageId` now, or waits for the runner that claimed it first; resolves once its receipt is on the ledger or its time is up. */
  run(messageId: string): Promise<void>;
}
