import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import { join, resolve } from 'node:path';
import { hostLabel, isAlive, processStartTime, recordedProcessGone } from '../util/process.js';
import { readBounded } from '../util/bounded-read.js';
import { writeOwnFile } from '../util/own-write.js';
import { realPathOr } from '../util/real-path.js';

/** Largest runner record read: a line of JSON. */
const RECORD_BYTES = 4096;

/**
 * Who a runner is, and whether a runner of this host is still alive.
 *
 * A runner's id is random, drawn when it starts: never host and pid, which two containers of one
 * image share (same hostname, node as pid 1), so that the second took the first's live claim for
 * its own crashed attempt and paid again. "My own attempt" is decided by this id and nothing else.
 *
 * Without a remote, a claim whose runner is gone is recovered by a runner of the same host, which
 * needs to tell a live runner from a dead one: each runner says who it is in the ledger's folder
 * (`coo/runners/<id>.json`: host, pid, and the process's start time, so a reused pid is not taken
 * for the runner). A runner of another host, or one that never said (a runner that pushed its claim
 * to this ledger from a clone), is neither: its claim is held by a lease, as through a remote, and
 * never taken while its runner may still be paying for it.
 */

/** What this host knows of a runner: alive here, gone from here, or nothing (another host's, or one that never said). */
export type RunnerStatus = 'alive' | 'gone' | 'unknown';

/** A new runner id: `run-` and 80 random bits. */
export function newRunnerId(): string {
  return `run-${randomBytes(10).toString('hex')}`;
}

interface RunnerRecord {
  readonly host: string;
  readonly pid: number;
  /** The process's start time in clock ticks since boot (/proc/PID/stat), or null where there is no /proc. */
  readonly started: string | null;
  /** Its state folder, where its attempts' files are: the real path, or the path resolved when the folder was not yet made; absent in records of older versions. */
  readonly state?: string;
  /** The mark its state folder held when it started (stateFolderMark): a folder removed and made again at that path holds another; absent in records of older versions. */
  readonly folder?: string;
}

/** Largest state folder mark read. */
const MARK_BYTES = 64;

/** Runner ids of coo versions that derived them from host and pid: `host-pPID`. */
const LEGACY_ID = /^(.*)-p(\d+)$/;

export class LocalRunners {
  private readonly dir: string;

  constructor(gitdir: string) {
    this.dir = LocalRunners.folder(gitdir);
  }

  /** Where the runners of a ledger say who they are. */
  static folder(gitdir: string): string {
    return join(gitdir, 'coo', 'runners');
  }

  private path(runnerId: string): string {
    return join(this.dir, `${runnerId}.json`);
  }

  /** Says, in the ledger's folder, that `runnerId` is this process on this host, keeping its attempts' files in `stateDir`. */
  register(runnerId: string, stateDir: string): void {
    const record: RunnerRecord = { host: hostLabel(), pid: process.pid, started: processStartTime(process.pid), state: realPathOr(stateDir) };
    const folder = stateFolderMark(stateDir, true);
    writeOwnFile(this.path(runnerId), JSON.stringify(folder === null ? record : { ...record, folder }), { mode: 0o644, what: 'the record of which process runs as this runner', remedy: "the ledger's runners folder holds only the records runners write: move what is at that name away and start the runner again", code: 'IO_ERROR' });
  }

  private read(runnerId: string): RunnerRecord | null {
    if (!/^[A-Za-z0-9._-]{1,80}$/.test(runnerId)) return null;
    // Anything but a small file there (a FIFO, a link, a huge file) is a runner that never said: left alive, never waited on.
    const read = readBounded(this.path(runnerId), { maxBytes: RECORD_BYTES });
    if (read.kind !== 'file') return null;
    try {
      const value = JSON.parse(read.bytes.toString('utf8')) as RunnerRecord;
      return typeof value.host === 'string' && Number.isSafeInteger(value.pid) ? value : null;
    } catch {
      return null;
    }
  }

  /**
   * Whether `runnerId` may still be running: true unless it is known to be a runner of this host
   * whose process is gone (or whose pid now belongs to a process started later).
   */
  mayBeAlive(runnerId: string): boolean {
    return this.status(runnerId) !== 'gone';
  }

  /** Whether `runnerId` is a runner of this host that is alive, one that is gone, or one this host knows nothing of. */
  status(runnerId: string): RunnerStatus {
    const record = this.read(runnerId);
    if (record === null) {
      const legacy = LEGACY_ID.exec(runnerId);
      if (legacy === null || legacy[1] !== hostLabel()) return 'unknown';
      const pid = Number(legacy[2]);
      return pid !== process.pid && isAlive(pid) ? 'alive' : 'gone';
    }
    if (record.host !== hostLabel()) return 'unknown';
    return recordedProcessGone(record.host, record.pid, record.started) ? 'gone' : 'alive';
  }

  /**
   * Whether a runner of this host kept its attempts' files in `stateDir`: false for one that said another
   * folder, or none (a record of an older version, or none at all), whose files this folder does not hold,
   * and for one whose folder was removed since (made again at its path, it holds another mark).
   */
  keptIn(runnerId: string, stateDir: string): boolean {
    const record = this.read(runnerId);
    const state = record?.state;
    // Recorded before the folder may have existed: its path as given, resolved, or its real path once made.
    if (state === undefined || (state !== realPathOr(stateDir) && state !== resolve(stateDir))) return false;
    return record?.folder === undefined || record.folder === stateFolderMark(stateDir, false);
  }

  /** Forgets the records of this host's runners that are gone and hold no open claim (`held`). */
  prune(held: ReadonlySet<string>): void {
    let names: string[];
    try {
      names = fs.readdirSync(this.dir).filter((name) => name.endsWith('.json'));
    } catch {
      return;
    }
    for (const name of names) {
      const runnerId = name.slice(0, -'.json'.length);
      if (held.has(runnerId) || this.mayBeAlive(runnerId)) continue;
      fs.rmSync(this.path(runnerId), { force: true });
    }
  }
}

/**
 * The random mark a state folder holds (`folder-id`), made with it (`make`) by the first runner that
 * starts there: null where there is none, or it cannot be read or made (its runners' files are then judged by its path alone).
 */
function stateFolderMark(stateDir: string, make: boolean): string | null {
  const path = join(stateDir, 'folder-id');
  const read = readBounded(path, { maxBytes: MARK_BYTES });
  if (read.kind === 'file') return read.bytes.toString('utf8').trim();
  if (read.kind !== 'unreadable' || read.code !== 'ENOENT' || !make) return null;
  const mark = randomBytes(16).toString('hex');
  try {
    writeOwnFile(path, mark, { what: 'the mark of this state folder', remedy: 'the state folder holds only what runners write there', code: 'IO_ERROR' });
  } catch {
    return null;
  }
  return mark;
}

