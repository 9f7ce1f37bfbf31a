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
