import * as fs from 'node:fs';
import { join, resolve } from 'node:path';
import { CooError, errorClassOf, isCooError, type ErrorCode } from '../errors.js';
import { runnerKeyProblem } from './startup.js';
import { folderOf, isTerminal, retryApprovalsOf, type LedgerState, type MessageRecord } from '../authority/state.js';
import { claimedCallMoved, claimFloor, type ClaimedCall } from '../authority/rules/claim.js';
import type { PrivateKey } from '../crypto/keys.js';
import { attemptIdOf, isRunnerIntent, nextWork, type Work } from '../authority/runnable.js';
import { ConsultLane, type ConsultEvent } from '../consult/runner-lane.js';
import type { AaTransport } from '../consult/oracle.js';
import { executorFactory } from '../dispatch/executors.js';
import type { ExecutorFactory } from '../dispatch/executor.js';
import { DispatchLane, type DispatchEvent, type PullRequestConfig } from '../dispatch/runner-lane.js';
import { PinnedRepo } from '../lane/pins.js';
import { readMessage } from '../lane/envelope.js';
import type { LaneContext, Problem, RunnerLane } from '../lane/runner-lane.js';
import { pinnedCommitOf } from '../lane/context-pin.js';
import { stopGroups } from '../util/children.js';
import { readOwnFile } from '../util/bounded-read.js';
import { writeOwnFile } from '../util/own-write.js';
import { bootId, machineMonotonic } from '../util/process.js';
import { claimPath, classifyPath, heartbeatPath } from '../ledger/layout.js';
import { commitsSince, isAncestor } from '../ledger/history.js';
import type { AppendOptions, AppendResult, Ledger, NewFile } from '../ledger/ledger.js';
import { aheadOfClock, heartbeatReading, leaseDecision, observeClaim, retryWaitMs, type LeaseObservation } from '../authority/lease.js';
import type { RemoteLedger } from '../remote/publish.js';
import type { Intent } from '../schema/common.js';
import type { BlockerCode, ReceiptStatus } from '../schema/receipt.js';
import { readStrictYaml, toYaml } from '../schema/strict-yaml.js';
import { attemptIdFor, sessionSlugFor } from '../util/ids.js';
import { addSeconds, isoSeconds } from '../util/time.js';
import { credentialFileSecrets, gitRemoteSecrets } from '../util/credential-files.js';
import { environmentSecrets, privateKeySecrets, runnerPlaces, Scrubber } from '../util/scrub.js';
import { LIMITS } from '../limits.js';
import { LocalRunners, newRunnerId } from './identity.js';
import { anotherLedgerProblem, headFileOf, readSeenHead } from './state-folder.js';
import { assignWork } from './assignment.js';
import { CLAIMS, RetrySightings } from './retry-sightings.js';
import { commandBudgetOf, jointSpendMovedSince, spentOnMessageUsd, type JudgedSpend } from '../lane/budget.js';
import { boundedUsd } from '../schema/common.js';

/** An error the runner reports: about one message, or (messageId null) about a pass. */
export type RunnerErrorEvent = { readonly type: 'error'; readonly messageId: string | null; readonly code: string; readonly message: string };

export type RunnerEvent =
  | { readonly type: 'claimed'; readonly messageId: string; readonly attempt: number }
  | { readonly type: 'receipt'; readonly messageId: string; readonly attempt: number; readonly status: ReceiptStatus; readonly blockers: readonly BlockerCode[]; readonly retryAt: string | null }
  | { readonly type: 'skipped'; readonly messageId: string; readonly reason: string }
  | { readonly type: 'heartbeat'; readonly seq: number }
  | RunnerErrorEvent
  /** The remote cannot be reached: no new work starts until it can; receipts of paid calls wait in the journal. */
  | { readonly type: 'cut_off'; readonly url: string; readonly since: string; readonly detail: string }
  /** The remote answers again after a cut-off. */
  | { readonly type: 'reconnected'; readonly url: string; readonly since: string; readonly at: string }
  /** A receipt the remote could not take now, kept in the runner's journal until it can. */
  | { readonly type: 'journaled'; readonly messageId: string; readonly attempt: number; readonly detail: string }
  /** A write of this runner that other writers beat to the remote, rebuilt on the new head and published (or refused there). */
  | { readonly type: 'rebuilt'; readonly summary: string; readonly tries: number; readonly conflicts: number }
  /** Another runner's claim whose lease and runtime budget both ran out: the attempt is recorded as interrupted. */
  | { readonly type: 'takeover'; readonly messageId: string; readonly attempt: number; readonly runner: string; readonly detail: string }
  /** An entry another runner wrote dated ahead of this runner's clock by more than the stated skew: its writer's clock is off. Flagged once; no decision reads it. */
  | { readonly type: 'clock_skew'; readonly messageId: string; readonly runner: string; readonly entry: string; readonly aheadSeconds: number }
  /** A paid result the ledger refused for a reason other than an unreachable remote or lost races (a COO key rotated meanwhile, say): kept in the state folder, never lost. */
  | { readonly type: 'result_kept'; readonly messageId: string; readonly attempt: number; readonly code: string; readonly detail: string; readonly kept: string }
  | ConsultEvent
  | DispatchEvent;

/** What a runner needs of a remote (remote/publish.ts): publishing its writes, and syncing to the remote's verified head. */
export type RunnerRemote = Pick<RemoteLedger, 'url' | 'append' | 'sync'> & Partial<Pick<RemoteLedger, 'write' | 'secrets'>>;

/** What the runner reads of an envelope before its lane does: when its attempts may last start, and the commit it pins in the repository (context-pin.ts pinnedCommitOf). */
interface EnvelopeFacts {
  readonly expiresAt: string;
  readonly deadlineAt: string;
  readonly pinned: string | null;
}

/** Seconds between a watch's looks at the repository while a message waits for a commit it lacks (the operator fetching it). */
const REPO_LOOK_SECONDS = 30;
/** How soon a watch looks again at an endpoint on this machine where nothing answered, while a message to it waits. */
const ENDPOINT_LOOK_SECONDS = 5;
/** The longest a watch waits to look again at such an endpoint: each pass that finds it still silent doubles the wait, to this (a watch's longest idle poll through a remote by default). */
const ENDPOINT_LOOK_MAX_SECONDS = 30;

/** Runners through a remote pick their next work among this many of the oldest ready messages. */
const REMOTE_PICK_WINDOW = 4;

/** Seconds past an attempt's runtime budget before a runner on another machine may take it over (by default). */
export const DEFAULT_LEASE_GRACE_SECONDS = 60;

export interface RunnerOptions {
  readonly ledger: Ledger;
  readonly key: PrivateKey;
  /** The repository consults pin their context in. */
  readonly repo: string;
  /** Where attempt sandboxes live; keep it across restarts so a crashed attempt can be harvested. */
  readonly stateDir: string;
  readonly transport: AaTransport;
  /** The wall clock: times written into entries, expiry and retry times. */
  readonly clock?: () => Date;
  /** This runner's own monotonic clock in milliseconds (the machine's, counted from its boot, by default): leases and retry waits are measured on it alone. */
  readonly monotonic?: () => number;
  readonly onEvent?: (event: RunnerEvent) => void;
  /** Keep sandboxes after a receipt (for inspection); removed by default. */
  readonly keepSandboxes?: boolean;
  /** How dispatches start their executor; `codex` and `claude` on PATH, with the providers' own endpoints, by default. */
  readonly executors?: ExecutorFactory;
  /** Paths no executor or verification command may see besides the ledger and the runner's state (the COO key's folder). */
  readonly hide?: readonly string[];
  /** The runner's forge credentials for dispatches that open a pull request (`--open-pr`). */
  readonly pullRequests?: PullRequestConfig;
  /**
   * Work through a remote: `ledger` is its clone. Every claim, receipt and heartbeat is published
   * there (a claim counts once the remote took it), each pass starts from the remote's verified
   * head, and leases (authority/lease.ts) replace the same-host pid check.
   */
  readonly remote?: RunnerRemote;
  /** Seconds past an attempt's runtime budget before another runner may take it over (remote only; default 60). */
  readonly leaseGraceSeconds?: number;
  /**
   * The command a dispatch attempt's executor runs as its agent's consult tool (an MCP server on
   * stdio: `coo consult-relay`, to which `--socket PATH` is added); the built coo by default.
   */
  readonly consultRelay?: readonly string[];
  /**
   * Targets whose lane cannot run here (runner/startup.ts: a provider key or an executor is missing),
   * with why: their messages stay queued and unclaimed, and the reason was said once at start.
   */
  readonly waiting?: ReadonlyMap<string, { readonly code: ErrorCode; readonly message: string }>;
  /**
   * Targets that call an endpoint on this machine (runner/startup.ts StartedLanes.looks): why nothing
   * answers there now, or null. Asked while the target has a message to start (a pass's, or a consult a
   * dispatch's agent asks), again once its answer is ENDPOINT_LOOK_SECONDS old: held, its messages stay
   * queued and unclaimed, and run once something answers there.
   */
  readonly looks?: ReadonlyMap<string, () => Promise<Problem | null>>;
  /**
   * Through a remote, runners share the queue by assignment (runner/assignment.ts). Absent, each
   * pass picks among the oldest ready messages at random (a one-shot pass, which will not be there
   * later to take what another runner left).
   */
  readonly share?: QueueSharing;
}

