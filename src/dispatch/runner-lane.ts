import * as fs from 'node:fs';
import { join } from 'node:path';
import { attemptBranchFor } from '../authority/rules/intents/dispatch.js';
import { attemptIdOf, revokedWord } from '../authority/runnable.js';
import { folderOf, isTerminal, retryApprovalsOf, type LedgerState, type MessageRecord } from '../authority/state.js';
import { judgedSpend, heldBackDetail, judgeWithHeld, spentOnMessageUsd } from '../lane/budget.js';
import { readLaneMessage } from '../lane/envelope.js';
import { contextBounds, contextOverBounds } from '../lane/pins.js';
import { loopbackAddress } from '../lane/endpoint.js';
import { toProblem, type LaneContext, type LaneReadiness, type LaneTarget, type LocalEndpoint, type Problem, type RunnerLane } from '../lane/runner-lane.js';
import { CooError, isCooError } from '../errors.js';
import { attemptArtifactPath, receiptPath } from '../ledger/layout.js';
import type { NewFile } from '../ledger/ledger.js';
import { LIMITS } from '../limits.js';
import { readDocument } from '../schema/documents.js';
import type { EaDispatchMessage } from '../schema/message.js';
import type { BlockerCode, EaReceipt, ReceiptStatus } from '../schema/receipt.js';
import { toYaml } from '../schema/strict-yaml.js';
import { readBounded } from '../util/bounded-read.js';
import { failpoint } from '../util/failpoint.js';
import { canonicalJson, sha256Ref } from '../util/hash.js';
import { holdsHeldSecret } from '../util/held-secrets.js';
import { Scrubber } from '../util/scrub.js';
import { recordedReceipt } from '../lane/recorded-receipt.js';
import { endRecordedGroup, parseProcessRecord, PROCESS_RECORD_BYTES } from '../util/process.js';
import { removeTree } from '../util/remove-tree.js';
import { isDiskFull } from '../util/disk-full.js';
import { endRecordedMark } from '../util/leftovers.js';
import { isoSeconds } from '../util/time.js';
import { branchHead, gatherEvidence, landAttemptCommit, type GatheredEvidence } from './evidence.js';
import { accountRun, type DispatchCost, type ExecutorFactory, type ExecutorRun, type ExecutorSpec } from './executor.js';
import { buildEaReceipt, changesArtifact, crashAllowanceUsd, fitsReceipt, preflightDispatch, executorPromptProblem, renderTask, withFilesInArtifact, type EaReceiptFacts } from './lane.js';
import { decideDispatch } from './outcome.js';
import type { PullRequestEvidence } from './pull-request-body.js';
import { parseRepoSlug, publishAttempt } from './pull-request.js';
import { createAttemptWorktree, removeAttemptWorktree, safeGit, writeSandboxConfig, type AttemptWorktree } from './worktree.js';
import { requireGitPlacesListed, type Repository } from '../util/bubblewrap.js';
import { CONSULT_TOOL_SERVER, openConsultBridge } from './consult-bridge.js';
import { answerConsultCall } from './consult-tool.js';
import { AttemptSpend } from './attempt-spend.js';
import { attemptConsults, consultsCostUsd, consultsTakeAtEndUsd } from '../authority/dispatch-consults.js';
import { matchesPattern } from '../authority/policy-check.js';
import { cliEntryPoint } from '../assets.js';
import type { AskedConsults } from '../lane/runner-lane.js';
import { writeOwnFile } from '../util/own-write.js';


/** What the dispatch lane needs besides what the runner lends every lane: how executors start, the forge, and the consult lane. */
export interface DispatchLaneOptions {
  readonly executors: ExecutorFactory;
  /** How a succeeded dispatch that asks for it (`open_pr`) becomes a pull request; absent, none is opened. */
  readonly pullRequests?: PullRequestConfig;
  /** How the consults an agent asks run (the runner lends the consult lane); absent, agents get no consult tool. */
  readonly consults?: AskedConsults;
  /** The command of the agent's consult tool (`coo consult-relay`); the built coo's by default. */
  readonly consultRelay?: readonly string[];
}

/** The built coo's consult relay, when there is a built coo to run. */
function defaultConsultRelay(): string[] | null {
  const entry = cliEntryPoint();
  return fs.existsSync(entry) ? [process.execPath, entry, 'consult-relay'] : null;
}

/** The runner's forge credentials and endpoints: the executor never sees them. */
export interface PullRequestConfig {
  readonly token: string;
  /** The branch pull requests ask to merge into. */
  readonly base: string;
  /** Where the branch is pushed; https://github.com/OWNER/REPO.git by default. */
  readonly pushUrl?: string;
  readonly apiBaseUrl?: string;
}

export type DispatchEvent =
  | { readonly type: 'executor_started'; readonly messageId: string; readonly attempt: number; readonly executor: string; readonly branch: string; readonly at: number }
  | { readonly type: 'executor_ended'; readonly messageId: string; readonly attempt: number; readonly exitCode: number | null; readonly killedBy: string | null; readonly elapsedMs: number }
  | { readonly type: 'verified'; readonly messageId: string; readonly attempt: number; readonly commands: number; readonly failed: number }
  | { readonly type: 'late_result'; readonly messageId: string; readonly attempt: number; readonly detail: string }
  | { readonly type: 'pull_request'; readonly messageId: string; readonly attempt: number; readonly url: string | null; readonly created: boolean; readonly detail: string }
  /** Something after the receipt that did not happen (the work's commit could not be put on its branch): the receipt stands. */
  | { readonly type: 'error'; readonly messageId: string; readonly code: string; readonly message: string };

