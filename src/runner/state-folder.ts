import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import { join, resolve } from 'node:path';
import { CooError } from '../errors.js';
import { readBounded, readOwnFile } from '../util/bounded-read.js';
import { writeOwnFile } from '../util/own-write.js';
import { ownerGone, ownerTag } from '../util/process.js';

/**
 * Who may use a runner's state folder at once. The folder holds each attempt's sandbox or worktree
 * (with the pid of its Oracle or executor), the journal of receipts the remote has not taken, the
 * results kept for a restart and the head the runner last saw.
 *
 * Runners of one ledger that work on it directly (no `--remote`) may share one: they tell a live
 * runner from a dead one by its record in the ledger's folder (identity.ts), never touch a live
 * runner's attempt, and a runner that recovers a dead one's attempt harvests what its sandbox holds
 * (the answer it paid for) from this very folder. `coo watch` and `coo mcp --run` on one ledger share
 * the default folder so.
 *
 * A runner through a remote judges every other runner by leases (its pid says nothing across
 * machines): a runner that took over another's attempt would find that runner's live Oracle or
 * executor here, end it and remove its worktree under it, and publish that runner's journal as its
 * own. So a runner through a remote has its state folder to itself: one started beside any other
 * live runner of the folder, or any runner started beside it, is refused at start (RUNNER_CONFIG,
 * exit 2), before a claim. So is a runner of another ledger, live or not (a runner saw its head).
 *
 * Each runner process says, in the folder's `holders/`, that it uses the folder and how (its ledger,
 * its remote), under a name that says which process it is (util/process.ts ownerTag); a record whose
 * process is gone counts for nothing. It writes its own record first and then reads the others', so
 * of two runners that start together and may not share, neither runs rather than both.
 */

/** Largest holder record read: a line of JSON. */
const RECORD_BYTES = 4096;

/** Largest file of the head a runner last saw read: a line of JSON. */
const HEAD_FILE_BYTES = 4096;

/** How one runner process uses the folder. */
interface HolderRecord {
  /** The ledger's git folder, resolved. */
  readonly ledger: string;
  /** The remote it works through, or null. */
  readonly remote: string | null;
}

/** What a runner last saw of its ledger, as it recorded it in its state folder. */
export interface SeenHead {
  readonly seq: number;
  readonly head: string;
  readonly ledger?: unknown;
  readonly genesis?: unknown;
}

/** Where a runner records the head it last saw. */
export function headFileOf(stateDir: string): string {
  return join(stateDir, 'ledger-head.json');
}

/** The head a runner of this folder last saw, or null when none was recorded (or it does not parse). */
export function readSeenHead(stateDir: string): SeenHead | null {
  // A line of JSON a runner wrote; anything else at its path (a FIFO, a folder, a huge file) is said, never waited on.
  const bytes = readOwnFile(headFileOf(stateDir), { maxBytes: HEAD_FILE_BYTES, what: 'the ledger head this runner last saw', remedy: 'remove it (the runner records the head again on its next pass), after checking the ledger with coo verify', code: 'RUNNER_CONFIG' });
  if (bytes === null) return null;
  try {
    return JSON.parse(bytes.toString('utf8')) as SeenHead;
  } catch {
    return null;
  }
}

/**
 * The refusal of a state folder that holds what a runner saw of another ledger (another genesis),
 * or null: never taken for a fork of this one.
 */
export function anotherLedgerProblem(stateDir: string, saved: SeenHead | null, gitdir: string, genesis: string | null): CooError | null {
  const ledger = resolve(gitdir);
  if (saved === null || typeof saved.ledger !== 'string' || saved.ledger === ledger || typeof saved.genesis !== 'string' || genesis === saved.genesis) return null;
  return new CooError(
    'RUNNER_CONFIG',
    `the state folder ${stateDir} holds what a runner saw of another ledger (${saved.ledger}), not of ${ledger}: give each ledger a --state-dir of its own (the default is one per ledger); nothing was claimed`,
  );
}

function holdersDir(stateDir: string): string {
  return join(stateDir, 'holders');
}

function readHolder(path: string): HolderRecord | null {
  const read = readBounded(path, { maxBytes: RECORD_BYTES });
  if (read.kind !== 'file') return null;
  try {
    const value = JSON.parse(read.bytes.toString('utf8')) as HolderRecord;
    return typeof value.ledger === 'string' && (value.remote === null || typeof value.remote === 'string') ? value : null;
  } catch {
    return null;
  }
}

/** Why a runner using the folder as `mine` may not run beside one using it as `theirs`, or null when both may. */
function conflict(mine: HolderRecord, theirs: HolderRecord | null, path: string): string | null {
  // A record this runner cannot read is a runner it cannot judge: said, never run beside.
  if (theirs === null) return `a runner whose record ${path} cannot be read: remove it if no runner uses the folder`;
  const what = `a runner of ${theirs.ledger}${theirs.remote === null ? '' : ` through ${theirs.remote}`} (${path})`;
  if (theirs.remote !== null || mine.remote !== null) {
    return `${what}, and a runner through a remote has its state folder to itself (it would take another runner's attempts there for those of a runner gone: end its Oracle or executor, remove its worktree, publish its journal): give each runner through a remote a --state-dir of its own, or stop the other runner`;
  }
  if (theirs.ledger === mine.ledger) return null;
  return `${what}, not of ${mine.ledger}: give each ledger a --state-dir of its own (the default is one per ledger)`;
}

/**
 * Records that this process runs a runner on `stateDir` (of the ledger `gitdir`, through `remote`
 * when given), or throws RUNNER_CONFIG when a live runner there may not share the folder with it.
 * Returns how to give the folder up (when the runner stops); a runner killed leaves a record whose
 * process is gone, which counts for nothing.
 */
export function holdStateFolder(stateDir: string, gitdir: string, remote: string | null): () => void {
  const dir = holdersDir(stateDir);
  const name = `${ownerTag()}.${randomBytes(6).toString('hex')}`;
  const path = join(dir, `${name}.json`);
  const mine: HolderRecord = { ledger: resolve(gitdir), remote };
  try {
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  } catch (error) {
    throw new CooError('RUNNER_CONFIG', `cannot make ${dir}, where the runners of the state folder ${stateDir} say they use it (${(error as NodeJS.ErrnoException).code ?? 'EIO'}): the state folder holds only what runners write; move what is at that name out of it, and start again`);
  }
  writeOwnFile(path, JSON.stringify(mine), { what: 'the record of the runner that uses this state folder', remedy: "the state folder's holders folder holds only what runners write: move what is at that name out of it, and start again", code: 'RUNNER_CONFIG' });
  const release = (): void => fs.rmSync(path, { force: true });
  for (const entry of fs.readdirSync(dir)) {
    if (entry === `${name}.json` || !entry.endsWith('.json')) continue;
    const owner = /^(.+)\.[0-9a-f]+\.json$/.exec(entry)?.[1];
    if (owner !== undefined && ownerGone(owner)) {
      fs.rmSync(join(dir, entry), { force: true });
      continue;
    }
    const why = conflict(mine, readHolder(join(dir, entry)), join(dir, entry));
    if (why === null) continue;
    release();
    throw new CooError('RUNNER_CONFIG', `the state folder ${stateDir} is in use by ${why}; nothing was claimed`);
  }
  return release;
}
