import { clipText } from '../util/bytes.js';
import type { BlockerCode, ReceiptStatus } from '../schema/receipt.js';
import type { ExecutorName, StreamFacts } from './executor.js';

/**
 * The dispatch lane's fail-closed decision (LifeOS's matrix). Pure: the run's facts and the COO's
 * own evidence in, the receipt's status, blockers and evidence fields out. Success needs a
 * completed turn, a clean and well-formed stream, in-scope changes committed exactly, and every
 * verification command exiting 0; the agent's narrative and its wrapper's exit code alone prove
 * nothing.
 */

/** One row of the matrix each blocker comes from: stable names for tests and audits. */
export type MatrixRow =
  | 'no_completed_turn'
  | 'missing_result'
  | 'malformed_stream'
  | 'truncated_stream'
  | 'stream_overflow'
  | 'dirty_worktree'
  | 'partial_commit'
  | 'no_evidence'
  | 'permission_denied'
  | 'ambiguous'
  | 'verification_failed'
  | 'out_of_scope'
  | 'budget_time'
  | 'budget_cost'
  | 'inner_command_failed'
  | 'work_too_large'
  | 'runner_error';

export interface RunSummary {
  readonly executor: ExecutorName;
  readonly attemptId: string;
  readonly exitCode: number | null;
  readonly killedBy: 'timeout' | 'cost' | 'stream_bound' | null;
  readonly streamOverflow: boolean;
  readonly facts: StreamFacts;
  /** Why nothing ran, when the executor's sandbox never stood. */
  readonly notStarted?: string;
}

export interface EvidenceSummary {
  readonly changes: ReadonlyArray<{ readonly path: string }>;
  readonly outOfScope: readonly string[];
  /**
   * Entries that are not work, with what each is: a link, a FIFO, a socket, a `.git` entry, a name the ledger cannot record;
   * a `.gitattributes` by which a checkout or an archive writes the commit's files in a new way, with what it changes (`detail`).
   */
  readonly notRegular: ReadonlyArray<{ readonly path: string; readonly why: string; readonly detail?: string }>;
  /** Files over the bound the runner reads: the work was not read whole. */
  readonly tooLarge: readonly string[];
  /** More entries or bytes than the runner reads: the work was not read whole. */
  readonly overflow: boolean;
  readonly gitLinkTampered: boolean;
  /** Changed files holding a secret the runner holds or handed the agent, in their bytes or their names: nothing was written, committed or verified (the runner says why). */
  readonly holdingSecrets?: readonly string[];
  readonly verification: ReadonlyArray<{ readonly command: string; readonly exitCode: number | null; readonly killedByTimer: boolean }>;
  /**
   * The runner's commit of the work; null when nothing was committed (no changes, or work not read
   * whole). `branchAtBase`: the attempt's branch still points at the base, so the commit can land
   * on it; `dirty`: what the verification changed in its checkout of the commit.
   */
  readonly commit: { readonly headSha: string; readonly branchAtBase: boolean; readonly dirty: readonly string[] } | null;
  /** What the verification changed in its checkout of the base, when nothing was committed. */
  readonly dirtyWithoutCommit?: readonly string[];
}

export interface DispatchFacts {
  /** What the dispatch names: the executor and the attempt this result must belong to. */
  readonly expected: { readonly executor: ExecutorName; readonly attemptId: string };
  /** True when this attempt already has its receipt: a result now is late. */
  readonly attemptTerminal: boolean;
  readonly run: RunSummary;
  /** The COO's own evidence; null when it could not be gathered. */
  readonly evidence: EvidenceSummary | null;
  readonly costUsd: number;
  readonly maxCostUsd: number;
  readonly baseSha: string;
  /** An error of the runner's own inside the attempt (its code and message): what is known is still receipted. */
  readonly runnerError?: { readonly code: string; readonly message: string } | null;
}

export interface DispatchBlocker {
  readonly code: BlockerCode;
  readonly row: MatrixRow;
  readonly detail: string;
}

export type DispatchDecision =
  /** A result for an attempt that already ended: recorded, never applied. */
  | { readonly kind: 'late'; readonly detail: string }
  /** A result from another executor or attempt: refused, never applied to this one. */
  | { readonly kind: 'foreign'; readonly row: 'wrong_executor' | 'wrong_attempt'; readonly detail: string }
  | {
      readonly kind: 'receipt';
      readonly status: ReceiptStatus;
      readonly blockers: readonly DispatchBlocker[];
      /** The EA's commands, then the verification commands, in order; exit codes beside them (-1: none). */
      readonly commandsRun: readonly string[];
      readonly innerExitCodes: readonly number[];
      /** The executor's commands past what a receipt holds (ea_receipt.v0: 200 in all). */
      readonly commandsOmitted: number;
      readonly filesChanged: readonly string[];
      readonly testsRun: readonly string[];
      readonly headSha: string | null;
    };

/** The most commands an ea_receipt.v0 lists. */
const MAX_COMMANDS = 200;

const TIMED_OUT: ReadonlySet<MatrixRow> = new Set(['missing_result', 'budget_time']);
const BLOCKED: ReadonlySet<MatrixRow> = new Set(['permission_denied', 'ambiguous']);