/** How runners through one remote share its queue (times on each runner's own monotonic clock). */
export interface QueueSharing {
  /**
   * A new attempt the assignment gives another live, idle runner is left to it this long from when
   * this runner first saw it ready; then this runner takes it, and leaves that runner out of the
   * assignment until it shows progress (a heartbeat or a claim).
   */
  readonly handoffMs: number;
  /**
   * Claims go out one at a time, in queue order: a runner whose message is k-th among those the
   * assignment gives out claims once the ones before it are claimed (it sees them land), or after
   * k times this long since it first saw its message or a claim ahead of it last landed, whichever
   * comes first (Runner.turnSince): the runners left do not all push at once when the first of them
   * have taken longer than the wait. Runners then do not all push to the one ref at the same moment.
   */
  readonly staggerMs: number;
}

/** A receipt for a call already paid that the remote could not take yet, kept across restarts. */
interface JournalEntry {
  readonly messageId: string;
  readonly attempt: number;
  readonly summary: string;
  readonly at: string;
  readonly files: ReadonlyArray<{ readonly path: string; readonly base64: string }>;
}

export interface RunSummary {
  readonly receipts: number;
  /** When to look again: the retries below, and when what is held or skipped ends, open leases run out, a lacking commit may be fetched. */
  readonly waiting: readonly string[];
  /** When each message that waits for a retry may start its next attempt (a part of `waiting`), soonest first. */
  readonly retries?: readonly string[];
  /** Messages left queued because their target's lane cannot run here (`waiting` in the options). */
  readonly held: readonly string[];
  /** Where the pass kept paid results the ledger refused the receipts of (`result_kept`): they wait for the operator. */
  readonly kept: readonly string[];
}


/**
 * The COO-controlled runner: the loop over the committed ledger's ready messages, the one claim
 * rule (each attempt is claimed in the ledger before anything is paid for), the one receipt path
 * (with its journal) and the leases. What an attempt does is the lane's registered for the
 * message's intent (lane/runner-lane.ts): every outcome ends in a receipt signed with the COO key.
 */
export class Runner {
  /** Random per runner start (identity.ts): "my own attempt" is decided by this id alone. */
  readonly runnerId: string;
  private readonly clock: () => Date;
  private readonly monotonic: () => number;
  private readonly local: LocalRunners;
  private registered = false;
  private pruned = false;
  /** What every output of a transport or executor passes before it is hashed, signed or committed. */
  private readonly scrubber: Scrubber;
  /** The same secrets without the folders: what the runner's events pass before they are printed. */
  private readonly printable: Scrubber;
  /** What this runner saw of other runners' open claims, on its own clock, by claim path. */
  private readonly observed = new Map<string, LeaseObservation>();
  /** Entries already flagged as dated ahead of this runner's clock. */
  private readonly flagged = new Set<string>();
  /** When this runner's machine first saw each receipt that set a retry time, on its monotonic clock: the retry's wait is measured from there too. */
  private readonly retriesSeen: RetrySightings;
  /** When this runner's machine first saw each open claim of another runner and each heartbeat of its holder: its lease is measured from there too. */
  private readonly claimsSeen: RetrySightings;
  /** The messages whose retry the last look found due by the wall clock and still waiting on the monotonic one. */
  private earlyRetries: ReadonlySet<string> = new Set();
  private readonly repo: PinnedRepo;
  /** The lane of each intent the runner executes (authority/runnable.ts). */
  private readonly lanes: ReadonlyMap<Intent, RunnerLane>;
  private readonly configErrors = new Set<string>();
  /** When the remote was found unreachable; null while it answers. */
  private cutOffSince: Date | null = null;
  /** When the leases of claims other runners hold end, as seen by the last pass: a watch wakes then. */
  private leaseWaits: string[] = [];
  /** The messages the pass under way said it left unclaimed (a 'skipped' event): it does not take them again. */
  private passSkipped = new Set<string>();
  /** The reason each message was last said left unclaimed (a 'skipped' event), until it is claimed or receipted or a pass leaves it no longer: said again only when it changes. */
  private readonly saidSkipped = new Map<string, string>();
  /** How soon a watch looks again at a silent endpoint on this machine: ENDPOINT_LOOK_SECONDS, doubled by each pass that ends with one still silent, to ENDPOINT_LOOK_MAX_SECONDS. */
  private endpointLookWait = ENDPOINT_LOOK_SECONDS;
  /** What the pass in progress wrote: a receipt published or journaled counts once, a panel's each, and the results it kept. */
  private passWrote = { receipts: 0, kept: [] as string[] };
  /** When this runner first saw each message ready for a new attempt, on its monotonic clock: the hand-off is measured from there. */
  private readonly readySince = new Map<string, number>();
  /** Each message the assignment gives this runner: the messages given out ahead of it, and when (monotonic) its wait for its turn began (turnSince). */
  private readonly turns = new Map<string, { readonly ahead: ReadonlyMap<string, number>; readonly since: number }>();
  /** Runners that let a message matched to them pass the hand-off, with their newest heartbeat then: left out of the matching until they show progress. */
  private readonly suspects = new Map<string, number | null>();
  /** Why the operator stopped the runner (`SIGINT`), once they did: no new work starts, and the attempt in flight ends interrupted. */
  private stoppedBy: string | null = null;
  /**
   * The kill switch, seen on while a pass ran (by a heartbeat, or another look at the ledger): the
   * attempt in flight is stopped as the operator's stop stops it, and the next pass's pre-flight
   * blocks what is queued. Unlike the operator's stop it ends nothing else: it is cleared before
   * each new attempt is judged, on a state that holds the switch.
   */
  private switchedOff: string | null = null;
  /** The expiry and deadline of the envelopes of messages left unclaimed, by message id. */
  private readonly envelopeTimes = new Map<string, EnvelopeFacts>();
  /** The messages held because the repository lacks the commit they pin, with why (heldFor). */
  private readonly lacking = new Map<string, Problem>();
  /** What this pass found of each pinned commit in the repository: null when it holds it, else why not. */
  private repoLooks = new Map<string, string | null>();
  /**
   * What was last found at the endpoints on this machine each target calls (options.looks): null when
   * they answer, else why not, with when it was found on the monotonic clock. An answer is looked at
   * again once ENDPOINT_LOOK_SECONDS passed (endpointLook), within a pass as between passes.
   */
  private endpointLooks = new Map<string, { readonly found: Problem | null; readonly at: number }>();
  /** The heartbeat interval of the policy on the head the last heartbeat landed on: a watch beats at it. */
  private beatSeconds: number | null = null;

  constructor(private readonly options: RunnerOptions) {
    this.runnerId = newRunnerId();
    this.clock = options.clock ?? (() => new Date());
    this.monotonic = options.monotonic ?? machineMonotonic;
    this.retriesSeen = new RetrySightings(options.stateDir, bootId());
    this.claimsSeen = new RetrySightings(options.stateDir, bootId(), CLAIMS);
    this.local = new LocalRunners(options.ledger.gitdir);
    // What the transport may hand Oracle is known to every text the runner writes, events included: an endpoint's token given on
    // the command line (`--oracle-base-url …?key=…`) is in no environment the runner reads, and an event is printed (--json, coo mcp).
    this.scrubber = new Scrubber(
      [
        ...environmentSecrets(process.env),
        ...credentialFileSecrets(process.env),
        ...gitRemoteSecrets([options.repo, options.ledger.gitdir]),
        ...(options.remote?.secrets?.() ?? []),
        ...options.transport.handedSecrets(),
        ...(options.executors?.handedSecrets?.() ?? []),
        ...privateKeySecrets(options.key),
        ...(options.pullRequests === undefined ? [] : [{ name: 'forge token', value: options.pullRequests.token }]),
      ],
      runnerPlaces({ stateDir: options.stateDir, ledger: options.ledger.gitdir, repo: options.repo, hidden: options.hide ?? [] }),
    );
    this.printable = new Scrubber(this.scrubber.secrets);
    this.repo = new PinnedRepo(options.repo);
    const hide = [options.ledger.gitdir, options.stateDir, ...(options.hide ?? [])];
    // One context for every lane: the same claim rule, receipt path, clock, folders, scrubber and events.
    const context: LaneContext<RunnerEvent> = {
      ledger: options.ledger,
      key: options.key,
      stateDir: options.stateDir,
      repo: options.repo,
      pins: this.repo,
      hide,
      clock: this.clock,
      runnerId: this.runnerId,
      scrubber: this.scrubber,
      keepAttemptFiles: options.keepSandboxes === true,
      remoteUrl: options.remote?.url ?? null,
      claim: async (record, attempt, now, receipt, judged) =>
        (await this.claimTogether([{ record, attempt, ...(judged === undefined ? {} : { judged }), ...(receipt === undefined ? {} : { receipt: receipt.file }) }], now, receipt?.summary)).size > 0,
      claimTogether: (attempts, now, summary) => this.claimTogether(attempts, now, summary),
      onSkipped: (messageId, reason) => this.emit({ type: 'skipped', messageId, reason }),
      publishReceipt: (files, summary, now) => this.publishReceipt(files, summary, now),
      commit: (files, summary, now) => this.commit(files, summary, now),
      write: (write) => this.write(write),
      onReceipt: (messageId, attempt, status, blockers, retryAt) => this.emit({ type: 'receipt', messageId, attempt, status, blockers, retryAt }),
      onEvent: (event) => this.emit(event),
      stoppedBy: () => this.stoppedBy ?? this.switchedOff,
      heldHere: (target) => this.options.waiting?.get(target) ?? this.endpointLooks.get(target)?.found ?? null,
      waitsForRetry: (id) => this.earlyRetries.has(id),
    };
    const consults = new ConsultLane(context, options.transport);
    this.lanes = new Map<Intent, RunnerLane>([
      ['aa_consult', consults],
      ['cross_check', consults],
      [
        'ea_dispatch',
        new DispatchLane(context, {
          executors: options.executors ?? executorFactory({ hide }),
          ...(options.pullRequests === undefined ? {} : { pullRequests: options.pullRequests }),
          // The consults a dispatch's agent asks run through the consult lane, at once, while it waits.
          consults: { run: (messageId) => this.runAsked(consults, messageId) },
          ...(options.consultRelay === undefined ? {} : { consultRelay: options.consultRelay }),
        }),
      ],
    ]);
  }

