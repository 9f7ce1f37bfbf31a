import { LIMITS } from '../limits.js';
import type { BlockerCode } from '../schema/receipt.js';
import { redirectRefusal } from './no-redirects.js';

/** What one Oracle run left behind, gathered by the adapter. */
export interface OracleRun {
  readonly exitCode: number | null;
  readonly signal: string | null;
  /** True when our own timer killed the process group (the runtime budget). */
  readonly killedByTimer: boolean;
  readonly elapsedMs: number;
  readonly sessionId: string | null;
  readonly meta: OracleSessionMeta | null;
  /** Oracle's session record as `meta` was read from it, to keep with the receipt; null when absent or too large to keep. */
  readonly sessionRecord: Buffer | null;
  /** The whole answer file; null when there is none or it is over the artifact limit: never a prefix. */
  readonly answer: Buffer | null;
  /** The answer file's size as found, whether it was read or not (0 when there is none). */
  readonly answerBytes: number;
  /** The output cap (`--max-output`) the attempt ran under. */
  readonly maxOutputTokens: number;
  /** Why Oracle's process could not be started (a missing or unexecutable command), or null. */
  readonly startError: string | null;
  readonly stdoutTail: string;
  readonly stderrTail: string;
}

/** The fields of Oracle's `sessions/<id>/meta.json` the lane reads (oracle-cli notes, section 3). */
export interface OracleSessionMeta {
  readonly status: string | null;
  /**
   * What the provider reported, as Oracle recorded it: each figure as it reads (lane/usage-figure.ts);
   * `implausible` when a figure was stated as no honest provider states one (a string, a negative, a
   * fraction of a token), or the usage is not an object.
   */
  readonly usage: { inputTokens: number; outputTokens: number; reasoningTokens: number; totalTokens: number; cost: number | null; implausible?: boolean } | null;
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
 * What bubblewrap prints when it cannot set up the sandbox, or the shell inside it (util/sandbox-start.ts)
 * when it cannot become Oracle (an interpreter that is gone).
 */
const BWRAP_EXEC_FAILED = /^(bwrap: |sh: (\d+: )?exec: )/m;

/**
 * Success is exit 0, and `meta.json` status `completed`, and the whole answer file, within the
 * artifact limit and the output cap. Exit codes alone are not evidence: Oracle exits 1 for every
 * failure and can exit 0 when a session failed. An answer over a limit is never judged on a part.
 */
export function judgeRun(run: OracleRun, classifyProvider: (text: string) => BlockerCode | null = () => null): RunVerdict {
  if (run.killedByTimer) {
    return { ok: false, blocker: 'budget_runtime_breach', status: 'timed_out', detail: `killed after ${Math.round(run.elapsedMs / 1000)} s: the message's runtime budget` };
  }
  // Our transport did not start: nothing reached the provider, and another attempt may find it back.
  if (run.startError !== null || (run.exitCode !== 0 && run.meta === null && BWRAP_EXEC_FAILED.test(run.stderrTail))) {
    return { ok: false, blocker: 'aa_unavailable:transport', status: 'failed', detail: `Oracle could not be started: ${(run.startError ?? run.stderrTail.trim()).slice(0, 300)}` };
  }
  const meta = run.meta;
  const text = [meta?.errorMessage, meta?.errorCategory, run.stdoutTail.split('\n').filter((line) => line.includes('ERROR')).join(' '), run.stderrTail].filter(Boolean).join(' ');
  if (run.exitCode === 0 && meta?.status === 'completed') {
    if (run.answerBytes > LIMITS.artifactBytes) {
      return { ok: false, blocker: 'output_too_large', status: 'failed', detail: `the answer is ${run.answerBytes} bytes, over the ${LIMITS.artifactBytes}-byte artifact limit` };
    }
    const outputTokens = meta.usage?.outputTokens ?? 0;
    if (outputTokens > run.maxOutputTokens) {
      return { ok: false, blocker: 'output_too_large', status: 'failed', detail: `the answer is ${outputTokens} output tokens, over the ${run.maxOutputTokens}-token output cap (${run.answerBytes} bytes)` };
    }
    // A provider stops at the cap and Oracle still calls the answer completed (Claude's max_tokens,
    // Gemini's MAX_TOKENS, a Chat Completions "length"): an answer that reached the cap was cut.
    if (outputTokens === run.maxOutputTokens) {
      return { ok: false, blocker: 'output_too_large', status: 'failed', detail: `the answer reached the ${run.maxOutputTokens}-token output cap and was cut there (${run.answerBytes} bytes)` };
    }
    if (run.answer === null || run.answer.length === 0) return { ok: false, blocker: 'output_missing', status: 'failed', detail: 'Oracle reported completion but wrote no answer file' };
    return { ok: true };
  }
  // The endpoint sent Oracle elsewhere and was not followed (no-redirects.ts): a fault of where it points, said as such.
  const redirected = redirectRefusal(run.stderrTail);
  if (redirected !== null) return { ok: false, blocker: 'aa_unavailable:transport', status: 'failed', detail: redirected.slice(0, 300) };
  if (meta?.incompleteReason != null) {
    return { ok: false, blocker: 'output_missing', status: 'failed', detail: `response did not complete: ${meta.incompleteReason}` };
  }
  const named = classifyProvider(text) ?? classify(text);
  if (named !== null) return { ok: false, blocker: named, status: 'failed', detail: (meta?.errorMessage ?? text).slice(0, 300) };
  if (meta?.transportReason === 'client-timeout') return { ok: false, blocker: 'aa_unavailable:timeout', status: 'failed', detail: 'the provider did not answer in time' };
  if (meta?.transportReason != null) return { ok: false, blocker: 'aa_unavailable:transport', status: 'failed', detail: `${meta.transportReason}: ${(meta.errorMessage ?? '').slice(0, 200)}` };
  if (meta === null && run.exitCode === 0) return { ok: false, blocker: 'output_missing', status: 'failed', detail: 'Oracle exited 0 but left no session record' };
  if (run.exitCode === 0) return { ok: false, blocker: 'aa_unavailable:unknown', status: 'failed', detail: `Oracle exited 0 with session status ${meta?.status ?? 'unknown'}` };
  return { ok: false, blocker: 'aa_unavailable:unknown', status: 'failed', detail: `Oracle exited ${run.exitCode ?? run.signal}: ${text.slice(0, 240)}` };
}
