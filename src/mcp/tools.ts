import { isVerified, renderCitation } from '../audit/cite.js';
import { checkpointFile } from '../audit/checkpoint.js';
import { gatherEvidence } from '../audit/evidence.js';
import { viewMessage, type AttemptView, type MessageView } from '../audit/message-view.js';
import type { PanelComparison } from '../audit/panel-comparison.js';
import { listSessions, type SessionPage } from '../audit/sessions.js';
import { staleHeartbeat, verifyLedger } from '../audit/verify.js';
import { folderOf, isTerminal, laneStateOf, type LaneState, type LedgerState, type MessageRecord } from '../authority/state.js';
import { refuseWhileStopped } from '../consult/admission.js';
import { enqueueConsult, enqueuePanel, type ConsultRequest } from '../consult/enqueue.js';
import { enqueueCrossCheck } from '../consult/cross-check.js';
import { resolveCommit } from '../lane/pins.js';
import { derivedIdempotencyKey, derivedRequestKey, requestKey } from '../lane/request-key.js';
import { enqueueDispatch } from '../dispatch/enqueue.js';
import { adoptProposal } from '../dispatch/adopt.js';
import type { PrivateKey } from '../crypto/keys.js';
import { CooError, type Finding } from '../errors.js';
import { envelopePath } from '../ledger/layout.js';
import type { Ledger } from '../ledger/ledger.js';
import type { RemoteLedger } from '../remote/publish.js';
import { readDocument } from '../schema/documents.js';
import { ADVISORY_INTENTS, isRunnerIntent } from '../schema/common.js';
import type { z } from 'zod';
import type { adoptInput, consultInput, crossCheckInput, dispatchInput, messageInput, sessionsInput, waitInput } from './schemas.js';
import { MCP_ARGUMENTS } from '../util/argument-names.js';
import { machineMonotonic } from '../util/process.js';
import type { RunnerProblems } from './runner-problems.js';
import { citationNotice, quoteAgentEnvelope, quoted as quote, quoteUntrusted, untrustedAnswer, type UntrustedAnswer } from './untrusted.js';
import { adoptedWords, quoteAdoptedRequest } from './adopted-words.js';
import { classOf } from '../authority/policy-check.js';

/**
 * The MCP tools' handlers: arguments in, the library calls the CLI verbs make, plain results out.
 * No rule lives here; each one is the library's, as `coo consult`, `coo show`, `coo cite` and
 * `coo verify` run it.
 */

export interface ToolContext {
  readonly ledger: Ledger;
  readonly key: PrivateKey;
  /** The repository consults pin their context in: the server's, never the agent's choice. */
  readonly repo: string;
  /** Where `verify` keeps the last verified head, as `coo verify` does; null: none. */
  readonly auditDir: string | null;
  readonly clock: () => Date;
  /** The remote the ledger is a clone of (`coo mcp --remote`): writes are published there, reads start from its verified head. */
  readonly remote?: Pick<RemoteLedger, 'write' | 'sync'>;
  /** What stops the server's own runner from starting a message (`coo mcp --run`; runner-problems.ts). */
  readonly runnerProblems?: Pick<RunnerProblems, 'problemOf'>;
  /** The clock a call's wait is measured on, in milliseconds: the machine's monotonic clock unless a test gives another. */
  readonly monotonic?: () => number;
}

/**
 * The key a tool's request is written under (lane/request-key.ts requestKey): the one the agent gave,
 * or the one derived from the request, which the writer is told it may write though the ledger holds
 * none such (derivedKeyRule judges any other key of that form in the slot the envelope lands in).
 */
function keyFor(given: string | undefined, derived: string): { idempotencyKey: string; derivedKey: string } {
  return { idempotencyKey: requestKey(given, derived, MCP_ARGUMENTS), derivedKey: derived };
}

/** How often a waiting call looks at the ledger's head again (a clone of a remote: at the remote's). */
const POLL_MS = 200;
const REMOTE_POLL_MS = 2_000;

/** A write of a tool: on the ledger, or through the remote (published before it is reported). */
export async function writeThrough<R>(context: ToolContext, write: (ledger: Ledger) => Promise<R>): Promise<R> {
  return context.remote === undefined ? write(context.ledger) : (await context.remote.write(write)).result;
}

