import { readBounded } from '../util/bounded-read.js';
import * as fs from 'node:fs';
import { dirname, join } from 'node:path';
import type { ModelPrice } from '../lane/budget.js';
import type { PinnedFile } from '../lane/pins.js';
import type { OracleRouteName } from './providers/provider.js';
import { writeOwnFile } from '../util/own-write.js';

/**
 * One directory per attempt, at a path derived from the attempt id so that a restarted runner finds
 * what a crashed one left: the pinned files (read-only), a clean HOME and ORACLE_HOME_DIR, the exact
 * prompt, the attempt's canary, Oracle's pid and its answer.
 */
export interface Sandbox {
  readonly root: string;
  readonly work: string;
  readonly home: string;
  readonly oracleHome: string;
  readonly tmp: string;
  readonly answerPath: string;
  readonly promptPath: string;
  readonly attemptPath: string;
  readonly pidPath: string;
}

/** The route an attempt took, as its receipt names it; null name for an attempt file of an older runner. */
export interface AttemptRoute {
  readonly name: OracleRouteName | null;
  readonly provider: string;
  readonly offline: boolean;
}

export interface AttemptRecordFile {
  readonly attempt_id: string;
  readonly canary: string;
  readonly slug: string;
  readonly model: string;
  readonly max_output_tokens: number;
  readonly runtime_seconds: number;
  readonly started_at: string;
  /**
   * When Oracle was started on the machine's monotonic clock (ms since boot), and that boot's id:
   * the runner that recovers the attempt measures its wait for the Oracle on this clock, which NTP
   * or a resumed virtual machine does not step. Absent in the files of older runners.
   */
  readonly started_monotonic_ms?: number;
  readonly boot?: string | null;
  /** Absent in the files of runners before routes. */
  readonly route?: AttemptRoute;
  /**
   * The model's price the pre-flight judged the call at, from the policy in force at its claim: what
   * the call costs, whatever a later policy says of the model. Absent in the files of older runners.
   */
  readonly price?: ModelPrice;
}

/**
 * How much longer, in ms, the Oracle an attempt file records may run (its runtime budget from its
 * start). Measured on the machine's monotonic clock when the file was written in this boot: by the
 * wall clock, a clock stepped forward between the start and the recovery (NTP setting a slow clock
 * right, a virtual machine resumed) read a live Oracle's budget as spent, and the recovering runner
 * ended the call it was about to be answered and paid for it again. A file of another boot, or of an
 * older runner, has only its wall-clock start.
 */
export function oracleTimeLeftMs(attempt: Pick<AttemptRecordFile, 'runtime_seconds' | 'started_monotonic_ms' | 'boot' | 'started_at'>, now: { readonly boot: string | null; readonly monotonicMs: number; readonly wallMs: number }): number {
  const budgetMs = attempt.runtime_seconds * 1000;
  const started = attempt.started_monotonic_ms;
  // Never more than the whole budget: the Oracle started no later than now, whatever start the file (which Oracle may write) records.
  if (now.boot !== null && attempt.boot === now.boot && typeof started === 'number' && Number.isFinite(started) && started <= now.monotonicMs) return Math.min(budgetMs, started + budgetMs - now.monotonicMs);
  return Math.min(budgetMs, Date.parse(attempt.started_at) + budgetMs - now.wallMs);
}

export function sandboxFor(stateDir: string, attemptId: string): Sandbox {
  const root = join(stateDir, 'sandboxes', attemptId);
  // The work folder is inside HOME: Oracle looks for .oracle/config.json in its folder and each one
  // above it until it meets HOME, so it never reads one from the runner's state folder or above.
  const home = join(root, 'home');
  return {
    root,
    work: join(home, 'work'),
    home,
    oracleHome: join(root, 'oracle-home'),
    tmp: join(root, 'tmp'),
    answerPath: join(root, 'out', 'answer.md'),
    promptPath: join(root, 'prompt.txt'),
    attemptPath: join(root, 'attempt.json'),
    pidPath: join(root, 'oracle.pid'),
  };
}

/** Whether an attempt's folder was made (createSandbox, just before Oracle starts), whatever is left in it: looked at, never followed. */
export function attemptFolderMade(sandbox: Sandbox): boolean {
  return fs.lstatSync(sandbox.root, { throwIfNoEntry: false }) !== undefined;
}

function makeWritable(path: string): void {
  if (!fs.existsSync(path)) return;
  for (const entry of fs.readdirSync(path, { withFileTypes: true })) {
    const full = join(path, entry.name);
    if (entry.isDirectory()) {
      fs.chmodSync(full, 0o755);
      makeWritable(full);
    }
  }
}

export function removeSandbox(sandbox: Sandbox): void {
  if (!fs.existsSync(sandbox.root)) return;
  makeWritable(sandbox.root);
  fs.rmSync(sandbox.root, { recursive: true, force: true });
}

/** What to do about something in the way of a file the runner writes in a consult's sandbox. */
export const SANDBOX_REMEDY = "a consult's sandbox holds only what the runner and Oracle write: remove the sandbox folder (its answer, if any, is lost) and run the consult again";

/** A fresh sandbox: pinned files written read-only under work/, empty homes, the prompt and the attempt record. */
export function createSandbox(sandbox: Sandbox, files: readonly PinnedFile[], prompt: string, attempt: AttemptRecordFile): void {
  removeSandbox(sandbox);
  for (const dir of [sandbox.home, sandbox.work, sandbox.oracleHome, sandbox.tmp, dirname(sandbox.answerPath)]) fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  const dirs = new Set<string>();
  for (const file of files) {
    const full = join(sandbox.work, file.path);
    fs.mkdirSync(dirname(full), { recursive: true });
    fs.writeFileSync(full, file.bytes, { mode: 0o444 });
    for (let dir = dirname(full); dir.startsWith(sandbox.work) && dir !== sandbox.work; dir = dirname(dir)) dirs.add(dir);
  }
  for (const dir of [...dirs].sort((a, b) => b.length - a.length)) fs.chmodSync(dir, 0o555);
  fs.chmodSync(sandbox.work, 0o555);
  writeOwnFile(sandbox.promptPath, prompt, { mode: 0o400, what: "the sandbox's prompt", remedy: SANDBOX_REMEDY, code: 'IO_ERROR' });
  writeOwnFile(sandbox.attemptPath, `${JSON.stringify(attempt, null, 2)}\n`, { what: "the sandbox's attempt record", remedy: SANDBOX_REMEDY, code: 'IO_ERROR' });
}

export function readAttemptFile(sandbox: Sandbox): AttemptRecordFile | null {
  try {
    const read = readBounded(sandbox.attemptPath, { maxBytes: 64 * 1024 });
    return read.kind === 'file' ? (JSON.parse(read.bytes.toString('utf8')) as AttemptRecordFile) : null;
  } catch {
    return null;
  }
}
