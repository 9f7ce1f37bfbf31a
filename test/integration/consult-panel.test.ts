import { describe, expect, it } from 'vitest';
import { enqueuePanel } from '../../src/consult/enqueue.js';
import { appendPanel } from '../../src/ledger/append-envelope.js';
import { appendTrustVersion } from '../../src/ledger/trust-update.js';
import type { AaConsultMessage } from '../../src/schema/message.js';
import type { ActorPolicy } from '../../src/schema/policy.js';
import { newPanelId } from '../../src/util/ids.js';
import { codeOfAsync } from '../helpers/codes.js';
import { siblingId } from '../helpers/forged.js';
import { blockersOf, receiptsOf, worlds, type World } from '../helpers/lane.js';
import { git, tempDir } from '../helpers/tmp.js';

/**
 * Panels: one question to several advisory agents where a policy panel allows it, each member a
 * consult with its own attempts and receipts, written together, paid for whole or not at all, and
 * run at the same time.
 */
const fresh = worlds(tempDir());

const MEMBERS = ['aa.chatgpt', 'aa.claude', 'aa.gemini'];
const withPanel = (policy: ActorPolicy): ActorPolicy => ({ ...policy, panels: [{ name: 'review', from: 'coo.*', members: MEMBERS }] });

function panel(w: World, overrides: Partial<Parameters<typeof enqueuePanel>[0]> = {}): ReturnType<typeof enqueuePanel> {
  return enqueuePanel({ ledger: w.ledger, key: w.actors.coo, now: new Date(), repo: w.target, patterns: ['src/add.ts', 'README.md'], question: 'Is add() correct for NaN?', maxRuntimeSeconds: 60, ...overrides });
}

describe('a panel', () => {
  it('is refused where the policy names no panel: the default policy allows no fan-out', async () => {
    const w = await fresh();
    expect(await codeOfAsync(() => panel(w, { members: ['aa.chatgpt', 'aa.claude'] }))).toBe('POLICY_PANEL_NOT_ALLOWED');
    // Written without the writer's check, the validator refuses it as the commit is made.
    const id = newPanelId(Date.now());
    const one = (await w.consult({ idempotencyKey: 'solo' })).envelope;
    const seq = (await w.ledger.state()).seq;
    const member = (target: string, n: number): AaConsultMessage => ({ ...one, message_id: siblingId(one.message_id, n), target_actor: target, idempotency_key: `forged-${n}`, panel: { id, name: 'review', members: ['aa.chatgpt', 'aa.claude'] } });
    const forged = [member('aa.chatgpt', 1), member('aa.claude', 2)];
    const prompt = (await w.ledger.readFile(one.payload_ref))!;
    const manifest = (await w.ledger.readFile(one.context_pin.context_manifest_ref))!;
    const folderOf = (envelope: AaConsultMessage): string => `messages/${envelope.created_at.slice(0, 7)}/${envelope.created_at.slice(8, 10)}/${envelope.created_at.slice(11, 13)}/${envelope.message_id}`;
    const withPaths = forged.map((envelope) => ({ ...envelope, payload_ref: `${folderOf(envelope)}/prompt.md`, context_pin: { ...envelope.context_pin, context_manifest_ref: `${folderOf(envelope)}/context-manifest.yaml` } }));
    expect(await codeOfAsync(() => appendPanel(w.ledger, () => withPaths.map((envelope) => ({ envelope, artifacts: new Map([['prompt.md', prompt], ['context-manifest.yaml', manifest]]) })), w.actors.coo, new Date()))).toBe('POLICY_PANEL_NOT_ALLOWED');
    expect((await w.ledger.state()).seq).toBe(seq);
  });

  it('is written in one commit: one consult per member, one question, one correlation', async () => {
    const w = await fresh({ policy: withPanel });
    const before = (await w.ledger.state()).seq;
    const written = await panel(w);
    expect(written).toMatchObject({ name: 'review', existing: false });
    expect(written.members.map((member) => member.target)).toEqual(MEMBERS);
    const state = await w.ledger.state();
    expect(state.seq).toBe(before + 1);
    const records = written.members.map((member) => state.messages.get(member.messageId)!);
    expect(new Set(records.map((record) => record.correlation)).size).toBe(1);
    expect(new Set(records.map((record) => record.payloadHash)).size).toBe(1);
    expect(new Set(records.map((record) => record.manifestHash)).size).toBe(1);
    expect(records.every((record) => record.panel === written.panelId)).toBe(true);
    expect(state.panels.get(written.panelId)).toEqual({ name: 'review', messages: written.members.map((member) => member.messageId) });
    // The same request again returns the panel already there.
    const again = await panel(w, { idempotencyKey: 'twice' });
    const repeat = await panel(w, { idempotencyKey: 'twice' });
    expect(repeat).toMatchObject({ existing: true, panelId: again.panelId, commit: null });
    expect(repeat.members).toEqual(again.members);
    // A subset of the panel's members may be asked; a stranger may not.
    expect((await panel(w, { members: ['aa.claude', 'aa.gemini'] })).members.map((member) => member.target)).toEqual(['aa.claude', 'aa.gemini']);
    expect(await codeOfAsync(() => panel(w, { panel: 'review', members: ['aa.chatgpt', 'aa.unknown'] }))).toBe('POLICY_PANEL_NOT_ALLOWED');
  });

  it('runs its members at the same time, each through its own provider, with one attempt and one receipt each', async () => {
    const w = await fresh({ policy: withPanel });
    const written = await panel(w);
    // No answer leaves the model until all three calls have arrived: members run one after another would hang here.
    w.server.holdUntil(3);
    const summary = await w.runner().runOnce();
    // A panel's pass wrote a receipt for each member, and says so.
    expect(summary.receipts).toBe(3);
    for (const member of written.members) {
      const receipts = await receiptsOf(w, member.messageId);
      expect(receipts.map((receipt) => receipt['status'])).toEqual(['succeeded']);
      expect(receipts[0]!['target_actor']).toBe(member.target);
    }
    expect(w.server.requests.map((request) => request.path).sort()).toEqual(['/v1/chat/completions', '/v1/messages', '/v1beta/models/gemini-3.1-pro-preview:streamGenerateContent']);
    const started = w.events.filter((event) => event.type === 'oracle_started').length;
    expect(started).toBe(3);
  });

  it('lets each member fail and retry on its own', async () => {
    const w = await fresh({ policy: withPanel });
    w.server.setModelModes('claude-sonnet-4-6', ['server-error', 'ok']);
    w.server.setModelModes('gemini-3.1-pro-preview', ['quota']);
    const written = await panel(w);
    await w.runner().runOnce();
    const [chatgpt, claude, gemini] = await Promise.all(written.members.map((member) => receiptsOf(w, member.messageId)));
    expect(chatgpt!.map((receipt) => receipt['status'])).toEqual(['succeeded']);
    expect(claude!.map((receipt) => blockersOf(receipt))).toEqual([['aa_unavailable:transport'], []]);
    expect(gemini!.map((receipt) => blockersOf(receipt))).toEqual([['aa_unavailable:quota']]);
    // One paid call per attempt: four attempts, four requests.
    expect(w.server.requests).toHaveLength(4);
  });

  it('pays no member unless every member fits: their worst cases together must fit what the correlation has left', async () => {
    // Each member's worst case fits the correlation's $0.20 (ChatGPT and Gemini about $0.10, Claude about $0.035); the three together do not.
    const w = await fresh({ policy: (policy) => withPanel({ ...policy, budgets: { ...policy.budgets, max_cost_usd_per_correlation: 0.2 } }) });
    const written = await panel(w, { maxCostUsd: 0.1 });
    await w.runner().runOnce();
    for (const member of written.members) {
      const [receipt] = await receiptsOf(w, member.messageId);
      expect(receipt).toMatchObject({ status: 'blocked', next_attempt_at: null, actual_cost_usd: 0 });
      expect(blockersOf(receipt!)).toEqual(['correlation_budget_exhausted']);
      expect((receipt!['blockers'] as Array<{ detail: string }>)[0]!.detail).toContain("the panel's 3 members may cost up to");
    }
    expect(w.server.requests).toHaveLength(0);
  });

  it("pays no member when one member's own budget cannot pay for it (Claude's fixed 2048 output tokens)", async () => {
    const w = await fresh({ policy: withPanel });
    const written = await panel(w, { maxCostUsd: 0.03 });
    await w.runner().runOnce();
    for (const member of written.members) {
      const [receipt] = await receiptsOf(w, member.messageId);
      expect(receipt).toMatchObject({ status: 'blocked', next_attempt_at: null });
      expect(blockersOf(receipt!)).toEqual(['budget_preflight']);
      const detail = (receipt!['blockers'] as Array<{ detail: string }>)[0]!.detail;
      if (member.target === 'aa.claude') expect(detail).toContain('the 2048 output tokens the provider is always asked for');
      else expect(detail).toMatch(/^panel member aa\.claude cannot be paid for .*: no member of the panel is paid$/);
    }
    expect(w.server.requests).toHaveLength(0);
  });
});

