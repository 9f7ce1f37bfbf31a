import { randomBytes } from 'node:crypto';
import { readBounded, type BoundedRead } from '../util/bounded-read.js';
import { LIMITS } from '../limits.js';
import { nextWork, revokedWord } from '../authority/runnable.js';
import { folderOf, isTerminal, type AttemptRecord, type LedgerState, type MessageRecord } from '../authority/state.js';
import { claimAllowanceUsd, correlationCapUsd, type ModelPrice, judgedSpend, priceOf, heldBackDetail, judgeWithHeld, outputCapForUsd, spentOnMessageUsd, type JudgedSpend } from '../lane/budget.js';
import { contextBounds, contextOverBounds, type PinnedFile } from '../lane/pins.js';
import { checkContextPin } from '../lane/context-pin.js';
import { readMessage } from '../lane/envelope.js';
import { toProblem, type LaneContext, type LaneReadiness, type LaneTarget, type LocalEndpoint, type Problem, type RunnerLane } from '../lane/runner-lane.js';
import { attemptArtifactPath, receiptPath, trustPath } from '../ledger/layout.js';
import type { NewFile } from '../ledger/ledger.js';
import { CooError } from '../errors.js';
import { readDocument } from '../schema/documents.js';
import type { AdvisoryMessage } from '../schema/message.js';
import { modelPrice } from '../schema/policy.js';
import { oracleModelName } from '../schema/common.js';
import type { BlockerCode, ReceiptStatus } from '../schema/receipt.js';
import { failpoint } from '../util/failpoint.js';
import { requireGitPlacesListed } from '../util/bubblewrap.js';
import { sha256Ref } from '../util/hash.js';
import { attemptIdFor, sessionSlugFor } from '../util/ids.js';
import { bootId, endRecordedGroup, machineMonotonic, parseProcessRecord, PROCESS_RECORD_BYTES, processStartTime, recordedElsewhere, type ProcessRecord } from '../util/process.js';
import type { Scrubber, Secret } from '../util/scrub.js';
import { heldSecretWords, sentSecretIn, sentSecrets } from '../util/held-secrets.js';
import type { ActorRegistry } from '../schema/registry.js';
import { recordedReceipt } from '../lane/recorded-receipt.js';
import { isoSeconds } from '../util/time.js';
import { judgeAnswer } from './answer.js';
import { oraclePathProblem } from '../lane/oracle-inputs.js';
import { storedProposalBytes } from './proposal-artifact.js';
import type { Proposal } from '../schema/aa-answer.js';
import { estimateInputTokens } from './input-tokens.js';
import { nextAttemptAt, planPanel, preflight, type Preflight } from './lane.js';
import { harvestRun, readSession, type AaTransport, type OracleCli } from './oracle.js';
import { judgeRun, type OracleRun, type OracleSessionMeta } from './outcome.js';
import { renderConsultPrompt, suspiciousLines, type ChallengedAnswer } from './prompt.js';
import { buildReceipt, type ReceiptArtifact, type ReceiptFacts } from './receipt.js';
import { classifyFor, uncountedOutputCap } from './providers/routes.js';
import type { OracleRouteName, RoutePlan } from './providers/provider.js';
import { attemptFolderMade, createSandbox, oracleTimeLeftMs, readAttemptFile, removeSandbox, sandboxFor, type AttemptRecordFile, type AttemptRoute, type Sandbox } from './sandbox.js';
import { askerGone } from '../authority/dispatch-consults.js';
import { answeredModels } from '../authority/rules/panel.js';
import { claimedModel, claimedRouteOf } from '../authority/rules/claim.js';

export type ConsultEvent =
  | { readonly type: 'oracle_started'; readonly messageId: string; readonly attempt: number; readonly at: number }
  /** Oracle's process is gone; the answer is judged and the receipt committed after this. */
  | {
      readonly type: 'oracle_ended';
      readonly messageId: string;
      readonly attempt: number;
      readonly at: number;
      readonly elapsedMs: number;
      readonly exitCode: number | null;
      readonly signal: string | null;
      readonly killedByTimer: boolean;
    }
  /** The Oracle a runner that stopped (SIGKILL, a crash) left running: waited for, up to its runtime budget, before the attempt is recovered. */
  | { readonly type: 'oracle_orphan'; readonly messageId: string; readonly attempt: number; readonly pid: number; readonly runner: string; readonly until: string };

/** The consult lane's start-up check: Oracle can be started, and each advisory agent's route is configured here and its provider key is there. */
export function consultReadiness(transport: OracleCli): LaneReadiness {
  const oracleProblem = transport.commandProblem();
  return {
    problems(target: LaneTarget): Problem[] {
      const problems: Problem[] = [];
      if (oracleProblem !== null) problems.push({ code: 'ORACLE_CONFIG', message: `Oracle cannot be started: ${oracleProblem}` });
      if (target.transport === undefined) return problems;
      try {
        transport.plan(target.transport);
      } catch (error) {
        problems.push(toProblem(error));
      }
      return problems;
    },
    localEndpoints(target: LaneTarget): LocalEndpoint[] {
      if (target.transport === undefined) return [];
      const plan = transport.plan(target.transport);
      const address = transport.loopbackOf(plan);
      return address === null || plan.endpoint === null ? [] : [{ url: plan.endpoint, address }];
    },
  };
}

/** A consult attempt as decided before any claim. */
type Prepared =
  | { readonly kind: 'stop'; readonly record: MessageRecord; readonly message: AdvisoryMessage; readonly attempt: number; readonly status: ReceiptStatus; readonly blocker: BlockerCode; readonly detail: string }
  /** Its pre-flight stops it only for what other open attempts may still spend: unclaimed, judged again next pass. */
  | { readonly kind: 'wait'; readonly record: MessageRecord; readonly message: AdvisoryMessage; readonly attempt: number; readonly detail: string }
  /** Its lane cannot run it here (a key, an endpoint, Oracle): it stays queued, said by the runner. */
  | { readonly kind: 'unroutable'; readonly record: MessageRecord; readonly message: AdvisoryMessage; readonly attempt: number; readonly error: unknown }
  | {
      readonly kind: 'run';
      readonly record: MessageRecord;
      readonly message: AdvisoryMessage;
      readonly attempt: number;
      readonly decision: Extract<Preflight, { kind: 'run' }>;
      /** What the pre-flight judged the shared budgets on, with what other open attempts may still spend. */
      readonly shared: JudgedSpend;
      readonly route: RoutePlan;
      /** The prompt bundle Oracle is handed, whose size the pre-flight estimate was made from, and the canary it holds. */
      readonly bundle: string;
      readonly canary: string;
      readonly files: readonly PinnedFile[];
    };

/**
 * The runner's side of a consult: pre-flight, pins, claim, one Oracle call in the attempt's
 * sandbox, then the answer judged and a COO-signed aa_receipt.v0 for every outcome. A crashed
 * attempt's completed session is harvested, never bought again.
 */
export class ConsultLane implements RunnerLane {
  /** sentSecrets' scrubber, and the values it was built of. */
  private sent: { readonly fingerprint: string; readonly scrubber: Scrubber } | null = null;

  constructor(
    private readonly ctx: LaneContext<ConsultEvent>,
    private readonly transport: AaTransport,
  ) {}