/** The dispatch lane's start-up check: each execution agent's executor can be started, with its key. */
export function dispatchReadiness(executors: ExecutorFactory): LaneReadiness {
  // The target's executor as the checks see it: no attempt, so no price.
  const executorOf = (target: LaneTarget) => executors({ kind: target.executor!.kind, model: target.executor!.model, providerKeyEnv: target.providerKeyEnv, price: { inputPerMillion: 0, outputPerMillion: 0 } });
  return {
    problems(target: LaneTarget): Problem[] {
      try {
        executorOf(target).check();
        return [];
      } catch (error) {
        return [toProblem(error)];
      }
    },
    localEndpoints(target: LaneTarget): LocalEndpoint[] {
      const url = executorOf(target).endpoint?.() ?? null;
      const address = url === null ? null : loopbackAddress(url);
      return address === null ? [] : [{ url: url!, address }];
    },
  };
}

interface AttemptFolder {
  readonly root: string;
  readonly worktree: string;
  readonly scratch: string;
  readonly pidPath: string;
}

function attemptFolder(stateDir: string, attemptId: string): AttemptFolder {
  const root = join(stateDir, 'dispatch', attemptId);
  return { root, worktree: join(root, 'worktree'), scratch: join(root, 'scratch'), pidPath: join(root, 'executor.pid') };
}

/** What one attempt got to, as far as it got: each part is null until reached. */
interface AttemptOutcome {
  worktree: AttemptWorktree | null;
  /** Why the attempt could not be set up: no worktree (an existing branch, a base the repository lacks), or no configuration for its sandbox. */
  noWorktree: string | null;
  run: ExecutorRun | null;
  gathered: GatheredEvidence | null;
  /** An error of the runner's own inside the attempt. */
  error: { readonly code: string; readonly message: string } | null;
  /** What the executor said passes this (the key it was handed, the runner's folders) before anything reads it. */
  scrub: Scrubber | null;
  /** The operator stopped the runner (Runner.interrupt) before or while the executor ran: the attempt ends interrupted, nothing judged. */
  interrupted: string | null;
}

/** One line for a receipt: a coded error's message, or a system error's code and text. */
function describeError(error: unknown): string {
  if (isCooError(error)) return error.message;
  const code = (error as NodeJS.ErrnoException | null)?.code;
  const text = error instanceof Error ? error.message : String(error);
  return (code === undefined ? text : `${code}: ${text}`).split('\n')[0]!.slice(0, 1000);
}

/** The ledger keeps at most the artifact bound of a stream or an output; the receipt says when it was cut. */
function boundedArtifact(bytes: Buffer): { bytes: Buffer; cut: boolean } {
  return bytes.length > LIMITS.artifactBytes ? { bytes: bytes.subarray(0, LIMITS.artifactBytes), cut: true } : { bytes, cut: false };
}

/**
 * The runner's side of a dispatch: claim, a fresh worktree at the pinned base, the executor under
 * our own timer, then the COO's own evidence (changed files, verification, a signed commit on the
 * attempt's branch) and a COO-signed ea_receipt.v0 for every outcome.
 */
export class DispatchLane implements RunnerLane {
  constructor(
    private readonly ctx: LaneContext<DispatchEvent>,
    private readonly options: DispatchLaneOptions,
  ) {}

  /**
   * A receipt through the runner's one receipt path. A dispatch's follow-up (its branch, its pull
   * request) needs the receipt on the ledger: a journaled or late one stops the attempt here, and
   * the journal's publication does the rest (afterJournaledReceipt).
   */
  private async commitReceipt(files: NewFile[], summary: string, now: Date): Promise<void> {
    const outcome = await this.ctx.publishReceipt(files, summary, now);
    if (outcome === 'journaled') throw new CooError('REMOTE_UNREACHABLE', `${this.ctx.remoteUrl ?? 'the remote'} cannot be reached: the receipt is kept in the runner's journal and published when it can be`);
    if (outcome === 'late') throw new CooError('ATTEMPT_INVALID', 'the attempt was taken over by another runner: the result is kept as late, never applied');
  }

  private readEnvelope(record: MessageRecord): Promise<EaDispatchMessage> {
    return readLaneMessage(this.ctx.ledger, record, 'ea_dispatch', 'a dispatch');
  }

  private policyRef(state: LedgerState): string {
    return `${state.policy!.path}@${state.policy!.sha256}`;
  }

  /** A receipt with nothing run: the fields a run would fill are empty. */
  private emptyFacts(state: LedgerState, message: EaDispatchMessage, record: MessageRecord, attempt: number, now: Date): Omit<EaReceiptFacts, 'status' | 'blockers'> {
    return {
      now,
      message,
      record,
      attempt,
      policyRef: this.policyRef(state),
      executor: message.dispatch.executor,
      model: null,
      sessionId: null,
      commandsRun: [],
      innerExitCodes: [],
      files: [],
      testsRun: [],
      headSha: null,
      branch: null,
      usage: null,
      costUsd: 0,
      attachments: [],
      warnings: [],
    };
  }

  /** A pre-flight outcome: claim and receipt in one commit, nothing run or paid for. */
  private async stop(state: LedgerState, record: MessageRecord, message: EaDispatchMessage, attempt: number, now: Date, status: ReceiptStatus, blocker: BlockerCode, detail: string): Promise<boolean> {
    const receipt = buildEaReceipt({ ...this.emptyFacts(state, message, record, attempt, now), status, blockers: [{ code: blocker, detail }] });
    const landed = await this.ctx.claim(record, attempt, now, {
      file: { path: receiptPath(folderOf(record), attempt), bytes: recordedReceipt(receipt, this.ctx.scrubber).bytes },
      summary: `receipt ${message.message_id} attempt ${attempt}: ${status} (${blocker})`,
    });
    if (landed) this.ctx.onReceipt(message.message_id, attempt, status, [blocker], null);
    return landed;
  }

  /**
   * A dispatch that asks for a pull request (`open_pr`) needs the runner's forge token: without
   * one it is held as a missing executor is, before the claim (EXECUTOR_CONFIG keeps it queued,
   * unclaimed, and the runner says why once). A dispatch without `open_pr` runs as before.
   */
  private checkForge(message: EaDispatchMessage): void {
    if (message.open_pr !== true || this.options.pullRequests !== undefined) return;
    throw new CooError(
      'EXECUTOR_CONFIG',
      `${message.message_id} asks for a pull request on ${message.dispatch.repo} and this runner has no forge token: it stays queued, unclaimed; start the runner with the token in GITHUB_TOKEN, or in the variable --github-token-env names`,
    );
  }

