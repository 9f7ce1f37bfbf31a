import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { isTerminal } from '../../src/authority/state.js';
import { coo } from '../helpers/cli.js';
import { makeWorld, type World } from '../helpers/lane.js';
import { finished, startRunner } from '../helpers/runner-process.js';
import { tally } from '../helpers/tally.js';
import { tempDir } from '../helpers/tmp.js';
import { seededRandom } from '../helpers/seeded.js';

/**
 * SIGKILL the runner at the named points of a consult, then restart it: every envelope must end with
 * exactly one terminal receipt, no attempt may be paid for twice, and the ledger must verify.
 * `COO_RELIABILITY=full` runs 30 seeded runs; the normal suite runs one per point.
 */
const POINTS = ['after-claim', 'during-oracle', 'after-answer', 'ref-update', 'after-ref-update'] as const;
const FULL = process.env['COO_RELIABILITY'] === 'full';
const RUNS = FULL ? 30 : POINTS.length;
const CONSULTS = 3;

const dir = tempDir();
let world: World | null = null;
afterEach(async () => {
  await world?.close();
  world = null;
});

describe('crashes', () => {
  for (let seed = 0; seed < RUNS; seed += 1) {
    const next = seededRandom(seed + 1);
    const point = POINTS[seed % POINTS.length]!;
    const occurrence = 1 + Math.floor(next() * (point.includes('ref-update') ? 6 : CONSULTS));
    it(`survives SIGKILL at ${point}@${occurrence} (seed ${seed})`, async () => {
      world = await makeWorld(join(dir, `seed-${seed}`));
      const ids: string[] = [];
      for (let i = 0; i < CONSULTS; i += 1) ids.push((await world.consult({ idempotencyKey: `crash-${seed}-${i}` })).messageId);
      const first = await finished(startRunner(world, { failpoint: `${point}@${occurrence}` }));
      const killed = first.signal === 'SIGKILL';
      let restarts = 0;
      for (;;) {
        const state = await world.ledger.state();
        if (ids.every((id) => isTerminal(state.messages.get(id)!))) break;
        restarts += 1;
        expect(restarts).toBeLessThan(5);
        const again = await finished(startRunner(world));
        expect(again.stderr).not.toContain('"type":"error"');
        expect(again.code).toBe(0);
      }
      const state = await world.ledger.state();
      let attempts = 0;
      for (const id of ids) {
        const record = state.messages.get(id)!;
        attempts += record.attempts.length;
        const terminal = record.attempts.filter((attempt) => attempt.receipt !== null && attempt.receipt.nextAttemptAt === null);
        expect(terminal).toHaveLength(1);
        expect(record.attempts[record.attempts.length - 1]!.receipt!.status).toBe('succeeded');
      }
      const canaries = world.server.requests.map((request) => request.canary);
      expect(new Set(canaries).size).toBe(canaries.length);
      expect(canaries.length).toBeLessThanOrEqual(attempts);
      expect(coo(['verify', '--ledger', world.gitdir, '--no-checkpoint']).status).toBe(0);
      tally('faults', { seed, point, occurrence, killed, restarts, attempts, paid_calls: canaries.length, duplicate_calls: canaries.length - new Set(canaries).size, lost: ids.filter((id) => !isTerminal(state.messages.get(id)!)).length });
    });
  }
});
