import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { generatePrivateKey } from '../../src/crypto/keys.js';
import { appendEnvelope } from '../../src/ledger/append-envelope.js';
import { heartbeatPath, killSwitchPath, messageFolder, promptPath, trustPath } from '../../src/ledger/layout.js';
import type { Ledger } from '../../src/ledger/ledger.js';
import { appendKillSwitch, appendTrustVersion } from '../../src/ledger/trust-update.js';
import { toYaml } from '../../src/schema/strict-yaml.js';
import type { CooMessage } from '../../src/schema/message.js';
import { codeOfAsync } from '../helpers/codes.js';
import { T0, dispatchEnvelope, envelopeFile, messageFiles, makeLedger, type Actors } from '../helpers/ledger.js';
import { worlds } from '../helpers/lane.js';
import { tempDir } from '../helpers/tmp.js';

const dir = tempDir();
let ledger: Ledger;
let actors: Actors;
const aaKey = generatePrivateKey('aa.chatgpt');
const geminiKey = generatePrivateKey('aa.gemini');

beforeAll(async () => {
  ({ ledger, actors } = await makeLedger(dir));
  // Registry v2 gives two advisory agents keys, so the tests can show what such keys may not do.
  const registry = (await ledger.state()).registry!.doc;
  await appendTrustVersion(
    ledger,
    { role: 'registry', document: { ...registry, version: undefined }, actorKeys: new Map([['aa.chatgpt', aaKey.publicKey], ['aa.gemini', geminiKey.publicKey]]) },
    actors.ceo,
    T0,
  );
});

async function expectRejected(code: string, run: () => Promise<unknown>): Promise<void> {
  const before = ledger.head();
  expect(await codeOfAsync(run)).toBe(code);
  expect(ledger.head()).toBe(before);
}

const append = (message: ReturnType<typeof dispatchEnvelope>, key = actors.coo) => () => ledger.append({ files: [...messageFiles(message)], key, summary: 'test', now: T0 });

/** A blocker notice from one actor to another: the smallest envelope that exercises an edge. */
function blockerEnvelope(source: string, target: string): ReturnType<typeof dispatchEnvelope> {
  return dispatchEnvelope({ source_actor: source, principal: source, target_actor: target, intent: 'blocker', authority_class: 'evidence', about_message_id: null, blocker: { code: 'needs_decision', detail: 'x' }, expected_receipt_schema: null, dispatch: undefined, payload_ref: undefined, payload_hash: undefined, context_pin: undefined });
}

