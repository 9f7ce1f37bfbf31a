import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { agentScript, dispatchTo, hostilePlaces, receiptsFor, watchOnce } from '../helpers/hostile-agent.js';
import { headOf } from '../helpers/damage.js';
import { laneState } from '../helpers/startup.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * A careless operator, round 51: start-up mistakes under the full actor model. What a corrected
 * restart would run is the operator's mistake, not the message's: it is said at start, and the
 * message stays queued and unclaimed, never claimed and ended with a receipt that blames the work.
 */

const dir = tempDir('startup-redteam-51-');

describe('an execution agent\'s model base URL (--ea-base-url, $COO_EA_BASE_URL) no client can use', () => {
  const places = hostilePlaces(join(dir, 'places'), 'ea-url');

  it('leaves the dispatch queued and unclaimed, said at start by the one rule of an endpoint Oracle\'s routes follow; given a URL, the dispatch runs', { timeout: 180_000 }, async () => {
    const cases: Array<[string, string, RegExp]> = [
      ['not-a-url', 'localhost:8080/v1', /--ea-base-url \S+ is not an http or https URL/],
      ['words', 'the gateway', /--ea-base-url is not a URL \(give http:\/\/ or https:\/\/, a host and a path\)/],
      ['ftp', 'ftp://127.0.0.1/v1', /--ea-base-url ftp:\/\/127\.0\.0\.1\/v1 is not an http or https URL/],
      ['credentials', 'http://user:hunter2-secret@127.0.0.1:9/v1', /--ea-base-url carries credentials in its URL; give the key in the provider's variable instead/],
    ];
    for (const [name, url, said] of cases) {
      const place = await places(name);
      const id = (await dispatchTo(place, `url-${name}`)).messageId;
      const before = headOf(place.world.gitdir);
      const agent = agentScript(place.world.dir, 'true');
      const run = watchOnce(place, agent, { isolation: 'none', env: { COO_EA_BASE_URL: url } });
      expect(run.status, run.stderr).toBe(0);
      const waits = run.stderr.split('\n').find((line) => line.startsWith('coo watch: dispatches to ea.codex wait, queued and unclaimed: '));
      expect(waits, run.stderr).toMatch(said);
      expect(run.stderr).not.toContain('hunter2-secret');
      expect(run.stdout).not.toContain('"claimed"');
      expect(laneState(place.world, id)).toBe('queued');
      expect(headOf(place.world.gitdir)).toBe(before);
      expect(await receiptsFor(place, id)).toEqual([]);
    }
    // The same start with a URL an agent can be given: the dispatch is claimed and run.
    const place = await places('fixed');
    const id = (await dispatchTo(place, 'url-fixed')).messageId;
    const run = watchOnce(place, agentScript(place.world.dir, 'true'), { isolation: 'none', env: { COO_EA_BASE_URL: 'http://127.0.0.1:9/v1' } });
    expect(run.stdout, run.stderr).toContain(`"claimed","messageId":"${id}"`);
    expect(await receiptsFor(place, id)).toHaveLength(1);
  });
});