/** Brings a clone to the remote's verified head before a read; a remote that cannot be reached leaves the clone's last verified state. */
export async function fresh(context: ToolContext): Promise<void> {
  try {
    await context.remote?.sync();
  } catch (error) {
    if (!(error instanceof CooError) || error.code !== 'REMOTE_UNREACHABLE') throw error;
  }
}

export interface Outcome {
  readonly [key: string]: unknown;
  readonly message_id: string;
  readonly state: LaneState;
  readonly terminal: boolean;
  readonly attempts: number;
  readonly receipt: { attempt: number; status: string; blockers: string[]; cost_usd: number; created_at: string; path: string } | null;
  /** The earlier message whose receipts answer this one, when it repeats a request. */
  readonly answers_for: string | null;
  readonly submitted_via: string | null;
  readonly next: string;
}

function recordOf(state: LedgerState, messageId: string): MessageRecord {
  const record = state.messages.get(messageId);
  if (record === undefined) throw new CooError('MESSAGE_UNKNOWN', `${messageId} is not a message of this ledger`);
  return record;
}

function outcomeOf(state: LedgerState, record: MessageRecord): Outcome {
  const answering = record.duplicateOf === null ? record : state.messages.get(record.duplicateOf) ?? record;
  const last = [...answering.attempts].reverse().find((attempt) => attempt.receipt !== null);
  const lane = laneStateOf(answering, state.registry?.doc);
  const terminal = isTerminal(answering);
  return {
    message_id: record.id,
    state: lane,
    terminal,
    attempts: answering.attempts.length,
    receipt:
      last?.receipt == null
        ? null
        : { attempt: last.number, status: last.receipt.status, blockers: [...last.receipt.blockers], cost_usd: last.receipt.costUsd, created_at: last.receipt.createdAt, path: last.receipt.path },
    answers_for: answering === record ? null : answering.id,
    submitted_via: record.submittedVia ?? null,
    next: !isRunnerIntent(answering.intent)
      ? `${lane}: no runner executes a ${answering.intent}, so there is nothing to wait for${lane === 'awaiting_ack' ? ` (it waits in the inbox until acknowledged: ack with message_id ${answering.id})` : ''}; read it with show (message_id ${answering.id})`
      : terminal
      ? `final: read the answer with show (message_id ${answering.id}) or cite it`
      : `not final yet: call wait with message_id ${record.id}; do not call ${record.intent === 'ea_dispatch' ? 'dispatch' : 'consult'} again for it`,
  };
}

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done(): void {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });
}

/** The message's outcome once it is final, or as it stands when `seconds` pass or the call is cancelled. Starts nothing. */
export async function awaitOutcome(context: ToolContext, messageId: string, seconds: number, signal?: AbortSignal): Promise<Outcome> {
  // A span, not a time of day: measured on the monotonic clock, a wall clock stepped back does not stretch it, nor one stepped forward cut it.
  const monotonic = context.monotonic ?? machineMonotonic;
  const deadline = monotonic() + seconds * 1000;
  for (;;) {
    await fresh(context);
    const state = await context.ledger.state();
    const outcome = outcomeOf(state, recordOf(state, messageId));
    // A message the server's runner cannot start (its executor is missing, say) would only ever
    // look queued: the agent hears why, as a coded error, rather than wait for nothing.
    const problem = outcome.state === 'queued' ? (context.runnerProblems?.problemOf(outcome.message_id) ?? null) : null;
    if (problem !== null) throw new CooError(problem.code, `${messageId} is queued, but the runner cannot start it: ${problem.message}`);
    const left = deadline - monotonic();
    if (outcome.terminal || left <= 0 || signal?.aborted === true) return outcome;
    await sleep(Math.min(context.remote === undefined ? POLL_MS : REMOTE_POLL_MS, left), signal);
  }
}

export type ConsultArgs = z.infer<typeof consultInput>;

/**
 * `coo consult`, over MCP: the same enqueue through the write-time validator, refused while the kill
 * switch is on, with a key derived from the request unless the agent gives one, so a retried call
 * finds the message the first one queued.
 */
