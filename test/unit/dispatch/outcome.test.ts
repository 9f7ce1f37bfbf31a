import { describe, expect, it } from 'vitest';
import type { StreamFacts } from '../../../src/dispatch/executor.js';
import { decideDispatch, type DispatchFacts, type EvidenceSummary } from '../../../src/dispatch/outcome.js';
import { eaReceipt } from '../../../src/schema/receipt.js';

/** LifeOS's fail-closed matrix: one named test per row. */

const BASE = 'b'.repeat(40);
const HEAD = 'c'.repeat(40);

function stream(over: Partial<StreamFacts> = {}): StreamFacts {
  return {
    executor: 'codex',
    sessionId: 'thread-1',
    commands: [{ command: "/bin/bash -lc 'echo 2 > a.txt'", exitCode: 0 }],
    fileChanges: [],
    denials: [],
    usage: { inputTokens: 600, cachedInputTokens: 0, outputTokens: 60, reasoningTokens: 0, costUsd: null },
    observedUsage: null,
    implausibleUsage: false,
    finalMessage: 'done',
    errors: [],
    terminal: 'completed',
    afterTerminal: 0,
    malformedLines: 0,
    truncated: false,
    ...over,
  };
}

function evidence(over: Partial<EvidenceSummary> = {}): EvidenceSummary {
  return {
    changes: [{ path: 'src/a.txt' }],
    outOfScope: [],
    notRegular: [],
    tooLarge: [],
    overflow: false,
    gitLinkTampered: false,
    verification: [{ command: 'npm test', exitCode: 0, killedByTimer: false }],
    commit: { headSha: HEAD, branchAtBase: true, dirty: [] },
    ...over,
  };
}

function facts(over: { stream?: Partial<StreamFacts>; evidence?: EvidenceSummary | null; run?: Partial<DispatchFacts['run']>; top?: Partial<DispatchFacts> } = {}): DispatchFacts {
  return {
    expected: { executor: 'codex', attemptId: 'ea_attempt_X_1' },
    attemptTerminal: false,
    run: { executor: 'codex', attemptId: 'ea_attempt_X_1', exitCode: 0, killedBy: null, streamOverflow: false, facts: stream(over.stream), ...over.run },
    evidence: over.evidence === undefined ? evidence() : over.evidence,
    costUsd: 0.01,
    maxCostUsd: 1,
    baseSha: BASE,
    ...over.top,
  };
}

function receipt(f: DispatchFacts) {
  const decision = decideDispatch(f);
  if (decision.kind !== 'receipt') throw new Error(`expected a receipt, got ${decision.kind}`);
  // Every decision must make a receipt the schema accepts.
  eaReceipt.parse({
    schema_version: 'ea_receipt.v0',
    message_id: 'msg_01ARZ3NDEKTSV4RRFFQ69G5FAV',
    attempt_id: 'ea_attempt_01ARZ3NDEKTSV4RRFFQ69G5FAV_1',
    attempt_number: 1,
    target_actor: 'ea.codex',
    status: decision.status,
    created_at: '2026-01-01T00:00:00Z',
    blockers: decision.blockers.map(({ code, detail }) => ({ code, detail })),
    next_attempt_at: null,
    commands_run: decision.commandsRun,
    inner_exit_codes: decision.innerExitCodes,
    files_changed: decision.filesChanged,
    tests_run: decision.testsRun,
    head_sha: decision.headSha,
    executor: 'codex',
    executor_session_id: 'thread-1',
    model: 'gpt-5.5',
    base_sha: BASE,
    branch: decision.headSha === BASE ? null : 'coo/x',
    file_hashes: decision.filesChanged.map((path) => ({ path, sha256: `sha256:${'0'.repeat(64)}` })),
    attachments: [],
    policy_decision_ref: 'trust/policy/000001.yaml@sha256:0',
    usage: null,
    actual_cost_usd: 0.01,
    warnings: [],
  });
  return decision;
}

const rows = (f: DispatchFacts): string[] => receipt(f).blockers.map((blocker) => blocker.row);