describe('write-time authority', () => {
  it('accepts a dispatch from the active COO', async () => {
    expect(await codeOfAsync(append(dispatchEnvelope()))).toBe('no error');
  });

  it('refuses an envelope outside the month, day and hour folder of its created_at', async () => {
    const message = dispatchEnvelope();
    const { path, bytes } = envelopeFile(message);
    expect(path).toBe(`messages/2026-11/30/08/${message.message_id}/envelope.yaml`);
    for (const elsewhere of [path.replace('/30/08/', '/30/09/'), path.replace('2026-11/30/08/', '2026-11/29/08/'), `messages/2026/11/30/${message.message_id}/envelope.yaml`]) {
      await expectRejected('PATH_INVALID', () => ledger.append({ files: [{ path: elsewhere, bytes }], key: actors.coo, summary: 'test', now: T0 }));
    }
  });

  it('refuses a heartbeat outside the hour folder of its created_at, and takes it in its place', async () => {
    const seq = (await ledger.state()).seq + 1;
    const beat = { schema_version: 'heartbeat.v0', runner_id: 'runner-a', ledger_seq: seq, created_at: '2026-11-30T08:00:00Z', expires_at: '2026-11-30T08:10:00Z' };
    const bytes = Buffer.from(toYaml(beat));
    const path = heartbeatPath(beat.created_at, seq);
    expect(path).toBe(`heartbeats/2026-11/30/08/${String(seq).padStart(10, '0')}.yaml`);
    const place = (at: string) => () => ledger.append({ files: [{ path: at, bytes }], key: actors.coo, summary: 'heartbeat', now: T0 });
    await expectRejected('PATH_INVALID', place(path.replace('/30/08/', '/30/09/')));
    await expectRejected('PATH_INVALID', place(path.replace('2026-11/30/', '2026-10/30/')));
    expect(await codeOfAsync(place(path))).toBe('no error');
  });

  it("refuses, in the validator itself, a dispatch under the key of another item's acknowledgement (ack-<id>), whoever wrote it", async () => {
    const item = dispatchEnvelope();
    expect(await codeOfAsync(append(item))).toBe('no error');
    const before = ledger.head();
    const error = await ledger.append({ files: [...messageFiles(dispatchEnvelope({ idempotency_key: `ack-${item.message_id}` }))], key: actors.coo, summary: 'test', now: T0 }).catch((caught: unknown) => caught);
    expect(error).toMatchObject({ code: 'IDEMPOTENCY_CONFLICT' });
    expect(String((error as Error).message)).toContain(`"ack-${item.message_id}" is the key of the acknowledgement of ${item.message_id}`);
    expect(ledger.head()).toBe(before);
  });

  it('refuses a command-class envelope whose principal is not the active COO', async () => {
    await expectRejected('NOT_ACTIVE_COO', append(dispatchEnvelope({ principal: 'ceo' })));
  });

  it('refuses a dispatch sent by an execution agent on its own behalf', async () => {
    await expectRejected('NOT_ACTIVE_COO', append(dispatchEnvelope({ source_actor: 'ea.codex', principal: 'ea.codex', target_actor: 'ea.claude_code' }), actors.codex));
  });

  it('refuses AA -> EA: an advisory agent signing a dispatch', async () => {
    await expectRejected('POLICY_EDGE_FORBIDDEN', append(dispatchEnvelope({ source_actor: 'aa.chatgpt', principal: 'aa.chatgpt' }), aaKey));
  });

  it('refuses EA -> AA: an execution agent consulting an advisory agent', async () => {
    await expectRejected('POLICY_EDGE_FORBIDDEN', append(blockerEnvelope('ea.codex', 'aa.chatgpt'), actors.codex));
  });

  it('refuses AA -> AA cross-talk', async () => {
    await expectRejected('POLICY_EDGE_FORBIDDEN', append(blockerEnvelope('aa.chatgpt', 'aa.gemini'), aaKey));
  });

  it('refuses an edge the policy does not list (EA -> EA)', async () => {
    await expectRejected('POLICY_EDGE_NOT_ALLOWED', append(blockerEnvelope('ea.codex', 'ea.claude_code'), actors.codex));
  });

  it('refuses an intent the edge does not allow (COO -> EA receipt_notice)', async () => {
    await expectRejected(
      'POLICY_INTENT_NOT_ALLOWED',
      append(dispatchEnvelope({ intent: 'receipt_notice', authority_class: 'evidence', receipt_ref: { path: 'x/y.yaml', sha256: `sha256:${'0'.repeat(64)}` }, expected_receipt_schema: null, dispatch: undefined, payload_ref: undefined, payload_hash: undefined, context_pin: undefined })),
    );
  });

  it('refuses a status query from an EA: command-class intents come only from the active COO', async () => {
    await expectRejected(
      'NOT_ACTIVE_COO',
      append(dispatchEnvelope({ source_actor: 'ea.codex', principal: 'ea.codex', target_actor: 'coo.hermes', intent: 'status_query', authority_class: 'informational', about_message_id: dispatchEnvelope().message_id, expected_receipt_schema: null, dispatch: undefined, payload_ref: undefined, payload_hash: undefined, context_pin: undefined }), actors.codex),
    );
  });

  it('refuses budgets and lifetimes beyond the policy', async () => {
    await expectRejected('POLICY_LIMIT', append(dispatchEnvelope({ budget: { max_cost_usd: 500, max_runtime_seconds: 60, correlation_budget_remaining_usd: null } })));
    await expectRejected('POLICY_LIMIT', append(dispatchEnvelope({ expires_at: '2026-12-09T08:00:00Z', deadline_at: '2026-12-09T08:00:00Z' })));
    await expectRejected('POLICY_LIMIT', append(dispatchEnvelope({ max_hops: 9 })));
  });

  it('refuses a second envelope with the same message id, in the same folder or another day\'s', async () => {
    const message = dispatchEnvelope();
    await append(message)();
    await expectRejected('WRITE_ONCE', append({ ...message, idempotency_key: 'other' }));
    await expectRejected('MESSAGE_DUPLICATE', append({ ...message, idempotency_key: 'other', created_at: '2026-11-29T23:00:00Z', payload_ref: promptPath(messageFolder(message.message_id, '2026-11-29T23:00:00Z')) } as CooMessage));
  });

  it('treats the same idempotency key: same request is a duplicate, another request a conflict', async () => {
    const first = dispatchEnvelope({ idempotency_key: 'same-key' });
    const same = { idempotency_key: 'same-key', correlation_id: first.correlation_id };
    await append(first)();
    const repeat = dispatchEnvelope(same);
    await append(repeat)();
    expect((await ledger.state()).messages.get(repeat.message_id)?.duplicateOf).toBe(first.message_id);
    await expectRejected('IDEMPOTENCY_CONFLICT', append(dispatchEnvelope({ idempotency_key: 'same-key', correlation_id: first.correlation_id, max_hops: 2 })));
    const viaApi = await appendEnvelope(ledger, Buffer.from(toYaml(dispatchEnvelope(same))), new Map(), actors.coo, T0);
    expect(viaApi).toMatchObject({ messageId: first.message_id, existing: true, commit: null });
  });

  it('refuses the same idempotency key and request under another correlation, at write time and in the writer', async () => {
    const first = dispatchEnvelope({ idempotency_key: 'one-correlation' });
    await append(first)();
    const elsewhere = dispatchEnvelope({ idempotency_key: 'one-correlation', correlation_id: 'corr_elsewhere' });
    await expectRejected('IDEMPOTENCY_CONFLICT', append(elsewhere));
    await expectRejected('IDEMPOTENCY_CONFLICT', () => appendEnvelope(ledger, Buffer.from(toYaml(elsewhere)), new Map(), actors.coo, T0));
  });

  it('refuses a parent that does not exist and a chain that does not extend the parent', async () => {
    const parent = dispatchEnvelope();
    await expectRejected('MESSAGE_UNKNOWN', append(dispatchEnvelope({ parent_message_id: parent.message_id, causality_chain: [parent.message_id], hop_count: 1 })));
    await append(parent)();
    await expectRejected('SCHEMA_INVALID', append(dispatchEnvelope({ parent_message_id: parent.message_id, causality_chain: [parent.message_id], hop_count: 1, correlation_id: 'corr_other' })));
    expect(await codeOfAsync(append(dispatchEnvelope({ parent_message_id: parent.message_id, causality_chain: [parent.message_id], hop_count: 1, correlation_id: parent.correlation_id })))).toBe('no error');
  });
});