export async function consultTool(context: ToolContext, args: ConsultArgs, signal?: AbortSignal): Promise<Outcome & { existing: boolean; panel?: { panel_id: string; name: string; members: Array<Outcome & { target: string }> } }> {
  await fresh(context);
  refuseWhileStopped(await context.ledger.state());
  if (args.to === undefined && args.panel === undefined) throw new CooError('USAGE', 'give to (an advisory agent, or a list of them) or panel (a panel the policy names)');
  const { commit } = await resolveCommit(context.repo, args.rev ?? 'HEAD', MCP_ARGUMENTS);
  if (Array.isArray(args.to) || args.panel !== undefined) return panelTool(context, args, commit, signal);
  const optional = consultOptions(args);
  const target = args.to as string;
  const keys = keyFor(args.idempotency_key, derivedIdempotencyKey({ target, commit, patterns: args.files, question: args.prompt, ...optional }));
  const request: ConsultRequest = { ledger: context.ledger, target, ...askedFields(context, args, commit, keys) };
  const queued = await writeThrough(context, (ledger) => enqueueConsult({ ...request, ledger }));
  const outcome = await awaitOutcome(context, queued.messageId, args.wait_seconds ?? 0, signal);
  return { ...outcome, existing: queued.existing };
}

export type CrossCheckArgs = z.infer<typeof crossCheckInput>;

/**
 * `coo cross-check`, over MCP: one advisory agent's answer put to another to challenge, through the
 * write-time validator (the policy's cross_check edge, hops, budget), refused while the kill switch
 * is on; a retried call finds the message the first one queued.
 */
export async function crossCheckTool(context: ToolContext, args: CrossCheckArgs, signal?: AbortSignal): Promise<Outcome & { existing: boolean }> {
  await fresh(context);
  refuseWhileStopped(await context.ledger.state());
  const optional = {
    ...(args.prompt === undefined ? {} : { question: args.prompt }),
    ...(args.max_cost_usd === undefined ? {} : { maxCostUsd: args.max_cost_usd }),
    ...(args.max_runtime_seconds === undefined ? {} : { maxRuntimeSeconds: args.max_runtime_seconds }),
    ...(args.ttl_seconds === undefined ? {} : { ttlSeconds: args.ttl_seconds }),
  };
  const keys = keyFor(args.idempotency_key, derivedRequestKey({ lane: 'cross_check', answer: args.answer, target: args.to, ...optional }));
  const queued = await writeThrough(context, (ledger) => enqueueCrossCheck({ ledger, key: context.key, now: context.clock(), of: args.answer, target: args.to, ...keys, submittedVia: 'mcp', names: MCP_ARGUMENTS, ...optional }));
  const outcome = await awaitOutcome(context, queued.messageId, args.wait_seconds ?? 0, signal);
  return { ...outcome, existing: queued.existing };
}

/** What a consult and a panel are asked with over MCP, besides whom: the signer, the pinned commit, the question and the call's options. */
function askedFields(context: ToolContext, args: ConsultArgs, commit: string, keys: ReturnType<typeof keyFor>) {
  return {
    key: context.key,
    now: context.clock(),
    repo: context.repo,
    rev: commit,
    patterns: args.files,
    question: args.prompt,
    ...keys,
    submittedVia: 'mcp' as const,
    names: MCP_ARGUMENTS,
    ...consultOptions(args),
  };
}

/** The optional request fields of a consult call, as the library takes them. */
function consultOptions(args: ConsultArgs): Partial<ConsultRequest> {
  return {
    ...(args.max_cost_usd === undefined ? {} : { maxCostUsd: args.max_cost_usd }),
    ...(args.max_runtime_seconds === undefined ? {} : { maxRuntimeSeconds: args.max_runtime_seconds }),
    ...(args.ttl_seconds === undefined ? {} : { ttlSeconds: args.ttl_seconds }),
    ...(args.correlation_id === undefined ? {} : { correlationId: args.correlation_id }),
    ...(args.parent_message_id === undefined ? {} : { parentMessageId: args.parent_message_id }),
    ...(args.max_hops === undefined ? {} : { maxHops: args.max_hops }),
  };
}