  /**
   * A consult a dispatch's agent asked: its first attempt runs now, through the consult lane, while
   * the dispatch attempt waits for it. When another runner claimed it first, this waits for that
   * runner's receipt, until the consult's deadline. Only an unreachable remote is waited out: a
   * remote whose main does not verify (rolled back, rewritten, gone) ends the wait at once with its
   * coded error, as it stops a pass, never a wait on the last verified head until the deadline.
   * The time left to the deadline is read on the wall clock once, at the first look, and measured
   * from there on the monotonic clock: a clock stepped forward since (NTP, a resumed virtual machine)
   * does not end the wait early, nor one stepped back stretch it past the deadline.
   */
  private async runAsked(lane: RunnerLane, messageId: string): Promise<void> {
    let until: number | null = null;
    for (;;) {
      if (this.options.remote !== undefined) {
        await this.options.remote.sync().catch((error: unknown) => {
          if (!isCooError(error) || error.code !== 'REMOTE_UNREACHABLE') throw error;
        });
      }
      const state = await this.options.ledger.state();
      this.honourKillSwitch(state);
      const record = state.messages.get(messageId);
      if (record === undefined) throw new CooError('MESSAGE_UNKNOWN', `${messageId} is not in the ledger`);
      const work = nextWork(record, this.clock());
      if (work.kind === 'none' || work.kind === 'wait') return;
      // The lane's start reads what was found at the target's endpoint on this machine (heldHere): an answer as fresh as a pass's.
      if (work.kind === 'attempt') await this.endpointLook(record.target);
      if (work.kind === 'attempt' && (await lane.attempt(state, record))) return;
      if (until === null) {
        const message = await readMessage(this.options.ledger, record);
        until = this.monotonic() + Date.parse(message.deadline_at) - this.clock().getTime();
      }
      if (this.monotonic() > until || this.stoppedBy !== null) return;
      await new Promise((resolve) => setTimeout(resolve, this.options.remote === undefined ? 200 : 2000));
    }
  }

  /** A write of a lane's own (an envelope), on the ledger or published through the remote. */
  private async write<R>(write: (ledger: Ledger) => Promise<R>): Promise<R> {
    if (this.options.remote === undefined) return write(this.options.ledger);
    if (this.options.remote.write === undefined) throw new CooError('INTERNAL', "the runner's remote cannot publish a write of its own");
    return (await this.options.remote.write(write)).result;
  }

  /** The lane that runs `record`'s intent. */
  private laneFor(record: MessageRecord): RunnerLane {
    const lane = this.lanes.get(record.intent);
    if (lane === undefined) throw new CooError('INTERNAL', `no lane runs ${record.intent} messages`);
    return lane;
  }

  /**
   * The operator stops the runner (Ctrl-C): no new attempt starts, the processes of the attempt in
   * flight (Oracle, the executor, a verification) are killed, and that attempt is receipted
   * `interrupted`, as a runner after a crash would record it, before the pass returns.
   */
  interrupt(reason: string): void {
    this.stoppedBy ??= reason;
    stopGroups();
  }

  /**
   * Honours a kill switch `state` holds on: the processes of the attempt in flight (Oracle, the
   * executor, a verification) are killed, and that attempt is receipted `interrupted`, saying the
   * kill switch stopped it. Called wherever the runner looks at the ledger while an attempt may run.
   */
  private honourKillSwitch(state: Pick<LedgerState, 'killSwitch'>): void {
    const doc = state.killSwitch?.doc;
    if (doc?.state !== 'on' || this.switchedOff !== null) return;
    this.switchedOff = `the kill switch ${doc.set_by} set: ${doc.reason}`;
    stopGroups();
  }

  /** Looks at the ledger for a kill switch turned on since the pass began (a watch does so when the ledger's head moves mid-pass). */
  async checkKillSwitch(): Promise<void> {
    this.honourKillSwitch(await this.options.ledger.state());
  }

  /** The heartbeat interval of the policy the last heartbeat was written under; null before the first. */
  get heartbeatSeconds(): number | null {
    return this.beatSeconds;
  }

  /** Stops the runner's long-lived readers. */
  close(): void {
    this.repo.close();
  }

  /** An error met outside a message (a watch's failed pass) as an event: coded, and without the secrets this runner knows. */
  errorEvent(error: unknown): RunnerErrorEvent {
    return this.printable.value({ type: 'error', messageId: null, code: isCooError(error) ? error.code : 'INTERNAL', message: error instanceof Error ? error.message : String(error) });
  }

  /** Events are printed (coo watch, coo mcp's log): no secret the runner holds is in one. Folders stay, for the operator. */
  private emit(event: RunnerEvent): void {
    // A message said left unclaimed is not judged again this pass: a panel that waits, or whose joint claim was refused,
    // says so for every member at once, and each other member taken next would judge the whole panel and say it again.
    if (event.type === 'skipped') {
      this.passSkipped.add(event.messageId);
      // Said once until its reason changes: a watch that wakes every few seconds while a message is held passes over the same messages each time.
      if (this.saidSkipped.get(event.messageId) === event.reason) return;
      this.saidSkipped.set(event.messageId, event.reason);
    }
    if (event.type === 'claimed' || event.type === 'receipt') this.saidSkipped.delete(event.messageId);
    if (event.type === 'receipt' || event.type === 'journaled') this.passWrote.receipts += 1;
    if (event.type === 'result_kept') this.passWrote.kept.push(event.kept);
    this.options.onEvent?.(this.printable.value(event));
  }

  /** Says, once, in the ledger's folder that this runner is this process (identity.ts), before it claims anything. */
  private register(): void {
    if (this.registered) return;
    this.local.register(this.runnerId, this.options.stateDir);
    this.registered = true;
  }

  /**
   * Refuses a ledger whose head does not descend from the head this runner last saw: someone
   * rolled it back or replaced it. The runner acts on nothing until a human looks.
   */
  private async checkHistory(): Promise<void> {
    const head = this.options.ledger.head();
    const saved = readSeenHead(this.options.stateDir);
    if (saved === null) return;
    // A state folder given to runners of two ledgers holds the head of the other one: said so, never taken for a fork of this one.
    const other = anotherLedgerProblem(this.options.stateDir, saved, this.options.ledger.gitdir, (await this.options.ledger.state()).genesis);
    if (other !== null) throw other;
    if (head === null || (await commitsSince(this.options.ledger.reader, head, saved.head)) === null) {
      if (head === null || (await isAncestor(this.options.ledger.gitdir, head, saved.head))) {
        throw new CooError('HISTORY_ROLLBACK', `the ledger head ${head ?? '(none)'} is behind ${saved.head} (Ledger-Seq ${saved.seq}), which this runner saw before: rolled back; run coo verify; ${this.goOnAnyway()}`);
      }
      if (!(await this.holds(saved.head))) {
        // A clone made again from a remote that withholds what this runner saw (its own claims, the receipts of calls it paid for among it).
        throw new CooError(
          'HISTORY_FORK',
          `the ledger ${this.options.ledger.gitdir} does not hold ${saved.head} (Ledger-Seq ${saved.seq}), which this runner saw before (its own claims among what it saw): what it was made from withheld it, rolled back or forked; nothing was claimed; a clone that holds it keeps what the remote dropped (restore it from there); run coo verify; ${this.goOnAnyway()}`,
        );
      }
      throw new CooError('HISTORY_FORK', `the ledger head ${head} does not descend from ${saved.head} (Ledger-Seq ${saved.seq}), which this runner saw before: forked; run coo verify; ${this.goOnAnyway()}`);
    }
  }