  /**
   * A retry the CEO approved starts only while the approval holds: one that expired before any runner
   * claimed it is said (APPROVAL_INVALID) and nothing is claimed; the dispatch waits for the CEO to
   * approve that attempt again (rules/approval.ts allows it once the earlier approval has expired).
   */
  private checkRetryApproval(state: LedgerState, record: MessageRecord, attempt: number, now: Date): void {
    if (attempt === 1 || record.attempts[attempt - 2]?.receipt?.nextAttemptAt !== null) return;
    const approval = retryApprovalsOf(state.approvals.values(), record.id, attempt).at(-1);
    if (approval === undefined || now.getTime() < Date.parse(approval.expiresAt)) return;
    throw new CooError(
      'APPROVAL_INVALID',
      `${record.id}: the CEO's approval ${approval.id} of attempt ${attempt} expired at ${approval.expiresAt} before a runner claimed it, and nothing was claimed; the dispatch waits for the CEO to approve it again (coo approve ${record.id} --ceo-key CEO.key --reason ...)`,
    );
  }

  /** One new attempt. Returns false when another runner has it. */
  async attempt(state: LedgerState, record: MessageRecord): Promise<boolean> {
    const { ledger } = this.ctx;
    const attempt = record.attempts.length + 1;
    const now = this.ctx.clock();
    this.checkRetryApproval(state, record, attempt, now);
    const message = await this.readEnvelope(record);
    // What other open attempts may still spend counts as spent: the ledger knows their claims (lane/budget.ts).
    const shared = judgedSpend(state, message.correlation_id, isoSeconds(now).slice(0, 10), 0, record.id);
    const judge = (spent: { readonly spentOnCorrelationUsd: number; readonly spentTodayUsd: number }): ReturnType<typeof preflightDispatch> =>
      preflightDispatch({
        now,
        message,
        attempt,
        killSwitch: state.killSwitch?.doc ?? null,
        registry: state.registry!.doc,
        policy: state.policy!.doc,
        signerRevoked: revokedWord(state, record),
        spentOnMessageUsd: spentOnMessageUsd(record, attempt, (id) => state.messages.get(id)),
        spentOnCorrelationUsd: spent.spentOnCorrelationUsd,
        commandBudgetUsd: shared.commandBudgetUsd,
        spentTodayUsd: spent.spentTodayUsd,
      });
    const { decision, heldBack } = judgeWithHeld(shared, state, judge);
    if (decision.kind === 'stop' && heldBack) {
      this.ctx.onSkipped(record.id, heldBackDetail(attempt, decision.detail));
      return false;
    }
    const stopHere = (status: ReceiptStatus, blocker: BlockerCode, detail: string): Promise<boolean> => this.stop(state, record, message, attempt, now, status, blocker, detail);
    if (decision.kind === 'stop') return stopHere(decision.status, decision.blocker, decision.detail);
    const task = await ledger.readFile(message.payload_ref!);
    if (task === null || sha256Ref(task) !== message.payload_hash) return stopHere('failed', 'stale_context', `${message.payload_ref} does not hash to payload_hash`);
    const pins = await this.ctx.pins.check(message.dispatch.base_ref, message.context_pin?.files ?? []);
    if (!pins.ok) return stopHere('failed', 'stale_context', pins.detail);
    const overBounds = contextOverBounds(pins.files.map((file) => file.bytes.length), contextBounds(state.policy!.doc.limits));
    if (overBounds !== null) return stopHere('blocked', 'policy_denied', `${overBounds} (policy v${state.policy!.version}, in force now); nothing was run`);
    const price = { inputPerMillion: decision.price.input_usd_per_million, outputPerMillion: decision.price.output_usd_per_million };
    const executor = this.options.executors({ kind: decision.executor.kind, model: decision.executor.model, providerKeyEnv: decision.executor.provider_key_env, price });
    // A missing executor is the runner's configuration, not the dispatch's fault: it stays queued.
    executor.check();
    // So is a forge token for a dispatch that asks for a pull request: without one, the work would be paid for and never opened.
    this.checkForge(message);
    // The executor takes the task as one argument: a task over the bound is refused before anything is claimed or paid for.
    const relay = this.consultRelayFor(state, message);
    const prompt = renderTask(message, task.toString('utf8'), message.context_pin?.files.map((file) => file.path) ?? [], relay !== null);
    const promptProblem = executorPromptProblem(prompt);
    if (promptProblem !== null) return stopHere('failed', 'config_error', `${promptProblem}; nothing was run`);
    // Judged again on the state the claim is written on: what another runner spent meanwhile was not in this pre-flight.
    if (!(await this.ctx.claim(record, attempt, now, undefined, { ...shared, limitUsd: decision.maxCostUsd }))) return false;
    failpoint('after-claim');
    const attemptId = attemptIdOf(record, attempt);
    const folder = attemptFolder(this.ctx.stateDir, attemptId);
    const branch = attemptBranchFor(message.dispatch.branch_name, attempt);
    const out: AttemptOutcome = { worktree: null, noWorktree: null, run: null, gathered: null, error: null, scrub: null, interrupted: null };
    try {
      await this.runAttempt(out, { message, attempt, attemptId, folder, branch, executor, prompt, relay, timeoutSeconds: decision.timeoutSeconds, maxCostUsd: decision.maxCostUsd, actor: state.registry!.doc.active_coo });
    } catch (error) {
      // Whatever went wrong inside the attempt is the runner's: it ends in a failed receipt with what is known.
      out.error = { code: isCooError(error) ? error.code : 'INTERNAL', message: describeError(error) };
    }
    try {
      const finish = (): ReturnType<DispatchLane['finish']> => this.finish(state, record, message, attempt, out, decision.maxCostUsd, executor.isolated, decision.executor.model, price);
      const receipt = await finish().catch(async (error: unknown) => {
        if (!isDiskFull(error)) throw error;
        // The disk is full, and what the agent and its verification wrote (all of it in the attempt's folder) can have
        // filled it: the folder goes now, kept sandboxes or not, so that the attempt that was paid for is receipted.
        if (out.worktree !== null) await removeAttemptWorktree(out.worktree);
        removeTree(folder.root);
        return finish();
      });
      const commit = out.gathered?.commit ?? null;
      // The work's commit goes on the branch only now that a receipt names it.
      if (receipt !== null && commit !== null && receipt.doc.branch !== null && receipt.doc.head_sha === commit.headSha) {
        await this.land(message.message_id, { gitdir: out.worktree!.gitdir, branch: commit.branch, base: message.dispatch.base_ref }, commit.headSha, attemptId);
      }
      if (receipt !== null && receipt.doc.status === 'succeeded' && message.open_pr === true && out.worktree !== null) {
        const files = out.gathered?.snapshot.changes.map((change) => ({ path: change.path, status: change.status, sha256: change.sha256 }));
        await this.openPullRequest(message, attempt, out.worktree, receipt, files);
      }
    } finally {
      if (!this.ctx.keepAttemptFiles) {
        if (out.worktree !== null) await removeAttemptWorktree(out.worktree);
        removeTree(folder.root);
        await safeGit(['worktree', 'prune'], { cwd: this.ctx.repo }).catch(() => undefined);
      }
    }
    return true;
  }