  private async readEnvelope(record: MessageRecord): Promise<AdvisoryMessage> {
    const message = await readMessage(this.ctx.ledger, record);
    if (message.intent !== 'aa_consult' && message.intent !== 'cross_check') throw new CooError('INTERNAL', `${record.id} is not a question to an advisory agent`);
    return message;
  }

  /**
   * One new attempt: pre-flight, pins, claim, transport, receipt. A panel member's siblings ready
   * for a new attempt start with it: the panel is paid for whole or not at all (planPanel). A member
   * the ledger stops stops every member, unpaid; a member this runner cannot run leaves every member
   * unclaimed, for a runner that can run them all. Each member is claimed before it is paid, and
   * their Oracles run at the same time, each receipted as it ends. Returns false when another
   * runner has the attempt, or when it waits.
   */
  async attempt(state: LedgerState, record: MessageRecord): Promise<boolean> {
    const now = this.ctx.clock();
    const group = this.startingWith(state, record, now);
    const prepared: Prepared[] = [];
    for (const member of group) prepared.push(await this.prepare(state, member, now));
    if (prepared.length > 1) {
      const policy = state.policy!.doc;
      const shared = judgedSpend(state, prepared[0]!.message.correlation_id, isoSeconds(now).slice(0, 10), 0, record.id);
      const members = prepared.map((item) => ({ actor: item.message.target_actor, decision: item.kind === 'run' ? item.decision : item.kind === 'stop' ? ({ kind: 'stop', status: item.status, blocker: item.blocker, detail: item.detail } as const) : item.kind === 'wait' ? { kind: 'wait' as const, detail: item.detail } : { kind: 'unreachable' as const, detail: unreachableDetail(item.error) } }));
      const judgePanel = (spent: { readonly spentOnCorrelationUsd: number; readonly spentTodayUsd: number }) => {
        const plan = planPanel({
          members,
          correlationRemainingUsd: Math.max(0, correlationCapUsd(policy.budgets, shared.commandBudgetUsd) - spent.spentOnCorrelationUsd),
          dailyRemainingUsd: Math.max(0, policy.budgets.daily_cost_cap_usd - spent.spentTodayUsd),
        });
        return { kind: plan?.kind ?? 'run', plan };
      };
      // Members that together fit what was spent, and not what other open attempts may still spend beside it, wait for those, unclaimed.
      const { decision, heldBack } = judgeWithHeld(shared, state, judgePanel);
      const panel = decision.plan?.kind === 'stop' && heldBack ? { kind: 'wait' as const, detail: heldBackDetail(record.attempts.length + 1, decision.plan.detail) } : decision.plan;
      if (panel?.kind === 'wait') {
        for (const item of prepared) this.ctx.onSkipped(item.record.id, panel.detail);
        return false;
      }
      if (panel?.kind === 'stop') {
        for (const [index, item] of prepared.entries()) if (item.kind !== 'stop') prepared[index] = { kind: 'stop', record: item.record, message: item.message, attempt: item.attempt, status: panel.status, blocker: panel.blocker, detail: panel.detail };
      }
    }
    const mine = prepared.find((item) => item.record.id === record.id)!;
    if (mine.kind === 'wait') {
      this.ctx.onSkipped(mine.record.id, mine.detail);
      return false;
    }
    let wrote = false;
    const stops = prepared.flatMap((item) => (item.kind === 'stop' ? [item] : []));
    if (stops.length > 1) {
      // A panel stopped before anything runs is receipted in one commit: a runner stopped between two of its receipts would leave a member queued, to be paid alone.
      const receipts = stops.map((item) => ({ item, ...this.stopReceipt(state, item.record, item.message, item.attempt, now, item.status, item.blocker, item.detail) }));
      const ids = await this.ctx.claimTogether(receipts.map(({ item, file }) => ({ record: item.record, attempt: item.attempt, receipt: file })), now, `receipts ${receipts.map(({ item }) => `${item.message.message_id} attempt ${item.attempt}`).join(', ')}: ${stops[0]!.status} (${stops[0]!.blocker})`);
      for (const { item, retryAt } of receipts) if (ids.has(item.record.id)) this.ctx.onReceipt(item.message.message_id, item.attempt, item.status, [item.blocker], retryAt);
      wrote = ids.size > 0;
    } else {
      for (const item of stops) wrote = (await this.stop(state, item.record, item.message, item.attempt, now, item.status, item.blocker, item.detail)) || wrote;
    }
    // The claim lets the attempt spend its worst case (its output cap is set from it): what it holds until its receipt lands.
    // It is judged again on the state it is written on (what another runner spent meanwhile was not in this pre-flight, a model the registry gives its target since, or a price);
    // a panel's members are claimed in one commit, judged together, so that none is paid unless all may be.
    const runs = prepared.flatMap((item) => (item.kind === 'run' ? [item] : []));
    const ids = runs.length === 0 ? new Set<string>() : await this.ctx.claimTogether(runs.map((item) => ({ record: item.record, attempt: item.attempt, judged: { ...item.shared, limitUsd: item.decision.worstCaseUsd }, call: { model: item.decision.model, price: item.decision.price, route: claimedRouteOf(state.registry?.doc ?? null, item.record.target) } })), now);
    const claimed = runs.filter((item) => ids.has(item.record.id));
    if (claimed.length > 0) failpoint('after-claim');
    const ran = await Promise.allSettled(claimed.map((item) => this.run(item, now)));
    const failed = ran.find((result): result is PromiseRejectedResult => result.status === 'rejected');
    if (failed !== undefined) throw failed.reason;
    // A missing provider key or an unconfigured route is the runner's configuration, not the consult's fault: it stays queued.
    if (mine.kind === 'unroutable') throw mine.error;
    return wrote || claimed.length > 0;
  }

  /**
   * The messages that start with `record`: itself, and when it is a panel member, every other member
   * ready for a new attempt now (those whose retry still waits on this runner's clock wait on).
   */
  private startingWith(state: LedgerState, record: MessageRecord, now: Date): MessageRecord[] {
    if (record.panel === undefined) return [record];
    const siblings = (state.panels.get(record.panel)?.messages ?? [])
      .filter((id) => id !== record.id)
      .map((id) => state.messages.get(id))
      .filter((other): other is MessageRecord => other !== undefined && !isTerminal(other) && nextWork(other, now).kind === 'attempt' && !this.ctx.waitsForRetry(other.id));
    return [record, ...siblings];
  }

  /** The question as Oracle is handed it, with what it was rendered from: the payload, the context manifest and its files' sizes, and a cross-check's challenged answer. */
  private async renderBundle(message: AdvisoryMessage, canary: string) {
    const ledger = this.ctx.ledger;
    const prompt = await ledger.readFile(message.payload_ref);
    const manifest = await ledger.readFile(message.context_pin.context_manifest_ref);
    const listed = manifest === null ? [] : readDocument('context_manifest.v0', manifest, message.context_pin.context_manifest_ref).files;
    const contextBytes = listed.reduce((sum, file) => sum + file.bytes, 0);
    // What is sent is the whole bundle: the question in its template and, for a cross-check, the challenged answer quoted; the estimate is of that.
    const answer = message.intent === 'cross_check' ? await ledger.readFile(message.challenge.answer_ref) : null;
    const challenged: ChallengedAnswer | undefined = message.intent === 'cross_check' && answer !== null ? { author: message.source_actor, sha256: message.challenge.answer_hash, text: answer.toString('utf8') } : undefined;
    const bundle = renderConsultPrompt({
      question: prompt?.toString('utf8') ?? '',
      canary,
      repoCommit: message.context_pin.repo_commit_sha,
      files: message.context_pin.files.map((file) => file.path),
      ...(challenged === undefined ? {} : { challenged }),
    });
    return { prompt, manifest, listed, contextBytes, answer, bundle };
  }

