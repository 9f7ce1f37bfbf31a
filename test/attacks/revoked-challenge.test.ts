import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { generatePrivateKey, type PrivateKey } from '../../src/crypto/keys.js';
import { enqueueCrossCheck } from '../../src/consult/cross-check.js';
import { appendTrustVersion } from '../../src/ledger/trust-update.js';
import type { FakeMode } from '../../src/offline/fake-model-server.js';
import type { ActorPolicy } from '../../src/schema/policy.js';
import { claimedByAGoneRunner } from '../helpers/gone-runner.js';
import { blockersOf, makeWorld, receiptsOf, type World } from '../helpers/lane.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * A cross-check stands on the receipt that vouches for the answer it challenges: once that receipt's
 * key is revoked, no attempt of the cross-check is paid for, a retry no more than the first, and a
 * runner that takes over an attempt another left does not buy the next one.
 */

const dir = tempDir('coo-attack-revoked-challenge-');
const withCrossChecks = (policy: ActorPolicy): ActorPolicy => ({ ...policy, edges: [...policy.edges, { from: 'aa.*', to: 'aa.*', intents: ['cross_check'], requires: [] }] });

let w: World | null = null;
afterEach(async () => {
  await w?.close();
  w = null;
});

/**
 * A consult answered under the COO's first key, that key rotated out (retired, not revoked), and a
 * cross-check of the answer queued by the new key: the cross-check's own key stands throughout.
 */
async function crossCheckUnderNewKey(name: string, modes: FakeMode[]): Promise<{ world: World; successor: PrivateKey; messageId: string }> {
  const world = await makeWorld(join(dir, name), { policy: withCrossChecks, modes });
  w = world;
  const answered = (await world.consult()).messageId;
  await world.runner().runOnce();
  const successor = generatePrivateKey('coo.hermes');
  const registry = (await world.ledger.state()).registry!.doc;
  await appendTrustVersion(world.ledger, { role: 'registry', document: { ...registry, version: undefined }, actorKeys: new Map([['coo.hermes', successor.publicKey]]) }, world.actors.ceo, new Date());
  const { messageId } = await enqueueCrossCheck({ ledger: world.ledger, key: successor, now: new Date(), of: answered, target: 'aa.claude', maxRuntimeSeconds: 60 });
  return { world, successor, messageId };
}

/** The old key turns out stolen: the answer its receipt vouches for may be a thief's. */
async function revokeFirstKey(world: World): Promise<void> {
  const registry = (await world.ledger.state()).registry!.doc;
  await appendTrustVersion(world.ledger, { role: 'registry', document: { ...registry, version: undefined }, revoke: new Map([[world.actors.coo.publicKey.keyId, 'laptop stolen']]) }, world.actors.ceo, new Date());
}

/** The cross-check's receipts as status, blockers and whether each stated a cost. */
async function outcome(world: World, messageId: string): Promise<Array<[unknown, string[], boolean]>> {
  return (await receiptsOf(world, messageId)).map((receipt) => [receipt['status'], blockersOf(receipt), (receipt['actual_cost_usd'] as number) > 0]);
}

describe('a cross-check whose first attempt failed transiently, the key of the answer it challenges revoked before its retry', () => {
  it('starts no second attempt: blocked (policy_denied) naming the revoked key, charged nothing, and no model is paid again', async () => {
    const { world, successor, messageId } = await crossCheckUnderNewKey('retry', ['ok', 'rate-limit', 'ok']);
    const first = world.runner({ key: successor, onEvent: (event) => event.type === 'receipt' && event.messageId === messageId && first.interrupt('one receipt') });
    await first.runOnce();
    expect((await receiptsOf(world, messageId)).map((receipt) => [blockersOf(receipt), receipt['next_attempt_at'] !== null])).toEqual([[['aa_unavailable:rate_limited'], true]]);
    await revokeFirstKey(world);
    const paid = world.server.requests.length;
    await world.runner({ key: successor }).runOnce();
    expect(await outcome(world, messageId)).toEqual([
      ['failed', ['aa_unavailable:rate_limited'], true],
      ['blocked', ['policy_denied'], false],
    ]);
    const receipts = await receiptsOf(world, messageId);
    expect(JSON.stringify(receipts[1]!['blockers'])).toContain('the key of the challenged receipt');
    expect(receipts[1]!['next_attempt_at']).toBeNull();
    expect(world.server.requests.length).toBe(paid);
  }, 120_000);
});

describe('a cross-check claimed by a runner that went quiet, the key of the answer it challenges revoked, then taken over', () => {
  it('the taker charges the attempt it found open and starts no other: blocked (policy_denied), and no model is paid', async () => {
    const { world, successor, messageId } = await crossCheckUnderNewKey('takeover', ['ok']);
    const at = new Date();
    await claimedByAGoneRunner(world, messageId, undefined, at, successor);
    await revokeFirstKey(world);
    const paid = world.server.requests.length;
    // Past the quiet runner's lease and runtime budget, on the taker's own clock.
    let tick = 0;
    const taker = world.runner({ key: successor, monotonic: () => tick, clock: () => at, leaseGraceSeconds: 600 });
    await taker.runOnce();
    tick = 2_000_000;
    await taker.runOnce();
    expect(world.events.map((event) => event.type)).toContain('takeover');
    expect(await outcome(world, messageId)).toEqual([
      ['failed', ['interrupted'], true],
      ['blocked', ['policy_denied'], false],
    ]);
    expect(world.server.requests.length).toBe(paid);
  }, 120_000);
});
