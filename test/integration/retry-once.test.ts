import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { RetrySightings } from '../../src/runner/retry-sightings.js';
import { receiptsOf, worlds } from '../helpers/lane.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * A runner started for one pass at a time (`coo watch --once` from cron, a process per pass): the
 * wait a retry's receipt sets is measured on the machine's monotonic clock from when the machine
 * first saw the receipt, which the state folder keeps, so a later process goes on from there.
 */

const dir = tempDir('coo-retry-once-');
const fresh = worlds(join(dir, 'worlds'));

describe('a retry through runners of one pass each', () => {
  it('a consult rate limited with a 60 s backoff: the pass that first sees it waits, a new runner process 60 s later on the machine clock claims the retry, pays once for it, and it succeeds', async () => {
    const w = await fresh({ modes: ['rate-limit', 'ok'], policy: (policy) => ({ ...policy, retries: { ...policy.retries, backoff_base_seconds: 60, backoff_max_seconds: 60 } }) });
    const { messageId } = await w.consult();
    await w.runner().runOnce();
    expect((await receiptsOf(w, messageId)).map((receipt) => receipt['status'])).toEqual(['failed']);
    const paid = w.server.requests.length;
    const later = (seconds: number) => new Date(Date.now() + seconds * 1000);

    // Each pass is a new Runner, as each `coo watch --once` is a new process; the wall clock is past next_attempt_at.
    expect((await w.runner({ clock: () => later(120), monotonic: () => 1_000_000 }).runOnce()).waiting.length).toBeGreaterThan(0);
    await w.runner({ clock: () => later(150), monotonic: () => 1_059_000 }).runOnce();
    expect((await w.ledger.state()).messages.get(messageId)!.attempts).toHaveLength(1);
    expect(w.server.requests).toHaveLength(paid);

    await w.runner({ clock: () => later(180), monotonic: () => 1_060_000 }).runOnce();
    expect((await receiptsOf(w, messageId)).map((receipt) => receipt['status'])).toEqual(['failed', 'succeeded']);
    expect(w.server.requests).toHaveLength(paid + 1);
  });
});

describe('what the state folder keeps of retries', () => {
  it('goes on from a sighting of this boot, starts over for another boot, a sighting later than now, or a file that is not its own, and forgets what is no longer pending', () => {
    const state = tempDir('coo-retry-sightings-');
    const first = new RetrySightings(state, 'boot-a');
    expect(first.firstSeen('r/1', 500)).toBe(500);
    first.keepOnly(new Set(['r/1']));
    expect(new RetrySightings(state, 'boot-a').firstSeen('r/1', 9_000)).toBe(500);
    expect(new RetrySightings(state, 'boot-b').firstSeen('r/1', 9_000)).toBe(9_000);
    expect(new RetrySightings(state, 'boot-a').firstSeen('r/1', 100)).toBe(100);
    // Without a boot id nothing is kept across processes.
    const none = new RetrySightings(state, null);
    expect(none.firstSeen('r/2', 7)).toBe(7);
    none.keepOnly(new Set(['r/2']));
    expect(new RetrySightings(state, 'boot-a').firstSeen('r/2', 9_000)).toBe(9_000);

    const file = join(state, 'retries-seen.json');
    const gone = new RetrySightings(state, 'boot-a');
    gone.firstSeen('r/1', 600);
    gone.keepOnly(new Set());
    expect(JSON.parse(readFileSync(file, 'utf8'))).toEqual({ boot: 'boot-a', seen: {} });
    for (const junk of ['not json', '{"boot":"boot-a","seen":{"r/1":-5}}', '{"boot":"boot-a","seen":{"r/1":"0"}}', '[]']) {
      writeFileSync(file, junk);
      expect(new RetrySightings(state, 'boot-a').firstSeen('r/1', 9_000)).toBe(9_000);
    }
  });
});