  /** The attempt from the worktree to the evidence; fills `out` as it goes, so a failure part way keeps what is known. */
  private async runAttempt(
    out: AttemptOutcome,
    a: {
      readonly message: EaDispatchMessage;
      readonly attempt: number;
      readonly attemptId: string;
      readonly folder: AttemptFolder;
      readonly branch: string;
      readonly executor: ReturnType<ExecutorFactory>;
      readonly prompt: string;
      /** The agent's consult tool's command, when the attempt offers one. */
      readonly relay: readonly string[] | null;
      readonly timeoutSeconds: number;
      readonly maxCostUsd: number;
      readonly actor: string;
    },
  ): Promise<void> {
    const { message, attempt, folder, branch, executor } = a;
    removeTree(folder.root);
    fs.mkdirSync(folder.scratch, { recursive: true, mode: 0o700 });
    // What the sandboxes see of the target repository: its git folder alone, its configuration without its remotes' credentials.
    let repository: Repository;
    try {
      out.worktree = await createAttemptWorktree({ repo: this.ctx.repo, base: message.dispatch.base_ref, branch, path: folder.worktree });
    } catch (error) {
      if (!isCooError(error)) throw error;
      out.noWorktree = `no worktree for ${branch}: ${error.message}`;
      return;
    }
    const config = join(folder.root, 'repository-config');
    try {
      const { coreWorktree } = await writeSandboxConfig(out.worktree.gitdir, config);
      repository = { folder: this.ctx.repo, gitdir: out.worktree.gitdir, config, ...(coreWorktree === null ? {} : { coreWorktree }) };
    } catch (error) {
      if (!isCooError(error)) throw error;
      out.noWorktree = `the worktree for ${branch} was made, but not the copy of the repository's configuration its sandbox reads (${config}): ${error.message}`;
      return;
    }
    try {
      if (executor.isolated) requireGitPlacesListed(repository);
    } catch (error) {
      if (!isCooError(error)) throw error;
      out.noWorktree = `the worktree for ${branch} was made, but not its sandbox: ${error.message}`;
      return;
    }
    const stoppedFirst = this.ctx.stoppedBy();
    if (stoppedFirst !== null) {
      out.interrupted = `the runner was stopped (${stoppedFirst}) before ${executor.name} started; nothing ran`;
      return;
    }
    // The agent's consult tool: the runner listens; the executor starts the relay that reaches it.
    const consults = this.options.consults;
    const worktree = out.worktree.path;
    // The executor and the consults its agent asks spend one budget: each is held to what the other left.
    const spend = new AttemptSpend(a.maxCostUsd);
    // What the agent hears of a refusal is scrubbed of the runner's secrets and folders; what it asks is refused
    // for secrets only, no folders: a question naming a path is no leak, one holding a key is.
    const shown = this.ctx.scrubber.with(executor.handedSecrets());
    const secrets = new Scrubber(shown.secrets);
    const bridge = a.relay === null || consults === undefined ? null : await openConsultBridge((request) => answerConsultCall({ ctx: this.ctx, consults, dispatch: message, attempt, attemptId: a.attemptId, worktree, spend, secrets }, request), shown);
    this.ctx.onEvent({ type: 'executor_started', messageId: message.message_id, attempt, executor: executor.name, branch, at: Date.now() });
    let ran: ExecutorRun;
    try {
      const running = executor.run({
        attemptId: a.attemptId,
        worktree: out.worktree.path,
        scratch: folder.scratch,
        prompt: a.prompt,
        timeoutSeconds: a.timeoutSeconds,
        maxCostUsd: a.maxCostUsd,
        pidFile: folder.pidPath,
        repository,
        ...(bridge === null || a.relay === null ? {} : { spend, consultTool: { server: CONSULT_TOOL_SERVER, command: [...a.relay, '--socket', bridge.socket], socketDir: bridge.dir, timeoutSeconds: a.timeoutSeconds } }),
      });
      failpoint('during-executor');
      ran = await running;
    } finally {
      // A consult asked before the agent was gone still lands with its receipt: the dispatch's receipt lists it.
      await bridge?.close();
    }
    // What the executor said is scrubbed of the key it was handed and of the runner's paths before anything reads it.
    const scrub = this.ctx.scrubber.with(executor.handedSecrets(), [{ name: 'worktree', path: out.worktree.path }, { name: 'attempt', path: folder.root }]);
    out.scrub = scrub;
    const run = scrub.value(ran);
    out.run = run;
    this.ctx.onEvent({ type: 'executor_ended', messageId: message.message_id, attempt, exitCode: run.exitCode, killedBy: run.killedBy, elapsedMs: run.elapsedMs });
    const stoppedBy = this.ctx.stoppedBy();
    if (stoppedBy !== null && run.exitCode === null) {
      // Killed by the operator's stop: nothing is gathered or judged from a run cut short.
      out.interrupted = `the runner was stopped (${stoppedBy}) while ${executor.name} ran; it was ended after ${(run.elapsedMs / 1000).toFixed(1)} s`;
      return;
    }
    // The runner's own folder for its evidence, made now that the agent is gone, where the agent could not write: a fresh name beside its worktree.
    const runnerDir = fs.mkdtempSync(join(folder.root, 'runner-'));
    out.gathered = await gatherEvidence(out.worktree, {
      runnerDir,
      scope: message.dispatch.scope_paths,
      verify: message.dispatch.verification_commands,
      verifyTimeoutSeconds: a.timeoutSeconds,
      isolation: executor.isolated ? 'bwrap' : 'none',
      hide: this.ctx.hide,
      repository,
      commit: { key: this.ctx.key, actor: a.actor, attemptId: a.attemptId, summary: `${message.message_id} attempt ${attempt}: work of ${message.target_actor}`, now: this.ctx.clock() },
      // Removed with the attempt's folders after the receipt, off the receipt's path.
      keepCheckout: true,
      // A file of the work holding a secret (the agent's key, written as it likes) is not landed: the branch would carry it where the ledger does not.
      holdsSecret: (bytes) => holdsHeldSecret(secrets, bytes),
      stopped: () => this.ctx.stoppedBy() !== null,
    });
    const stoppedInVerification = this.ctx.stoppedBy();
    const verified = out.gathered.verification;
    const cutShort = verified.length < message.dispatch.verification_commands.length || verified.some((result) => result.exitCode === null && !result.killedByTimer);
    // A command that changed the checkout ended the verification itself: that is evidence, and it stands.
    const changed = (out.gathered.summary.commit?.dirty ?? out.gathered.summary.dirtyWithoutCommit ?? []).length > 0;
    if (stoppedInVerification !== null && cutShort && !changed) {
      // Killed or cut short by the stop: a verification that did not run to its end is no evidence of the work either way.
      out.interrupted = `the runner was stopped (${stoppedInVerification}) while the verification ran; ${verified.filter((result) => result.exitCode !== null).length} of ${message.dispatch.verification_commands.length} commands ran to their end, and the work was not judged`;
      return;
    }
    this.ctx.onEvent({ type: 'verified', messageId: message.message_id, attempt, commands: out.gathered.verification.length, failed: out.gathered.verification.filter((result) => result.exitCode !== 0).length });
  }

