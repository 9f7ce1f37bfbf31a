import { afterAll, describe, expect, it } from 'vitest';
import { attemptIdOf } from '../../src/authority/runnable.js';
import { folderOf } from '../../src/authority/state.js';
import { allowanceBoundsUsd } from '../../src/lane/budget.js';
import { claimPath } from '../../src/ledger/layout.js';
import { toYaml } from '../../src/schema/strict-yaml.js';
import { sessionSlugFor } from '../../src/util/ids.js';
import { isoSeconds } from '../../src/util/time.js';
import { blockersOf, receiptsOf, worlds, type World } from '../helpers/lane.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * Machines whose clocks disagree, or jump, around the times the ledger's rules read: a clock is
 * never a way to pay more than the ledger allows.
 */

const dir = tempDir('machines-redteam-13');
const made: World[] = [];
const fresh = worlds(dir);

afterAll(async () => {
  for (const world of made) await world.close();
});

/** The first UTC midnight at least ten minutes from now: every time a case dates around it lies ahead of the ledger's first entries. */
function nextMidnight(): Date {
  const day = 86_400_000;
  return new Date(Math.ceil((Date.now() + 600_000) / day) * day);
}

const at = (midnight: Date, seconds: number): Date => new Date(midnight.getTime() + seconds * 1000);

describe("an attempt that straddles a day's midnight on two machines' clocks", () => {
  it("is charged to the day of its claim when its receipt's clock reads the day before: the next day's cap still counts what it spent", async () => {
    const w = await fresh({ policy: (policy) => ({ ...policy, budgets: { ...policy.budgets, daily_cost_cap_usd: 1 } }) });
    made.push(w);
    const midnight = nextMidnight();
    const { messageId } = await w.consult({ idempotencyKey: 'straddles-midnight', maxCostUsd: 1, now: at(midnight, -60) });
    const state = await w.ledger.state();
    const record = state.messages.get(messageId)!;
    const { ceilingUsd } = allowanceBoundsUsd(record, 1, state.policy!.doc, state.registry!.doc);
    // A runner whose clock read 00:00:30 claims the whole budget, and then goes quiet.
    const claimedAt = at(midnight, 30);
    const claim = {
      schema_version: 'claim.v0',
      message_id: messageId,
      attempt_id: attemptIdOf(record, 1),
      attempt_number: 1,
      runner_id: 'run-gone',
      transport_session_id: sessionSlugFor(messageId, 1),
      claimed_at: isoSeconds(claimedAt),
      allowance_usd: ceilingUsd,
    };
    await w.ledger.append({ files: [{ path: claimPath(folderOf(record), 1), bytes: Buffer.from(toYaml(claim)) }], key: w.actors.coo, now: claimedAt, summary: `claim ${messageId} attempt 1` });

    // Another machine, its clock 50 s behind (within the skew allowed between machines), takes it over: by its clock, before midnight.
    let tick = 0;
    const taker = w.runner({ monotonic: () => tick, clock: () => at(midnight, -20), leaseGraceSeconds: 600 });
    await taker.runOnce();
    tick = 2_000_000;
    await taker.runOnce();
    expect(w.events.map((event) => event.type)).toContain('takeover');
    const [receipt] = await receiptsOf(w, messageId);
    expect(blockersOf(receipt!)).toEqual(['interrupted']);
    const charged = receipt!.actual_cost_usd as number;
    expect(charged).toBeGreaterThan(0.9);

    // The spend happened after 00:00:30 by the claim's clock: the new day holds it, not the one before.
    const after = await w.ledger.state();
    const today = isoSeconds(midnight).slice(0, 10);
    expect(after.spendByDay.get(today)).toBeCloseTo(charged, 9);
    expect(after.spendByDay.get(isoSeconds(at(midnight, -60)).slice(0, 10))).toBeUndefined();

    // So the new day's cap has nothing left for another consult: it is blocked, never paid.
    const { messageId: next } = await w.consult({ idempotencyKey: 'after-midnight', maxCostUsd: 1, now: at(midnight, 60) });
    const requests = w.server.requests.length;
    await w.runner({ clock: () => at(midnight, 90) }).runOnce();
    const [blocked] = await receiptsOf(w, next);
    expect(blockersOf(blocked!)).toEqual(['daily_cap_reached']);
    expect(w.server.requests.length).toBe(requests);
  }, 120_000);
});
