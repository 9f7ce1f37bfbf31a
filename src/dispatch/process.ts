import { spawn } from 'node:child_process';
import { dirname, resolve } from 'node:path';
import { StringDecoder } from 'node:string_decoder';
import { CooError } from '../errors.js';
import { LIMITS } from '../limits.js';
import { bwrapArgs, commandFiles, findBwrap, killGroup, type Repository } from '../util/bubblewrap.js';
import { trackGroup } from '../util/children.js';
import { findExecutable, startProblem } from '../util/executable.js';
import { formatProcessRecord, machineMonotonic, processStartTime, recordedBoot } from '../util/process.js';
import { costOf, floorCostUsd, type ExecutorRun, type ExecutorName } from './executor.js';
import type { StreamState } from './stream-state.js';
import type { AttemptSpend } from './attempt-spend.js';
import { wholeLinesOf } from '../util/bytes.js';
import { sandboxFellText, standingCommand, untilSandboxStands } from '../util/sandbox-start.js';
import { writeOwnFile } from '../util/own-write.js';
import { endMarked, newRunMarks, notePipes, RUN_MARK_VARIABLE } from '../util/leftovers.js';

/** What to do about something in the way of a file the runner writes in an attempt's folder. */
export const ATTEMPT_FOLDER_REMEDY = 'the attempt folder holds only what the runner writes: move what is at that name away';

/**
 * Starting an executor: the command checked before anything runs, bubblewrap around it where
 * installed, an allow-listed environment, stdin closed, our own kill timer on its process group,
 * and the event stream captured up to a bound and parsed as it arrives.
 */

export type { Isolation } from '../util/bubblewrap.js';

/**
 * The command with its program resolved to an absolute path: a path is checked as given, a bare
 * name is looked up on `PATH`. Missing, not executable, or a script whose interpreter cannot start it
 * (util/executable.ts startProblem) is EXECUTOR_CONFIG, before anything runs.
 */
export function resolveCommand(command: readonly string[], path: string | undefined, label: string): string[] {
  const program = command[0];
  if (program === undefined || program === '') throw new CooError('EXECUTOR_CONFIG', `${label}: the executor command is empty`);
  const full = findExecutable(program, path ?? '');
  if (full !== null) {
    const problem = startProblem(full, executorPath(full));
    if (problem !== null) throw new CooError('EXECUTOR_CONFIG', `${label}: ${problem}`);
    return [full, ...command.slice(1)];
  }
  if (program.includes('/')) throw new CooError('EXECUTOR_CONFIG', `${label}: ${resolve(program)} is missing or not executable`);
  throw new CooError('EXECUTOR_CONFIG', `${label}: ${program} is not on PATH (set the executor command, e.g. --ea-command)`);
}

/** The PATH an executor gets: node's folder, the command's folder and the system folders. */
export function executorPath(program: string): string {
  return [...new Set([dirname(process.execPath), dirname(program), '/usr/local/bin', '/usr/bin', '/bin'])].join(':');
}

export interface ProcessPlan {
  readonly executor: ExecutorName;
  readonly attemptId: string;
  readonly argv: readonly string[];
  /**
   * Under bubblewrap: the commands whose files stay visible in the sandbox (util/bubblewrap.ts commandFiles), the
   * executor's own (`node <pkg>/bin/codex.js` as well as a script) and its consult tool's; argv[0] when absent.
   */
  readonly programs?: ReadonlyArray<readonly string[]>;
  readonly cwd: string;
  readonly env: NodeJS.ProcessEnv;
  readonly isolation: 'bwrap' | 'none';
  /** Under bubblewrap: the writable paths (worktree, scratch), read-only binds, and the hidden ones. */
  readonly writable: readonly string[];
  readonly readOnly: readonly string[];
  readonly hide: readonly string[];
  /** Under bubblewrap: folders of the attempt's, bound writable where the host has its own (util/bubblewrap.ts). */
  readonly privateDirs?: ReadonlyArray<{ readonly source: string; readonly target: string }>;
  /** Under bubblewrap: the repository the worktree is of, its work tree hidden and its git folder read-only (util/bubblewrap.ts). */
  readonly repository?: Repository;
  readonly timeoutSeconds: number;
  readonly maxStreamBytes?: number;
  readonly maxCostUsd?: number;
  /** The attempt's live spend: told the run's cost as it goes, and its ceiling (what the consults leave) stops the run. */
  readonly spend?: AttemptSpend;
  readonly pidFile?: string;
  readonly price?: { readonly inputPerMillion: number; readonly outputPerMillion: number };
  readonly state: StreamState;
}