describe('trust files', () => {
  const policyFile = async (version: number, change: Record<string, unknown> = {}): Promise<{ path: string; bytes: Buffer }> => {
    const policy = (await ledger.state()).policy!.doc;
    return { path: trustPath('policy', version), bytes: Buffer.from(toYaml({ ...policy, version, ...change })) };
  };

  it('refuses a policy signed by the COO instead of the CEO', async () => {
    const file = await policyFile(2);
    await expectRejected('TRUST_AUTHORITY', () => ledger.append({ files: [file], key: actors.coo, summary: 'policy', now: T0 }));
  });

  it('refuses a version that skips or repeats a number', async () => {
    await expectRejected('TRUST_VERSION', async () => ledger.append({ files: [await policyFile(3)], key: actors.ceo, summary: 'skip', now: T0 }));
    const repeat = { path: trustPath('policy', 1), bytes: (await policyFile(1)).bytes };
    await expectRejected('WRITE_ONCE', () => ledger.append({ files: [repeat], key: actors.ceo, summary: 'repeat', now: T0 }));
  });

  it('refuses a policy that opens an AA -> EA edge', async () => {
    const policy = (await ledger.state()).policy!.doc;
    const file = await policyFile(2, { edges: [...policy.edges, { from: 'aa.*', to: 'ea.*', intents: ['receipt_notice'], requires: [] }] });
    await expectRejected('POLICY_EDGE_FORBIDDEN', () => ledger.append({ files: [file], key: actors.ceo, summary: 'bad policy', now: T0 }));
  });

  it('refuses entries signed by a revoked key, naming it revoked', async () => {
    const state = await ledger.state();
    const spare = generatePrivateKey('ea.claude_code');
    await appendTrustVersion(ledger, { role: 'registry', document: { ...state.registry!.doc, version: undefined }, actorKeys: new Map([['ea.claude_code', spare.publicKey]]), revoke: new Map([[actors.claude.publicKey.keyId, 'laptop lost']]) }, actors.ceo, T0);
    const blocker = dispatchEnvelope({ source_actor: 'ea.claude_code', principal: 'ea.claude_code', target_actor: 'coo.hermes', intent: 'blocker', authority_class: 'evidence', about_message_id: null, blocker: { code: 'needs_decision', detail: 'x' }, expected_receipt_schema: null, dispatch: undefined, payload_ref: undefined, payload_hash: undefined, context_pin: undefined });
    await expectRejected('SIGNER_REVOKED', append(blocker, actors.claude));
    expect(await codeOfAsync(append(blocker, spare))).toBe('no error');
  });

  it('lets the COO stop the kill switch but not release one the CEO set', async () => {
    await appendKillSwitch(ledger, 'on', 'COO pause', 'coo.hermes', actors.coo, T0);
    await appendKillSwitch(ledger, 'off', 'COO resume', 'coo.hermes', actors.coo, T0);
    await appendKillSwitch(ledger, 'on', 'CEO stop', 'ceo', actors.ceo, T0);
    await expectRejected('TRUST_AUTHORITY', () => appendKillSwitch(ledger, 'off', 'COO overrides', 'coo.hermes', actors.coo, T0));
    await expectRejected('TRUST_AUTHORITY', async () =>
      ledger.append({ files: [{ path: killSwitchPath(4), bytes: Buffer.from(toYaml({ schema_version: 'kill_switch.v0', version: 4, state: 'off', reason: 'x', set_by: 'ea.codex', created_at: '2026-11-30T08:00:00Z' })) }], key: actors.codex, summary: 'ks', now: T0 }),
    );
    expect((await ledger.state()).killSwitch?.doc.state).toBe('on');
    await appendKillSwitch(ledger, 'off', 'CEO resume', 'ceo', actors.ceo, T0);
  });

  it('keeps a CEO stop until the CEO releases it: the COO can neither take it over by setting it again nor then release it', async () => {
    await appendKillSwitch(ledger, 'on', 'CEO stop', 'ceo', actors.ceo, T0);
    await expectRejected('TRUST_AUTHORITY', () => appendKillSwitch(ledger, 'on', 'COO re-asserts', 'coo.hermes', actors.coo, T0));
    await expectRejected('TRUST_AUTHORITY', () => appendKillSwitch(ledger, 'off', 'COO releases', 'coo.hermes', actors.coo, T0));
    expect((await ledger.state()).killSwitch?.doc).toMatchObject({ state: 'on', set_by: 'ceo' });
    await appendKillSwitch(ledger, 'on', 'CEO again', 'ceo', actors.ceo, T0);
    await appendKillSwitch(ledger, 'off', 'CEO resume', 'ceo', actors.ceo, T0);
    expect((await ledger.state()).killSwitch?.doc.state).toBe('off');
  });

  it("lets the COO set its own stop again, and makes a COO stop the CEO sets again the CEO's", async () => {
    await appendKillSwitch(ledger, 'on', 'COO pause', 'coo.hermes', actors.coo, T0);
    await appendKillSwitch(ledger, 'on', 'COO pause, still', 'coo.hermes', actors.coo, T0);
    await appendKillSwitch(ledger, 'on', 'CEO holds it', 'ceo', actors.ceo, T0);
    await expectRejected('TRUST_AUTHORITY', () => appendKillSwitch(ledger, 'off', 'COO resume', 'coo.hermes', actors.coo, T0));
    await appendKillSwitch(ledger, 'off', 'CEO resume', 'ceo', actors.ceo, T0);
  });
});