  /** Everything decided before a claim: pre-flight, the hashes and pins, the names Oracle is handed, and the route. */
  private async prepare(state: LedgerState, record: MessageRecord, now: Date): Promise<Prepared> {
    const ledger = this.ctx.ledger;
    const attempt = record.attempts.length + 1;
    const message = await this.readEnvelope(record);
    const policy = state.policy!;
    const registry = state.registry!.doc;
    const canary = newCanary();
    const { prompt, manifest, listed, contextBytes, answer, bundle } = await this.renderBundle(message, canary);
    // The route, from the registry entry and the runner's endpoints: what it asks the provider for bounds the budget.
    const entry = registry.actors.find((actor) => actor.id === message.target_actor)?.transport;
    let route: RoutePlan | null = null;
    let unroutable: unknown = null;
    try {
      if (entry !== undefined) route = this.transport.plan(entry);
    } catch (error) {
      unroutable = error;
    }
    // What other open attempts may still spend counts as spent: the ledger knows their claims (lane/budget.ts).
    const shared = judgedSpend(state, message.correlation_id, isoSeconds(now).slice(0, 10), 0, record.id);
    const judge = (spent: { readonly spentOnCorrelationUsd: number; readonly spentTodayUsd: number }): Preflight =>
      preflight({
        fixedOutputTokens: route?.fixedOutputTokens ?? null,
        now,
        message,
        attempt,
        killSwitch: state.killSwitch?.doc ?? null,
        registry,
        policy: policy.doc,
        signerRevoked: revokedWord(state, record),
        earlier: record.attempts,
        spentOnMessageUsd: spentOnMessageUsd(record, attempt, (id) => state.messages.get(id)),
        spentOnCorrelationUsd: spent.spentOnCorrelationUsd,
        commandBudgetUsd: shared.commandBudgetUsd,
        spentTodayUsd: spent.spentTodayUsd,
        inputTokens: estimateInputTokens(Buffer.byteLength(bundle), contextBytes),
        answered: answeredModels(message, state),
      });
    const { decision, heldBack } = judgeWithHeld(shared, state, judge);
    const stopHere = (status: ReceiptStatus, blocker: BlockerCode, detail: string): Prepared => ({ kind: 'stop', record, message, attempt, status, blocker, detail });
    if (decision.kind === 'stop' && heldBack) {
      return { kind: 'wait', record, message, attempt, detail: heldBackDetail(attempt, decision.detail) };
    }
    if (decision.kind === 'stop') return stopHere(decision.status, decision.blocker, decision.detail);
    // A consult its agent left behind (the attempt that asked it ended) is receipted unrun: nobody would read the answer.
    const gone = askerGone(record, (id) => state.messages.get(id));
    if (gone !== null) return stopHere('blocked', 'expired', gone);
    // Context pins (review correction 6): the prompt and manifest still hash as enqueued, and every
    // pinned file still hashes as pinned at the pinned commit. Anything else fails closed, unpaid.
    if (prompt === null || sha256Ref(prompt) !== message.payload_hash) return stopHere('failed', 'stale_context', `${message.payload_ref} does not hash to payload_hash`);
    if (manifest === null || sha256Ref(manifest) !== message.context_pin.context_manifest_hash) {
      return stopHere('failed', 'stale_context', `${message.context_pin.context_manifest_ref} does not hash to context_manifest_hash`);
    }
    const pins = await checkContextPin(ledger, this.ctx.pins, record, message.context_pin);
    if (!pins.ok) return stopHere('failed', 'stale_context', pins.detail);
    const overBounds = contextOverBounds(pins.files.map((file) => file.bytes.length), contextBounds(policy.doc.limits));
    if (overBounds !== null) return stopHere('blocked', 'policy_denied', `${overBounds} (policy v${policy.version}, in force now); nothing was sent`);
    // The manifest's sizes are its writer's word, and the estimate above was made from them: a file of another size than it states is not sent.
    const missized = pins.files.find((file, index) => listed[index]?.path !== file.path || listed[index]?.bytes !== file.bytes.length);
    if (missized !== undefined) {
      return stopHere('failed', 'stale_context', `${missized.path} is ${missized.bytes.length} bytes, not the ${listed.find((file) => file.path === missized.path)?.bytes ?? 'unstated'} its context manifest states; nothing was sent`);
    }
    // What is sent is kept beside the receipt as prompt-sent.md: a bundle over the artifact limit could be paid for and never receipted.
    if (Buffer.byteLength(bundle) > LIMITS.artifactBytes) {
      return stopHere('failed', 'config_error', `the question as Oracle would be handed it is ${Buffer.byteLength(bundle)} bytes with its template${message.intent === 'cross_check' ? ' and the answer it challenges' : ''}, over the ${LIMITS.artifactBytes}-byte artifact limit under which its receipt keeps it; nothing was sent`);
    }
    // What enqueue refuses, refused again for an envelope written by other means: before the claim, unpaid.
    for (const file of pins.files) {
      const problem = oraclePathProblem(file.path);
      if (problem !== null) return stopHere('failed', 'config_error', `the context pins ${file.path}: ${problem}; nothing was sent`);
    }
    // The answer to challenge is sent only as the envelope pins it: the auditor proves what was seen from that hash and prompt-sent.md.
    if (message.intent === 'cross_check' && (answer === null || sha256Ref(answer) !== message.challenge.answer_hash)) {
      return stopHere('failed', 'stale_context', `${message.challenge.answer_ref} does not hash to challenge.answer_hash`);
    }
    // A target whose lane the runner's start-up found it cannot run (runner/startup.ts) is not started here, whatever its route says now.
    const held = this.ctx.heldHere(message.target_actor);
    const cannot = held !== null ? new CooError(held.code, held.message) : unroutable !== null || route === null ? (unroutable ?? new CooError('ORACLE_CONFIG', `${message.target_actor} has no route`)) : this.sandboxUnplanned();
    if (cannot !== null) {
      // A consult an agent asks inside its dispatch attempt takes that one attempt, and holds what it may cost of the
      // dispatch's budget while it may still be paid: left queued, it would hold it for nothing until the attempt ends,
      // and another runner could pay for an answer no one waits for. It ends here, unpaid, and the agent is told why.
      if (message.intent === 'aa_consult' && message.asked_in_attempt !== undefined) {
        return stopHere('failed', 'config_error', `this runner cannot ask ${message.target_actor}: ${cannot instanceof Error ? cannot.message : String(cannot)}; a consult asked inside a dispatch attempt takes one attempt, and nothing was sent`);
      }
      return { kind: 'unroutable', record, message, attempt, error: cannot };
    }
    // The pinned files are sent to the provider as they are: one holding a secret this runner was given (its COO key, a provider key, its
    // forge or remote token, committed to the repository) would give it to that provider, which no scrubber of what comes back takes back.
    // Asked once the runner knows it can run the consult: a runner that cannot route it leaves it to one that can.
    const sent = this.sentSecrets(registry);
    for (const file of pins.files) {
      const secret = sentSecretIn(sent, file.bytes);
      if (secret !== null) return stopHere('failed', 'config_error', `the context pins ${file.path}, which holds ${heldSecretWords(secret)}: it would be sent to ${message.target_actor}'s provider; nothing was sent`);
    }
    // No problem found: the route is planned.
    return { kind: 'run', record, message, attempt, decision, shared, route: route!, bundle, canary, files: pins.files };
  }