/** A consult to several advisory agents: a panel, queued as `coo consult --to A --to B` does, with every member's outcome. */
async function panelTool(context: ToolContext, args: ConsultArgs, commit: string, signal?: AbortSignal): Promise<Outcome & { existing: boolean; panel: { panel_id: string; name: string; members: Array<Outcome & { target: string }> } }> {
  const members = Array.isArray(args.to) ? args.to : typeof args.to === 'string' ? [args.to] : undefined;
  const optional = consultOptions(args);
  const keys = keyFor(args.idempotency_key, derivedRequestKey({ lane: 'panel', panel: args.panel ?? null, members: members ?? null, commit, patterns: args.files, question: args.prompt, ...optional }));
  const queued = await writeThrough(context, (ledger) =>
    enqueuePanel({
      ledger,
      ...(members === undefined ? {} : { members }),
      ...(args.panel === undefined ? {} : { panel: args.panel }),
      ...askedFields(context, args, commit, keys),
    }),
  );
  // Each member is waited for in turn, within the one time the call was given.
  const monotonic = context.monotonic ?? machineMonotonic;
  const deadline = monotonic() + (args.wait_seconds ?? 0) * 1000;
  const outcomes: Array<Outcome & { target: string }> = [];
  for (const member of queued.members) outcomes.push({ ...(await awaitOutcome(context, member.messageId, Math.max(0, (deadline - monotonic()) / 1000), signal)), target: member.target });
  const { target: _first, ...first } = outcomes[0]!;
  return { ...first, existing: queued.existing, panel: { panel_id: queued.panelId, name: queued.name, members: outcomes } };
}

export type DispatchArgs = z.infer<typeof dispatchInput>;

/**
 * `coo dispatch`, over MCP: the same enqueue through the write-time validator (a dispatch the
 * policy gives to the CEO is refused with the request hash to approve), refused while the kill
 * switch is on, with a key derived from the request unless the agent gives one.
 */
export async function dispatchTool(context: ToolContext, args: DispatchArgs, signal?: AbortSignal): Promise<Outcome & { existing: boolean }> {
  await fresh(context);
  refuseWhileStopped(await context.ledger.state());
  const { commit } = await resolveCommit(context.repo, args.rev ?? 'HEAD', MCP_ARGUMENTS);
  const optional = {
    ...(args.timeout_seconds === undefined ? {} : { timeoutSeconds: args.timeout_seconds, maxRuntimeSeconds: args.timeout_seconds }),
    ...(args.max_cost_usd === undefined ? {} : { maxCostUsd: args.max_cost_usd }),
    ...(args.ttl_seconds === undefined ? {} : { ttlSeconds: args.ttl_seconds }),
    ...(args.approval_id === undefined ? {} : { approvalId: args.approval_id }),
    ...(args.correlation_id === undefined ? {} : { correlationId: args.correlation_id }),
    ...(args.parent_message_id === undefined ? {} : { parentMessageId: args.parent_message_id }),
  };
  const asked = { lane: 'dispatch', target: args.to, commit, task: args.task, scope: args.scope, accept: args.accept, verify: args.verify, files: args.files ?? [], ...optional };
  const keys = keyFor(args.idempotency_key, derivedRequestKey(asked));
  const queued = await writeThrough(context, (ledger) => enqueueDispatch({
    ledger,
    key: context.key,
    now: context.clock(),
    target: args.to,
    repo: context.repo,
    rev: commit,
    task: args.task,
    scope: args.scope,
    accept: args.accept,
    verify: args.verify,
    patterns: args.files ?? [],
    ...keys,
    submittedVia: 'mcp',
    names: MCP_ARGUMENTS,
    ...optional,
  }));
  const outcome = await awaitOutcome(context, queued.messageId, args.wait_seconds ?? 0, signal);
  return { ...outcome, existing: queued.existing };
}

export type AdoptArgs = z.infer<typeof adoptInput>;

/**
 * `coo adopt`, over MCP: the COO adopts an advisory agent's proposal as a dispatch, through the same
 * writer and validator (an adoption the policy gives to the CEO is refused with the request hash the
 * CEO approves). There is no approve tool: only the CEO approves, with its own key.
 */