  /**
   * The command of the agent's consult tool, when its attempt offers one: the agent may consult at
   * all (the policy in force has an edge from it carrying consults), and the runner has the consult
   * lane and a relay to start. Null: the agent gets no tool.
   */
  private consultRelayFor(state: LedgerState, message: EaDispatchMessage): readonly string[] | null {
    if (this.options.consults === undefined) return null;
    const policy = state.policy?.doc;
    if (policy?.edges.some((edge) => matchesPattern(edge.from, message.target_actor) && edge.intents.includes('aa_consult')) !== true) return null;
    return this.options.consultRelay ?? defaultConsultRelay();
  }

  /**
   * A receipt that waited in the runner's journal (the remote was away) and is now published: the
   * work's commit goes on the attempt's branch now that a receipt names it, and a succeeded
   * dispatch that asks for one gets its pull request, from the receipt's own evidence.
   */
  async afterJournaledReceipt(record: MessageRecord, attempt: number, receiptFile: NewFile): Promise<void> {
    const messageId = record.id;
    const message = await this.readEnvelope(record);
    const doc = readDocument('ea_receipt.v0', receiptFile.bytes, receiptFile.path) as EaReceipt;
    if (doc.branch === null || doc.head_sha === null) return;
    const common = (await safeGit(['rev-parse', '--path-format=absolute', '--git-common-dir'], { cwd: this.ctx.repo })).toString('utf8').trim();
    const attemptBranch = { gitdir: common, branch: doc.branch, base: doc.base_sha };
    if (doc.head_sha !== doc.base_sha) await this.land(messageId, attemptBranch, doc.head_sha, doc.attempt_id);
    if (doc.status !== 'succeeded' || message.open_pr !== true) return;
    await this.openPullRequest(message, attempt, attemptBranch, { doc, path: receiptFile.path, sha256: sha256Ref(receiptFile.bytes) }, doc.file_hashes);
  }

  /**
   * Puts the work's commit on its branch once a receipt names it (a compare-and-swap from the base;
   * already there is done). A branch someone moved meanwhile is left as it is and said as an event:
   * the receipt stands, and names the commit.
   */
  private async land(messageId: string, attemptBranch: { readonly gitdir: string; readonly branch: string; readonly base: string }, head: string, attemptId: string): Promise<void> {
    try {
      if ((await branchHead(attemptBranch)) === head) return;
      await landAttemptCommit(attemptBranch, head, attemptId);
    } catch (error) {
      if (!isCooError(error)) throw error;
      this.ctx.onEvent({ type: 'error', messageId, code: error.code, message: `the receipt names ${head} on ${attemptBranch.branch}, but the branch was not moved there: ${error.message}` });
    }
  }

