import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { verifyLedger } from '../../src/audit/verify.js';
import { revokedWord } from '../../src/authority/runnable.js';
import { formatPublicKeyLine, generatePrivateKey, type PrivateKey } from '../../src/crypto/keys.js';
import { approve } from '../../src/dispatch/approve.js';
import { enqueuePanel } from '../../src/consult/enqueue.js';
import { enqueueDispatch } from '../../src/dispatch/enqueue.js';
import { executorFactory } from '../../src/dispatch/executors.js';
import { makeTargetRepo } from '../helpers/dispatch-repo.js';
import { agentScript, dispatchTo, hostilePlaces, type HostilePlace } from '../helpers/hostile-agent.js';
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

describe("a dispatch the CEO's approval allowed, queued, and the CEO's key revoked before any runner claimed it", () => {
  /** A dispatch to ea.claude_code, whose policy edge gives it to the CEO, approved by the CEO's key and written; then that key revoked (or only rotated out). */
  async function approvedThenKeyChanged(w: World, revoke: boolean): Promise<{ messageId: string; approvalId: string }> {
    const repo = join(w.dir, 'work');
    if (!existsSync(repo)) makeTargetRepo(repo);
    const base = { ledger: w.ledger, key: w.actors.coo, target: 'ea.claude_code', repo, task: 'Push the release out today.', scope: ['src/**'], accept: ['ok'], verify: ['sh test.sh'] };
    const refused = await enqueueDispatch({ ...base, now: new Date() }).catch((error: unknown) => error as Error);
    const hash = /request (sha256:[0-9a-f]{64})/.exec((refused as Error).message)![1]!;
    const approvalId = (await approve({ ledger: w.ledger, key: w.actors.ceo, now: new Date(), reason: 'go', requestHash: hash })).approval.approval_id;
    const { messageId } = await enqueueDispatch({ ...base, now: new Date(), approvalId });
    const root = (await w.ledger.state()).root!.doc;
    const next = generatePrivateKey('ceo');
    const authorities = [{ actor: 'ceo', key_id: next.publicKey.keyId, public_key: formatPublicKeyLine(next.publicKey) }];
    await appendTrustVersion(w.ledger, { role: 'root', document: { ...root, version: undefined, created_at: undefined, authorities }, ...(revoke ? { revoke: new Map([[w.actors.ceo.publicKey.keyId, 'laptop stolen']]) } : {}) }, w.actors.ceo, new Date());
    return { messageId, approvalId };
  }

  it('starts no attempt: the approval is void, and what the pre-flight stops on names the approval whose key was revoked; the history verifies', async () => {
    const w = await fresh();
    const { messageId, approvalId } = await approvedThenKeyChanged(w, true);
    const state = await w.ledger.state();
    expect(state.approvals.get(approvalId)!.revoked).toBe(true);
    expect(revokedWord(state, state.messages.get(messageId)!)?.what).toBe(`the key of the CEO's approval ${approvalId}`);
    expect((await verifyLedger(w.gitdir, { full: true })).findings).toEqual([]);
  });

  it('starts when the key was only rotated out: a rotation leaves the approval standing', async () => {
    const w = await fresh();
    const { messageId, approvalId } = await approvedThenKeyChanged(w, false);
    const state = await w.ledger.state();
    expect(state.approvals.get(approvalId)!.revoked).toBeUndefined();
    expect(revokedWord(state, state.messages.get(messageId)!)).toBeNull();
  });
});

describe('a consult queued before the policy lowered its context limits', () => {
  it.each([
    ['files', { max_context_files: 1 }],
    ['bytes', { max_context_bytes: 8 }],
  ])('is receipted blocked (policy_denied) when its pinned %s exceed the limit now, and nothing is sent or paid', async (_what, limits) => {
    const w = await fresh();
    const { messageId } = await w.consult();
    const policy = (await w.ledger.state()).policy!.doc;
    await appendTrustVersion(w.ledger, { role: 'policy', document: { ...policy, version: undefined, limits: { ...policy.limits, ...limits } } }, w.actors.ceo, new Date());
    await w.runner().runOnce();
    expect(w.server.requests).toHaveLength(0);
    expect((await receiptsOf(w, messageId)).map((receipt) => [receipt['status'], blockersOf(receipt)])).toEqual([['blocked', ['policy_denied']]]);
  });
});