  /** The way on for an operator who means this ledger to be the one (a backup restored, a remote lost): the record this runner would otherwise refuse it by forever. */
  private goOnAnyway(): string {
    return `to go on from this ledger all the same (what this runner saw past it, its claims and paid calls among it, may then be claimed and paid for again), remove ${headFileOf(this.options.stateDir)}`;
  }

  /** Whether the ledger holds the commit `oid` names. */
  private async holds(oid: string): Promise<boolean> {
    if (!/^[0-9a-f]{40,64}$/.test(oid)) return false;
    return (await this.options.ledger.reader.read(oid, 0).catch(() => null)) !== null;
  }

  /** A key revoked or rotated out while the runner watches stops it at once, as it would refuse its start: nothing more is claimed or published with it. */
  private checkKey(state: LedgerState): void {
    const keyProblem = runnerKeyProblem(state, this.options.key, "the runner's key");
    if (keyProblem !== null) throw new CooError(keyProblem.code, keyProblem.message);
  }

  /** Records the head this runner saw in its state folder; `durable` (a head holding its own claim, before it pays) survives a crash of the machine too. */
  private rememberHead(state: LedgerState, durable = false): void {
    if (state.head === null) return;
    writeOwnFile(headFileOf(this.options.stateDir), JSON.stringify({ seq: state.seq, head: state.head, ledger: resolve(this.options.ledger.gitdir), genesis: state.genesis }), { durable, what: 'the ledger head this runner last saw', remedy: STATE_REMEDY, code: 'IO_ERROR' });
  }

  /** Handles every message that is ready now, until none is; returns what was written and what waits. */
  async runOnce(): Promise<RunSummary> {
    this.register();
    const wrote = { receipts: 0, kept: [] as string[] };
    this.passWrote = wrote;
    const summary = (waiting: readonly string[], held: readonly string[], retries: readonly string[] = []): RunSummary => ({ receipts: wrote.receipts, waiting, held, kept: wrote.kept, retries });
    if (this.options.remote !== undefined && !(await this.syncRemote())) return summary([], []);
    await this.checkHistory();
    // Nothing is published before this runner's own checks pass: a state folder of this ledger, and a
    // key the trust now in force makes the active COO's. Until then the journal stays as it is.
    if (this.options.remote !== undefined) {
      this.checkKey(await this.options.ledger.intactState());
      if (!(await this.flushJournal())) return summary([], []);
    }
    this.leaseWaits = [];
    this.repoLooks = new Map();
    this.endpointLooks = new Map();
    // What was said of a message the last pass did not leave unclaimed is forgotten: said again if it is left so again, and the map holds no more than a pass's.
    for (const id of this.saidSkipped.keys()) if (!this.passSkipped.has(id)) this.saidSkipped.delete(id);
    const skipped = new Set<string>();
    this.passSkipped = skipped;
    for (let pass = 0; ; pass += 1) {
      if (this.stoppedBy !== null) return summary([], []);
      this.switchedOff = null;
      const state = await this.options.ledger.intactState();
      this.checkKey(state);
      const now = this.clock();
      const holders = this.observeClaims(state, now);
      if (pass === 0 && !this.pruned) {
        // Records of this host's runners that are gone and hold nothing are of no more use.
        this.local.prune(holders);
        this.pruned = true;
      }
      this.earlyRetries = this.observeRetries(state, now);
      const open = [...state.messages.values()]
        .filter((record) => isRunnerIntent(record.intent) && !isTerminal(record) && !skipped.has(record.id) && !this.earlyRetries.has(record.id))
        .map((record) => ({ record, work: nextWork(record, now) }))
        .filter(({ record, work }) => work.kind !== 'attempt' || !this.beforeItsFloor(state, record, work.number, now));
      // A new attempt this runner cannot run for a lack of its own (its target's lane, or the commit it pins in --repo) is never
      // claimed while another runner may still run it; an open claim is still recovered. Once no runner may start it (heldUntil)
      // its lane receipts it, unrun.
      const held: string[] = [];
      const over = new Set<string>();
      for (const { record, work } of open) {
        if (work.kind !== 'attempt' || (await this.heldFor(record)) === null) continue;
        if (Date.parse(await this.heldUntil(record, work.number)) <= now.getTime()) over.add(record.id);
        else held.push(record.id);
      }
      // Said once per held message too, so that whoever asked for it (an agent over MCP) hears why it waits.
      for (const id of held) this.configError(id, (await this.heldFor(state.messages.get(id)!))!);
      // Open attempts first: a dead runner's claim holds what its attempt may spend until its receipt
      // lands (lane/budget.ts), so it is recovered before new work is judged beside it.
      const heldIds = new Set(held);
      const ready = open
        .filter(({ record, work }) => work.kind === 'recover' || (work.kind === 'attempt' && !heldIds.has(record.id)))
        .sort((a, b) => Number(b.work.kind === 'recover') - Number(a.work.kind === 'recover') || a.record.seq - b.record.seq);
      const item = this.options.remote === undefined ? ready[0] : this.pick(state, ready, holders, now);
      if (item === undefined) {
        this.rememberHead(state);
        const waiting = [...state.messages.values()].map((record) => nextWork(record, now)).flatMap((work) => (work.kind === 'wait' ? [work.until] : []));
        // A message held for a commit its repository lacks runs once the operator fetches it: a watch looks again soon, not only when the ledger moves.
        // One held because nothing answers at its endpoint on this machine runs once the model server does: looked at again sooner.
        const silent = held.some((id) => this.endpointLooks.get(state.messages.get(id)!.target)?.found != null);
        const look = silent ? [isoSeconds(addSeconds(now, this.endpointLookWait))] : held.some((id) => this.lacking.has(id)) ? [isoSeconds(addSeconds(now, REPO_LOOK_SECONDS))] : [];
        // Backed off while it stays silent: through a remote each pass fetches, and a model server down for an hour is not fetched for every 5 s.
        this.endpointLookWait = silent ? Math.min(ENDPOINT_LOOK_MAX_SECONDS, this.endpointLookWait * 2) : ENDPOINT_LOOK_SECONDS;
        return summary([...waiting, ...this.leaseWaits, ...look, ...(await this.endsOfLeft(state, [...held, ...skipped], now))].sort(), held, [...waiting].sort());
      }
      try {
        const landed = item.work.kind === 'recover' ? await this.recover(state, item.record) : await this.laneFor(item.record).attempt(state, item.record);
        if (!landed) skipped.add(item.record.id);
      } catch (error) {
        // A remote whose main does not verify (or is gone), met mid-pass: the runner acts on nothing more, as when a pass starts there.
        if (isCooError(error) && (error.code === 'REMOTE_UNVERIFIED' || error.code === 'REMOTE_MAIN_MISSING')) throw error;
        // A remote that refuses what this runner's clock dates refuses every claim it would write: it stops, as at a refused start.
        if (isCooError(error) && (error.code === 'CLOCK_AHEAD' || error.code === 'CLOCK_BEHIND')) throw error;
        skipped.add(item.record.id);
        const code = isCooError(error) ? error.code : 'INTERNAL';
        const message = error instanceof Error ? error.message : String(error);
        if (code === 'EXECUTOR_CONFIG' || code === 'ORACLE_CONFIG' || code === 'SANDBOX_UNAVAILABLE' || code === 'RUNNER_CONFIG') this.configError(item.record.id, { code, message });
        else this.emit({ type: 'error', messageId: item.record.id, code, message });
        if (code === 'REMOTE_UNREACHABLE') {
          // Cut off: nothing new starts until the remote answers again.
          this.cutOff(message);
          return summary([], []);
        }
      }
    }
  }

  /**
   * The last moment attempt `attempt` of `record` may start (authority/runnable.ts gateAttempt): its
   * envelope's expiry for the first, its deadline for a retry. Read once per message: an envelope never changes.
   */
  private async lastStart(record: MessageRecord, attempt: number): Promise<string> {
    const times = await this.envelopeFacts(record);
    return attempt === 1 ? times.expiresAt : times.deadlineAt;
  }

  /** What the runner reads of a message's envelope before its lane does: read once per message, as an envelope never changes. */
  private async envelopeFacts(record: MessageRecord): Promise<EnvelopeFacts> {
    let facts = this.envelopeTimes.get(record.id);
    if (facts === undefined) {
      const message = await readMessage(this.options.ledger, record);
      facts = { expiresAt: message.expires_at, deadlineAt: message.deadline_at, pinned: pinnedCommitOf(message) };
      this.envelopeTimes.set(record.id, facts);
    }
    return facts;
  }

