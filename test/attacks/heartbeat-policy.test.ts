import { afterAll, describe, expect, it } from 'vitest';
import { loadPrivateKey } from '../../src/cli/common.js';
import { appendTrustVersion } from '../../src/ledger/trust-update.js';
import { makeCase } from '../helpers/remote-runners.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * The CEO shortens the heartbeat's lifetime while runners work through a remote. A runner's clone
 * learns of it only when it next fetches, which its heartbeat's own push does: the heartbeat must
 * be written under the policy of the head it lands on. Written under the policy its clone held
 * before, it was refused (POLICY_LIMIT), which ends a watch as a refused write does: every runner
 * stopped at its next beat.
 */

const dir = tempDir('heartbeat-policy');
const closers: Array<() => Promise<void> | void> = [];

afterAll(async () => {
  for (const close of closers.reverse()) await close();
});

describe('a heartbeat lifetime the CEO shortened on the remote', () => {
  it("is the one the runner's next heartbeat states, though its clone still held the longer one", async () => {
    const world = await makeCase(dir, closers);
    const machine = await world.machine('runner');
    const runner = machine.runner();
    await runner.runOnce();
    const before = (await machine.ledger.state()).policy!.doc;
    const shorter = Math.floor(before.heartbeat.ttl_seconds / 2);
    expect(shorter).toBeGreaterThan(before.heartbeat.interval_seconds);

    const ceo = await world.machine('ceo');
    const policy = (await ceo.ledger.state()).policy!.doc;
    await ceo.remote.write((ledger) => appendTrustVersion(ledger, { role: 'policy', document: { ...policy, version: undefined, heartbeat: { ...policy.heartbeat, ttl_seconds: shorter } } }, loadPrivateKey(world.served.keys.ceo), new Date()));
    expect((await machine.ledger.state()).policy!.doc.heartbeat.ttl_seconds).toBe(before.heartbeat.ttl_seconds);

    const seq = await runner.heartbeat();

    const state = await machine.ledger.state();
    const beat = [...state.runnerHeartbeats.values()].find((heartbeat) => heartbeat.seq === seq)!;
    expect(beat).toBeDefined();
    expect((Date.parse(beat.expiresAt) - Date.parse(beat.createdAt)) / 1000).toBe(shorter);
  });
});
