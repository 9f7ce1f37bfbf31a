import { createHash } from 'node:crypto';
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';
import { stateFromJson, stateToJson, type LedgerState } from '../authority/state.js';
import { LIMITS } from '../limits.js';
import { readOwnFile } from '../util/bounded-read.js';
import { writeOwnFile } from '../util/own-write.js';

/**
 * What an auditor or a runner last verified: kept outside the ledger, where whoever controls the
 * ledger cannot roll it back together with the history. A head that does not descend from it is a
 * rollback or a fork.
 */
export interface VerifiedCheckpoint {
  readonly genesis: string;
  readonly seq: number;
  readonly head: string;
  readonly tree: string;
  readonly verifiedAt: string;
  /** The state at `head`, so the next run replays only what came after. */
  readonly state: LedgerState;
}

/** A checkpoint as read back: its state is null when it was written in another shape (the next run replays in full). */
export type LoadedCheckpoint = Omit<VerifiedCheckpoint, 'state'> & { readonly state: LedgerState | null };

// Format 5: a commit message holding a forge's skip words is invalid, so history kept before that rule is
// judged anew; 4: a claim keeps its model's route at the claim; 3: its model's price (state.ts).
const FORMAT = 5;

export function defaultAuditDir(): string {
  return join(process.env['XDG_STATE_HOME'] ?? join(homedir(), '.local', 'state'), 'coo-commons', 'verified');
}

export function checkpointFile(dir: string, gitdir: string): string {
  return join(dir, `${createHash('sha256').update(resolve(gitdir)).digest('hex').slice(0, 16)}.json`);
}

/**
 * The last verified head. A state of an older shape is dropped, but the head it names still holds:
 * a new version of coo must not forget what the auditor verified, or a rollback would pass once.
 */
export function loadVerified(file: string): LoadedCheckpoint | null {
  // Read within the bound of a state cache; a FIFO, a folder, a link or a huge file there is said, never waited on or read whole.
  const bytes = readOwnFile(file, {
    maxBytes: LIMITS.checkpointBytes,
    what: 'the head this auditor last verified',
    remedy: 'put back the file coo verify wrote there, or remove it (the next coo verify replays the ledger from its start, and cannot tell a rollback to before the head it forgot)',
    code: 'IO_ERROR',
  });
  if (bytes === null) return null;
  try {
    const raw = JSON.parse(bytes.toString('utf8')) as Omit<VerifiedCheckpoint, 'state'> & { format: number; state: unknown };
    if (!isVerifiedHead(raw)) return null;
    const { genesis, seq, head, tree, verifiedAt } = raw;
    // Another format's state is replayed over; the head it names is still what was verified.
    if (raw.format !== FORMAT) return { genesis, seq, head, tree, verifiedAt, state: null };
    let state: LedgerState | null = null;
    try {
      state = stateFromJson(raw.state);
    } catch {
      state = null;
    }
    return { genesis, seq, head, tree, verifiedAt, state };
  } catch {
    return null;
  }
}

const OBJECT_ID = /^[0-9a-f]{40}(?:[0-9a-f]{24})?$/;

/** The fields every format of the checkpoint has held, each of its shape. */
function isVerifiedHead(raw: unknown): raw is Omit<VerifiedCheckpoint, 'state'> & { format: unknown; state: unknown } {
  if (raw === null || typeof raw !== 'object') return false;
  const { genesis, seq, head, tree, verifiedAt } = raw as Record<string, unknown>;
  return typeof genesis === 'string' && OBJECT_ID.test(genesis) && typeof head === 'string' && OBJECT_ID.test(head) && typeof tree === 'string' && OBJECT_ID.test(tree) && Number.isSafeInteger(seq) && (seq as number) >= 0 && typeof verifiedAt === 'string';
}

export function saveVerified(file: string, checkpoint: VerifiedCheckpoint): void {
  // Its folders are the auditor's own (the default is inside the state root every runner of this user shares): private.
  writeOwnFile(file, JSON.stringify({ format: FORMAT, ...checkpoint, state: stateToJson(checkpoint.state) }), { folderMode: 0o700, what: "the auditor's checkpoint", remedy: 'move what is at that name away; the next audit replays the ledger in full', code: 'IO_ERROR' });
}