  /**
   * Why this runner holds a new attempt of `record`, queued and unclaimed, or null: its target's lane
   * cannot run here (found at start), or its repository does not hold the commit the message pins
   * (a clone behind the project's origin, a repository removed or renamed while the runner ran), or
   * nothing answers yet at an endpoint on this machine its target calls (a model server started
   * beside the runner, or restarting). Each is a lack of this runner, as a missing provider key is, never the work's: a runner that has
   * what it needs may run it, and the operator's fix lets this one run it. A commit the repository
   * holds whose files do not match the pins is the work's, and its lane receipts it stale_context.
   * The repository is looked at once a pass for each commit, and such an endpoint for each target once its last answer is ENDPOINT_LOOK_SECONDS old.
   */
  private async heldFor(record: MessageRecord): Promise<Problem | null> {
    const waiting = this.options.waiting?.get(record.target);
    if (waiting !== undefined) return waiting;
    const silent = await this.endpointLook(record.target);
    if (silent !== null) return silent;
    const { pinned } = await this.envelopeFacts(record);
    let lack = pinned === null ? null : this.repoLooks.get(pinned);
    if (pinned !== null && lack === undefined) {
      lack = await this.repo.lacks(pinned);
      this.repoLooks.set(pinned, lack);
    }
    if (lack == null) {
      this.lacking.delete(record.id);
      return null;
    }
    const problem: Problem = { code: 'RUNNER_CONFIG', message: `it waits, queued and unclaimed: ${lack}; a runner that holds the commit may run it, and if none does before it expires it is receipted expired` };
    this.lacking.set(record.id, problem);
    return problem;
  }

  /**
   * Why nothing answers now at an endpoint on this machine `target` calls, or null: an answer found
   * less than ENDPOINT_LOOK_SECONDS ago on the monotonic clock, else a new look. A long pass (an
   * attempt running beside a held message) looks again, rather than holding the message on what it
   * found when it began.
   */
  private async endpointLook(target: string): Promise<Problem | null> {
    const look = this.options.looks?.get(target);
    if (look === undefined) return null;
    const last = this.endpointLooks.get(target);
    if (last !== undefined && this.monotonic() - last.at < ENDPOINT_LOOK_SECONDS * 1000) return last.found;
    const why = await look();
    const found = why === null ? null : { code: why.code, message: `it waits, queued and unclaimed, until something answers there: ${why.message}` };
    this.endpointLooks.set(target, { found, at: this.monotonic() });
    return found;
  }

  /**
   * Until when attempt `attempt` of `record` stays queued here when its target is held on this runner:
   * its last start, by the clock of every machine within the skew the ledger allows between them
   * (LIMITS.clockSkewSeconds). A runner that cannot run it never ends it while a runner that can, with
   * a clock behind this one's by no more than that skew, may still start it; any other message ends at
   * its last start, as its lane's gate judges it.
   */
  private async heldUntil(record: MessageRecord, attempt: number): Promise<string> {
    const end = await this.lastStart(record, attempt);
    return this.options.waiting?.has(record.target) === true || this.endpointLooks.get(record.target)?.found != null || this.lacking.has(record.id) ? isoSeconds(addSeconds(new Date(end), LIMITS.clockSkewSeconds)) : end;
  }

  /**
   * When the messages a pass left unclaimed with a new attempt to start (held here, or said skipped:
   * a panel that waits for a member, a budget that waits for open attempts) can no longer start: a
   * watch wakes then, and receipts each that is still queued, rather than waiting for the ledger to move.
   */
  private async endsOfLeft(state: LedgerState, ids: readonly string[], now: Date): Promise<string[]> {
    const ends: string[] = [];
    for (const id of new Set(ids)) {
      const record = state.messages.get(id);
      const work = record === undefined ? null : nextWork(record, now);
      if (record === undefined || work?.kind !== 'attempt' || isTerminal(record)) continue;
      const end = await this.heldUntil(record, work.number);
      if (Date.parse(end) > now.getTime()) ends.push(end);
    }
    for (const id of this.envelopeTimes.keys()) {
      if (state.messages.get(id) !== undefined && !isTerminal(state.messages.get(id)!)) continue;
      this.envelopeTimes.delete(id);
      this.lacking.delete(id);
    }
    return ends;
  }

  /**
   * Looks at every open claim another runner holds, on this runner's own clocks: the monotonic one
   * records when each was first seen and when its holder last showed progress (a heartbeat this
   * runner had not seen), for the leases; the wall clock flags entries dated ahead of it by more
   * than the stated skew, whose writer's clock is off. Claims that closed are forgotten.
   */
  private observeClaims(state: LedgerState, now: Date): Set<string> {
    const tick = this.monotonic();
    const open = new Set<string>();
    const seen = new Set<string>();
    const holders = new Set<string>();
    for (const record of state.messages.values()) {
      const claim = record.attempts[record.attempts.length - 1]?.claim;
      if (claim == null || record.attempts[record.attempts.length - 1]!.receipt !== null || claim.runner === this.runnerId) continue;
      open.add(claim.path);
      holders.add(claim.runner);
      const beat = state.runnerHeartbeats.get(claim.runner);
      // First sightings are kept for the machine's boot (claimsSeen): the next process goes on from them.
      const firstSeen = this.claimsSeen.firstSeen(claim.path, tick);
      const beatKey = beat === undefined ? null : `${claim.path}#heartbeat-${beat.seq}`;
      if (beatKey !== null) seen.add(beatKey);
      const kept = { firstSeen, lastProgress: Math.max(firstSeen, beatKey === null ? firstSeen : this.claimsSeen.firstSeen(beatKey, tick)), heartbeatSeq: beat?.seq ?? null };
      this.observed.set(claim.path, observeClaim(this.observed.get(claim.path) ?? kept, beat?.seq ?? null, tick));
      for (const [entry, at] of [[claim.path, claim.at], ...(beat === undefined ? [] : [[`heartbeat of ${claim.runner} at Ledger-Seq ${beat.seq}`, beat.createdAt]])] as const) {
        const ahead = aheadOfClock(at, now, LIMITS.clockSkewSeconds);
        if (ahead === null || this.flagged.has(entry)) continue;
        this.flagged.add(entry);
        this.emit({ type: 'clock_skew', messageId: record.id, runner: claim.runner, entry, aheadSeconds: ahead });
      }
    }
    for (const path of this.observed.keys()) if (!open.has(path)) this.observed.delete(path);
    this.claimsSeen.keepOnly(new Set([...open, ...seen]));
    return holders;
  }

  /**
   * Whether a claim of attempt `attempt` dated `now` by this runner's clock would be dated before an
   * entry it builds on by more than the skew allowed between machines (rules/claim.ts claimFloor),
   * which the validator refuses (CLOCK_SKEW): that entry's writer's clock ran ahead, or this one runs
   * behind. Such a message is not claimed and refused on every pass: it is said once, as a coded
   * error naming the entry, and waits (a watch wakes) until a claim by this clock can land.
   */
  private beforeItsFloor(state: LedgerState, record: MessageRecord, attempt: number, now: Date): boolean {
    const last = record.attempts[record.attempts.length - 1];
    const approval = last?.receipt != null && last.receipt.nextAttemptAt === null ? retryApprovalsOf(state.approvals.values(), record.id, attempt).at(-1) : undefined;
    const floor = claimFloor(record, approval);
    const ahead = aheadOfClock(floor.at, now, LIMITS.clockSkewSeconds);
    if (ahead === null) return false;
    const until = isoSeconds(addSeconds(new Date(floor.at), -LIMITS.clockSkewSeconds));
    this.leaseWaits.push(until);
    // Said once for the attempt and the entry that blocks it, however far this clock moved since.
    this.configError(
      record.id,
      {
        code: 'CLOCK_SKEW',
        message: `attempt ${attempt} of ${record.id} is not claimed: ${floor.what} is dated ${floor.at}, ${ahead} s ahead of this runner's clock (${isoSeconds(now)}), and a claim dated more than ${LIMITS.clockSkewSeconds} s before it is refused; the clock of this machine or of that entry's writer is off: set the wrong one right (NTP). Until then the message waits (until ${until} by this clock), and is not asked again`,
      },
      `attempt ${attempt} before ${floor.what} at ${floor.at}`,
    );
    return true;
  }

  /**
   * Looks at every retry a receipt set, on this runner's monotonic clock: when it first saw the
   * receipt, and whether the wait the receipt set (authority/lease.ts retryWaitMs) has passed since.
   * The messages whose retry its wall clock reads as due while that wait has not passed (its clock
   * runs ahead of the receipt's writer's): they are not started, and a watch wakes when the wait ends.
   */
  private observeRetries(state: LedgerState, now: Date): Set<string> {
    const tick = this.monotonic();
    const pending = new Set<string>();
    const early = new Set<string>();
    for (const record of state.messages.values()) {
      const receipt = record.attempts[record.attempts.length - 1]?.receipt;
      if (receipt?.nextAttemptAt == null || isTerminal(record)) continue;
      pending.add(receipt.path);
      const wait = retryWaitMs({ createdAt: receipt.createdAt, nextAttemptAt: receipt.nextAttemptAt }, this.retriesSeen.firstSeen(receipt.path, tick), tick);
      if (wait === 0 || nextWork(record, now).kind !== 'attempt') continue;
      early.add(record.id);
      this.leaseWaits.push(isoSeconds(new Date(now.getTime() + Math.ceil(wait / 1000) * 1000)));
    }
    this.retriesSeen.keepOnly(pending);
    return early;
  }