  /**
   * Pushes a succeeded attempt's branch with the runner's credentials and opens one pull request
   * whose body is the receipt's evidence. The receipt stands whatever happens here: a failure is
   * reported, and publishing again later finds what this did.
   */
  private async openPullRequest(
    message: EaDispatchMessage,
    attempt: number,
    worktree: Pick<AttemptWorktree, 'gitdir' | 'branch'>,
    receipt: { readonly doc: EaReceipt; readonly path: string; readonly sha256: string },
    files: PullRequestEvidence['files'],
  ): Promise<void> {
    const config = this.options.pullRequests;
    const event = (url: string | null, created: boolean, detail: string): void => this.ctx.onEvent({ type: 'pull_request', messageId: message.message_id, attempt, url, created, detail });
    if (config === undefined) {
      event(null, false, 'the runner has no forge token (coo watch --github-token-env): no pull request opened');
      return;
    }
    try {
      const github = parseRepoSlug(message.dispatch.repo);
      const opened = await publishAttempt({
        github,
        evidence: {
          receipt: receipt.doc,
          receiptPath: receipt.path,
          receiptSha256: receipt.sha256,
          branch: worktree.branch,
          baseSha: message.dispatch.base_ref,
          ...(files === undefined ? {} : { files }),
          cost: { usd: receipt.doc.actual_cost_usd, reported: receipt.doc.usage !== null },
          ...(message.dispatch.issue_number === null ? {} : { issueNumber: message.dispatch.issue_number }),
          acceptance: message.dispatch.acceptance_criteria,
          signer: this.ctx.key.publicKey.keyId,
        },
        gitdir: worktree.gitdir,
        base: config.base,
        token: config.token,
        ...(config.pushUrl === undefined ? {} : { pushUrl: config.pushUrl }),
        ...(config.apiBaseUrl === undefined ? {} : { apiBaseUrl: config.apiBaseUrl }),
      });
      event(opened.url, opened.created, opened.created ? `opened pull request #${opened.number}` : `pull request #${opened.number} was already open for this attempt`);
    } catch (error) {
      if (!isCooError(error)) throw error;
      event(null, false, `${error.code}: ${error.message}`);
    }
  }