export async function adoptTool(context: ToolContext, args: AdoptArgs, signal?: AbortSignal): Promise<Outcome & { existing: boolean; changed: readonly string[] }> {
  await fresh(context);
  refuseWhileStopped(await context.ledger.state());
  // The base as the repository resolves it now: the request is that commit, not the name given for it.
  const base = args.rev === undefined ? undefined : (await resolveCommit(context.repo, args.rev, MCP_ARGUMENTS)).commit;
  const optional = {
    ...(args.attempt === undefined ? {} : { attempt: args.attempt }),
    ...(args.task === undefined ? {} : { task: args.task }),
    ...(args.scope === undefined ? {} : { scope: args.scope }),
    ...(args.accept === undefined ? {} : { accept: args.accept }),
    ...(args.verify === undefined ? {} : { verify: args.verify }),
    ...(base === undefined ? {} : { rev: base }),
    ...(args.timeout_seconds === undefined ? {} : { timeoutSeconds: args.timeout_seconds, maxRuntimeSeconds: args.timeout_seconds }),
    ...(args.max_cost_usd === undefined ? {} : { maxCostUsd: args.max_cost_usd }),
    ...(args.approval_id === undefined ? {} : { approvalId: args.approval_id }),
  };
  // A key derived from the request names the commit the work starts from, as the dispatch tool's does: a retried
  // call finds the message the first one queued, and a branch that moved since is a new request, not a reused key.
  const { wait_seconds: _wait, idempotency_key: key, approval_id: _approval, rev: _rev, ...asked } = args;
  const keys = keyFor(key, derivedRequestKey({ lane: 'adopt', ...asked, ...(base === undefined ? {} : { commit: base }) }));
  const queued = await writeThrough(context, (ledger) =>
    adoptProposal({
      ledger,
      key: context.key,
      now: context.clock(),
      target: args.to,
      repo: context.repo,
      consultId: args.message_id,
      proposal: args.proposal,
      ...keys,
      submittedVia: 'mcp',
      names: { ...MCP_ARGUMENTS, again: 'call the adopt tool again' },
      ...optional,
    }),
  );
  const outcome = await awaitOutcome(context, queued.messageId, args.wait_seconds ?? 0, signal);
  return { ...outcome, existing: queued.existing, changed: queued.changed };
}

export async function waitTool(context: ToolContext, args: z.infer<typeof waitInput>, signal?: AbortSignal): Promise<Outcome> {
  return awaitOutcome(context, args.message_id, args.timeout_seconds, signal);
}

export async function sessionsTool(context: ToolContext, args: z.infer<typeof sessionsInput>): Promise<SessionPage> {
  await fresh(context);
  return listSessions(await context.ledger.state(), {
    limit: args.limit ?? 20,
    ...(args.correlation_id === undefined ? {} : { correlationId: args.correlation_id }),
    ...(args.state === undefined ? {} : { state: args.state }),
    ...(args.since === undefined ? {} : { since: args.since }),
    ...(args.until === undefined ? {} : { until: args.until }),
    ...(args.before === undefined ? {} : { before: args.before }),
  });
}

/**
 * The answer of a message's succeeded receipt, or null. Only an answer that passed judgement is
 * advice, as the panel comparison and the citation hold: one the judge refused (an answer that
 * obeyed an injected instruction, addressed an agent or carried a command) or that broke its budget
 * is kept in the ledger beside its receipt, whose blockers and validation errors say why, but is
 * never handed to an agent COO as an advisory agent's answer.
 */
async function answerOf(context: ToolContext, state: LedgerState, record: MessageRecord): Promise<UntrustedAnswer | null> {
  const answering = record.duplicateOf === null ? record : state.messages.get(record.duplicateOf) ?? record;
  for (const attempt of [...answering.attempts].reverse()) {
    if (attempt.receipt?.status !== 'succeeded') continue;
    const bytes = await context.ledger.readFile(attempt.receipt.path);
    if (bytes === null) continue;
    const receipt = readDocument(answering.intent === 'ea_dispatch' ? 'ea_receipt.v0' : 'aa_receipt.v0', bytes, attempt.receipt.path);
    const ref = 'output_ref' in receipt ? receipt.output_ref : null;
    if (ref === null) continue;
    const answer = await context.ledger.readFile(ref);
    if (answer !== null) return untrustedAnswer(ref, answer.toString('utf8'));
  }
  return null;
}