  /**
   * The next work of a runner through a remote. Runners on other machines all see the same queue:
   * with a hand-off time, each takes the recoveries and the messages the assignment gives it
   * (runner/assignment.ts) and leaves the others to their runners for that long; without one, or
   * while it knows of no other live runner, it picks at random among the oldest few, so they do
   * not all race for the oldest one (a lost race costs a push, a fetch, a rebuild and a skip).
   */
  private pick(state: LedgerState, ready: ReadonlyArray<{ record: MessageRecord; work: Work }>, holders: ReadonlySet<string>, now: Date): { record: MessageRecord; work: Work } | undefined {
    const share = this.options.share;
    const random = (): { record: MessageRecord; work: Work } | undefined => ready[Math.floor(Math.random() * Math.min(ready.length, REMOTE_PICK_WINDOW))];
    if (share === undefined) return random();
    const tick = this.monotonic();
    const fresh = ready.filter(({ work }) => work.kind === 'attempt').map(({ record }) => record.id);
    const freshIds = new Set(fresh);
    for (const id of this.readySince.keys()) if (!freshIds.has(id)) this.readySince.delete(id);
    for (const id of this.turns.keys()) if (!freshIds.has(id)) this.turns.delete(id);
    for (const id of fresh) if (!this.readySince.has(id)) this.readySince.set(id, tick);
    // Live: a heartbeat not yet expired, with the skew allowed between machines, and not dated ahead beyond it. A suspect is live
    // again once it shows progress: a new heartbeat, or a claim of its own.
    const live = new Set<string>([this.runnerId]);
    for (const [runner, beat] of state.runnerHeartbeats) {
      if (this.suspects.has(runner) && this.suspects.get(runner) === beat.seq && !holders.has(runner)) continue;
      this.suspects.delete(runner);
      if (heartbeatReading(beat, now).kind === 'live') live.add(runner);
    }
    if (live.size === 1) return random();
    const matched = assignWork(
      fresh,
      [...live].filter((runner) => runner === this.runnerId || !holders.has(runner)),
    );
    const order = [...matched.keys()];
    const wake = (ms: number): void => void this.leaseWaits.push(isoSeconds(new Date(now.getTime() + Math.ceil(ms / 1000) * 1000)));
    for (const candidate of ready) {
      if (candidate.work.kind === 'recover') return candidate;
      const owner = matched.get(candidate.record.id);
      const waited = tick - this.readySince.get(candidate.record.id)!;
      if (owner === this.runnerId) {
        const place = order.indexOf(candidate.record.id);
        const turn = place * share.staggerMs;
        const waitedTurn = tick - this.turnSince(state, candidate.record.id, order.slice(0, place), tick);
        if (waitedTurn >= turn) return candidate;
        wake(turn - waitedTurn);
        continue;
      }
      // Given to another runner now: a wait this runner began for it no longer stands if it comes back.
      this.turns.delete(candidate.record.id);
      if (waited >= share.handoffMs) {
        if (owner !== undefined) this.suspects.set(owner, state.runnerHeartbeats.get(owner)?.seq ?? null);
        return candidate;
      }
      wake(share.handoffMs - waited);
    }
    return undefined;
  }

  /**
   * When this runner's wait for its turn with `id` began: when it first saw it given to it, and again
   * each time a message that was ahead of it was claimed or ended (the ledger shows a new attempt, or
   * its end), which moves it up. A place that grows (a retry come due ahead of it) or a message ahead
   * that this pass only left aside starts no new wait, so a place that comes and goes with the pass
   * cannot hold it back.
   */
  private turnSince(state: LedgerState, id: string, ahead: readonly string[], tick: number): number {
    const attempts = (other: string): number => {
      const record = state.messages.get(other);
      return record === undefined || isTerminal(record) ? Number.POSITIVE_INFINITY : record.attempts.length;
    };
    const mark = this.turns.get(id);
    const moved = mark !== undefined && [...mark.ahead].some(([other, seen]) => attempts(other) > seen);
    const since = mark === undefined || moved ? tick : mark.since;
    this.turns.set(id, { ahead: new Map(ahead.map((other) => [other, attempts(other)])), since });
    return since;
  }

  /**
   * A configuration error stays until someone fixes the runner: said once per message, not every
   * pass. `about` names what it is about when its message changes from pass to pass (a reading of
   * the clock in it); by default the message itself.
   */
  private configError(messageId: string, problem: { readonly code: ErrorCode; readonly message: string }, about: string = problem.message): void {
    const said = `${messageId} ${problem.code} ${about}`;
    if (this.configErrors.has(said)) return;
    this.configErrors.add(said);
    this.emit({ type: 'error', messageId, code: problem.code, message: problem.message });
  }

  /** When the remote was found unreachable, or null while it answers. */
  get cutOffAt(): Date | null {
    return this.cutOffSince;
  }

  private cutOff(detail: string): void {
    if (this.cutOffSince !== null) return;
    this.cutOffSince = this.clock();
    this.emit({ type: 'cut_off', url: this.options.remote!.url, since: isoSeconds(this.cutOffSince), detail });
  }

  /**
   * Fetches, verifies and adopts the remote's head (the pass publishes the journal once its checks
   * pass). False when the remote cannot be reached: the runner starts no new work. A history that
   * does not verify throws, and the runner acts on nothing, as with a damaged local ledger.
   */
  private async syncRemote(): Promise<boolean> {
    try {
      await this.options.remote!.sync();
    } catch (error) {
      if (!isCooError(error) || error.code !== 'REMOTE_UNREACHABLE') throw error;
      this.cutOff(error.message);
      return false;
    }
    if (this.cutOffSince !== null) {
      this.emit({ type: 'reconnected', url: this.options.remote!.url, since: isoSeconds(this.cutOffSince), at: isoSeconds(this.clock()) });
      this.cutOffSince = null;
    }
    return true;
  }

  private get journalDir(): string {
    return join(this.options.stateDir, 'journal');
  }

  /** Where the journal keeps the receipt of a message's attempt (one name for both lanes). */
  private journalPath(messageId: string, attempt: number): string {
    return join(this.journalDir, `${attemptIdFor(messageId, attempt)}.json`);
  }

  /** Keeps a receipt the remote could not take, durably, until it can. */
  private journal(entry: JournalEntry): void {
    writeOwnFile(this.journalPath(entry.messageId, entry.attempt), JSON.stringify(entry), { durable: true, what: 'the journaled receipt', remedy: STATE_REMEDY, code: 'IO_ERROR' });
  }

  /** Publishes the journal's receipts, oldest first; false when the remote went away again. */
  private async flushJournal(): Promise<boolean> {
    let names: string[];
    try {
      names = fs.readdirSync(this.journalDir).filter((name) => name.endsWith('.json')).sort();
    } catch {
      return true;
    }
    for (const name of names) if ((await this.publishJournaled(join(this.journalDir, name))) === 'journaled') return false;
    return true;
  }

  /** Publishes one receipt of the journal; it leaves the journal once the remote has it (or has another receipt of its attempt). */
  private async publishJournaled(path: string): Promise<'published' | 'journaled' | 'late'> {
    const entry = readJournalEntry(path);
    if (entry === null) return 'published';
    const files = entry.files.map((file) => ({ path: file.path, bytes: Buffer.from(file.base64, 'base64') }));
    const outcome = await this.publishReceipt(files, entry.summary, new Date(entry.at), false);
    if (outcome === 'journaled') return outcome;
    fs.rmSync(path, { force: true });
    if (outcome === 'published') {
      this.emit(receiptEvent(entry.messageId, entry.attempt, files));
      const receiptFile = files.find((file) => classifyPath(file.path)?.kind === 'receipt');
      const record = receiptFile === undefined ? undefined : (await this.options.ledger.state()).messages.get(entry.messageId);
      if (record !== undefined) await this.lanes.get(record.intent)?.afterJournaledReceipt?.(record, entry.attempt, receiptFile!);
    }
    return outcome;
  }

  /**
   * The one receipt path of every lane. Commits `files` (a receipt and its artifacts); through a
   * remote, a receipt the remote cannot take now is journaled (published by the next pass that
   * reaches it), and one whose attempt another runner closed meanwhile (a takeover) is late: kept
   * in the state folder, never applied. A receipt already on the ledger with these exact bytes (a
   * journal entry published before a crash) is not published again.
   */
  private async publishReceipt(files: NewFile[], summary: string, now: Date, journal = true): Promise<'published' | 'journaled' | 'late'> {
    const receiptFile = files.find((file) => classifyPath(file.path)?.kind === 'receipt');
    const info = receiptFile === undefined ? null : classifyPath(receiptFile.path);
    if (receiptFile === undefined || info === null || info.kind !== 'receipt') {
      await this.commit(files, summary, now);
      return 'published';
    }
    if (this.options.remote === undefined) {
      try {
        await this.commit(files, summary, now);
        return 'published';
      } catch (error) {
        this.keepRefused(info.messageId, info.attempt, summary, now, files, error);
        throw error;
      }
    }
    const landed = async (): Promise<'published' | 'late' | null> => {
      const existing = await this.options.ledger.readFile(receiptFile.path);
      if (existing === null) return null;
      if (existing.equals(receiptFile.bytes)) return 'published';
      this.keepLate(info.messageId, info.attempt, summary, now, files);
      return 'late';
    };
    const before = await landed();
    if (before !== null) return before;
    try {
      await this.commit(files, summary, now);
      return 'published';
    } catch (error) {
      if (!isCooError(error)) throw error;
      // The remote did not take it now, or another process held the clone past the lock's wait: nothing refused it.
      if (error.code === 'REMOTE_UNREACHABLE' || error.code === 'REMOTE_CONFLICT' || error.code === 'LEDGER_LOCKED') {
        if (journal) {
          this.journal({ messageId: info.messageId, attempt: info.attempt, summary, at: now.toISOString(), files: files.map((file) => ({ path: file.path, base64: file.bytes.toString('base64') })) });
          this.emit({ type: 'journaled', messageId: info.messageId, attempt: info.attempt, detail: error.message });
        }
        if (error.code === 'REMOTE_UNREACHABLE') this.cutOff(error.message);
        return 'journaled';
      }
      // Refused on the remote's new head: late when the attempt has a receipt there now.
      const after = await landed().catch(() => null);
      if (after !== null) return after;
      this.keepRefused(info.messageId, info.attempt, summary, now, files, error);
      throw error;
    }
  }