  /**
   * Decides the attempt from the COO's own evidence and commits the receipt with the stream,
   * verification output and any list too long for the receipt as hashed artifacts; null when the
   * result was late. An attempt whose executor never ran (no worktree, a runner error) gets a
   * receipt too: every claimed attempt ends in one.
   */
  private async finish(
    claimState: LedgerState,
    record: MessageRecord,
    message: EaDispatchMessage,
    attempt: number,
    out: AttemptOutcome,
    maxCostUsd: number,
    isolated: boolean,
    model: string,
    price: ExecutorSpec['price'],
  ): Promise<{ readonly doc: EaReceipt; readonly path: string; readonly sha256: string } | null> {
    const now = this.ctx.clock();
    const scrub = out.scrub ?? this.ctx.scrubber;
    const path = receiptPath(folderOf(record), attempt);
    const commitReceipt = async (built: EaReceipt, files: NewFile[]): Promise<{ doc: EaReceipt; path: string; sha256: string }> => {
      const { doc, bytes } = recordedReceipt(await this.withConsults(built, record.id, attempt), scrub);
      files.push({ path, bytes });
      const codes = doc.blockers.map((blocker) => blocker.code);
      await this.commitReceipt(files, `receipt ${message.message_id} attempt ${attempt}: ${doc.status}${codes.length === 0 ? '' : ` (${[...new Set(codes)].join(', ')})`}`, now);
      this.ctx.onReceipt(message.message_id, attempt, doc.status, codes, null);
      return { doc, path, sha256: sha256Ref(bytes) };
    };
    const run = out.run;
    if (out.interrupted !== null) {
      // A run the operator's stop cut short still spent what it spent: its cost is charged as any run's.
      const spent = run === null ? null : await this.charge(record, attempt, run, maxCostUsd, price);
      const ran = run === null || spent === null ? {} : { model, sessionId: run.facts.sessionId, usage: spent.charged.usage, costUsd: spent.charged.costUsd, warnings: spent.charged.warning === null ? [] : [spent.charged.warning] };
      return commitReceipt(buildEaReceipt({ ...this.emptyFacts(claimState, message, record, attempt, now), ...ran, status: 'failed', blockers: [{ code: 'interrupted', detail: out.interrupted }] }), []);
    }
    if (run === null) {
      const blocker = out.noWorktree !== null ? { code: 'config_error' as const, detail: out.noWorktree } : { code: 'runner_error' as const, detail: `${out.error?.code ?? 'INTERNAL'}: ${out.error?.message ?? 'the attempt ended before its executor ran'}` };
      return commitReceipt(buildEaReceipt({ ...this.emptyFacts(claimState, message, record, attempt, now), status: 'failed', blockers: [blocker] }), []);
    }
    const { latest, allowanceUsd, charged } = await this.charge(record, attempt, run, maxCostUsd, price);
    const attemptId = attemptIdOf(record, attempt);
    const gathered = out.gathered;
    const costUsd = charged.costUsd;
    const decision = decideDispatch({
      expected: { executor: message.dispatch.executor, attemptId },
      attemptTerminal: latest.attempts[attempt - 1]?.receipt != null || isTerminal(latest),
      run,
      evidence: gathered?.summary ?? null,
      costUsd,
      maxCostUsd: allowanceUsd,
      baseSha: message.dispatch.base_ref,
      runnerError: out.error,
    });
    if (decision.kind === 'late') {
      // Another runner closed the attempt (it took it over): the result is kept beside the runner, never applied.
      writeOwnFile(join(this.ctx.stateDir, 'late-results', `${attemptId}.jsonl`), run.stream, { what: 'the late result', remedy: "the runner's state folder holds only what the runner writes: move what is at that name out of it", code: 'IO_ERROR' });
      this.ctx.onEvent({ type: 'late_result', messageId: message.message_id, attempt, detail: decision.detail });
      return null;
    }
    const files: NewFile[] = [];
    const attachments: Array<{ path: string; sha256: string }> = [];
    const warnings: string[] = charged.warning === null ? [] : [charged.warning];
    // `cut`: the bytes are already a part of what was said (a stream, an output or a tail the runner bounded as it read).
    const add = (name: string, bytes: Buffer, cut = false): { path: string; sha256: string } => {
      const bounded = boundedArtifact(scrub.bytes(bytes));
      if ((cut || bounded.cut) && !warnings.includes('artifact_truncated')) warnings.push('artifact_truncated');
      const artifact = { path: attemptArtifactPath(folderOf(record), attempt, name), sha256: sha256Ref(bounded.bytes) };
      files.push({ path: artifact.path, bytes: bounded.bytes });
      attachments.push(artifact);
      return artifact;
    };
    add(`${run.executor === 'codex' ? 'codex' : 'claude'}-events.jsonl`, run.stream, run.streamOverflow);
    if (run.stderrTail !== '') add('executor-stderr.txt', Buffer.from(run.stderrTail, 'utf8'), run.stderrCut === true);
    if (run.facts.finalMessage !== null) add('final-message.md', Buffer.from(run.facts.finalMessage, 'utf8'));
    gathered?.verification.forEach((result, index) => add(`verify-${String(index + 1).padStart(2, '0')}.log`, result.output, result.outputOverflow));
    if (decision.kind === 'receipt' && decision.commandsOmitted > 0) {
      add('commands.json', Buffer.from(`${JSON.stringify(run.facts.commands, null, 1)}\n`));
      warnings.push('commands_in_artifact');
    }
    const snapshot = gathered?.snapshot ?? null;
    // The whole list of what the agent left, where the receipt's own list is not the whole.
    const listed = snapshot !== null && (snapshot.refused.length > 0 || snapshot.overflow) ? add('changes.json', changesArtifact(snapshot)) : null;
    if (!isolated) warnings.push('sandbox_unenforced');
    const landing = gathered?.summary.commit ?? null;
    const facts = {
      ...this.baseFacts(claimState, message, latest, attempt, now, run, charged, attachments, warnings, model),
      files: (snapshot?.changes ?? []).map((change) => ({ path: change.path, sha256: change.sha256 })),
      branch: gathered?.commit != null && landing?.branchAtBase === true ? gathered.commit.branch : null,
    };
    let doc =
      decision.kind === 'foreign'
        ? buildEaReceipt({ ...facts, status: 'failed', blockers: [{ code: 'attempt_mismatch', detail: decision.detail }], commandsRun: [], innerExitCodes: [], testsRun: [], branch: null })
        : buildEaReceipt({ ...facts, status: decision.status, blockers: decision.blockers, commandsRun: decision.commandsRun, innerExitCodes: decision.innerExitCodes, testsRun: decision.testsRun, headSha: decision.headSha });
    // The work's names (files, those outside the scope) can carry a secret the agent was handed, as its
    // output can; the receipt is signed for good, so it holds the marker in its place, and work named so
    // is not landed: the branch would carry the name where the ledger does not.
    const scrubbed = new Scrubber(scrub.secrets).value(doc);
    const secretNamed = canonicalJson(scrubbed) !== canonicalJson(doc);
    if (secretNamed) {
      const unwritten = (snapshot?.namingSecrets ?? []).length > 0 ? ', nor written to the repository, committed or verified' : '';
      const detail = `a name of the work holds a secret the runner holds or handed the agent (a provider key, a token, the COO key): the receipt names it by its marker, and nothing was put on the branch${unwritten}`;
      doc = { ...scrubbed, status: 'failed', branch: null, blockers: [...scrubbed.blockers, { code: 'scope_violation', detail }] };
    }
    // A name that spells a folder of the runner's machine (`src/@/home/op/a.js`) is recorded by that folder's marker
    // (recordedReceipt), as every path the receipt holds is: the receipt would name and hash a file the commit does
    // not hold, two names could be one. Such work is not landed either, and the receipt says why.
    const spelled = secretNamed ? [] : (snapshot?.changes ?? []).map((change) => change.path).filter((path) => scrub.text(path) !== path);
    if (spelled.length > 0) {
      const detail = `a name of the work spells a folder of the runner's machine (${spelled.slice(0, 10).join(', ')}${spelled.length > 10 ? ` and ${spelled.length - 10} more` : ''}), which the receipt records by its marker, so it would not name the file the commit holds: nothing was put on the branch, and the receipt names no commit; rename the work`;
      // Nor does it name the commit: a receipt (and a statement coo attest makes of it) says each file it names with its hash is at that commit.
      doc = { ...doc, status: 'failed', branch: null, head_sha: null, blockers: [...doc.blockers, { code: 'scope_violation', detail }] };
    }
    const holding = snapshot?.holdingSecrets ?? [];
    if (holding.length > 0) {
      const named = holding.slice(0, 10).map((path) => new Scrubber(scrub.secrets).text(path)).join(', ');
      const detail = `the work writes a secret the runner holds or handed the agent (a provider key, a token, the COO key) into ${named}${holding.length > 10 ? ` and ${holding.length - 10} more` : ''}: nothing of the work was written to the repository, committed or verified, where the branch and every later agent's sandbox would carry it where the ledger does not; remove the secret from the work`;
      doc = { ...doc, status: 'failed', branch: null, blockers: [...doc.blockers, { code: 'scope_violation', detail }] };
    }
    if (!fitsReceipt(doc) && snapshot !== null) {
      const artifact = listed ?? add('changes.json', changesArtifact(snapshot));
      doc = withFilesInArtifact({ ...doc, attachments: [...attachments], warnings: [...warnings] }, artifact);
    }
    try {
      readDocument('ea_receipt.v0', Buffer.from(toYaml(doc)), path);
    } catch (error) {
      if (!isCooError(error)) throw error;
      // Still no fit (a list the lane did not foresee): the attempt ends failed with what is surely known, its cost and its artifacts.
      doc = buildEaReceipt({
        ...this.baseFacts(claimState, message, latest, attempt, now, run, charged, attachments, warnings, model),
        status: 'failed',
        blockers: [{ code: 'runner_error', detail: `${error.code}: the receipt did not fit the ledger (${error.message}); the stream and outputs are attached` }],
      });
    }
    return commitReceipt(doc, files);
  }