describe('the dispatch decision', () => {
  it('succeeds with a completed turn, in-scope committed changes and passing verification', () => {
    const decision = receipt(facts());
    expect(decision).toMatchObject({ status: 'succeeded', blockers: [], headSha: HEAD, filesChanged: ['src/a.txt'], testsRun: ['npm test'], innerExitCodes: [0, 0] });
    expect(decision.commandsRun).toEqual(["/bin/bash -lc 'echo 2 > a.txt'", 'npm test']);
  });

  it('treats wrapper exit 0 without a completed turn as transport health only', () => {
    const decision = receipt(facts({ stream: { terminal: 'failed' } }));
    expect(decision.status).toBe('failed');
    expect(rows(facts({ stream: { terminal: 'failed' } }))).toContain('no_completed_turn');
  });

  it('turns a missing result into timed_out', () => {
    const f = facts({ stream: { terminal: null, finalMessage: null, usage: null } });
    expect(receipt(f).status).toBe('timed_out');
    expect(rows(f)).toContain('missing_result');
  });

  it('fails a malformed event stream', () => {
    const f = facts({ stream: { malformedLines: 1 } });
    expect(receipt(f).status).toBe('failed');
    expect(rows(f)).toEqual(['malformed_stream']);
  });

  it('fails a truncated event stream', () => {
    const f = facts({ stream: { truncated: true } });
    expect(receipt(f).status).toBe('failed');
    expect(rows(f)).toEqual(['truncated_stream']);
  });

  it('fails a stream that passed its bound', () => {
    const f = facts({ run: { killedBy: 'stream_bound', streamOverflow: true, exitCode: null }, stream: { terminal: null } });
    expect(rows(f)).toContain('stream_overflow');
    expect(receipt(f).status).not.toBe('succeeded');
  });

  it('fails a checkout of the commit that the verification left dirty', () => {
    const f = facts({ evidence: evidence({ commit: { headSha: HEAD, branchAtBase: true, dirty: ['src/generated.txt'] } }) });
    expect(receipt(f).status).toBe('failed');
    expect(rows(f)).toEqual(['dirty_worktree']);
  });

  it('fails a partial commit (the branch moved off the base before the runner\'s commit could land)', () => {
    const f = facts({ evidence: evidence({ commit: { headSha: HEAD, branchAtBase: false, dirty: [] } }) });
    expect(receipt(f).status).toBe('failed');
    expect(rows(f)).toEqual(['partial_commit']);
  });

  it('records a result arriving after the attempt is terminal and never applies it', () => {
    expect(decideDispatch(facts({ top: { attemptTerminal: true } }))).toMatchObject({ kind: 'late' });
  });

  it('never lets events after the stream\'s terminal event change the outcome', () => {
    // A turn.completed after turn.failed is counted in afterTerminal by the parser, not applied.
    const f = facts({ stream: { terminal: 'failed', afterTerminal: 1 } });
    expect(receipt(f).status).toBe('failed');
  });

  it('fails a completed turn whose stream goes on after it: what comes after is not applied, so the receipt would list less than the stream says', () => {
    const f = facts({ stream: { terminal: 'completed', afterTerminal: 2 } });
    expect(receipt(f).status).toBe('failed');
    expect(rows(f)).toEqual(['malformed_stream']);
  });

  it('refuses a result from the wrong executor', () => {
    expect(decideDispatch(facts({ run: { executor: 'claude_code' } }))).toMatchObject({ kind: 'foreign', row: 'wrong_executor' });
  });

  it('refuses a result for the wrong attempt', () => {
    expect(decideDispatch(facts({ run: { attemptId: 'ea_attempt_X_2' } }))).toMatchObject({ kind: 'foreign', row: 'wrong_attempt' });
  });

  it('blocks on a permission denial named by an enumerated code', () => {
    const f = facts({ stream: { denials: [{ code: 'tool_denied', tool: 'Bash' }] } });
    expect(receipt(f).status).toBe('blocked');
    expect(receipt(f).blockers[0]).toMatchObject({ code: 'permission_denied', row: 'permission_denied' });
  });

  it('never reads a denial from error text', () => {
    const f = facts({ stream: { errors: ['permission denied', 'Operation not permitted', 'EACCES'] } });
    expect(receipt(f).status).toBe('succeeded');
  });

  it('makes an ambiguous outcome needs_decision (a completed turn, but the wrapper failed)', () => {
    const f = facts({ run: { exitCode: 1 } });
    expect(receipt(f).status).toBe('blocked');
    expect(receipt(f).blockers).toEqual([expect.objectContaining({ code: 'needs_decision', row: 'ambiguous' })]);
  });

  it('makes reported file changes that git does not show needs_decision', () => {
    const f = facts({ stream: { fileChanges: [{ path: '/w/src/a.txt', kind: 'add' }] }, evidence: evidence({ changes: [], commit: null, dirtyWithoutCommit: [] }) });
    expect(receipt(f).status).toBe('blocked');
    expect(rows(f)).toEqual(['ambiguous']);
  });

  it('rejects success on any nonzero verification exit', () => {
    const f = facts({ evidence: evidence({ verification: [{ command: 'npm test', exitCode: 0, killedByTimer: false }, { command: 'npm run lint', exitCode: 2, killedByTimer: false }] }) });
    const decision = receipt(f);
    expect(decision.status).toBe('failed');
    expect(decision.innerExitCodes).toEqual([0, 0, 2]);
    expect(rows(f)).toEqual(['verification_failed']);
  });

  it('rejects success when a verification command timed out', () => {
    const f = facts({ evidence: evidence({ verification: [{ command: 'npm test', exitCode: null, killedByTimer: true }] }) });
    expect(receipt(f).status).toBe('failed');
    expect(rows(f)).toEqual(['verification_failed']);
  });

  it('fails an out-of-scope change', () => {
    const f = facts({ evidence: evidence({ outOfScope: ['.github/workflows/ci.yml'] }) });
    expect(receipt(f).status).toBe('failed');
    expect(receipt(f).blockers[0]).toMatchObject({ code: 'scope_violation', row: 'out_of_scope' });
  });

  it('fails a symbolic link or a replaced .git link as out of scope', () => {
    expect(rows(facts({ evidence: evidence({ notRegular: [{ path: 'src/link', why: 'symlink' }] }) }))).toEqual(['out_of_scope']);
    expect(rows(facts({ evidence: evidence({ gitLinkTampered: true }) }))).toEqual(['out_of_scope']);
  });

  it('fails work the runner could not read whole, names no head, and does not ask for a verification that could not run', () => {
    for (const over of [{ overflow: true }, { tooLarge: ['src/huge.bin'] }]) {
      const f = facts({ evidence: evidence({ ...over, commit: null, verification: [] }) });
      expect(rows(f)).toEqual(['work_too_large']);
      expect(receipt(f)).toMatchObject({ status: 'failed', headSha: null });
    }
  });

  it('fails an attempt with an error of the runner\'s own, keeping the evidence it had', () => {
    const error = { code: 'INTERNAL', message: 'EISDIR: illegal operation on a directory' };
    expect(rows(facts({ evidence: null, top: { runnerError: error } }))).toEqual(['runner_error']);
    const f = facts({ top: { runnerError: error }, evidence: evidence({ outOfScope: ['.github/ci.yml'] }) });
    expect(rows(f)).toEqual(['runner_error', 'out_of_scope']);
    expect(receipt(f).blockers[0]!.detail).toBe('INTERNAL: EISDIR: illegal operation on a directory');
  });

  it('keeps the executor\'s first commands and every verification command within the 200 a receipt lists, and counts the rest', () => {
    const commands = Array.from({ length: 250 }, (_, i) => ({ command: `echo ${i}`, exitCode: i === 230 ? 1 : 0 }));
    const f = facts({ stream: { commands } });
    const decided = receipt(f);
    expect(decided.commandsRun).toHaveLength(200);
    expect(decided.commandsRun.at(-1)).toBe('npm test');
    expect(decided.commandsOmitted).toBe(51);
    // A failure among the commands left out still fails the attempt.
    expect(decided.status).toBe('failed');
    expect(rows(f)).toEqual(['inner_command_failed']);
  });

  it('times out on a time budget breach', () => {
    const f = facts({ run: { killedBy: 'timeout', exitCode: null }, stream: { terminal: null } });
    expect(receipt(f).status).toBe('timed_out');
    expect(receipt(f).blockers[0]).toMatchObject({ code: 'budget_runtime_breach', row: 'budget_time' });
  });

  it('fails on a cost budget breach', () => {
    const killed = facts({ run: { killedBy: 'cost', exitCode: null }, stream: { terminal: null } });
    expect(rows(killed)).toContain('budget_cost');
    const over = facts({ top: { costUsd: 2, maxCostUsd: 1 } });
    expect(receipt(over).status).toBe('failed');
    expect(rows(over)).toEqual(['budget_cost']);
  });

  it('fails when the runner could not gather its own evidence', () => {
    const f = facts({ evidence: null });
    expect(receipt(f).status).toBe('failed');
    expect(receipt(f).headSha).toBeNull();
    expect(rows(f)).toEqual(['no_evidence']);
  });

  it('fails when an executor command exited nonzero (ea_receipt.v0 counts every inner exit code)', () => {
    const f = facts({ stream: { commands: [{ command: 'false', exitCode: 1 }] } });
    expect(receipt(f).status).toBe('failed');
    expect(rows(f)).toEqual(['inner_command_failed']);
  });

  it('needs a verification command before it can succeed', () => {
    const f = facts({ evidence: evidence({ verification: [] }) });
    expect(receipt(f).status).toBe('blocked');
    expect(rows(f)).toEqual(['ambiguous']);
  });
});