  /** What pinned files are refused for (util/held-secrets.ts): the secrets this runner's scrubber was given and what each route it can plan sends, built once per set of values. */
  private sentSecrets(registry: ActorRegistry): Scrubber {
    const handed: Secret[] = [...this.ctx.scrubber.secrets];
    for (const actor of registry.actors) {
      if (actor.transport === undefined) continue;
      try {
        handed.push(...this.transport.handedSecrets(this.transport.plan(actor.transport).keyEnv));
      } catch {
        // a route this runner cannot plan sends nothing from here
      }
    }
    const fingerprint = JSON.stringify(handed);
    if (this.sent?.fingerprint !== fingerprint) this.sent = { fingerprint, scrubber: sentSecrets(this.ctx.key, handed) };
    return this.sent.scrubber;
  }

  /**
   * Why this runner cannot plan Oracle's sandbox now (git cannot list what of its configuration to hide), or null:
   * asked before the claim, so the runner's own problem leaves the consult queued and unclaimed, as a missing key does.
   */
  private sandboxUnplanned(): CooError | null {
    if (!this.transport.isolated) return null;
    try {
      requireGitPlacesListed();
      return null;
    } catch (error) {
      if (!(error instanceof CooError) || error.code !== 'RUNNER_CONFIG') throw error;
      return error;
    }
  }

  /** A claimed attempt: Oracle in its sandbox, then the receipt. */
  private async run(item: Extract<Prepared, { kind: 'run' }>, now: Date): Promise<void> {
    const { record, message, attempt, decision, route, bundle, canary, files } = item;
    const stoppedFirst = this.ctx.stoppedBy();
    if (stoppedFirst !== null) {
      await this.writeInterrupted(message, record.id, attempt, `the runner was stopped (${stoppedFirst}) before Oracle started; nothing was paid for`);
      return;
    }
    const sandbox = sandboxFor(this.ctx.stateDir, attemptIdFor(message.message_id, attempt));
    const slug = sessionSlugFor(message.message_id, attempt);
    createSandbox(sandbox, files, bundle, {
      attempt_id: attemptIdFor(message.message_id, attempt),
      canary,
      slug,
      model: decision.model,
      max_output_tokens: decision.maxOutputTokens,
      runtime_seconds: decision.runtimeSeconds,
      started_at: now.toISOString(),
      started_monotonic_ms: machineMonotonic(),
      boot: bootId(),
      route: { name: route.route, ...route.label },
      price: decision.price,
    });
    this.ctx.onEvent({ type: 'oracle_started', messageId: message.message_id, attempt, at: Date.now() });
    const running = this.transport.run({
      sandbox,
      model: decision.model,
      slug,
      files: files.map((file) => file.path),
      maxOutputTokens: decision.maxOutputTokens,
      runtimeSeconds: decision.runtimeSeconds,
      route,
    });
    failpoint('during-oracle');
    // What Oracle left (answer, session record, error text, output tails) is scrubbed before anything judges, hashes or keeps it.
    const scrub = this.consultScrubber(sandbox, route.keyEnv);
    const run = scrub.value(await running);
    this.ctx.onEvent({ type: 'oracle_ended', messageId: message.message_id, attempt, at: Date.now(), elapsedMs: run.elapsedMs, exitCode: run.exitCode, signal: run.signal, killedByTimer: run.killedByTimer });
    const stoppedBy = this.ctx.stoppedBy();
    if (stoppedBy !== null && run.exitCode === null) {
      // Killed by the operator's stop, not judged: an Oracle that had already ended is judged as usual.
      // A call the stop cut short still spent what it spent: it is charged as a call that ended unanswered, with the bundle it was handed.
      const call = this.callFacts(slug, run, decision, { name: route.route, ...route.label }, bundle, files);
      await this.writeInterrupted(message, record.id, attempt, `the runner was stopped (${stoppedBy}) while Oracle ran; Oracle was ended after ${(run.elapsedMs / 1000).toFixed(1)} s`, call, Buffer.from(bundle, 'utf8'));
      if (!this.ctx.keepAttemptFiles) removeSandbox(sandbox);
      return;
    }
    if (readAttemptFile(sandbox) === null && !judgeRun(run, classifyFor(route.route)).ok) {
      // The attempt's folder went while Oracle ran (the operator removed the state folder, or cleaned
      // the folder it is in): Oracle had nowhere to write what it got. Not the advisory agent's
      // failure, never a terminal aa_unavailable: charged as a call that ended unanswered, and retried.
      // Oracle's session record went with the folder: the call is charged as one whose record is unseen, its whole output cap
      // with it, as a recovery charges one; read as a call never made, it cost nothing and its retry paid again uncounted.
      const answered = this.callFacts(slug, run, decision, { name: route.route, ...route.label }, bundle, files, true);
      const call = { ...answered, meta: answered.meta ?? unseenSession() };
      await this.writeInterrupted(message, record.id, attempt, `the attempt's folder ${sandbox.root} was removed from the runner's state folder while Oracle ran, and what Oracle got went with it; keep the state folder while a runner runs`, call, Buffer.from(bundle, 'utf8'));
      return;
    }
    failpoint('after-answer');
    await this.finish(message, record, attempt, sandbox, run, decision, { name: route.route, ...route.label }, canary, bundle, files, scrub);
  }

  /** The runner's scrubber with what one consult attempt adds: the key handed to Oracle (all it could hand, when not known) and the sandbox. */
  private consultScrubber(sandbox: Sandbox, providerKeyEnv?: string): Scrubber {
    return this.ctx.scrubber.with(this.transport.handedSecrets(providerKeyEnv === '' ? undefined : providerKeyEnv), [{ name: 'sandbox', path: sandbox.root }]);
  }

  /** A pre-flight outcome: claim and receipt in one commit, nothing paid for. */
  private async stop(state: LedgerState, record: MessageRecord, message: AdvisoryMessage, attempt: number, now: Date, status: ReceiptStatus, blocker: BlockerCode, detail: string): Promise<boolean> {
    const { file, retryAt } = this.stopReceipt(state, record, message, attempt, now, status, blocker, detail);
    if (!(await this.ctx.claim(record, attempt, now, { file, summary: `receipt ${message.message_id} attempt ${attempt}: ${status} (${blocker})` }))) return false;
    this.ctx.onReceipt(message.message_id, attempt, status, [blocker], retryAt);
    return true;
  }

  /** The receipt of an attempt stopped before anything runs, and when it may be tried again. */
  private stopReceipt(state: LedgerState, record: MessageRecord, message: AdvisoryMessage, attempt: number, now: Date, status: ReceiptStatus, blocker: BlockerCode, detail: string): { readonly file: NewFile; readonly retryAt: string | null } {
    const retryAt = status === 'succeeded' ? null : nextAttemptAt({ now, blocker, record, message, policy: state.policy!.doc });
    const receipt = buildReceipt({
      now,
      message,
      record,
      attempt,
      status,
      blockers: [{ code: blocker, detail }],
      nextAttemptAt: retryAt,
      policyRef: `${state.policy!.path}@${state.policy!.sha256}`,
      validation: { status: 'not_run', errors: [] },
      warnings: [],
    });
    return { file: { path: receiptPath(folderOf(record), attempt), bytes: recordedReceipt(receipt, this.ctx.scrubber).bytes }, retryAt };
  }