/** `coo show` of one message, by id only (never a path), with its answer quoted as untrusted data. */
export async function showTool(context: ToolContext, args: z.infer<typeof messageInput>): Promise<Record<string, unknown>> {
  await fresh(context);
  const state = await context.ledger.state();
  const record = recordOf(state, args.message_id);
  const view = quoteAgentWords(await viewMessage(context.ledger, state, record, context.clock()), record, state);
  return { ...view, answer: await answerOf(context, state, record) };
}

/**
 * Whether a message's words are an agent's, never the COO's or the CEO's: its source is no
 * orchestrator or human authority of the registry. An actor the registry has since dropped (or never
 * held) still wrote what it wrote: its words are quoted, as an execution or advisory agent's are.
 */
function agentWrote(record: MessageRecord, state: LedgerState): boolean {
  const registry = state.registry?.doc;
  const from = registry === undefined ? null : classOf(registry, record.source);
  return from !== 'orchestrator' && from !== 'human_authority';
}


/**
 * What an agent wrote in its own words, as show hands it to an agent COO: every free string of an
 * envelope an agent signed (a blocker's detail, its idempotency key, a retry's reason) and the
 * question it asked inside its dispatch are quoted as untrusted data, as the inbox quotes them, so
 * that show is no way around the quoting.
 */
function quoteAgentWords(view: MessageView, record: MessageRecord, state: LedgerState): MessageView {
  // A dispatch adopting a proposal states the advisory agent's words where the COO changed nothing of them.
  const adopted = adoptedWords(view.envelope);
  const attempts = view.attempts.map((attempt) => quoteReceiptDetails(quoteExecutorCommands(attempt, adopted.has('verification'))));
  const quoted = quoteAdoptedRequest({ ...view, attempts, ...(view.panel === undefined ? {} : { panel: quotePanel(view.panel) }) }, adopted);
  if (!agentWrote(record, state)) return quoted;
  return {
    ...quoted,
    envelope: quoteAgentEnvelope(quoted.envelope),
    ...(quoted.consult === undefined
      ? {}
      : {
          consult: {
            ...quoted.consult,
            question: quoted.consult.question === null ? null : quote(quoted.consult.question),
            files: quoted.consult.files.map((file) => ({ ...file, path: quote(file.path) })),
          },
        }),
  };
}

/**
 * A dispatch attempt as show hands it to an agent COO: the commands the execution agent chose to run
 * (the first of its receipt's commands_run; the rest are the runner's verification) are its own
 * words, quoted as untrusted data in the evidence and in the receipt document alike. So is the
 * verification, where it is an adopted proposal's as the advisory agent wrote it (`adopted`).
 */
function quoteExecutorCommands(attempt: AttemptView, adopted: boolean): AttemptView {
  if (attempt.dispatch === undefined) return attempt;
  const executorCommands = attempt.dispatch.commands.filter((command) => command.by === 'executor').length;
  const document = attempt.receipt?.document as { commands_run?: unknown; tests_run?: unknown } | null | undefined;
  const commandsRun = document?.commands_run;
  const testsRun = document?.tests_run;
  const words = (index: number): boolean => adopted || index < executorCommands;
  const quoteList = (list: unknown[], quoted: (index: number) => boolean): unknown[] => list.map((command, index) => (quoted(index) && typeof command === 'string' ? quote(command) : command));
  return {
    ...attempt,
    dispatch: { ...attempt.dispatch, commands: attempt.dispatch.commands.map((command) => (command.by === 'executor' || adopted ? { ...command, command: quote(command.command) } : command)) },
    ...(attempt.receipt === null || !Array.isArray(commandsRun)
      ? {}
      : {
          receipt: {
            ...attempt.receipt,
            document: { ...document, commands_run: quoteList(commandsRun, words), ...(adopted && Array.isArray(testsRun) ? { tests_run: quoteList(testsRun, () => true) } : {}) },
          },
        }),
  };
}

/** What a receipt (or its view) may hold that repeats an agent's or a provider's words. */
interface Repeating {
  readonly blockers?: ReadonlyArray<{ readonly code: string; readonly detail: string }>;
  readonly executor_session_id?: string | null;
  readonly model?: string | null;
  readonly files?: ReadonlyArray<{ readonly path: string }>;
  readonly files_changed?: readonly string[];
  readonly file_hashes?: ReadonlyArray<{ readonly path: string }>;
  /** A consult's output validation, in the attempt's view and in its receipt. */
  readonly validation?: { readonly errors: readonly string[] };
  readonly output_validation?: { readonly errors: readonly string[] };
}