  /**
   * A receipt the ledger refused for any other reason (the COO key was rotated while the call was
   * in flight, the remote's hook refused it, its main is gone): the result was paid for, so it is
   * kept in the state folder with why, and said (`result_kept`), never dropped. The attempt stays
   * open; a runner with a valid key on this state folder recovers it by publishing what was kept
   * (publishKept), without paying again.
   */
  private keepRefused(messageId: string, attempt: number, summary: string, now: Date, files: NewFile[], error: unknown): void {
    const code = isCooError(error) ? error.code : 'INTERNAL';
    const detail = error instanceof Error ? error.message : String(error);
    const path = this.keptPath(messageId, attempt);
    const entry = { messageId, attempt, summary, at: now.toISOString(), refused: { code, message: detail }, files: files.map((file) => ({ path: file.path, base64: file.bytes.toString('base64') })) };
    // A result kept for this attempt before (the paid one) is never replaced by another receipt of it (the recovery's).
    const before = readOwnFile(path, { maxBytes: LIMITS.journalEntryBytes, what: 'the kept result', remedy: STATE_REMEDY, code: 'IO_ERROR' });
    if (before !== null && keptFiles(before) !== null && keptFiles(before) !== JSON.stringify(entry.files)) return;
    writeOwnFile(path, JSON.stringify(entry), { durable: true, what: 'the kept result', remedy: STATE_REMEDY, code: 'IO_ERROR' });
    this.emit({ type: 'result_kept', messageId, attempt, code, detail, kept: path });
  }

  /** A result whose attempt another runner closed: kept beside the runner, never applied. */
  private keepLate(messageId: string, attempt: number, summary: string, now: Date, files: NewFile[]): void {
    const entry: JournalEntry = { messageId, attempt, summary, at: now.toISOString(), files: files.map((file) => ({ path: file.path, base64: file.bytes.toString('base64') })) };
    writeOwnFile(join(this.options.stateDir, 'late-results', `${attemptIdFor(messageId, attempt)}.json`), JSON.stringify(entry), { what: 'the late result', remedy: STATE_REMEDY, code: 'IO_ERROR' });
    this.emit({ type: 'late_result', messageId, attempt, detail: 'another runner closed the attempt first (its lease ran out and it was taken over); this result is kept in the state folder, never applied' });
  }

  /**
   * Appends a signed heartbeat naming the sequence of its own commit, once the checks a pass makes
   * first hold: a state folder of this ledger, a history that descends from what this runner saw,
   * and (on the head it is written on, the remote's verified one) a key that is the active COO's.
   * A refused heartbeat is said as the check said it, never as a write the validator refused.
   */
  async heartbeat(): Promise<number> {
    const now = this.clock();
    await this.checkHistory();
    const result = await this.append({
      files: (state) => {
        this.checkKey(state);
        // The lifetime of the policy on the head it is written on: through a remote that is the head its push fetched, where
        // the CEO may have shortened it since this clone last looked (a heartbeat stating the old one is refused, and ends a watch).
        const policy = state.policy?.doc;
        if (policy === undefined) throw new CooError('TRUST_VERSION', 'the ledger has no policy');
        // The same head says how often to beat, and whether the CEO has turned the kill switch on meanwhile.
        this.beatSeconds = policy.heartbeat.interval_seconds;
        this.honourKillSwitch(state);
        const seq = state.seq + 1;
        const doc = { schema_version: 'heartbeat.v0', runner_id: this.runnerId, ledger_seq: seq, created_at: isoSeconds(now), expires_at: isoSeconds(addSeconds(now, policy.heartbeat.ttl_seconds)) };
        return [{ path: heartbeatPath(doc.created_at, seq), bytes: Buffer.from(toYaml(doc)) }];
      },
      key: this.options.key,
      now,
      summary: `heartbeat from ${this.runnerId}`,
    });
    const seq = 'seq' in result ? result.seq : 0;
    this.emit({ type: 'heartbeat', seq });
    return seq;
  }

  /** Appends to the ledger, or through the remote: the write counts once the remote took it. */
  private async append(options: AppendOptions<never>): Promise<AppendResult> {
    if (this.options.remote === undefined) return (await this.options.ledger.append(options)) as AppendResult;
    const published = await this.options.remote.append(options);
    if (published.report.conflicts > 0) this.emit({ type: 'rebuilt', summary: options.summary, tries: published.report.tries, conflicts: published.report.conflicts });
    return published.result as AppendResult;
  }

  private async commit(files: NewFile[], summary: string, now: Date): Promise<void> {
    await this.append({ files, key: this.options.key, now, summary });
  }

  /** The claim of `attempt` of `record`, written on `state`: what it states was spent before it, and its command's budget, are what that ledger counts. */
  private claimFile(state: LedgerState, record: MessageRecord, attempt: number, now: Date, allowanceUsd: number | undefined): NewFile {
    const spentBefore = spentOnMessageUsd(state.messages.get(record.id) ?? record, attempt, (id) => state.messages.get(id));
    const doc = {
      schema_version: 'claim.v0',
      message_id: record.id,
      attempt_id: attemptIdOf(record, attempt),
      attempt_number: attempt,
      runner_id: this.runnerId,
      transport_session_id: sessionSlugFor(record.id, attempt),
      claimed_at: isoSeconds(now),
      ...(allowanceUsd === undefined ? {} : { allowance_usd: boundedUsd(allowanceUsd) }),
      spent_before_usd: boundedUsd(spentBefore),
      command_budget_usd: commandBudgetOf(state, record.id),
    };
    return { path: claimPath(folderOf(record), attempt), bytes: Buffer.from(toYaml(doc)) };
  }

  /**
   * The one claim rule of every lane: the claims of attempts paid for together (one, or a panel's
   * members), in one commit, land before anything is paid for. With what each pre-flight `judged`,
   * a claim records the allowance it let its attempt spend, and they are judged again together on
   * the state they are written on (through a remote, each head a refused push is rebuilt on), so
   * that none is claimed when the shared budgets no longer cover them all. An attempt another
   * runner claimed meanwhile is left out (that runner runs it); when it took them all, the claims
   * are written as they are and the claim rules refuse them. An attempt with its `receipt` (an
   * outcome decided before anything runs) is closed in the same commit. The ids claimed.
   */
  private async claimTogether(attempts: ReadonlyArray<{ readonly record: MessageRecord; readonly attempt: number; readonly judged?: JudgedSpend; readonly call?: ClaimedCall; readonly receipt?: NewFile }>, now: Date, summary?: string): Promise<ReadonlySet<string>> {
    let refused: string | null = null;
    let claimed = attempts;
    const write = (state: LedgerState): NewFile[] => {
      const open = attempts.filter((item) => (state.messages.get(item.record.id)?.attempts.length ?? 0) < item.attempt);
      claimed = open.length === 0 ? attempts : open;
      // A claim records the model the registry it lands on gives its target, and its price there: one on another than the pre-flight asked Oracle for is not written.
      const moved = open.map((item) => (item.call === undefined ? null : claimedCallMoved(item.record, item.call, state.registry?.doc ?? null, state.policy?.doc ?? null))).find((reason) => reason !== null) ?? null;
      refused = open.length === 0 ? null : (moved ?? jointSpendMovedSince(open.flatMap((item) => (item.judged === undefined ? [] : [item.judged])), state));
      if (refused !== null) throw new CooError('POLICY_LIMIT', refused);
      return claimed.flatMap((item) => [this.claimFile(state, item.record, item.attempt, now, item.judged?.limitUsd), ...(item.receipt === undefined ? [] : [item.receipt])]);
    };
    try {
      await this.append({ files: write, key: this.options.key, now, summary: summary ?? `claim ${attempts.map((item) => `${item.record.id} attempt ${item.attempt}`).join(', ')}` });
    } catch (error) {
      // A claim the remote refused as dated behind its clock, when this runner's own clock has moved on by more than half the skew allowed
      // since it dated the claim (a write slowed by a contended remote, a clock set right meanwhile): the date went stale on the way, which
      // says nothing of the clock; the next pass dates and judges it again. Refused at once after it was dated, the clock is behind: it stops.
      const stale = isCooError(error) && error.code === 'CLOCK_BEHIND' && this.clock().getTime() - now.getTime() > (LIMITS.clockSkewSeconds * 1000) / 2;
      const pass = `the next pass judges ${attempts.length > 1 ? 'them' : 'it'} again`;
      const said = refused !== null ? `was not claimed${attempts.length > 1 ? ', nor any paid for with it' : ''}: ${refused}; ${pass}` : stale ? `was not claimed: the claim, dated ${isoSeconds(now)}, reached the remote too late to be taken as of then; ${pass}, dated anew` : isCooError(error) && (error.code === 'WRITE_ONCE' || error.code === 'ATTEMPT_INVALID') ? 'was claimed by another runner' : null;
      if (said === null) throw error;
      for (const item of attempts) this.emit({ type: 'skipped', messageId: item.record.id, reason: `attempt ${item.attempt} ${said}` });
      return new Set();
    }
    const running = claimed.filter((item) => item.receipt === undefined);
    if (running.length > 0) {
      if (this.options.remote !== undefined) await this.confirmClaim();
      // The head holding the claim is what this runner saw before it pays, kept in its state folder: a ledger shown later without
      // it (a remote that withholds it, a clone made again from such a remote) is refused by the next check, never claimed and paid for again.
      this.rememberHead(await this.options.ledger.intactState(), true);
    }
    for (const item of running) this.emit({ type: 'claimed', messageId: item.record.id, attempt: item.attempt });
    return new Set(claimed.map((item) => item.record.id));
  }

