import { laneStateOf, type LaneState, type LedgerState, type MessageRecord } from '../authority/state.js';
import { CooError } from '../errors.js';
import { toMillis } from '../schema/common.js';
import type { ActorRegistry } from '../schema/registry.js';

/** Which messages a listing holds: all of each given filter, newest first, one page at a time. */
export interface SessionFilter {
  readonly correlationId?: string;
  readonly state?: LaneState;
  /** Only messages created at or after this time (`YYYY-MM-DDTHH:MM:SSZ`). */
  readonly since?: string;
  /** Only messages created before this time. */
  readonly until?: string;
  /** The cursor a previous page returned: the listing goes on below that Ledger-Seq. */
  readonly before?: number;
  readonly limit: number;
}

/** One message in a listing: what a COO needs to pick the one to open. */
export interface SessionSummary {
  readonly message_id: string;
  readonly intent: string;
  readonly target: string;
  readonly correlation_id: string;
  readonly created_at: string;
  readonly state: LaneState;
  readonly attempts: number;
  readonly cost_usd: number;
  /** The last receipt's status and path, or null while none has landed. */
  readonly receipt: { readonly status: string; readonly path: string } | null;
  readonly duplicate_of: string | null;
  readonly submitted_via: string | null;
  readonly seq: number;
}

export interface SessionPage {
  readonly sessions: readonly SessionSummary[];
  /** Pass as `before` for the next page; null on the last one. */
  readonly next_before: number | null;
}

/** The most a page holds. */
export const MAX_SESSIONS_PAGE = 200;

/** One message's line in a listing; `registry` (the ledger's) says whose acknowledgement a message waits for (laneStateOf). */
export function summarizeSession(record: MessageRecord, registry?: ActorRegistry): SessionSummary {
  const last = [...record.attempts].reverse().find((attempt) => attempt.receipt !== null)?.receipt ?? null;
  return {
    message_id: record.id,
    intent: record.intent,
    target: record.target,
    correlation_id: record.correlation,
    created_at: record.createdAt,
    state: laneStateOf(record, registry),
    attempts: record.attempts.length,
    cost_usd: record.attempts.reduce((sum, attempt) => sum + (attempt.receipt?.costUsd ?? 0), 0),
    receipt: last === null ? null : { status: last.status, path: last.path },
    duplicate_of: record.duplicateOf,
    submitted_via: record.submittedVia ?? null,
    seq: record.seq,
  };
}

/**
 * Lists a ledger's messages newest first (by the Ledger-Seq that added them), filtered and paged.
 * Pure: one pass from the newest message down, stopping once the page is full.
 */
export function listSessions(state: LedgerState, filter: SessionFilter): SessionPage {
  if (!Number.isSafeInteger(filter.limit) || filter.limit < 1 || filter.limit > MAX_SESSIONS_PAGE) {
    throw new CooError('USAGE', `a page holds 1 to ${MAX_SESSIONS_PAGE} messages, not ${filter.limit}`);
  }
  const since = filter.since === undefined ? null : toMillis(filter.since);
  const until = filter.until === undefined ? null : toMillis(filter.until);
  const records = [...state.messages.values()];
  const sessions: SessionSummary[] = [];
  let more = false;
  // Messages enter the state in Ledger-Seq order, so the map's order is already oldest first.
  for (let i = records.length - 1; i >= 0; i--) {
    const record = records[i]!;
    if (filter.before !== undefined && record.seq >= filter.before) continue;
    if (filter.correlationId !== undefined && record.correlation !== filter.correlationId) continue;
    if (filter.state !== undefined && laneStateOf(record, state.registry?.doc) !== filter.state) continue;
    const created = toMillis(record.createdAt);
    if (since !== null && created < since) continue;
    if (until !== null && created >= until) continue;
    if (sessions.length === filter.limit) {
      more = true;
      break;
    }
    sessions.push(summarizeSession(record, state.registry?.doc));
  }
  return { sessions, next_before: more ? sessions[sessions.length - 1]!.seq : null };
}