const STDERR_TAIL = 4000;

/**
 * Runs one executor process to its end and returns the run with its parsed facts. Under bubblewrap a
 * sandbox that did not stand ran nothing and is set up again (util/sandbox-start.ts); one that never
 * stands is a run that did not start, saying so.
 */
export async function runExecutorProcess(plan: ProcessPlan): Promise<ExecutorRun> {
  if (plan.isolation !== 'bwrap') return startExecutor(plan);
  const { run, tries, fell } = await untilSandboxStands(
    () => startExecutor(plan),
    (one) => ({ stood: one.started, exitedByItself: one.exitCode !== null && one.signal === null && one.killedBy === null }),
  );
  if (!fell) return run;
  const notStarted = sandboxFellText(tries, run.stderrTail);
  return { ...run, notStarted, stderrTail: `${notStarted}\n${run.stderrTail}` };
}

/** One start of the executor: under bubblewrap, the sandbox planned afresh (the folders it hides listed now). */
function startExecutor(plan: ProcessPlan): Promise<ExecutorRun> {
  const program = plan.argv[0]!;
  const isolated = plan.isolation === 'bwrap';
  // Under bubblewrap the process started is bubblewrap: a sandbox that could not be set up (a hidden folder
  // gone, a command it cannot see) ran nothing. A shell inside says on its own pipe, fd 3, that the sandbox
  // stands and the executor is there, and closes it before the executor takes its place.
  const argv = isolated
    ? [...bwrapArgs(findBwrap()!, { writable: plan.writable, readOnly: plan.readOnly, hide: plan.hide, keep: commandFiles(plan.programs ?? [[program]]), chdir: plan.cwd, ownPids: true, ...(plan.privateDirs === undefined ? {} : { privateDirs: plan.privateDirs }), ...(plan.repository === undefined ? {} : { repository: plan.repository }) }), ...standingCommand(plan.argv)]
    : [...plan.argv];
  const bound = plan.maxStreamBytes ?? LIMITS.subprocessOutputBytes;
  const started = machineMonotonic();
  return new Promise((resolvePromise) => {
    const chunks: Buffer[] = [];
    let kept = 0;
    let overflow = false;
    let stderr = '';
    let stderrCut = false;
    // A character split across two reads is decoded whole.
    const decoder = new StringDecoder('utf8');
    let killedBy: ExecutorRun['killedBy'] = null;
    let settled = false;
    // detached: its own process group, so the timer ends every process the executor started; marked, so
    // that what left the group is ended with it too (util/leftovers.ts).
    const marks = newRunMarks();
    const child = spawn(argv[0]!, argv.slice(1), { cwd: plan.cwd, env: { ...plan.env, [RUN_MARK_VARIABLE]: marks.mark }, detached: true, stdio: ['ignore', 'pipe', 'pipe', isolated ? 'pipe' : 'ignore'] });
    notePipes(marks, child);
    let stood = !isolated;
    child.stdio[3]?.on('data', () => (stood = true));
    const untrack = trackGroup(child.pid);
    const kill = (reason: NonNullable<ExecutorRun['killedBy']>): void => {
      if (killedBy === null) killedBy = reason;
      if (child.pid !== undefined) killGroup(child.pid);
      endMarked(marks);
    };
    const timer = setTimeout(() => kill('timeout'), plan.timeoutSeconds * 1000);
    child.stdout!.on('data', (chunk: Buffer) => {
      if (overflow) return;
      const room = bound - kept;
      const part = chunk.length > room ? chunk.subarray(0, room) : chunk;
      chunks.push(part);
      kept += part.length;
      if (chunk.length > room) {
        // The stream is kept to its last whole line (below): what is parsed is what is kept, never the line the cut went through.
        const whole = part.lastIndexOf(0x0a) + 1;
        plan.state.feed(decoder.write(part.subarray(0, whole)));
        plan.state.dropPartial();
        overflow = true;
        kill('stream_bound');
        return;
      }
      plan.state.feed(decoder.write(part));
      if (plan.maxCostUsd === undefined && plan.spend === undefined) return;
      // What the terminal event says, never below what the stream's model calls and any terminal event have said so far.
      const floor = plan.state.floor;
      const cost = Math.max(costOf(plan.state.usage, plan.price ?? null), floor === null ? 0 : floorCostUsd(floor, plan.price ?? null));
      plan.spend?.reportExecutor(cost);
      const ceiling = Math.min(plan.maxCostUsd ?? Infinity, plan.spend?.executorCeilingUsd() ?? Infinity);
      if (cost > ceiling) kill('cost');
    });
    child.stderr!.on('data', (chunk: Buffer) => {
      const longer = stderr + chunk.toString('utf8');
      stderrCut ||= longer.length > STDERR_TAIL;
      stderr = longer.slice(-STDERR_TAIL);
    });
    const finish = (exitCode: number | null, signal: string | null, startError?: string): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      // Whatever the executor left running, in its group or out of it, ends with it.
      if (child.pid !== undefined) killGroup(child.pid);
      endMarked(marks);
      untrack();
      if (!overflow) plan.state.feed(decoder.end());
      resolvePromise({
        executor: plan.executor,
        attemptId: plan.attemptId,
        exitCode,
        signal,
        killedBy,
        elapsedMs: Math.round(machineMonotonic() - started),
        // Cut at a bound: the line the cut went through is dropped, not kept in part (util/bytes.ts).
        stream: overflow ? wholeLinesOf(Buffer.concat(chunks), 'end') : Buffer.concat(chunks),
        streamOverflow: overflow,
        stderrTail: startError ?? (stderrCut ? wholeLinesOf(stderr, 'start') : stderr),
        stderrCut: startError === undefined && stderrCut,
        facts: plan.state.finish(),
        isolated: plan.isolation === 'bwrap',
        started: startError === undefined && child.pid !== undefined && stood,
      });
    };
    // The executor is done: what it left running (and holding its pipes, in a session of its own or not) ends now.
    child.on('exit', () => {
      if (child.pid !== undefined) killGroup(child.pid);
      endMarked(marks);
    });
    child.on('error', (error) => finish(null, null, `cannot start ${plan.executor}: ${error.message}`));
    // close, not exit: the pipes are drained before the stream is parsed.
    child.on('close', (code, signal) => finish(code, signal));
    // The pid with its start time: a runner after a crash ends this process's group only if the pid is still this process.
    // Written by a fresh file and a rename: a link or a FIFO left at its name is replaced, never written through or waited on.
    if (plan.pidFile !== undefined && child.pid !== undefined) {
      try {
        writeOwnFile(plan.pidFile, formatProcessRecord({ pid: child.pid, start: processStartTime(child.pid), mark: marks.mark, ...recordedBoot() }), { what: "the executor's pid file", remedy: ATTEMPT_FOLDER_REMEDY, code: 'IO_ERROR' });
      } catch (error) {
        // Without its pid on record the executor is not run: a runner after a crash could not end it.
        finish(null, null, `cannot start ${plan.executor}: ${error instanceof Error ? error.message : String(error)}`);
      }
    }
  });
}