  /**
   * Judges a run and commits its receipt with the answer, the exact prompt and Oracle's session record.
   * `run` is what Oracle left, scrubbed already (`scrub`), its session record with it.
   * `kept` false: a recovered attempt whose sandbox does not hold `bundle` as it was handed to Oracle; it is charged, not kept.
   */
  private async finish(
    message: AdvisoryMessage,
    record: MessageRecord,
    attempt: number,
    sandbox: Sandbox,
    run: OracleRun,
    decision: CallDecision,
    route: AttemptRoute,
    canary: string,
    bundle: string,
    files: readonly PinnedFile[],
    scrub: Scrubber,
    kept = true,
  ): Promise<void> {
    const now = this.ctx.clock();
    const state = await this.ctx.ledger.state();
    const latest = state.messages.get(record.id) ?? record;
    // What was put to the model as data and reads as instructions: the pinned files, and a cross-check's challenged answer.
    const challenged = message.intent === 'cross_check' ? await this.ctx.ledger.readFile(message.challenge.answer_ref) : null;
    const steering = [...files, ...(challenged === null ? [] : [{ bytes: challenged }])].flatMap((file) => suspiciousLines(file.bytes.toString('utf8')));
    const verdict = judgeRun(run, classifyFor(route.name));
    let status: ReceiptStatus = 'succeeded';
    let blocker: { code: BlockerCode; detail: string } | null = null;
    let validation: { status: 'pass' | 'fail' | 'not_run'; errors: string[] } = { status: 'not_run', errors: [] };
    let proposals: readonly Proposal[] = [];
    if (!verdict.ok) {
      status = verdict.status;
      blocker = { code: verdict.blocker, detail: verdict.detail };
    } else {
      const judged = judgeAnswer({ text: run.answer!.toString('utf8'), canary, steering });
      validation = { status: judged.status, errors: [...judged.errors] };
      if (judged.status === 'fail') {
        status = 'failed';
        blocker = { code: judged.blocker, detail: judged.errors.join('; ') };
      } else {
        proposals = judged.proposals;
      }
    }
    const files_: NewFile[] = [];
    const attachments: ReceiptArtifact[] = [];
    const add = (name: string, bytes: Buffer): ReceiptArtifact => {
      const path = attemptArtifactPath(folderOf(record), attempt, name);
      files_.push({ path, bytes });
      return { path, sha256: sha256Ref(bytes) };
    };
    const output = run.answer === null || run.answer.length === 0 ? undefined : add('answer.md', run.answer);
    // A recovered attempt whose sandbox no longer holds the bundle its message renders keeps none as sent (recoveredBundle).
    if (kept) attachments.push(add('prompt-sent.md', Buffer.from(bundle, 'utf8')));
    // The record as its usage and status were read (scrubbed with the run), never read again: a process Oracle left behind may have rewritten it since.
    if (run.sessionRecord !== null) attachments.push(add('oracle-session.json', run.sessionRecord));
    // Each proposal kept is stored on its own, so that a dispatch can adopt it by its hash.
    const proposalRefs = proposals.map((item, index) => add(`proposal-${String(index + 1).padStart(2, '0')}.yaml`, storedProposalBytes(message.message_id, attempt, index + 1, item)));
    const retryAt = blocker === null ? null : nextAttemptAt({ now, blocker: blocker.code, record: latest, message, policy: state.policy!.doc });
    const warnings: string[] = [];
    if (validation.status === 'pass' && validation.errors.length > 0) warnings.push('proposal_stripped');
    if (steering.length > 0) warnings.push('context_injection_suspected');
    if (!this.transport.isolated) warnings.push('sandbox_unenforced');
    if (!kept) warnings.push('bundle_unverified');
    const receipt = buildReceipt({
      now,
      message,
      record: latest,
      attempt,
      status,
      blockers: blocker === null ? [] : [blocker],
      nextAttemptAt: retryAt,
      policyRef: `${state.policy!.path}@${state.policy!.sha256}`,
      transport: { ...this.callFacts(sessionSlugFor(message.message_id, attempt), run, decision, route, bundle, files), ...(kept ? {} : { bundleHash: null }) },
      ...(output === undefined ? {} : { output }),
      attachments,
      proposals: proposalRefs,
      validation,
      warnings,
    });
    files_.push({ path: receiptPath(folderOf(record), attempt), bytes: recordedReceipt(receipt, scrub).bytes });
    const blockers = receipt.blockers.map((item) => item.code);
    failpoint('before-receipt');
    const outcome = await this.ctx.publishReceipt(files_, `receipt ${message.message_id} attempt ${attempt}: ${receipt.status}${blockers.length === 0 ? '' : ` (${blockers.join(', ')})`}`, now);
    if (outcome === 'published') this.ctx.onReceipt(message.message_id, attempt, receipt.status, blockers, receipt.next_attempt_at);
    // A journaled receipt holds every file it needs; the sandbox is not.
    if (!this.ctx.keepAttemptFiles) removeSandbox(sandbox);
  }

  /**
   * What a receipt knows of a call this runner made: Oracle's session, the price, and the prompt
   * bundle and pinned files it was handed. `unanswered`: the call ended before its session said it
   * completed (killed, or its record lost), so output it does not count is charged up to the cap.
   */
  private callFacts(slug: string, run: OracleRun, decision: CallDecision, route: AttemptRoute, bundle: string, files: readonly PinnedFile[], unanswered = run.exitCode === null): NonNullable<ReceiptFacts['transport']> {
    const contextBytes = files.reduce((sum, file) => sum + file.bytes.length, 0);
    return {
      sessionId: run.sessionId ?? slug,
      model: decision.model,
      route: { provider: route.provider, offline: route.offline },
      meta: run.meta,
      price: decision.price,
      estimatedInputTokens: estimateInputTokens(Buffer.byteLength(bundle), contextBytes),
      sentBytes: Buffer.byteLength(bundle) + contextBytes,
      answerBytes: run.answerBytes,
      uncountedOutputCap: uncountedOutput(route.name, decision.maxOutputTokens, run.meta, unanswered, run.answerBytes),
      bundleHash: sha256Ref(Buffer.from(bundle, 'utf8')),
    };
  }

