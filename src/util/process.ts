import { readFileSync, readlinkSync } from 'node:fs';
import { hostname } from 'node:os';

/** Whether a process with this pid exists on this host (EPERM: it exists, owned by someone else). */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** This host's name, reduced to the characters ids and lock files allow. */
export function hostLabel(): string {
  return hostname().replace(/[^A-Za-z0-9._-]/g, '-').slice(0, 60) || 'host';
}

/**
 * A process the runner started, as it recorded it at the start: its pid and its start time (in
 * clock ticks since boot, field 22 of /proc/PID/stat). A pid alone names whoever has that number
 * now; with the start time it names one process.
 */
export interface ProcessRecord {
  readonly pid: number;
  /** Null when the process was gone before its start time could be read. */
  readonly start: string | null;
  /** The mark of its environment (util/leftovers.ts), when it was given one: what it left out of its group carries it. */
  readonly mark?: string;
  /**
   * The boot of the machine it ran on (bootId), when the system said: a record read on another boot
   * (the machine restarted, or the state folder was copied or restored onto another machine) names
   * no process here, and its pid no group of the runner's.
   */
  readonly boot?: string;
  /**
   * The pid namespace its pid was numbered in (the inode /proc/self/ns/pid names), when the system
   * said: a container recreated on the same machine keeps the boot and numbers its processes anew,
   * so a state folder restored into it names, by pid and group, processes of strangers there.
   */
  readonly pidns?: string;
}

/** The start time in /proc/PID/stat's text: field 22, counted after the command name, which may hold spaces and parentheses. */
export function startTimeOf(stat: string): string | null {
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // Field 3 (the state) is the first after the name: field 22 is the 20th.
  const start = fields[19];
  return start !== undefined && /^\d+$/.test(start) ? start : null;
}

/** The start time of a running process, or null when there is no such process (or no /proc). */
export function processStartTime(pid: number): string | null {
  try {
    return startTimeOf(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return null;
  }
}

/** Largest process record a runner reads: a line of a pid, a start time, a mark, a boot id and a pid namespace. */
export const PROCESS_RECORD_BYTES = 256;

export function formatProcessRecord(record: ProcessRecord): string {
  return `${record.pid} ${record.start ?? '-'}${record.mark === undefined ? '' : ` ${record.mark}`}${record.boot === undefined ? '' : ` boot=${record.boot}`}${record.pidns === undefined ? '' : ` pidns=${record.pidns}`}\n`;
}

export function parseProcessRecord(text: string): ProcessRecord | null {
  const match = /^(\d+) (\d+|-)(?: ([0-9a-f]{24}))?(?: boot=([0-9a-f-]{1,64}))?(?: pidns=(\d{1,20}))?\n?$/.exec(text);
  if (match === null) return null;
  const pid = Number(match[1]);
  if (!Number.isSafeInteger(pid) || pid <= 1) return null;
  return {
    pid,
    start: match[2] === '-' ? null : match[2]!,
    ...(match[3] === undefined ? {} : { mark: match[3] }),
    ...(match[4] === undefined ? {} : { boot: match[4] }),
    ...(match[5] === undefined ? {} : { pidns: match[5] }),
  };
}

/** Where a process record's pid means this process: this machine's boot and this process's pid namespace, each absent where the system does not say. */
export function recordedBoot(): { readonly boot?: string; readonly pidns?: string } {
  const boot = bootId();
  const pidns = pidNamespace();
  return { ...(boot === null ? {} : { boot }), ...(pidns === null ? {} : { pidns }) };
}

/**
 * Whether a record names a process of another boot, another machine or another pid namespace (a
 * container recreated on this machine): none that runs here, whatever now holds its pid. A record
 * that does not say (an older runner's) is judged by what it does say.
 */
export function recordedElsewhere(record: ProcessRecord): boolean {
  return (record.boot !== undefined && record.boot !== bootId()) || (record.pidns !== undefined && record.pidns !== pidNamespace());
}

/**
 * Ends the process group a record names, if it is still the one the runner started. A process with
 * that pid and the recorded start time is it: its group is killed. A process with that pid and
 * another start time is someone else's: nothing is killed. No process with that pid: what is left
 * of the group (if anything) is the runner's, since Linux does not give a pid to a new process
 * while a process group of that number has members; only the group is signalled, never a pid alone.
 */
export function endRecordedGroup(record: ProcessRecord): 'killed' | 'gone' | 'reused' {
  // Its pid here is someone else's, or free; a group of that number, leaderless, is someone else's too.
  if (recordedElsewhere(record)) return 'gone';
  const now = processStartTime(record.pid);
  if (now !== null && now !== record.start) return 'reused';
  try {
    process.kill(-record.pid, 'SIGKILL');
  } catch {
    if (now === null) return 'gone';
    // The leader is alive but leads no group of that number (it moved): it alone is ours.
    try {
      process.kill(record.pid, 'SIGKILL');
    } catch {
      return 'gone';
    }
  }
  return 'killed';
}

/**
 * This process as part of a name: host, pid and start time (`host.pid.start`), so that a later
 * process can tell, by `ownerGone`, whether what the name belongs to was left by one that is gone.
 */
export function ownerTag(): string {
  return `${hostLabel()}.${process.pid}.${processStartTime(process.pid) ?? '-'}`;
}

/**
 * Whether a process recorded by its host, pid and start time is known to be gone: one of this host
 * whose pid is free, or now belongs to a process started since. Another host's is never known gone;
 * without a start time, a live pid is taken for it, and so is a live pid whose start this process
 * cannot read (/proc mounted with hidepid, and the process another user's; no /proc): a pid that
 * answers but hides its start is not proof its holder went, and judged gone, a live coo's ledger
 * lock was broken under it, two writers then moving main at once.
 */
export function recordedProcessGone(host: string, pid: number, start: string | null): boolean {
  if (host !== hostLabel()) return false;
  if (!isAlive(pid)) return true;
  if (start === null) return false;
  const now = processStartTime(pid);
  // Unreadable: gone only if it ended while it was read.
  return now === null ? !isAlive(pid) : now !== start;
}

/**
 * Whether the process an `ownerTag` names is known to be gone (recordedProcessGone). A tag that
 * does not parse is never known gone.
 */
export function ownerGone(tag: string): boolean {
  const match = /^(.+)\.(\d+)\.(\d+|-)$/.exec(tag);
  if (match === null) return false;
  const pid = Number(match[2]);
  if (!Number.isSafeInteger(pid) || pid <= 1) return false;
  return recordedProcessGone(match[1]!, pid, match[3] === '-' ? null : match[3]!);
}

/** The machine's monotonic clock in milliseconds, counted from its boot: the same in every process of one boot. */
export function machineMonotonic(): number {
  return Number(process.hrtime.bigint() / 1000n) / 1000;
}

/** This boot of the machine (Linux's boot id); null where the system does not say. */
export function bootId(): string | null {
  try {
    return readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim() || null;
  } catch {
    return null;
  }
}

/** The pid namespace this process numbers processes in (the inode of /proc/self/ns/pid); null where the system does not say. */
export function pidNamespace(): string | null {
  try {
    return /^pid:\[(\d{1,20})\]$/.exec(readlinkSync('/proc/self/ns/pid'))?.[1] ?? null;
  } catch {
    return null;
  }
}
