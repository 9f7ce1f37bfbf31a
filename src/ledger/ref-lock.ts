import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import { dirname, join } from 'node:path';
import { CooError } from '../errors.js';
import { LIMITS } from '../limits.js';
import { failpoint } from '../util/failpoint.js';
import { readOwnFile } from '../util/bounded-read.js';
import { hostLabel, processStartTime, recordedProcessGone } from '../util/process.js';

export const MAIN_REF = 'refs/heads/main';
const OID = /^[0-9a-f]{40}$/;
/** A lock in a format we did not write (git's own) is considered abandoned after this long. */
const FOREIGN_LOCK_STALE_MS = 60_000;

/** Largest loose ref read: git writes an object id and a newline. */
const LOOSE_REF_BYTES = 1024;
/** Largest lock file read: ours is a line of JSON, git's an object id. */
const LOCK_BYTES = 4096;

/** What to do about a ref file that is not what git writes there. */
const REF_REMEDY = "git writes refs as small regular files: put the ledger's git folder back as git left it (remove what is at this path; restore the ref from a copy or the remote if it held one), then run coo verify";

/** The current value of a ref: the loose file, else packed-refs, else null. Both are read within a bound, never from a FIFO. */
export function readRef(gitdir: string, ref = MAIN_REF): string | null {
  const loose = readOwnFile(join(gitdir, ref), { maxBytes: LOOSE_REF_BYTES, what: `the ledger's ref ${ref}`, remedy: REF_REMEDY, code: 'GIT_FAILED' });
  if (loose !== null) {
    const value = loose.toString('utf8').trim();
    if (OID.test(value)) return value;
    throw new CooError('GIT_FAILED', `${ref} holds ${JSON.stringify(value.slice(0, 60))}, not an object id`);
  }
  const packed = readOwnFile(join(gitdir, 'packed-refs'), { maxBytes: LIMITS.packedRefsBytes, what: "the ledger's packed-refs", remedy: REF_REMEDY, code: 'GIT_FAILED' });
  for (const line of packed === null ? [] : packed.toString('utf8').split('\n')) {
    const [oid, name] = line.split(' ');
    if (name === ref && oid !== undefined && OID.test(oid)) return oid;
  }
  return null;
}

/** A lock file's content, or null when it is gone; one that is not a file a lock is written to is a coded error. */
function readLock(lockPath: string): string | null {
  return readOwnFile(lockPath, { maxBytes: LOCK_BYTES, what: 'the ledger lock', remedy: 'no coo or git takes a lock like it: remove it', code: 'LEDGER_LOCKED' })?.toString('utf8') ?? null;
}

/**
 * Who holds a lock: its host, pid and start time (util/process.ts), so that a lock left by a coo
 * killed while it held it (SIGKILL, a closed terminal, a container stopped) is known stale also when
 * its pid is now another live program's, or this very process's (a runner restarted in a container
 * gets the pid it had). By its pid alone such a lock held every writer off for good, a runner's
 * claims and receipts with them, until the operator removed it by hand.
 */
interface LockOwner {
  readonly pid: number;
  readonly host: string;
  readonly nonce: string;
  /** The holder's start time; absent from a lock an older coo wrote, whose live pid is then taken for it. */
  readonly start?: string;
}

function parseOwner(text: string): LockOwner | null {
  try {
    const value = JSON.parse(text) as Partial<LockOwner>;
    if (typeof value.pid === 'number' && typeof value.host === 'string' && typeof value.nonce === 'string') {
      return { pid: value.pid, host: value.host, nonce: value.nonce, ...(typeof value.start === 'string' ? { start: value.start } : {}) };
    }
  } catch {
    // not ours
  }
  return null;
}

function isStale(lockPath: string, content: string): boolean {
  const owner = parseOwner(content);
  if (owner !== null) return recordedProcessGone(owner.host, owner.pid, owner.start ?? null);
  try {
    return Date.now() - fs.statSync(lockPath).mtimeMs > FOREIGN_LOCK_STALE_MS;
  } catch {
    return false;
  }
}