describe('what an enqueued consult states', () => {
  const world = worlds(join(dir, 'worlds'));

  it("defaults a reply's max_hops to what its parent leaves, not the policy's maximum", async () => {
    const w = await world();
    const parent = await w.consult({ idempotencyKey: 'parent', maxHops: 2 });
    const child = await w.consult({ idempotencyKey: 'child', parentMessageId: parent.messageId });
    expect(child.envelope).toMatchObject({ hop_count: 1, max_hops: 2 });
    expect((await w.ledger.state()).messages.get(child.messageId)?.maxHops).toBe(2);
    expect(await codeOfAsync(() => w.consult({ idempotencyKey: 'grandchild', parentMessageId: child.messageId }))).toBe('POLICY_LIMIT');
  });

  it("reuses the original's correlation for a retry under the same idempotency key that gives none, and returns the envelope the ledger holds", async () => {
    const w = await world();
    const first = await w.consult({ idempotencyKey: 'retried' });
    const again = await w.consult({ idempotencyKey: 'retried' });
    expect(again).toMatchObject({ existing: true, messageId: first.messageId, commit: null });
    expect(again.envelope).toEqual(first.envelope);
    expect(await codeOfAsync(() => w.consult({ idempotencyKey: 'retried', correlationId: 'corr_other' }))).toBe('IDEMPOTENCY_CONFLICT');
  });

  it("holds an envelope's correlation_budget_remaining_usd to the ledger's own figure", async () => {
    const w = await world();
    const first = await w.consult({ idempotencyKey: 'spends', correlationId: 'corr_spent' });
    await w.runner().runOnce();
    const state = await w.ledger.state();
    const spent = state.spendByCorrelation.get('corr_spent') ?? 0;
    expect(spent).toBeGreaterThan(0);
    const cap = state.policy!.doc.budgets.max_cost_usd_per_correlation;
    const stated = (usd: number | null) => () =>
      w.ledger.append({ files: [...messageFiles(dispatchEnvelope({ correlation_id: 'corr_spent', budget: { max_cost_usd: 1, max_runtime_seconds: 600, correlation_budget_remaining_usd: usd } }, new Date()))], key: w.actors.coo, summary: 'test', now: new Date() });
    expect(await codeOfAsync(stated(cap))).toBe('POLICY_LIMIT');
    expect(await codeOfAsync(stated(cap - spent))).toBe('no error');
    expect(await codeOfAsync(stated(null))).toBe('no error');
    const second = await w.consult({ idempotencyKey: 'states', correlationId: first.envelope.correlation_id });
    expect(second.envelope.budget.correlation_budget_remaining_usd).toBe(cap - spent);
  });
});