  /**
   * What a run is charged (accountRun), with what it was allowed: the dispatch's budget less what
   * the agent's consults cost, which came out of the same budget. At the price its pre-flight judged
   * it by and its live limit stopped it at (as a consult is charged at its plan's price): a policy
   * the CEO changed while it ran (a lower price, the model dropped) does not make it cheaper.
   */
  private async charge(record: MessageRecord, attempt: number, run: ExecutorRun, maxCostUsd: number, price: ExecutorSpec['price']): Promise<{ latest: MessageRecord; allowanceUsd: number; charged: DispatchCost }> {
    const state = await this.ctx.ledger.state();
    const latest = state.messages.get(record.id) ?? record;
    const consultsUsd = consultsCostUsd(latest, attempt, (id) => state.messages.get(id));
    const allowanceUsd = Math.max(0, maxCostUsd - consultsUsd);
    return { latest, allowanceUsd, charged: accountRun(run, price, allowanceUsd) };
  }

  /**
   * What an attempt whose runner died was allowed to spend: the tightest of what its message,
   * correlation and claim's day had left, as its pre-flight found them (dispatch/lane.ts), less its consults.
   */
  private allowanceAfterCrash(state: LedgerState, record: MessageRecord, message: EaDispatchMessage, attempt: number): number {
    // A consult of the attempt whose claim is open is recovered too, and charged what it was let spend: not twice.
    const consultsUsd = consultsTakeAtEndUsd(record, attempt, (id) => state.messages.get(id));
    return crashAllowanceUsd({ state, record, message, attempt, consultsUsd, today: isoSeconds(this.ctx.clock()).slice(0, 10) });
  }

  /** A receipt with the consults its attempt's agent asked, each with its receipt, as the ledger has them now. */
  private async withConsults(doc: EaReceipt, messageId: string, attempt: number): Promise<EaReceipt> {
    const state = await this.ctx.ledger.state();
    const record = state.messages.get(messageId);
    const consults = record === undefined ? [] : attemptConsults(record, attempt, (id) => state.messages.get(id));
    return consults.length === 0 ? doc : { ...doc, consults };
  }

  private baseFacts(
    state: LedgerState,
    message: EaDispatchMessage,
    record: MessageRecord,
    attempt: number,
    now: Date,
    run: ExecutorRun,
    charged: DispatchCost,
    attachments: ReadonlyArray<{ path: string; sha256: string }>,
    warnings: readonly string[],
    model: string,
  ): Omit<EaReceiptFacts, 'status' | 'blockers'> {
    return {
      ...this.emptyFacts(state, message, record, attempt, now),
      executor: run.executor,
      model,
      sessionId: run.facts.sessionId,
      usage: charged.usage,
      costUsd: charged.costUsd,
      attachments,
      warnings,
    };
  }

  /**
   * An attempt claimed but never receipted whose runner is gone: whatever it started is ended, and
   * the attempt is recorded as interrupted. A dispatch is not harvested (its evidence was never
   * gathered by a live runner) and does not retry on its own: the next attempt needs the CEO. An
   * attempt whose files this state folder does not hold (`takenOver`: another runner's, or its folder
   * removed with its runner) is charged as one whose executor started: what it spent is not known here.
   * One of this folder's own with no folder (its runner died before it made one) started nothing.
   */
  async recover(state: LedgerState, record: MessageRecord, takenOver = false): Promise<boolean> {
    const last = record.attempts[record.attempts.length - 1]!;
    const message = await this.readEnvelope(record);
    const folder = attemptFolder(this.ctx.stateDir, last.attemptId);
    // The executor's pid with its start time: its group is ended only if that pid is still the executor.
    const pidFile = readBounded(folder.pidPath, { maxBytes: PROCESS_RECORD_BYTES });
    const started = pidFile.kind === 'file' ? parseProcessRecord(pidFile.bytes.toString('utf8')) : null;
    if (started !== null && endRecordedGroup(started) !== 'reused' && started.mark !== undefined) endRecordedMark(started.mark, started.start);
    const now = this.ctx.clock();
    // The executor started (its pid was recorded, or another runner's may have) and its stream died with its runner: what it spent is not known, so it is charged what it was allowed.
    // So is one whose files this state folder does not hold: taken over, or its folder removed after its runner died.
    const unseen = takenOver && !fs.existsSync(folder.root);
    // A claim that does not state its allowance leaves it to be bounded from the ledger as it stood at the claim (crashAllowanceUsd): the receipt says so.
    const unstated = last.claim?.allowanceUsd === undefined ? ['allowance_unstated'] : [];
    const unknownSpend = pidFile.kind === 'file' || unseen ? { costUsd: this.allowanceAfterCrash(state, record, message, last.number), warnings: ['usage_unreported', ...unstated] } : {};
    const receipt = buildEaReceipt({
      ...this.emptyFacts(state, message, record, last.number, now),
      ...unknownSpend,
      status: 'failed',
      blockers: [{ code: 'interrupted', detail: `the runner ${last.claim?.runner ?? '(unknown)'} stopped before attempt ${last.number} finished; its work was not taken as evidence${unseen ? '; this state folder holds none of its files (its lease ran out, or its folder was removed with its runner) and what its executor spent is not known here, so the attempt is charged what it was allowed' : ''}` }],
    });
    const listed = await this.withConsults(receipt, record.id, last.number);
    await this.commitReceipt([{ path: receiptPath(folderOf(record), last.number), bytes: recordedReceipt(listed, this.ctx.scrubber).bytes }], `receipt ${message.message_id} attempt ${last.number}: failed (interrupted)`, now);
    this.ctx.onReceipt(message.message_id, last.number, 'failed', ['interrupted'], null);
    removeTree(folder.root);
    await safeGit(['worktree', 'prune'], { cwd: this.ctx.repo }).catch(() => undefined);
    return true;
  }
}