const list = (paths: readonly string[]): string => `${paths.slice(0, 5).join(', ')}${paths.length > 5 ? ` and ${paths.length - 5} more` : ''}`;

function runBlockers(facts: DispatchFacts): DispatchBlocker[] {
  const { run } = facts;
  const out: DispatchBlocker[] = [];
  const add = (code: BlockerCode, row: MatrixRow, detail: string): void => {
    out.push({ code, row, detail });
  };
  if (run.killedBy === 'timeout') add('budget_runtime_breach', 'budget_time', 'killed by the runner at the dispatch\'s timeout');
  if (run.killedBy === 'cost' || facts.costUsd > facts.maxCostUsd) add('budget_cost_breach', 'budget_cost', `cost ${facts.costUsd.toFixed(4)} USD over the ${facts.maxCostUsd} USD budget`);
  if (run.killedBy === 'stream_bound' || run.streamOverflow) add('stream_overflow', 'stream_overflow', 'the event stream passed its bound: the run was stopped and its stream kept up to the bound');
  const stream = run.facts;
  if (stream.malformedLines > 0) add('stream_malformed', 'malformed_stream', `${stream.malformedLines} line(s) of the event stream are not events of this run (not JSON events of a known shape, or naming another session than its own)`);
  if (stream.truncated) add('stream_truncated', 'truncated_stream', 'the event stream ends mid-event');
  // No executor says anything after its terminal event: what such events state (a command, its exit, a refusal) is not
  // applied, so the receipt would list less than the stream it keeps says ran.
  if (stream.afterTerminal > 0) add('stream_malformed', 'malformed_stream', `${stream.afterTerminal} event(s) of the stream come after its terminal event: what they state is not taken, and the run is not taken as clean`);
  // A sandbox that never stood ran nothing: the runner's machine could not set it up, no result went missing.
  if (run.notStarted !== undefined) add('config_error', 'runner_error', run.notStarted);
  else if (stream.terminal === null && run.killedBy === null) add('timeout', 'missing_result', `the executor exited ${run.exitCode ?? 'by a signal'} without a terminal event`);
  if (stream.terminal === 'failed') add('output_missing', 'no_completed_turn', `the turn failed (wrapper exit ${run.exitCode ?? 'none'}): transport health is not success`);
  if (stream.terminal === 'completed' && run.exitCode !== 0 && run.killedBy === null) add('needs_decision', 'ambiguous', `a completed turn, but the executor exited ${run.exitCode ?? 'by a signal'}`);
  if (stream.denials.length > 0) add('permission_denied', 'permission_denied', `${stream.denials.length} refusal(s): ${[...new Set(stream.denials.map((denial) => `${denial.code}:${denial.tool}`))].join(', ')}`);
  return out;
}

function evidenceBlockers(facts: DispatchFacts): DispatchBlocker[] {
  const evidence = facts.evidence;
  if (facts.runnerError != null) {
    const runner: DispatchBlocker = { code: 'runner_error', row: 'runner_error', detail: `${facts.runnerError.code}: ${facts.runnerError.message}` };
    return evidence === null ? [runner] : [runner, ...evidenceBlockers({ ...facts, runnerError: null })];
  }
  if (evidence === null) return [{ code: 'output_missing', row: 'no_evidence', detail: 'the runner could not gather its own evidence from the worktree' }];
  const out: DispatchBlocker[] = [];
  if (evidence.overflow) out.push({ code: 'work_too_large', row: 'work_too_large', detail: 'the worktree holds more entries or bytes than the runner reads: nothing was committed or verified' });
  if (evidence.tooLarge.length > 0) out.push({ code: 'work_too_large', row: 'work_too_large', detail: `files over the bound the runner reads: ${list(evidence.tooLarge)}; nothing was committed or verified` });
  if (evidence.outOfScope.length > 0) out.push({ code: 'scope_violation', row: 'out_of_scope', detail: `changed outside the scope: ${list(evidence.outOfScope)}` });
  // Attributes that have a checkout write the commit's files otherwise than verified, and files it writes through a filter, apart.
  const rewriting = (entry: { readonly why: string }): boolean => entry.why === 'checkout_attributes' || entry.why === 'filtered';
  const notWork = evidence.notRegular.filter((entry) => !rewriting(entry));
  const rewritten = evidence.notRegular.filter(rewriting);
  if (notWork.length > 0) out.push({ code: 'scope_violation', row: 'out_of_scope', detail: `not work (only regular files with names the ledger can record and every checkout writes apart are): ${list(notWork.map((entry) => `${entry.path} (${entry.why}${entry.detail === undefined ? '' : `: ${entry.detail}`})`))}` });
  if (rewritten.length > 0) out.push({ code: 'scope_violation', row: 'out_of_scope', detail: `changes how a checkout or an archive writes the commit's files, other than as verified: ${list(rewritten.map((entry) => `${entry.path} (${entry.why}${entry.detail === undefined ? '' : `: ${entry.detail}`})`))}` });
  if (evidence.gitLinkTampered) out.push({ code: 'scope_violation', row: 'out_of_scope', detail: 'the worktree\'s .git link was changed' });
  if (evidence.verification.length === 0 && !evidence.overflow && evidence.tooLarge.length === 0 && (evidence.holdingSecrets ?? []).length === 0) out.push({ code: 'needs_decision', row: 'ambiguous', detail: 'no verification command ran: nothing proves the work' });
  const failed = evidence.verification.filter((result) => result.exitCode !== 0);
  if (failed.length > 0) out.push({ code: 'tests_failed', row: 'verification_failed', detail: `${failed.length} verification command(s) did not exit 0: ${clipText(failed.map((result) => (result.killedByTimer ? `${result.command} (timed out)` : `${result.command} (exit ${result.exitCode ?? 'none'})`)).join('; '), 400)}` });
  const stated = facts.run.facts.fileChanges.length;
  if (stated > 0 && evidence.changes.length === 0) out.push({ code: 'needs_decision', row: 'ambiguous', detail: `the executor reports ${stated} file change(s), git shows none` });
  if (evidence.commit !== null && !evidence.commit.branchAtBase) out.push({ code: 'commit_partial', row: 'partial_commit', detail: 'the attempt branch moved off the base: the runner\'s commit was not put on it' });
  const dirty = evidence.commit?.dirty ?? evidence.dirtyWithoutCommit ?? [];
  // The runner checks the checkout after each command and runs none after one that changed it (evidence.ts): that is the last.
  const changer = evidence.verification.at(-1);
  if (dirty.length > 0) out.push({ code: 'worktree_dirty', row: 'dirty_worktree', detail: `the verification changed its checkout of the committed work: ${list(dirty)}${changer === undefined ? '' : `, after ${changer.command}; no command after it ran`}` });
  return out;
}

