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
  | 'inner_command_failed';

export interface RunSummary {
  readonly executor: ExecutorName;
  readonly attemptId: string;
  readonly exitCode: number | null;
  readonly killedBy: 'timeout' | 'cost' | 'stream_bound' | null;
  readonly streamOverflow: boolean;
  readonly facts: StreamFacts;
}

export interface EvidenceSummary {
  readonly changes: ReadonlyArray<{ readonly path: string }>;
  readonly outOfScope: readonly string[];
  readonly notRegular: readonly string[];
  readonly gitLinkTampered: boolean;
  readonly verification: ReadonlyArray<{ readonly command: string; readonly exitCode: number | null; readonly killedByTimer: boolean }>;
  /** Null when nothing was committed (no changes). */
  readonly commit: { readonly headSha: string; readonly headMatches: boolean; readonly dirty: readonly string[] } | null;
  /** The dirty paths when nothing was committed (the work tree against the base). */
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
      readonly filesChanged: readonly string[];
      readonly testsRun: readonly string[];
      readonly headSha: string | null;
    };

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
  if (stream.malformedLines > 0) add('stream_malformed', 'malformed_stream', `${stream.malformedLines} line(s) of the event stream are not events`);
  if (stream.truncated) add('stream_truncated', 'truncated_stream', 'the event stream ends mid-event');
  if (stream.terminal === null && run.killedBy === null) add('timeout', 'missing_result', `the executor exited ${run.exitCode ?? 'by a signal'} without a terminal event`);
  if (stream.terminal === 'failed') add('output_missing', 'no_completed_turn', `the turn failed (wrapper exit ${run.exitCode ?? 'none'}): transport health is not success`);
  if (stream.terminal === 'completed' && run.exitCode !== 0 && run.killedBy === null) add('needs_decision', 'ambiguous', `a completed turn, but the executor exited ${run.exitCode ?? 'by a signal'}`);
  if (stream.denials.length > 0) add('permission_denied', 'permission_denied', `${stream.denials.length} refusal(s): ${[...new Set(stream.denials.map((denial) => `${denial.code}:${denial.tool}`))].join(', ')}`);
  return out;
}

function evidenceBlockers(facts: DispatchFacts): DispatchBlocker[] {
  const evidence = facts.evidence;
  if (evidence === null) return [{ code: 'output_missing', row: 'no_evidence', detail: 'the runner could not gather its own evidence from the worktree' }];
  const out: DispatchBlocker[] = [];
  if (evidence.outOfScope.length > 0) out.push({ code: 'scope_violation', row: 'out_of_scope', detail: `changed outside the scope: ${list(evidence.outOfScope)}` });
  if (evidence.notRegular.length > 0) out.push({ code: 'scope_violation', row: 'out_of_scope', detail: `not regular files: ${list(evidence.notRegular)}` });
  if (evidence.gitLinkTampered) out.push({ code: 'scope_violation', row: 'out_of_scope', detail: 'the worktree\'s .git link was changed' });
  if (evidence.verification.length === 0) out.push({ code: 'needs_decision', row: 'ambiguous', detail: 'no verification command ran: nothing proves the work' });
  const failed = evidence.verification.filter((result) => result.exitCode !== 0);
  if (failed.length > 0) out.push({ code: 'tests_failed', row: 'verification_failed', detail: `${failed.length} verification command(s) did not exit 0: ${failed.map((result) => (result.killedByTimer ? `${result.command} (timed out)` : `${result.command} (exit ${result.exitCode ?? 'none'})`)).join('; ').slice(0, 400)}` });
  const stated = facts.run.facts.fileChanges.length;
  if (stated > 0 && evidence.changes.length === 0) out.push({ code: 'needs_decision', row: 'ambiguous', detail: `the executor reports ${stated} file change(s), git shows none` });
  if (evidence.commit !== null && !evidence.commit.headMatches) out.push({ code: 'commit_partial', row: 'partial_commit', detail: 'the attempt branch does not hold the commit the runner made' });
  const dirty = evidence.commit?.dirty ?? evidence.dirtyWithoutCommit ?? [];
  if (dirty.length > 0) out.push({ code: 'worktree_dirty', row: 'dirty_worktree', detail: `the worktree differs from the committed work: ${list(dirty)}` });
  return out;
}

/** The decision for one executor result. */
export function decideDispatch(facts: DispatchFacts): DispatchDecision {
  const { run, expected } = facts;
  if (facts.attemptTerminal) return { kind: 'late', detail: `a result for ${run.attemptId} after its receipt: recorded, not applied` };
  if (run.executor !== expected.executor) return { kind: 'foreign', row: 'wrong_executor', detail: `a result from ${run.executor}, the dispatch names ${expected.executor}` };
  if (run.attemptId !== expected.attemptId) return { kind: 'foreign', row: 'wrong_attempt', detail: `a result for ${run.attemptId}, expected ${expected.attemptId}` };
  const blockers = [...runBlockers(facts), ...evidenceBlockers(facts)];
  const verification = facts.evidence?.verification ?? [];
  const commandsRun = [...run.facts.commands.map((command) => command.command), ...verification.map((result) => result.command)].map((command) => command.slice(0, 2000));
  const innerExitCodes = [...run.facts.commands.map((command) => command.exitCode), ...verification.map((result) => result.exitCode)].map((code) => (code === null ? -1 : Math.max(-255, Math.min(255, code))));
  // ea_receipt.v0: any nonzero inner exit code forces failure, the EA's own commands included.
  if (innerExitCodes.some((code) => code !== 0) && !blockers.some((blocker) => !TIMED_OUT.has(blocker.row) && !BLOCKED.has(blocker.row))) {
    const failedCommands = run.facts.commands.filter((command) => command.exitCode !== 0);
    if (failedCommands.length > 0) blockers.push({ code: 'command_failed', row: 'inner_command_failed', detail: `${failedCommands.length} command(s) of the executor did not exit 0` });
  }
  const rows = new Set(blockers.map((blocker) => blocker.row));
  const status: ReceiptStatus =
    blockers.length === 0
      ? 'succeeded'
      : [...rows].some((row) => TIMED_OUT.has(row))
        ? 'timed_out'
        : [...rows].every((row) => BLOCKED.has(row)) && innerExitCodes.every((code) => code === 0)
          ? 'blocked'
          : 'failed';
  return {
    kind: 'receipt',
    status,
    blockers: blockers.slice(0, 20).map((blocker) => ({ ...blocker, detail: blocker.detail.slice(0, 2000) })),
    commandsRun,
    innerExitCodes,
    filesChanged: (facts.evidence?.changes ?? []).map((change) => change.path),
    testsRun: verification.map((result) => result.command),
    headSha: facts.evidence?.commit?.headSha ?? (facts.evidence === null ? null : facts.baseSha),
  };
}