/**
 * An attempt's receipt as show hands it to an agent COO: the runner writes it, but parts of it repeat
 * what the agent or a provider made, so each is quoted as untrusted data in the evidence and in the
 * receipt document alike: every blocker's detail (the names of files changed outside the scope, a
 * provider's error), the names of the files the agent changed (it chose them, within its scope),
 * the session id and model its event stream reported, and each error of a consult's output
 * validation (the judge's findings name what the advisory agent wrote: the fields of a proposal it
 * stripped, the keys of a block it refused). Codes, hashes and warnings (a code each) are the schema's.
 */
function quoteReceiptDetails(attempt: AttemptView): AttemptView {
  const quoteOrNull = (text: string | null | undefined): string | null | undefined => (typeof text === 'string' ? quote(text) : text);
  const repeated = <T extends Repeating>(of: T): T => ({
    ...of,
    ...(Array.isArray(of.blockers) ? { blockers: of.blockers.map((blocker) => (typeof blocker.detail === 'string' ? { ...blocker, detail: quote(blocker.detail) } : blocker)) } : {}),
    ...(of.executor_session_id === undefined ? {} : { executor_session_id: quoteOrNull(of.executor_session_id) }),
    ...(of.model === undefined || !('executor_session_id' in of) ? {} : { model: quoteOrNull(of.model) }),
    ...(Array.isArray(of.files) ? { files: of.files.map((file) => ({ ...file, path: quote(file.path) })) } : {}),
    ...(Array.isArray(of.files_changed) ? { files_changed: of.files_changed.map(quote) } : {}),
    ...(Array.isArray(of.file_hashes) ? { file_hashes: of.file_hashes.map((file) => ({ ...file, path: quote(file.path) })) } : {}),
    ...(Array.isArray(of.validation?.errors) ? { validation: { ...of.validation, errors: of.validation.errors.map(quote) } } : {}),
    ...(Array.isArray(of.output_validation?.errors) ? { output_validation: { ...of.output_validation, errors: of.output_validation.errors.map(quote) } } : {}),
  });
  const document = attempt.receipt?.document;
  const quotedDocument = document !== null && typeof document === 'object' ? repeated(document as Repeating) : document;
  return {
    ...attempt,
    ...(attempt.dispatch === undefined ? {} : { dispatch: repeated(attempt.dispatch) }),
    ...(attempt.consult === undefined ? {} : { consult: repeated(attempt.consult) }),
    ...(attempt.receipt === null ? {} : { receipt: { ...attempt.receipt, document: quotedDocument } }),
  };
}

/**
 * A panel's comparison as show hands it to an agent COO: each member's summary and objections are
 * its advisory agent's words, quoted as untrusted data as its answer is (the verdicts, counts and
 * paths beside them are the runner's).
 */
function quotePanel(panel: PanelComparison): PanelComparison {
  return {
    ...panel,
    members: panel.members.map((member) => ({ ...member, summary: member.summary === null ? null : quote(member.summary), objections: member.objections.map(quote) })),
    objections: panel.objections.map((entry) => ({ ...entry, objection: quote(entry.objection) })),
  };
}