/** The commit the receipt names: the runner's, the base when nothing changed, none when the work was not read whole or holds a secret. */
function headOf(facts: DispatchFacts): string | null {
  const evidence = facts.evidence;
  if (evidence === null || evidence.overflow || evidence.tooLarge.length > 0 || (evidence.holdingSecrets ?? []).length > 0) return null;
  return evidence.commit?.headSha ?? facts.baseSha;
}

/** The decision for one executor result. */
export function decideDispatch(facts: DispatchFacts): DispatchDecision {
  const { run, expected } = facts;
  if (facts.attemptTerminal) return { kind: 'late', detail: `a result for ${run.attemptId} after its receipt: recorded, not applied` };
  if (run.executor !== expected.executor) return { kind: 'foreign', row: 'wrong_executor', detail: `a result from ${run.executor}, the dispatch names ${expected.executor}` };
  if (run.attemptId !== expected.attemptId) return { kind: 'foreign', row: 'wrong_attempt', detail: `a result for ${run.attemptId}, expected ${expected.attemptId}` };
  const blockers = [...runBlockers(facts), ...evidenceBlockers(facts)];
  const verification = facts.evidence?.verification ?? [];
  const allCodes = [...run.facts.commands.map((command) => command.exitCode), ...verification.map((result) => result.exitCode)].map((code) => (code === null ? -1 : Math.max(-255, Math.min(255, code))));
  // The receipt holds MAX_COMMANDS: the executor's first ones and every verification; the rest are counted (and kept whole as an artifact by the runner).
  const kept = Math.max(0, Math.min(run.facts.commands.length, MAX_COMMANDS - verification.length));
  const commandsOmitted = run.facts.commands.length - kept;
  const commandsRun = [...run.facts.commands.slice(0, kept).map((command) => command.command), ...verification.map((result) => result.command)].map((command) => clipText(command, 2000));
  const innerExitCodes = [...allCodes.slice(0, kept), ...allCodes.slice(run.facts.commands.length)];
  // ea_receipt.v0: any nonzero inner exit code forces failure, the EA's own commands included.
  if (allCodes.some((code) => code !== 0) && !blockers.some((blocker) => !TIMED_OUT.has(blocker.row) && !BLOCKED.has(blocker.row))) {
    const failedCommands = run.facts.commands.filter((command) => command.exitCode !== 0);
    if (failedCommands.length > 0) blockers.push({ code: 'command_failed', row: 'inner_command_failed', detail: `${failedCommands.length} command(s) of the executor did not exit 0` });
  }
  const rows = new Set(blockers.map((blocker) => blocker.row));
  const status: ReceiptStatus =
    blockers.length === 0
      ? 'succeeded'
      : [...rows].some((row) => TIMED_OUT.has(row))
        ? 'timed_out'
        : [...rows].every((row) => BLOCKED.has(row)) && allCodes.every((code) => code === 0)
          ? 'blocked'
          : 'failed';
  return {
    kind: 'receipt',
    status,
    blockers: blockers.slice(0, 20).map((blocker) => ({ ...blocker, detail: clipText(blocker.detail, 2000) })),
    commandsRun,
    innerExitCodes,
    commandsOmitted,
    filesChanged: (facts.evidence?.changes ?? []).map((change) => change.path),
    testsRun: verification.map((result) => result.command),
    headSha: headOf(facts),
  };
}