describe('a dispatch queued before its trust or policy changed, through the dispatch lane', () => {
  const place = hostilePlaces(dir, 'dispatch');

  /** A runner whose agent leaves a mark in the state folder if it is ever started. */
  function runnerOf(p: HostilePlace, key?: PrivateKey): ReturnType<World['runner']> {
    const agent = agentScript(p.world.dir, `touch ${join(p.world.dir, 'agent-ran')}`);
    const executors = executorFactory({ command: [agent], hide: [p.world.gitdir], env: { PATH: process.env['PATH'], OPENAI_API_KEY: 'sk-test-key' } });
    return p.world.runner({ repo: p.repo, executors, stateDir: p.stateDir, ...(key === undefined ? {} : { key }) });
  }

  it('a dispatch its COO key queued, that key revoked before any claim: receipted blocked (policy_denied), the agent never started', async () => {
    const p = await place('revoked');
    const { messageId } = await dispatchTo(p, 'revoked');
    const next = await replaceCooKey(p.world, true);
    await runnerOf(p, next).runOnce();
    expect(existsSync(join(p.world.dir, 'agent-ran'))).toBe(false);
    expect((await receiptsOf(p.world, messageId)).map((receipt) => [receipt['status'], blockersOf(receipt)])).toEqual([['blocked', ['policy_denied']]]);
  });

  it("a dispatch written without an approval, then the policy gave its target's dispatches to the CEO: receipted blocked (policy_denied), the agent never started", async () => {
    const p = await place('approval');
    const { messageId } = await dispatchTo(p, 'approval');
    const policy = (await p.world.ledger.state()).policy!.doc;
    const edges = policy.edges.map((edge) => (edge.to === 'ea.codex' ? { ...edge, requires: [...edge.requires, 'ceo_approval' as const] } : edge));
    await appendTrustVersion(p.world.ledger, { role: 'policy', document: { ...policy, version: undefined, edges } }, p.world.actors.ceo, new Date());
    await runnerOf(p).runOnce();
    expect(existsSync(join(p.world.dir, 'agent-ran'))).toBe(false);
    const receipts = await receiptsOf(p.world, messageId);
    expect(receipts.map((receipt) => [receipt['status'], blockersOf(receipt)])).toEqual([['blocked', ['policy_denied']]]);
    expect(JSON.stringify(receipts[0])).toContain('gives dispatches to ea.codex to the CEO');
  });

  it('a dispatch pinning more context files than the policy now allows: receipted blocked (policy_denied), the agent never started', async () => {
    const p = await place('context');
    const { messageId } = await dispatchTo(p, 'context', { patterns: ['src/add.js', 'test.sh'] });
    const policy = (await p.world.ledger.state()).policy!.doc;
    await appendTrustVersion(p.world.ledger, { role: 'policy', document: { ...policy, version: undefined, limits: { ...policy.limits, max_context_files: 1 } } }, p.world.actors.ceo, new Date());
    await runnerOf(p).runOnce();
    expect(existsSync(join(p.world.dir, 'agent-ran'))).toBe(false);
    expect((await receiptsOf(p.world, messageId)).map((receipt) => [receipt['status'], blockersOf(receipt)])).toEqual([['blocked', ['policy_denied']]]);
  });
});

describe('a panel queued before the policy took its fan-out away', () => {
  it('has every member receipted blocked (policy_denied), none paid, when the policy panel no longer holds one of its members', async () => {
    const w = await fresh({ policy: (policy) => ({ ...policy, panels: [{ name: 'review', from: 'coo.*', members: ['aa.chatgpt', 'aa.claude'] }] }) });
    const panel = await enqueuePanel({ ledger: w.ledger, key: w.actors.coo, now: new Date(), repo: w.target, patterns: ['src/add.ts'], question: 'Is add() correct for NaN?', maxRuntimeSeconds: 60 });
    const policy = (await w.ledger.state()).policy!.doc;
    await appendTrustVersion(w.ledger, { role: 'policy', document: { ...policy, version: undefined, panels: [{ name: 'review', from: 'coo.*', members: ['aa.chatgpt', 'aa.gemini'] }] } }, w.actors.ceo, new Date());
    await w.runner().runOnce();
    expect(w.server.requests).toHaveLength(0);
    for (const member of panel.members) {
      expect((await receiptsOf(w, member.messageId)).map((receipt) => [receipt['status'], blockersOf(receipt)])).toEqual([['blocked', ['policy_denied']]]);
    }
    expect((await verifyLedger(w.gitdir, { full: true })).findings).toEqual([]);
  });
});