describe('the loop controls a policy states', () => {
  it('refuses a message beyond the fan-out of its parent when it is written', async () => {
    const w = await fresh({ policy: (policy) => ({ ...policy, limits: { ...policy.limits, max_fanout: 2 } }) });
    const parent = await w.consult({ idempotencyKey: 'parent' });
    await w.consult({ parentMessageId: parent.messageId, idempotencyKey: 'child-1' });
    await w.consult({ parentMessageId: parent.messageId, idempotencyKey: 'child-2' });
    expect(await codeOfAsync(() => w.consult({ parentMessageId: parent.messageId, idempotencyKey: 'child-3' }))).toBe('POLICY_LIMIT');
  });

  it('refuses a panel over max_fanout in the policy itself', async () => {
    const w = await fresh();
    const policy = (await w.ledger.state()).policy!.doc;
    expect(await codeOfAsync(() => appendTrustVersion(w.ledger, { role: 'policy', document: { ...withPanel(policy), version: undefined, limits: { ...policy.limits, max_fanout: 2 } } }, w.actors.ceo, new Date()))).toBe('SCHEMA_INVALID');
  });

  it('refuses a message of a correlation already at its in-flight limit, and takes one once a message there has ended', async () => {
    const w = await fresh({ policy: (policy) => ({ ...policy, limits: { ...policy.limits, max_in_flight_per_correlation: 2 } }) });
    const first = await w.consult({ correlationId: 'corr_busy', idempotencyKey: 'one' });
    await w.consult({ correlationId: 'corr_busy', idempotencyKey: 'two' });
    expect(await codeOfAsync(() => w.consult({ correlationId: 'corr_busy', idempotencyKey: 'three' }))).toBe('POLICY_LIMIT');
    expect((await w.consult({ correlationId: 'corr_other', idempotencyKey: 'elsewhere' })).existing).toBe(false);
    await w.runner().runOnce();
    expect((await receiptsOf(w, first.messageId))[0]!['status']).toBe('succeeded');
    expect((await w.consult({ correlationId: 'corr_busy', idempotencyKey: 'three' })).existing).toBe(false);
    expect(git(['--git-dir', w.gitdir, 'log', '--oneline']).length).toBeGreaterThan(0);
  });
});