  /**
   * Publishes the `interrupted` receipt of a claimed consult attempt that will not finish, with a retry
   * when the policy allows one, through the one receipt path (journaled when the remote cannot take
   * it now, kept as late when another runner closed the attempt first); `sent`, the prompt bundle
   * Oracle was handed, is kept as its prompt-sent.md, so that the receipt's bundle_hash names bytes
   * the ledger holds. False when the receipt is late: this runner wrote nothing.
   */
  private async writeInterrupted(message: AdvisoryMessage, messageId: string, attempt: number, detail: string, transport?: ReceiptFacts['transport'], sent?: Buffer, warnings: readonly string[] = []): Promise<boolean> {
    const now = this.ctx.clock();
    const state = await this.ctx.ledger.state();
    const record = state.messages.get(messageId)!;
    const retryAt = nextAttemptAt({ now, blocker: 'interrupted', record, message, policy: state.policy!.doc });
    const kept: NewFile[] = sent === undefined ? [] : [{ path: attemptArtifactPath(folderOf(record), attempt, 'prompt-sent.md'), bytes: sent }];
    const receipt = buildReceipt({
      now,
      message,
      record,
      attempt,
      status: 'failed',
      blockers: [{ code: 'interrupted', detail }],
      nextAttemptAt: retryAt,
      policyRef: `${state.policy!.path}@${state.policy!.sha256}`,
      ...(transport === undefined ? {} : { transport }),
      attachments: kept.map((file) => ({ path: file.path, sha256: sha256Ref(file.bytes) })),
      validation: { status: 'not_run', errors: [] },
      warnings,
    });
    const outcome = await this.ctx.publishReceipt([...kept, { path: receiptPath(folderOf(record), attempt), bytes: recordedReceipt(receipt, this.ctx.scrubber).bytes }], `receipt ${message.message_id} attempt ${attempt}: failed (interrupted)`, now);
    if (outcome === 'published') this.ctx.onReceipt(message.message_id, attempt, 'failed', ['interrupted'], retryAt);
    return outcome !== 'late';
  }

  /** A receipt published from the runner's journal or kept results: the attempt's sandbox, left for its recovery, is of no more use. */
  async afterJournaledReceipt(record: MessageRecord, attempt: number): Promise<void> {
    if (!this.ctx.keepAttemptFiles) removeSandbox(sandboxFor(this.ctx.stateDir, attemptIdFor(record.id, attempt)));
    return Promise.resolve();
  }

  /**
   * An attempt whose runner is gone: wait out an Oracle that is still running, harvest a session
   * that completed (the answer was paid for once; it is not bought again), or record the attempt
   * as interrupted, with a new attempt when the policy allows. An attempt whose files this state folder
   * does not hold (`takenOver`: another runner's, or its folder removed with its runner) is charged as a
   * call its runner's timer ended: its Oracle may have sent the question and streamed its whole output
   * cap. So is one whose attempt folder was made (its runner made it just before starting Oracle)
   * and holds no attempt record, whatever else is left in it. One of this folder's own whose attempt
   * folder was never made (its runner died between its claim and Oracle's start) is charged nothing.
   */
  async recover(state: LedgerState, record: MessageRecord, takenOver = false): Promise<boolean> {
    const last = record.attempts[record.attempts.length - 1]!;
    const claim = last.claim!;
    const message = await this.readEnvelope(record);
    const sandbox = sandboxFor(this.ctx.stateDir, last.attemptId);
    const recorded = readAttemptFile(sandbox);
    // The model, the session and the route are the ones the ledger keeps for the claim, not the file's word: the file lies in the sandbox Oracle may write.
    // A claim the ledger keeps no model with takes the file's only when it is a name a registry could give (oracleModelName), otherwise none:
    // a name no receipt holds left the paid answer unreceipted, kept for the operator.
    // A route renamed there to one whose record counts the output dropped the charge for what its provider bills uncounted.
    // Its runtime too is bounded by what the envelope allows (lane.ts preflight hands Oracle no more): a budget raised in the file held the runner waiting past it.
    const attemptFile =
      recorded === null ? null : { ...recorded, model: claim.model ?? modelNamed(recorded.model), slug: claim.session, ...(claim.route === undefined ? {} : { route: claimedRoute(claim.route, recorded.route) }), runtime_seconds: Math.min(recorded.runtime_seconds, message.budget.max_runtime_seconds) };
    const oracle = readOracleRecord(sandbox.pidPath);
    if (attemptFile !== null && oracle !== null) {
      // Only while the pid is still the process this attempt started: a pid alone names whoever holds the number now.
      // Its runtime budget is measured on the machine's monotonic clock, which a clock stepped since the start does not move.
      // The end is fixed once, never more than the budget from now: a start the file puts in the future cannot move it on.
      const boot = bootId();
      const end = machineMonotonic() + oracleTimeLeftMs(attemptFile, { boot, monotonicMs: machineMonotonic(), wallMs: Date.now() });
      const left = (): number => end - machineMonotonic();
      if (isStill(oracle) && left() > 0) this.ctx.onEvent({ type: 'oracle_orphan', messageId: record.id, attempt: last.number, pid: oracle.pid, runner: claim.runner, until: new Date(Date.now() + left()).toISOString() });
      while (isStill(oracle) && left() > 0) await new Promise((resolve) => setTimeout(resolve, 200));
    }
    // Ended whatever else is left of the folder: an Oracle whose attempt record was removed alone is never left running unreceipted.
    if (oracle !== null) endRecordedGroup(oracle);
    const scrub = this.consultScrubber(sandbox);
    // Oracle's session record, read once: the interrupted receipt states and charges what the harvest judged, never a later read of a record rewritten since.
    const session = attemptFile === null ? null : readSession(sandbox.oracleHome, attemptFile.slug);
    const meta = session === null ? null : scrub.value(session.meta);
    const harvested = attemptFile === null || session === null ? null : scrub.value(harvestRun(sandbox, attemptFile, session));
    // The prompt as the runner wrote it, in a folder Oracle may change: never through a link or a FIFO, never past the bound.
    const promptFile = readBounded(sandbox.promptPath, { maxBytes: LIMITS.artifactBytes });
    const rendered = attemptFile === null ? null : await this.recoveredBundle(message, attemptFile.canary, promptFile);
    // A paid answer is harvested whatever became of prompt.txt: the bundle is the one the message renders (recoveredBundle).
    if (attemptFile !== null && rendered !== null && harvested !== null) {
      const pins = await checkContextPin(this.ctx.ledger, this.ctx.pins, record, message.context_pin);
      const model = attemptFile.model;
      const price = await this.claimedPrice(state, claim, attemptFile);
      if (pins.ok && price !== undefined) {
        // The cap the call was handed: the file's, never below what the claim allowed (flooredCap). A route whose record leaves output out is charged up to it.
        const inputTokens = estimateInputTokens(Buffer.byteLength(rendered.bundle), pins.files.reduce((sum, file) => sum + file.bytes.length, 0));
        const maxOutputTokens = flooredCap(attemptFile.max_output_tokens, claimedOutputCap(state, record, last, inputTokens, price), claim.allowanceUsd !== undefined, price);
        const decision = { kind: 'run' as const, model, providerKeyEnv: '', price, maxOutputTokens, runtimeSeconds: attemptFile.runtime_seconds, budgetLimitUsd: 0, worstCaseUsd: 0 };
        // An attempt file of an older runner names no route: the receipt says so rather than guess.
        const route = attemptFile.route ?? { name: null, provider: 'unknown', offline: false };
        // The answer is judged against that cap too: a cap lowered in the file turned a paid answer within the real one into output_too_large.
        await this.finish(message, record, last.number, sandbox, { ...harvested, maxOutputTokens }, decision, route, attemptFile.canary, rendered.bundle, pins.files, scrub, rendered.held !== null);
        return true;
      }
    }
    // An Oracle that started may have been paid for: the attempt is charged as the live lane charges a call that ended unanswered.
    // Its folder is made after the claim, just before Oracle starts: one that stands, whatever is left in it, shows the call may have been made.
    // Oracle's pid or its attempt record removed from it (both in the folder Oracle writes) charged an unanswered call nothing.
    const made = attemptFolderMade(sandbox);
    const spent =
      attemptFile !== null
        ? await this.unansweredCall(state, message, record, last, attemptFile, meta ?? unseenSession(), { bytes: Buffer.byteLength(rendered!.bundle), sent: rendered!.held })
        : takenOver || oracle !== null || made
          ? await this.takenOverCall(state, message, record, last)
          : undefined;
    const sent = spent?.bundleHash != null ? (rendered?.held ?? undefined) : undefined;
    const unverified = rendered !== null && rendered.held === null;
    // A claim that does not state its allowance leaves the output cap its call was handed to be bounded from its message's budget: the receipt says so.
    const unstated = spent !== undefined && attemptFile === null && claim.allowanceUsd === undefined;
    const written = await this.writeInterrupted(
      message,
      record.id,
      last.number,
      `the runner ${claim.runner} stopped before attempt ${last.number} finished; its Oracle session ${meta?.status ?? 'left no record'}${spent?.uncountedOutputCap == null || attemptFile !== null ? '' : `; ${made ? 'its attempt folder holds no record of the call (removed from it)' : 'this state folder holds none of its files (removed with the folder, or its lease ran out, or it kept them in another)'}, and its call is charged its whole output cap, ${spent.uncountedOutputCap} tokens, ${unstated ? "bounded by its message's budget and its model's cap (its claim states no allowance)" : 'from the allowance its claim states'}`}${unverified ? `; ${UNVERIFIED_DETAIL}` : ''}`,
      spent,
      sent,
      [...(unstated ? ['allowance_unstated'] : []), ...(unverified ? ['bundle_unverified'] : [])],
    );
    removeSandbox(sandbox);
    return written;
  }

