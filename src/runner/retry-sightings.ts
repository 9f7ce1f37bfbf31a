import { join } from 'node:path';
import { readOwnFile } from '../util/bounded-read.js';
import { writeOwnFile } from '../util/own-write.js';

/**
 * When a runner's machine first saw each receipt that set a retry time, on the machine's monotonic
 * clock, kept in the runner's state folder (`retries-seen.json`): a retry's wait is measured from
 * there (authority/lease.ts retryWaitMs), also by the next process. Held in memory alone, every
 * process started over, so a runner started for one pass at a time (`coo watch --once` from cron)
 * measured every wait from its own start and never started a retry. The monotonic clock counts
 * from the machine's boot, the same in every process of one boot; a record of another boot (the
 * machine restarted), of a clock this process cannot compare (a sighting later than now), or that
 * cannot be read, is started over: the wait only ever runs longer than needed, never shorter.
 */

const FILE = 'retries-seen.json';
const MAX_BYTES = 1024 * 1024;

/** What a store of first sightings keeps, and where: the retries by default. */
export interface SightingsKind {
  readonly file: string;
  /** What the file holds, said when it cannot be kept. */
  readonly what: string;
  /** What removing it costs, said beside it. */
  readonly remedy: string;
}

const RETRIES: SightingsKind = { file: FILE, what: 'when this runner first saw each retry', remedy: 'remove it (a retry then waits its whole backoff again)' };

/**
 * When this machine first saw each open claim of another runner, and each heartbeat of its holder
 * (`claims-seen.json`): a lease is measured from there (authority/lease.ts), also by the next
 * process. In memory alone, a runner started for one pass at a time (`coo watch --once` from cron)
 * saw every claim for the first time at each start and never took one over, and the claim held
 * what its attempt may spend against its correlation and the day for good.
 */
export const CLAIMS: SightingsKind = { file: 'claims-seen.json', what: 'when this runner first saw each open claim and heartbeat', remedy: 'remove it (a claim is then held a whole lease again)' };

export class RetrySightings {
  private readonly file: string;
  private seen: Map<string, number> | null = null;
  private changed = false;

  constructor(
    stateDir: string,
    private readonly boot: string | null,
    private readonly kind: SightingsKind = RETRIES,
  ) {
    this.file = join(stateDir, kind.file);
  }

  /** When the entry at `path` was first seen (now, `tick`, if never before), on the machine's monotonic clock. */
  firstSeen(path: string, tick: number): number {
    const seen = this.load();
    const earlier = seen.get(path);
    if (earlier !== undefined && earlier <= tick) return earlier;
    seen.set(path, tick);
    this.changed = true;
    return tick;
  }

  /** Forgets every entry not in `pending` (a retry started, its message ended; a claim closed), and keeps what changed. */
  keepOnly(pending: ReadonlySet<string>): void {
    const seen = this.load();
    for (const path of seen.keys()) {
      if (pending.has(path)) continue;
      seen.delete(path);
      this.changed = true;
    }
    if (!this.changed) return;
    this.changed = false;
    if (this.boot === null) return;
    try {
      writeOwnFile(this.file, JSON.stringify({ boot: this.boot, seen: Object.fromEntries(seen) }), { what: this.kind.what, remedy: this.kind.remedy, code: 'IO_ERROR' });
    } catch {
      // Not kept: the next process waits the whole backoff again, never less.
    }
  }

  private load(): Map<string, number> {
    if (this.seen !== null) return this.seen;
    this.seen = new Map();
    if (this.boot === null) return this.seen;
    try {
      const bytes = readOwnFile(this.file, { maxBytes: MAX_BYTES, what: this.kind.what, remedy: 'remove it', code: 'IO_ERROR' });
      const saved = bytes === null ? null : (JSON.parse(bytes.toString('utf8')) as unknown);
      if (typeof saved !== 'object' || saved === null || (saved as { boot?: unknown }).boot !== this.boot) return this.seen;
      const entries = (saved as { seen?: unknown }).seen;
      if (typeof entries !== 'object' || entries === null) return this.seen;
      for (const [path, at] of Object.entries(entries)) if (typeof at === 'number' && Number.isFinite(at) && at >= 0) this.seen.set(path, at);
    } catch {
      // Unreadable: every wait starts over.
    }
    return this.seen;
  }
}
