import { join } from 'node:path';
import { stateFromJson, stateToJson, type LedgerState } from '../authority/state.js';
import { LIMITS } from '../limits.js';
import { readBounded } from '../util/bounded-read.js';
import { writeOwnFile } from '../util/own-write.js';

/**
 * A cache of the derived state at one commit, kept inside the ledger's git directory so that
 * opening a large ledger replays only the commits since. It is never evidence: `coo verify --full`
 * ignores it, and a checkpoint whose commit is not an ancestor of the head is discarded. It is
 * written only for a history without an invalid commit (ledger.ts), so a later process still finds
 * such a commit. Its format changes with the shape or the fold of the state it keeps, or with a rule
 * that judges history anew (format 10: a commit message holding a forge's skip words is invalid; 9: a
 * claim keeps its model's route at the claim; 8: its model's price; 7: a cost counts on its claim's day when its receipt
 * is dated the day before), so a cache an earlier version wrote is left behind and replayed over.
 */
const FORMAT = 10;

export function checkpointPath(gitdir: string): string {
  return join(gitdir, 'coo', 'checkpoint.json');
}

export function loadCheckpoint(gitdir: string): { state: LedgerState; tree: string } | null {
  // Never a FIFO that blocks, a link to a device, or a file past the bound: a cache passed over costs a replay.
  const read = readBounded(checkpointPath(gitdir), { maxBytes: LIMITS.checkpointBytes });
  if (read.kind !== 'file' || !writtenByThisUser(read)) return null;
  try {
    const raw = JSON.parse(read.bytes.toString('utf8')) as { format: number; tree: string; state: unknown };
    if (raw.format !== FORMAT || typeof raw.tree !== 'string') return null;
    return { state: stateFromJson(raw.state), tree: raw.tree };
  } catch {
    return null;
  }
}

/**
 * Whether only this process's user could have written the cache: its owner, and no one else may
 * write it. The state in it is taken without a replay, so a cache another account with write access
 * to the ledger's folder left there (a spend of nothing, a key in the registry) would steer this
 * process without a signature; such a cache is passed over, and costs a replay.
 */
function writtenByThisUser(read: { readonly mode: number; readonly uid: number }): boolean {
  return read.uid === process.getuid?.() && (read.mode & 0o022) === 0;
}

export function saveCheckpoint(gitdir: string, state: LedgerState, tree: string): void {
  const path = checkpointPath(gitdir);
  writeOwnFile(path, JSON.stringify({ format: FORMAT, tree, state: stateToJson(state) }), { mode: 0o644, what: "the ledger's checkpoint", remedy: 'move what is at that name away; the ledger is replayed in full without it', code: 'IO_ERROR' });
}