  /**
   * The bundle a recovered attempt's Oracle was handed, as far as this runner can prove it: the one its
   * message renders with the attempt's canary, which the runner wrote to prompt.txt before Oracle
   * started (the render is deterministic). prompt.txt lies in the folder Oracle may write, so its
   * bytes are kept as sent (`held`) only when they are that bundle; otherwise none are, and no hash
   * names them. A canary not of the form the runner writes (emptied, or text put in its place) is no
   * attempt's: its render is no bundle the runner wrote. One of that form, written into the attempt file
   * with prompt.txt rendered again around it, is kept: the question is the message's word for word, and
   * the canary, which the answer is judged against from the same file, is all that can differ; no
   * ledger entry holds the attempt's own to tell them apart. `bundle` is what is charged: its size, never
   * the file's, so a prompt.txt emptied, removed or grown moves no estimate.
   */
  private async recoveredBundle(message: AdvisoryMessage, canary: unknown, promptFile: BoundedRead): Promise<{ readonly bundle: string; readonly held: Buffer | null }> {
    const ours = typeof canary === 'string' && CANARY_FORM.test(canary);
    const { bundle } = await this.renderBundle(message, ours ? canary : newCanary());
    const held = ours && promptFile.kind === 'file' && promptFile.bytes.equals(Buffer.from(bundle, 'utf8')) ? promptFile.bytes : null;
    return { bundle, held };
  }

  /**
   * What a receipt knows of a call another runner claimed and may have made before its lease ran
   * out, its files on its own machine: the question as this runner would send it (the bundle the
   * message renders, to within its canary), to the model the registry routes its target to, with a
   * session that left this runner no record. It is charged as a call that was ended before it
   * answered: the question and the whole output cap that runner handed its Oracle, as far as the
   * ledger tells it (the claim's allowance; without one, the message's budget and the model's cap).
   */
  private async takenOverCall(state: LedgerState, message: AdvisoryMessage, record: MessageRecord, attempt: AttemptRecord): Promise<ReceiptFacts['transport']> {
    const claim = attempt.claim!;
    // The model the claim was made on, which the ledger keeps; the registry's now only for a claim of a build before it was kept.
    const model = claim.model ?? claimedModel(state.registry?.doc ?? null, message.target_actor);
    if (model === undefined) return undefined;
    const { bundle } = await this.renderBundle(message, newCanary());
    const unseen = unseenSession();
    // The charge is the claim's allowance at whatever price (the cap below is what it pays for); a model a later policy
    // dropped is priced as the policy last priced it, never left unpriced and so charged nothing.
    const price = await this.claimedPrice(state, claim, { model });
    // The output cap that runner handed its Oracle is on its machine: no cap is recorded here, and the claim's is charged (claimedOutputCap).
    const attemptFile: AttemptRecordFile = { attempt_id: attempt.attemptId, canary: '', slug: claim.session, model, max_output_tokens: Number.NaN, runtime_seconds: 0, started_at: claim.at, ...(price === undefined ? {} : { price }) };
    // Its size is what is charged; its bytes, with a canary of this runner's own, are not what was sent: no hash names them.
    return this.unansweredCall(state, message, record, attempt, attemptFile, unseen, { bytes: Buffer.byteLength(bundle), sent: null });
  }

  /**
   * The price a claimed call is charged at: its model's price in the policy in force at its claim,
   * which the ledger keeps with the claim (rules/claim.ts), whatever a later policy says and whatever
   * the attempt file in the sandbox (which Oracle may write) says. For a claim the ledger keeps no
   * price with (a state cached before it was kept), the price its pre-flight judged it at as the
   * attempt file records it, never less than the ledger's price of its model now (the policy's in
   * force, or, a model it no longer prices, the newest policy's that did). Undefined when none knows one.
   */
  private async claimedPrice(state: LedgerState, claim: NonNullable<AttemptRecord['claim']>, attemptFile: Pick<RecoveredAttempt, 'model' | 'price'>): Promise<ModelPrice | undefined> {
    if (claim.price !== undefined && claim.model === attemptFile.model) return claim.price;
    const parsed = modelPrice.safeParse(attemptFile.price);
    const recorded = parsed.success ? parsed.data : undefined;
    const ledger = attemptFile.model === null ? undefined : (priceOf(state.policy?.doc.models, attemptFile.model) ?? (await this.lastPriceOf(state, attemptFile.model)));
    if (recorded === undefined || ledger === undefined) return ledger ?? recorded;
    return {
      ...ledger,
      input_usd_per_million: Math.max(recorded.input_usd_per_million, ledger.input_usd_per_million),
      output_usd_per_million: Math.max(recorded.output_usd_per_million, ledger.output_usd_per_million),
    };
  }

  /** The price of `model` in the newest version of the policy before the one in force that prices it; undefined when none did. */
  private async lastPriceOf(state: LedgerState, model: string): Promise<ModelPrice | undefined> {
    for (let version = (state.policy?.version ?? 0) - 1; version >= 1; version -= 1) {
      const path = trustPath('policy', version);
      const bytes = await this.ctx.ledger.readFile(path);
      if (bytes === null) continue;
      let price: ModelPrice | undefined;
      try {
        price = priceOf(readDocument('actor_policy.v0', bytes, path).models, model);
      } catch {
        // A version this build's schema does not read (an older policy's shape) prices nothing here.
        continue;
      }
      if (price !== undefined) return price;
    }
    return undefined;
  }

