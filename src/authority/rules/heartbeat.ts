import { CooError } from '../../errors.js';
import { heartbeatPath } from '../../ledger/layout.js';
import { toMillis } from '../../schema/common.js';
import type { CommitCheck, EntryFile } from '../commit-check.js';

/**
 * A heartbeat (heartbeat.v0): written by the active COO's runner under the hour of its creation,
 * naming the sequence of its own commit, living no longer than the policy allows.
 */
export function checkHeartbeat(check: CommitCheck, entry: EntryFile, pathSeq: number, keyId: string): void {
  const where = entry.path;
  const doc = check.read('heartbeat.v0', entry);
  check.requireActiveCoo(keyId, where, 'heartbeats');
  if (heartbeatPath(doc.created_at, pathSeq) !== where) {
    throw new CooError('PATH_INVALID', `${where}: a heartbeat lives under the hour of its created_at, at ${heartbeatPath(doc.created_at, pathSeq)}`, { where });
  }
  if (doc.ledger_seq !== check.seq || pathSeq !== check.seq) {
    throw new CooError('COMMIT_SEQ', `${where}: a heartbeat names the sequence of its own commit (${check.seq})`, { where });
  }
  const ttl = (toMillis(doc.expires_at) - toMillis(doc.created_at)) / 1000;
  const limit = check.policy?.doc.heartbeat.ttl_seconds ?? 0;
  if (ttl <= 0 || ttl > limit) throw new CooError('POLICY_LIMIT', `${where}: a heartbeat lives between 0 and ${limit} seconds`, { where });
  check.heartbeat = { seq: check.seq, expiresAt: doc.expires_at, runner: doc.runner_id };
  check.runnerHeartbeat = { runner: doc.runner_id, seq: check.seq, createdAt: doc.created_at, expiresAt: doc.expires_at };
}

/**
 * The fold keeps each runner's newest heartbeat: it is how a holder of a claim shows it is alive
 * (authority/lease.ts). Runner ids are random per start, so the set of ids only grows; the fold
 * bounds it by one deterministic rule: the newest heartbeats of the RUNNERS_KEPT runners that beat
 * most recently are kept, and a runner that beats again comes back. Runners that hold claims and
 * are alive beat every interval, so only runners long gone fall out.
 */

/** How many runners' newest heartbeats the ledger state keeps. */
export const RUNNERS_KEPT = 256;

/**
 * Records `beat` as `runner`'s newest and drops the runners whose newest beat is oldest beyond
 * RUNNERS_KEPT. The map is kept in the order of each runner's newest beat (a beat moves its runner
 * to the end), so the oldest is the first.
 */
export function keepHeartbeat<B>(beats: Map<string, B>, runner: string, beat: B): void {
  beats.delete(runner);
  beats.set(runner, beat);
  for (const oldest of beats.keys()) {
    if (beats.size <= RUNNERS_KEPT) break;
    beats.delete(oldest);
  }
}
