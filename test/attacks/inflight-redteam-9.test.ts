import { describe, expect, it } from 'vitest';
import { verifyLedger } from '../../src/audit/verify.js';
import { generatePrivateKey, type PrivateKey } from '../../src/crypto/keys.js';
import { appendTrustVersion } from '../../src/ledger/trust-update.js';
import { blockersOf, receiptsOf, worlds, type World } from '../helpers/lane.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * Trust and policy that change while work is in flight: between an envelope and its claim, or
 * between a claim and its receipt. A change must never let through what the rules in force refuse,
 * pay twice, lose a message, or leave a runner stuck.
 */

const dir = tempDir('inflight-redteam-9');
const fresh = worlds(dir);

/** The COO's key replaced in the registry by a new one; the old one revoked (it may be in other hands) or only rotated out. */
async function replaceCooKey(w: World, revoke: boolean): Promise<PrivateKey> {
  const next = generatePrivateKey('coo.hermes');
  const registry = (await w.ledger.state()).registry!.doc;
  await appendTrustVersion(
    w.ledger,
    { role: 'registry', document: { ...registry, version: undefined }, actorKeys: new Map([['coo.hermes', next.publicKey]]), ...(revoke ? { revoke: new Map([[w.actors.coo.publicKey.keyId, 'laptop stolen']]) } : {}) },
    w.actors.ceo,
    new Date(),
  );
  return next;
}

describe('a consult queued by a COO key revoked before any runner claimed it', () => {
  it('is receipted blocked (policy_denied) by the runner holding the new key, and nothing is paid; the history verifies', async () => {
    const w = await fresh();
    const { messageId } = await w.consult();
    const next = await replaceCooKey(w, true);
    await w.runner({ key: next }).runOnce();
    expect(w.server.requests).toHaveLength(0);
    const receipts = await receiptsOf(w, messageId);
    expect(receipts.map((receipt) => [receipt['status'], blockersOf(receipt)])).toEqual([['blocked', ['policy_denied']]]);
    expect(JSON.stringify(receipts[0])).toContain('laptop stolen');
    expect((await verifyLedger(w.gitdir, { full: true })).findings).toEqual([]);
  });

  it('runs when the key was only rotated out, not revoked: a rotation leaves what the key said standing', async () => {
    const w = await fresh();
    const { messageId } = await w.consult();
    const next = await replaceCooKey(w, false);
    await w.runner({ key: next }).runOnce();
    expect(w.server.requests).toHaveLength(1);
    expect((await receiptsOf(w, messageId)).map((receipt) => receipt['status'])).toEqual(['succeeded']);
  });
});

describe("a consult's retry after the policy lowered its retries", () => {
  it('is receipted blocked (policy_denied) and not paid: the policy in force allows the rate-limited consult no second attempt', async () => {
    const w = await fresh({ modes: ['rate-limit', 'ok'], policy: (policy) => ({ ...policy, retries: { ...policy.retries, backoff_base_seconds: 60, backoff_max_seconds: 60 } }) });
    const { messageId } = await w.consult();
    await w.runner().runOnce();
    expect((await receiptsOf(w, messageId)).map((receipt) => receipt['next_attempt_at'] === null)).toEqual([false]);
    const paid = w.server.requests.length;
    const policy = (await w.ledger.state()).policy!.doc;
    await appendTrustVersion(w.ledger, { role: 'policy', document: { ...policy, version: undefined, retries: { ...policy.retries, transient_max_attempts: 1 } } }, w.actors.ceo, new Date());

    let tick = 0;
    const later = w.runner({ clock: () => new Date(Date.now() + 2 * 60_000), monotonic: () => tick });
    await later.runOnce();
    tick = 60_000;
    await later.runOnce();
    expect(w.server.requests).toHaveLength(paid);
    const receipts = await receiptsOf(w, messageId);
    expect(receipts.map((receipt) => [receipt['status'], blockersOf(receipt)])).toEqual([['failed', ['aa_unavailable:rate_limited']], ['blocked', ['policy_denied']]]);
    expect((await verifyLedger(w.gitdir, { full: true })).findings).toEqual([]);
  });
});