/** A message's envelope, latest receipt or answer, for the resources. */
export async function messagePart(context: ToolContext, messageId: string, part: 'envelope' | 'receipt' | 'answer'): Promise<{ text: string; mimeType: string }> {
  await fresh(context);
  const state = await context.ledger.state();
  const record = recordOf(state, messageId);
  if (part === 'answer') {
    const answer = await answerOf(context, state, record);
    if (answer === null) throw new CooError('NOT_FOUND', `${messageId} has no answer that passed judgement${isTerminal(record) ? '' : ' yet'}`);
    return { text: `${answer.notice}\n\n${answer.text}\n`, mimeType: 'text/markdown' };
  }
  const last = [...record.attempts].reverse().find((attempt) => attempt.receipt !== null)?.receipt ?? null;
  const path = part === 'envelope' ? envelopePath(folderOf(record)) : last?.path;
  if (path === undefined) throw new CooError('NOT_FOUND', `${messageId} has no receipt yet`);
  const bytes = await context.ledger.readFile(path);
  if (bytes === null) throw new CooError('NOT_FOUND', `${path} is missing`);
  // An envelope an agent wrote (its blocker in its own words) is quoted as the show tool quotes it,
  // and so is a dispatch's receipt, which holds the commands its execution agent chose to run, any
  // receipt that did not succeed, whose blockers repeat what came from outside (a provider's error),
  // and a consult's receipt whose output validation found something, which names what the advisory agent wrote.
  // An adoption's envelope is quoted where it states its proposal's scope, acceptance or verification as the advisory agent wrote them.
  if ((part === 'envelope' && (agentWrote(record, state) || statesAdoptedWords(record, bytes, path))) || (part === 'receipt' && (record.intent === 'ea_dispatch' || last?.status !== 'succeeded' || (ADVISORY_INTENTS.has(record.intent) && validationFound(bytes, path))))) {
    return { text: quote(bytes.toString('utf8')), mimeType: 'text/plain' };
  }
  return { text: bytes.toString('utf8'), mimeType: 'application/yaml' };
}

/** Whether a dispatch's envelope states words of the proposal it adopts as the advisory agent wrote them (its task is in a file of its own). */
function statesAdoptedWords(record: MessageRecord, bytes: Buffer, path: string): boolean {
  if (record.adopted === undefined) return false;
  const words = adoptedWords(readDocument('coo_message.v0', bytes, path));
  return words.has('scope') || words.has('acceptance') || words.has('verification');
}

/** Whether a consult's receipt records errors of its output validation (findings on proposals stripped from an answer that passed). */
function validationFound(bytes: Buffer, path: string): boolean {
  return readDocument('aa_receipt.v0', bytes, path).output_validation.errors.length > 0;
}

/** `coo cite` without posting: the Markdown evidence and whether it verifies. */
export async function citeTool(context: ToolContext, args: z.infer<typeof messageInput>): Promise<Record<string, unknown>> {
  await fresh(context);
  const evidence = await gatherEvidence(context.ledger.gitdir, args.message_id);
  // The citation carries the advisory agents' words (summary, findings, recommendations, objections): quoted as an answer is.
  const quoted = quoteUntrusted(renderCitation(evidence));
  return { message_id: evidence.messageId, advisory: true, untrusted: true, notice: citationNotice(quoted.boundary), boundary: quoted.boundary, verified: isVerified(evidence), findings: evidence.findings.map(quoteFinding), other_refs: evidence.otherRefs.map(quote), markdown: quoted.text };
}

/**
 * A finding as a tool hands it to an agent COO: its message and path repeat what the ledger holds,
 * and a commit pushed behind the hook's back chooses its own file names and contents, so both are
 * quoted as untrusted data; the code and the commit id are the auditor's.
 */
function quoteFinding(finding: Finding): Finding {
  return { ...finding, message: quote(finding.message), ...(finding.path === undefined ? {} : { path: quote(finding.path) }) };
}

/** `coo verify`: the ledger's health, with the kill switch and the runner's heartbeat. */
export async function verifyTool(context: ToolContext): Promise<Record<string, unknown>> {
  await fresh(context);
  const now = context.clock();
  const report = await verifyLedger(context.ledger.gitdir, { now, ...(context.auditDir === null ? {} : { checkpointFile: checkpointFile(context.auditDir, context.ledger.gitdir) }) });
  const beat = report.state.lastHeartbeat;
  return {
    ok: report.findings.length === 0,
    head: report.head,
    seq: report.seq,
    commits: report.commits,
    replayed: report.replayed,
    incremental: report.incremental,
    findings: report.findings.map(quoteFinding),
    // The refs beside main it did not judge (a branch, a tag, git notes), as `coo verify --json` names them: their names are anyone's words.
    other_refs: report.otherRefs.map(quote),
    kill_switch: report.state.killSwitch?.doc.state ?? 'off',
    heartbeat: beat === null ? null : { seq: beat.seq, runner: beat.runner, expires_at: beat.expiresAt, fresh: staleHeartbeat(report.state, now) === null },
  };
}