/**
 * Removes a lock whose owner is gone. Breakers serialize on `<lock>.break`, and the lock is
 * removed only if it still holds the content judged stale, so a live lock is never broken.
 */
function breakStale(lockPath: string, staleContent: string): void {
  const breakPath = `${lockPath}.break`;
  let fd: number;
  try {
    fd = fs.openSync(breakPath, 'wx');
  } catch {
    try {
      if (Date.now() - fs.statSync(breakPath).mtimeMs > 5_000) fs.rmSync(breakPath, { force: true });
    } catch {
      // another breaker finished
    }
    return;
  }
  try {
    if (readLock(lockPath) === staleContent) fs.rmSync(lockPath);
  } catch {
    // already gone
  } finally {
    fs.closeSync(fd);
    fs.rmSync(breakPath, { force: true });
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

export interface RefLockOptions {
  readonly ref?: string;
  readonly waitMs?: number;
}

/**
 * Runs `update` while holding `<ref>.lock`, the lock stock git takes (created with O_EXCL), and
 * moves the ref to the value `update` returns with an atomic rename. `update` sees the ref's value
 * under the lock, so the move is a compare-and-swap; returning null leaves the ref alone.
 */
export async function withRefLock<T>(
  gitdir: string,
  update: (current: string | null) => Promise<{ next: string | null; result: T }>,
  options: RefLockOptions = {},
): Promise<T> {
  const ref = options.ref ?? MAIN_REF;
  const refPath = join(gitdir, ref);
  const lockPath = `${refPath}.lock`;
  const waitMs = options.waitMs ?? LIMITS.lockWaitMs;
  const start = processStartTime(process.pid);
  const owner: LockOwner = { pid: process.pid, host: hostLabel(), nonce: randomBytes(8).toString('hex'), ...(start === null ? {} : { start }) };
  const ownerText = JSON.stringify(owner);
  fs.mkdirSync(dirname(refPath), { recursive: true });
  const started = Date.now();
  let delay = 2;
  for (;;) {
    try {
      const fd = fs.openSync(lockPath, 'wx');
      try {
        fs.writeSync(fd, ownerText);
      } catch (error) {
        // Made but not written (a full disk): a lock without its owner is no one's, and would hold every writer off until it aged.
        fs.closeSync(fd);
        fs.rmSync(lockPath, { force: true });
        throw error;
      }
      fs.closeSync(fd);
      break;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') {
        throw new CooError('IO_ERROR', `cannot create ${lockPath}: ${(error as Error).message}`, { cause: error });
      }
    }
    const content = readLock(lockPath);
    if (content === null) continue;
    if (isStale(lockPath, content)) {
      breakStale(lockPath, content);
      continue;
    }
    if (Date.now() - started > waitMs) {
      const holder = parseOwner(content);
      throw new CooError(
        'LEDGER_LOCKED',
        `ledger is locked${holder === null ? '' : ` by pid ${holder.pid} on ${holder.host}`}; if no coo or git process is running, remove ${lockPath}`,
      );
    }
    await sleep(delay + Math.random() * delay);
    delay = Math.min(delay * 2, 50);
  }
  try {
    const current = readRef(gitdir, ref);
    const { next, result } = await update(current);
    if (next !== null && next !== current) {
      // Named `*.lock`, a name git never reads as a ref: to git any other file under refs/ is a
      // branch, which `git pack-refs` (run by `git gc`) copies into packed-refs and removes, also
      // between this write and the rename, and which a crash there would leave behind.
      const temp = `${refPath}.coo-${owner.nonce}.lock`;
      try {
        failpoint('ref-update');
        fs.writeFileSync(temp, `${next}\n`);
        fs.renameSync(temp, refPath);
      } catch (error) {
        fs.rmSync(temp, { force: true });
        throw new CooError('IO_ERROR', `cannot move ${ref}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}; the ledger is unchanged`, { cause: error });
      }
      failpoint('after-ref-update');
    }
    return result;
  } finally {
    try {
      if (readLock(lockPath) === ownerText) fs.rmSync(lockPath);
    } catch {
      // nothing to release
    }
  }
}