  /**
   * Through a remote, a claim about to be paid for is looked for on the remote once more: a remote
   * that answered "ok" to the push and then serves a main without it (a lying or misconfigured
   * remote, a forced push over it) would let another runner claim the same attempt. The sync refuses
   * (REMOTE_UNVERIFIED, and the runner stops) a main that does not descend from the claim this clone
   * pushed (publish.ts), so a main it accepts holds the claim. A remote that cannot be reached now
   * took the push a moment ago and serves nothing to anyone: the attempt goes on as it would have
   * without this look (its receipt is journaled if the remote stays away), rather than leaving an
   * open claim that a dispatch could retry only with the CEO's approval.
   */
  private async confirmClaim(): Promise<void> {
    try {
      await this.options.remote!.sync();
    } catch (error) {
      if (!isCooError(error) || error.code !== 'REMOTE_UNREACHABLE') throw error;
    }
  }

  /**
   * An attempt claimed but never receipted: a runner crashed, or another runner holds it. A receipt
   * this runner journaled is published; an owner alive elsewhere (its pid here, its lease through a
   * remote) keeps it; otherwise the attempt is its lane's to recover.
   */
  private async recover(state: LedgerState, record: MessageRecord): Promise<boolean> {
    const last = record.attempts[record.attempts.length - 1]!;
    const claim = last.claim!;
    const journaled = this.journalPath(record.id, last.number);
    if (this.options.remote !== undefined && fs.existsSync(journaled)) {
      // This runner finished the attempt and its receipt waits in the journal (the remote was away,
      // or other writers beat it there too often): publish that, never an "interrupted" in its place.
      return (await this.publishJournaled(journaled)) === 'published';
    }
    const kept = this.keptPath(record.id, last.number);
    if (this.options.remote !== undefined && fs.existsSync(kept)) {
      // So too a result this state folder kept when its receipt was refused (a remote that served a
      // rolled-back head, and a runner restarted under a new id once it serves the right one): never
      // left to wait out its own claim's lease, while a runner elsewhere takes it over as interrupted.
      const published = await this.publishKept(kept);
      if (published !== null) return published;
    }
    let takenOver = false;
    if (claim.runner !== this.runnerId) {
      // A runner of this host says whether it is alive; one this host knows nothing of (another
      // host's, one that pushed its claim here from a clone, one whose record is gone) is held by a
      // lease, as through a remote: its claim, and what it holds of the budgets, never stays open for good.
      const local = this.options.remote === undefined ? this.local.status(claim.runner) : 'unknown';
      if (local === 'alive') {
        this.emit({ type: 'skipped', messageId: record.id, reason: `attempt ${last.number} is being run by ${claim.runner}` });
        return false;
      }
      // A runner of this host that is gone and kept its attempts' files in another state folder (or never said where) left
      // none of them here: its call is charged as a taken-over one, never as one that was not made.
      if (local === 'gone' && !this.local.keptIn(claim.runner, this.options.stateDir)) takenOver = true;
      if (local === 'unknown') {
        // Across machines a pid says nothing, and another machine's clock is not this one's: the
        // holder's progress as this runner saw it, on its own clock, and the attempt's runtime budget decide.
        const message = await readMessage(this.options.ledger, record);
        const observed = this.observed.get(claim.path)!;
        const lease = leaseDecision(
          {
            claim,
            message,
            heartbeatTtlSeconds: state.policy!.doc.heartbeat.ttl_seconds,
            graceSeconds: this.options.leaseGraceSeconds ?? DEFAULT_LEASE_GRACE_SECONDS,
            observed,
          },
          this.monotonic(),
        );
        if (lease.kind === 'held') {
          const until = isoSeconds(new Date(this.clock().getTime() + Math.ceil(lease.remainingMs / 1000) * 1000));
          this.leaseWaits.push(until);
          this.emit({ type: 'skipped', messageId: record.id, reason: `attempt ${last.number} is held by ${claim.runner} for at least ${Math.ceil(lease.remainingMs / 1000)} s more: ${lease.detail}` });
          return false;
        }
        this.emit({ type: 'takeover', messageId: record.id, attempt: last.number, runner: claim.runner, detail: lease.detail });
        takenOver = true;
      }
    }
    if (this.options.remote === undefined && fs.existsSync(kept)) {
      const published = await this.publishKept(kept);
      if (published !== null) return published;
    }
    return this.laneFor(record).recover(state, record, takenOver);
  }

  /** Where the state folder keeps a result whose receipt the ledger refused (keepRefused). */
  private keptPath(messageId: string, attempt: number): string {
    return join(this.options.stateDir, 'kept-results', `${attemptIdFor(messageId, attempt)}.json`);
  }

  /**
   * A result of this state folder kept when the ledger refused its receipt (the COO key rotated
   * while the call or the agent ran): its attempt is recovered by publishing it, signed by the key
   * the runner holds now, as a journaled one is (its work lands as it would have), so what was paid
   * for and done is on the ledger, never an attempt interrupted at no cost. True when it was
   * published, false when another runner closed the attempt or the remote is away; null when the
   * ledger refuses it again for what it says, and the lane recovers the attempt as it would without it.
   */
  private async publishKept(path: string): Promise<boolean | null> {
    try {
      return (await this.publishJournaled(path)) === 'published';
    } catch (error) {
      // A remote that shows no history this clone can build on says nothing of the result: it stays kept.
      if (!isCooError(error) || errorClassOf(error.code) !== 'rejected' || error.code === 'REMOTE_UNVERIFIED' || error.code === 'REMOTE_MAIN_MISSING') throw error;
      return null;
    }
  }
}

/** The files a kept result holds, as JSON, or null when it is not one the runner wrote (then it is replaced). */
function keptFiles(bytes: Buffer): string | null {
  try {
    const files = (JSON.parse(bytes.toString('utf8')) as { files?: unknown }).files;
    return Array.isArray(files) ? JSON.stringify(files) : null;
  } catch {
    return null;
  }
}

/** What to do about something in the way of a file the runner writes in its state folder. */
const STATE_REMEDY = "the runner's state folder holds only what the runner writes: move what is at that name out of it and start the runner again";

/** The receipt event of a receipt published from the journal, read from its own bytes. */
function receiptEvent(messageId: string, attempt: number, files: readonly NewFile[]): RunnerEvent {
  const file = files.find((item) => classifyPath(item.path)?.kind === 'receipt')!;
  const doc = readStrictYaml(file.bytes, file.path) as { status: ReceiptStatus; blockers: Array<{ code: BlockerCode }>; next_attempt_at?: string | null };
  return { type: 'receipt', messageId, attempt, status: doc.status, blockers: doc.blockers.map((item) => item.code), retryAt: doc.next_attempt_at ?? null };
}

/** What to do about an entry of the journal the runner cannot read as one it wrote. */
const JOURNAL_REMEDY = 'the journal holds only receipts this runner kept; move it out of the journal folder (if it is a receipt, keep it for the operator)';

/** One entry of the journal, read within its bound; null when it is gone (published meanwhile). */
function readJournalEntry(path: string): JournalEntry | null {
  const bytes = readOwnFile(path, { maxBytes: LIMITS.journalEntryBytes, what: 'the journaled receipt', remedy: JOURNAL_REMEDY, code: 'IO_ERROR' });
  if (bytes === null) return null;
  try {
    const entry = JSON.parse(bytes.toString('utf8')) as JournalEntry;
    if (typeof entry.messageId === 'string' && Number.isSafeInteger(entry.attempt) && Array.isArray(entry.files)) return entry;
  } catch {
    // said below
  }
  throw new CooError('IO_ERROR', `the journaled receipt ${path} is not an entry this runner wrote: ${JOURNAL_REMEDY}`);
}