  /**
   * What a receipt knows of a call whose Oracle started and whose runner died: the session record
   * Oracle left, and the prompt bundle's size and, when this runner holds the bytes Oracle was
   * handed, those bytes (their hash is the receipt's bundle_hash; no hash is stated for bytes it does not hold).
   */
  private async unansweredCall(state: LedgerState, message: AdvisoryMessage, record: MessageRecord, attempt: AttemptRecord, attemptFile: RecoveredAttempt, meta: OracleSessionMeta | null, prompt: { readonly bytes: number; readonly sent: Buffer | null }): Promise<ReceiptFacts['transport']> {
    const price = await this.claimedPrice(state, attempt.claim!, attemptFile);
    if (price === undefined) return undefined;
    const manifest = await this.ctx.ledger.readFile(message.context_pin.context_manifest_ref);
    const contextBytes = manifest === null ? 0 : readDocument('context_manifest.v0', manifest, message.context_pin.context_manifest_ref).files.reduce((sum, file) => sum + file.bytes, 0);
    const promptBytes = prompt.bytes;
    const estimatedInputTokens = estimateInputTokens(promptBytes, contextBytes);
    const cap = flooredCap(attemptFile.max_output_tokens, claimedOutputCap(state, record, attempt, estimatedInputTokens, price), attempt.claim?.allowanceUsd !== undefined, price);
    return {
      sessionId: attemptFile.slug,
      model: attemptFile.model,
      route: { provider: attemptFile.route?.provider ?? 'unknown', offline: attemptFile.route?.offline ?? false },
      meta,
      price,
      estimatedInputTokens,
      sentBytes: promptBytes + contextBytes,
      answerBytes: 0,
      uncountedOutputCap: uncountedOutput(attemptFile.route?.name ?? null, cap, meta, true, 0),
      bundleHash: prompt.sent === null ? null : sha256Ref(prompt.sent),
    };
  }
}

/**
 * The output tokens a call's provider may have billed beyond what Oracle's record counts, at most
 * (receipt.ts accountUsage): the attempt's cap when the route's record leaves output out, or when
 * Oracle was ended (`ended`: killed by the runner's timer, a stop, a signal, or a runner that died)
 * before its session completed, for the model may have streamed output until then; null otherwise.
 * A session record that says it completed is Oracle's word, in the folder it writes: without the
 * answer it would have written (`answerBytes` 0), it is no evidence the output stopped.
 */
function uncountedOutput(route: OracleRouteName | null, maxOutputTokens: number, meta: OracleSessionMeta | null, ended: boolean, answerBytes: number): number | null {
  if (ended && (meta?.status !== 'completed' || answerBytes === 0)) return maxOutputTokens;
  return uncountedOutputCap(route, maxOutputTokens);
}

/**
 * The output cap a claimed call was handed, as far as the ledger tells it: its claim's allowance is
 * the worst case its pre-flight set the cap from (the estimated input and the whole cap), so the cap
 * is what that allowance pays for after the same input at the same price. A claim that does not
 * state one is bounded by its message's budget and by the model's own cap: no pre-flight allows more.
 */
function claimedOutputCap(state: LedgerState, record: MessageRecord, attempt: AttemptRecord, inputTokens: number, price: ModelPrice): number {
  const fromAllowance = outputCapForUsd(claimAllowanceUsd(record, attempt, (id) => state.messages.get(id)), inputTokens, price);
  return attempt.claim?.allowanceUsd === undefined ? Math.min(fromAllowance, price.max_output_tokens) : fromAllowance;
}

/**
 * The output cap a recovered call is charged up to: the one its attempt file records, which lies in
 * the sandbox Oracle may write, so it can raise the charge and never lower it below the cap the
 * claim's stated allowance pays for (`claimed`), nor raise it past the claim's or the model's own
 * cap. A claim that states none bounds the cap from above only, so the file's stands; a file that
 * records no cap a number can be (none, or one rewritten into another shape) is charged the claim's.
 */
function flooredCap(recorded: unknown, claimed: number, stated: boolean, price: ModelPrice): number {
  if (typeof recorded !== 'number' || !Number.isFinite(recorded) || recorded < 0) return claimed;
  // Nor above what any pre-flight hands Oracle: the claim's cap, or the model's own where that is more. A cap of 10^12 written
  // into the file charged a million dollars, filling the day's and the correlation's caps, and no answer was ever too large.
  const cap = Math.min(Math.ceil(recorded), Math.max(claimed, price.max_output_tokens));
  return stated ? Math.max(cap, claimed) : cap;
}

/**
 * The route a recovered call is charged by: the one the ledger keeps with its claim (rules/claim.ts),
 * the file's provider and offline labels beside it. A claim kept before the route was (a state cached
 * by an older build) leaves the file's word, as before.
 */
function claimedRoute(kept: OracleRouteName, recorded: AttemptRoute | undefined): AttemptRoute {
  return { name: kept, provider: typeof recorded?.provider === 'string' ? recorded.provider : 'unknown', offline: recorded?.offline === true };
}

/** What the pre-flight decided of a call, as its receipt states it: a recovered call's model is null when no witness the runner trusts names one. */
type CallDecision = Omit<Extract<Preflight, { kind: 'run' }>, 'model'> & { readonly model: string | null };

/** A recovered attempt's file with what the ledger keeps in its place: its model null when neither its claim nor a model name in the file gives one. */
type RecoveredAttempt = Omit<AttemptRecordFile, 'model'> & { readonly model: string | null };

/** The model an attempt file names, when it is a name a registry could give (oracleModelName); null otherwise: the file lies in the folder Oracle writes. */
function modelNamed(model: unknown): string | null {
  return oracleModelName.safeParse(model).success ? (model as string) : null;
}

/** The session of a call that was made and whose record this runner cannot read: nothing is known of it. */
function unseenSession(): OracleSessionMeta {
  return { status: null, usage: null, errorMessage: null, transportReason: null, errorCategory: null, incompleteReason: null, responseId: null };
}

/**
 * The Oracle process an attempt recorded: its pid and start time (util/process.ts). A record of an
 * older runner holds the pid alone; its start time is then unknown, so it is never taken for a
 * live Oracle and never signalled while a process holds that pid.
 */
function readOracleRecord(path: string): ProcessRecord | null {
  const read = readBounded(path, { maxBytes: PROCESS_RECORD_BYTES });
  if (read.kind !== 'file') return null;
  const text = read.bytes.toString('utf8');
  const legacy = /^(\d+)\n?$/.exec(text);
  return parseProcessRecord(text) ?? (legacy === null ? null : { pid: Number(legacy[1]), start: null });
}

/** Why a lane cannot run a target here, as a panel's members are told it: its coded problem. */
function unreachableDetail(error: unknown): string {
  const problem = toProblem(error);
  return `${problem.code}: ${problem.message}`;
}

/** The form of every canary the runner writes: `canary-` and 12 random bytes in hex. */
const CANARY_FORM = /^canary-[0-9a-f]{24}$/;

/** A fresh per-attempt canary, which the answer must echo. */
function newCanary(): string {
  return `canary-${randomBytes(12).toString('hex')}`;
}

/** What an interrupted receipt says of a sandbox whose prompt.txt is not the bundle its message renders (recoveredBundle). */
const UNVERIFIED_DETAIL = "the sandbox's prompt.txt is not the bundle this build renders for the message with its attempt's canary (what the runner wrote there before Oracle started, unless the prompt's template changed with an upgrade since): it is not kept as prompt-sent.md and no bundle_hash names it";

/** Whether the recorded process is still running as itself. */
function isStill(record: ProcessRecord): boolean {
  return record.start !== null && !recordedElsewhere(record) && processStartTime(record.pid) === record.start;
}
