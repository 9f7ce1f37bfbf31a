import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import { processStartTime, startTimeOf } from './process.js';

/**
 * The processes a command the runner started left behind outside its process group. Killing the
 * group ends what stayed in it; a process that made a session of its own (setsid, a double fork,
 * a daemon) is not in it. Without bubblewrap (whose PID namespace ends every process inside with
 * it) such a process ran on after its command: one that kept the command's output pipes held the
 * runner waiting for their end for as long as it liked, and any other did what it liked after the
 * runner had read the work. Each start is marked twice, and what carries either mark is ended:
 *
 * - its output pipes: a process that holds the command's end of one of them got it from the command
 *   (the runner holds only its own ends);
 * - a variable of its environment with a value of its own: a process that did not clear its
 *   environment carries it, wherever its output went.
 *
 * Only a process started after the command is ended: one that was running before it (a daemon the
 * command handed a pipe to over a socket) is no process of the command's making.
 *
 * A process that both closed the pipes and cleared its environment is not found: only a sandbox
 * (bubblewrap, the default) ends it for certain.
 */

/** The environment variable that marks a start's processes. */
export const RUN_MARK_VARIABLE = 'COO_RUN_MARK';

export interface RunMarks {
  /** The value of RUN_MARK_VARIABLE in this start's environment. */
  readonly mark: string;
  /** `pipe:[inode]` or `socket:[inode]` of the command's end of each of its output pipes, as /proc names them. */
  readonly pipes: Set<string>;
  /** The start time of the command's first process (clock ticks since boot), once spawned; null when not known. */
  since: bigint | null;
}

/** A fresh mark for one start; its pipes are added once it was spawned (notePipes). */
export function newRunMarks(): RunMarks {
  return { mark: randomBytes(12).toString('hex'), pipes: new Set(), since: null };
}

/**
 * Notes in `marks` the child's ends of its output pipes (node gives a child socket pairs: the child's
 * end is another socket than the runner's, so it is read from the child), and when it started. Read
 * as soon as it was spawned, before the command could have put anything else in their place; only a
 * pipe or a socket is taken, never a file.
 */
export function notePipes(marks: RunMarks, child: ChildProcess): void {
  if (child.pid === undefined) return;
  const start = processStartTime(child.pid);
  marks.since = start === null ? null : BigInt(start);
  for (const fd of [1, 2]) {
    try {
      const link = fs.readlinkSync(`/proc/${child.pid}/fd/${fd}`);
      if (/^(pipe|socket):\[\d+\]$/.test(link)) marks.pipes.add(link);
    } catch {
      // gone already: what it left holding them is found by the mark in its environment
    }
  }
}

/** Whether process `pid` started after the command (unknown: taken as after) and carries one of the marks: an open pipe of the start's, or the mark in its environment. */
function marked(pid: string, marks: RunMarks, needle: Buffer): boolean {
  if (marks.since !== null) {
    let start: string | null;
    try {
      start = startTimeOf(fs.readFileSync(`/proc/${pid}/stat`, 'latin1'));
    } catch {
      return false;
    }
    if (start !== null && BigInt(start) < marks.since) return false;
  }
  try {
    const environ = fs.readFileSync(`/proc/${pid}/environ`);
    if (environ.indexOf(needle) === 0 || environ.includes(Buffer.concat([Buffer.from([0]), needle]))) return true;
  } catch {
    // gone, or not ours to read
  }
  if (marks.pipes.size === 0) return false;
  let fds: string[];
  try {
    fds = fs.readdirSync(`/proc/${pid}/fd`);
  } catch {
    return false;
  }
  for (const fd of fds) {
    try {
      if (marks.pipes.has(fs.readlinkSync(`/proc/${pid}/fd/${fd}`))) return true;
    } catch {
      // closed meanwhile
    }
  }
  return false;
}

/**
 * What a runner after a crash ends of a command it finds on record: what carries the recorded mark in
 * its environment and started after the recorded start (the pipes died with the runner that held them).
 */
export function endRecordedMark(mark: string, start: string | null): number {
  return endMarked({ mark, pipes: new Set(), since: start === null ? null : BigInt(start) });
}

/** The most passes over the process table: a marked process that forks as it is killed leaves marked children for the next pass. */
const PASSES = 20;

/** Kills every process that carries a mark of `marks` (never this one); returns how many processes it killed. */
export function endMarked(marks: RunMarks): number {
  const needle = Buffer.from(`${RUN_MARK_VARIABLE}=${marks.mark}\0`);
  const self = String(process.pid);
  const killed = new Set<string>();
  for (let pass = 0; pass < PASSES; pass += 1) {
    let names: string[];
    try {
      names = fs.readdirSync('/proc');
    } catch {
      break;
    }
    // One killed already may not be gone yet: it is not counted, nor looked at, again.
    const found = names.filter((name) => /^\d+$/.test(name) && name !== self && !killed.has(name) && marked(name, marks, needle));
    if (found.length === 0) break;
    for (const pid of found) {
      try {
        process.kill(Number(pid), 'SIGKILL');
        killed.add(pid);
      } catch {
        // already gone
      }
    }
  }
  return killed.size;
}
