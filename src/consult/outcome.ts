import type { BlockerCode } from '../schema/receipt.js';

/** What one Oracle run left behind, gathered by the adapter. */
export interface OracleRun {
  readonly exitCode: number | null;
  readonly signal: string | null;
  /** True when our own timer killed the process group (the runtime budget). */
  readonly killedByTimer: boolean;
  readonly elapsedMs: number;
  readonly sessionId: string | null;
  readonly meta: OracleSessionMeta | null;
  readonly answer: Buffer | null;
  readonly stdoutTail: string;
  readonly stderrTail: string;
}

/** The fields of Oracle's `sessions/<id>/meta.json` the lane reads (oracle-cli notes, section 3). */
export interface OracleSessionMeta {
  readonly status: string | null;
  readonly model: string | null;
  readonly usage: { inputTokens: number; outputTokens: number; reasoningTokens: number; totalTokens: number; cost: number | null } | null;
  readonly errorMessage: string | null;
  readonly transportReason: string | null;
  readonly errorCategory: string | null;
  readonly incompleteReason: string | null;
  readonly responseId: string | null;
}

export type RunVerdict =
  | { readonly ok: true }
  | { readonly ok: false; readonly blocker: BlockerCode; readonly status: 'failed' | 'timed_out'; readonly detail: string };

function classify(text: string): BlockerCode | null {
  if (/insufficient_quota|exceeded your current quota|quota exceeded|billing/i.test(text)) return 'aa_unavailable:quota';
  if (/rate.?limit|\b429\b|too many requests/i.test(text)) return 'aa_unavailable:rate_limited';
  if (/\b401\b|\b403\b|invalid api key|incorrect api key|unauthori[sz]ed|missing [a-z_]*api_key/i.test(text)) return 'aa_unavailable:auth';
  if (/model[^\n]*(not found|does not exist|unavailable)|unsupported model/i.test(text)) return 'aa_unavailable:model';
  return null;
}

/**
 * Success is exit 0, and `meta.json` status `completed`, and an answer file. Exit codes alone are
 * not evidence: Oracle exits 1 for every failure and can exit 0 when a session failed.
 */
export function judgeRun(run: OracleRun): RunVerdict {
  if (run.killedByTimer) {
    return { ok: false, blocker: 'budget_runtime_breach', status: 'timed_out', detail: `killed after ${Math.round(run.elapsedMs / 1000)} s: the message's runtime budget` };
  }
  const meta = run.meta;
  const text = [meta?.errorMessage, meta?.errorCategory, run.stdoutTail.split('\n').filter((line) => line.includes('ERROR')).join(' '), run.stderrTail].filter(Boolean).join(' ');
  if (run.exitCode === 0 && meta?.status === 'completed') {
    if (run.answer === null || run.answer.length === 0) return { ok: false, blocker: 'output_missing', status: 'failed', detail: 'Oracle reported completion but wrote no answer file' };
    return { ok: true };
  }
  if (meta?.incompleteReason != null) {
    return { ok: false, blocker: 'output_missing', status: 'failed', detail: `response did not complete: ${meta.incompleteReason}` };
  }
  const named = classify(text);
  if (named !== null) return { ok: false, blocker: named, status: 'failed', detail: (meta?.errorMessage ?? text).slice(0, 300) };
  if (meta?.transportReason === 'client-timeout') return { ok: false, blocker: 'aa_unavailable:timeout', status: 'failed', detail: 'the provider did not answer in time' };
  if (meta?.transportReason != null) return { ok: false, blocker: 'aa_unavailable:transport', status: 'failed', detail: `${meta.transportReason}: ${(meta.errorMessage ?? '').slice(0, 200)}` };
  if (meta === null && run.exitCode === 0) return { ok: false, blocker: 'output_missing', status: 'failed', detail: 'Oracle exited 0 but left no session record' };
  if (run.exitCode === 0) return { ok: false, blocker: 'aa_unavailable:unknown', status: 'failed', detail: `Oracle exited 0 with session status ${meta?.status ?? 'unknown'}` };
  return { ok: false, blocker: 'aa_unavailable:unknown', status: 'failed', detail: `Oracle exited ${run.exitCode ?? run.signal}: ${text.slice(0, 240)}` };
}
