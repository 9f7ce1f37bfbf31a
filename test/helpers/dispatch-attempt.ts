import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { PrivateKey } from '../../src/crypto/keys.js';
import { gatherEvidence, landAttemptCommit, type ChangedFile } from '../../src/dispatch/evidence.js';
import type { Executor, ExecutorRun } from '../../src/dispatch/executor.js';
import { decideDispatch, type DispatchDecision, type EvidenceSummary } from '../../src/dispatch/outcome.js';
import { createAttemptWorktree, type AttemptWorktree } from '../../src/dispatch/worktree.js';

export interface AttemptSetup {
  readonly dir: string;
  readonly repo: string;
  readonly base: string;
  readonly key: PrivateKey;
  readonly hide: readonly string[];
}

export interface AttemptResult {
  readonly wt: AttemptWorktree;
  readonly run: ExecutorRun;
  readonly evidence: EvidenceSummary;
  readonly decision: DispatchDecision;
}

let n = 0;

/** One attempt end to end without a ledger: worktree, executor, the COO's evidence and commit, the decision. */
export async function runAttempt(
  setup: AttemptSetup,
  executor: Executor,
  options: { prompt?: string; timeoutSeconds?: number; scope?: readonly string[]; verify?: readonly string[]; prepare?: (worktree: string) => void } = {},
): Promise<AttemptResult> {
  n += 1;
  const attemptId = `ea_attempt_CONTRACT${process.pid}_${n}`;
  const scratch = join(setup.dir, `scratch-${executor.name}-${n}`);
  mkdirSync(scratch, { recursive: true });
  const wt = await createAttemptWorktree({ repo: setup.repo, base: setup.base, branch: `coo/${executor.name}-${n}`, path: join(setup.dir, `wt-${executor.name}-${n}`) });
  options.prepare?.(wt.path);
  const run = await executor.run({ attemptId, worktree: wt.path, scratch, prompt: options.prompt ?? 'Fix add() so that test.sh passes.', timeoutSeconds: options.timeoutSeconds ?? 60 });
  const gathered = await gatherEvidence(wt, {
    runnerDir: join(setup.dir, `runner-${executor.name}-${n}`),
    scope: options.scope ?? ['src/**'],
    verify: options.verify ?? ['sh test.sh'],
    verifyTimeoutSeconds: 30,
    isolation: executor.isolated ? 'bwrap' : 'none',
    hide: setup.hide,
    commit: { key: setup.key, actor: 'coo.hermes', attemptId, summary: `Work of ${attemptId}`, now: new Date() },
  });
  const evidence = gathered.summary;
  const decision = decideDispatch({ expected: { executor: executor.name, attemptId }, attemptTerminal: false, run, evidence, costUsd: 0, maxCostUsd: 1, baseSha: setup.base });
  // As the runner does once the receipt is written: the commit goes on the branch.
  if (gathered.commit !== null && evidence.commit?.branchAtBase === true) await landAttemptCommit(wt, gathered.commit.headSha, attemptId);
  return { wt, run, evidence, decision };
}

/**
 * Attempt `n`'s work (add() fixed) committed by the COO on its own branch `coo/attempt-N` of `setup.repo`, as
 * the runner leaves it after the receipt: no executor, no ledger.
 */
export async function committedAttempt(setup: Omit<AttemptSetup, 'hide'>, n: number, attemptId: string): Promise<{ readonly attemptId: string; readonly branch: string; readonly gitdir: string; readonly head: string; readonly files: readonly ChangedFile[] }> {
  const scratch = join(setup.dir, `scratch-${n}`);
  mkdirSync(scratch);
  const wt = await createAttemptWorktree({ repo: setup.repo, base: setup.base, branch: `coo/attempt-${n}`, path: join(setup.dir, `wt-${n}`) });
  writeFileSync(join(wt.path, 'src', 'add.js'), 'export const add = (a, b) => a + b;\n');
  const gathered = await gatherEvidence(wt, { runnerDir: join(scratch, 'runner'), scope: ['src/**'], verify: ['true'], verifyTimeoutSeconds: 30, isolation: 'none', hide: [], commit: { key: setup.key, actor: 'coo.hermes', attemptId, summary: 'Fix add', now: new Date('2026-12-01T12:00:00Z') } });
  const head = gathered.commit!.headSha;
  await landAttemptCommit(wt, head, attemptId);
  return { attemptId, branch: wt.branch, gitdir: wt.gitdir, head, files: gathered.snapshot.changes };
}
