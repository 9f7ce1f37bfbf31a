import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generatePrivateKey, type PrivateKey } from '../../src/crypto/keys.js';
import { enqueueDispatch } from '../../src/dispatch/enqueue.js';
import { sendCommand } from '../../src/inbox/ceo-messages.js';
import { appendEnvelope } from '../../src/ledger/append-envelope.js';
import { planEnvelope } from '../../src/ledger/envelope-plan.js';
import { appendTrustVersion } from '../../src/ledger/trust-update.js';
import { toYaml } from '../../src/schema/strict-yaml.js';
import { envelopePath, messageFolder } from '../../src/ledger/layout.js';
import { attack, codeOf, useKit } from '../helpers/attack-kit.js';
import { makeWorld, type World } from '../helpers/lane.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * The actor model attacked through the causality chain: an agent that holds a key of its own (an
 * execution agent signs its blockers and receipt notices) names as its envelope's parent a message
 * it neither sent nor was sent, such as the CEO's command to the COO or the COO's consult of an
 * advisory agent. Each such reply counts toward its parent's fan-out (the policy's max_fanout), so a
 * few of them left the COO unable to send any work under the CEO's command, or to adopt the advice
 * it asked for.
 */

const dir = tempDir('actors-redteam-49');

/** A blocker from `key`'s holder to the COO with `parent` as its parent, as an agent writes one by hand: the code, or 'accepted'. */
function blockerUnder(w: World, key: PrivateKey, parent: string, detail = 'Which base?'): Promise<string> {
  return codeOf(async () => {
    const now = new Date();
    const plan = planEnvelope(await w.ledger.state(), key, 'coo.hermes', { parentMessageId: parent, maxRuntimeSeconds: 1 }, now, 'hand');
    const envelope = { ...plan.header, intent: 'blocker', authority_class: 'evidence', budget: { max_cost_usd: 0, max_runtime_seconds: 1 }, about_message_id: null, blocker: { code: 'needs_decision', detail }, expected_receipt_schema: null };
    return appendEnvelope(w.ledger, Buffer.from(toYaml(envelope)), new Map(), key, now);
  });
}

describe("an execution agent's replies under messages that are not its own", () => {
  let w: World;
  let command: string;
  beforeAll(async () => {
    w = await makeWorld(join(dir, 'foreign-parent'));
    command = (await sendCommand({ ledger: w.ledger, key: w.actors.ceo, now: new Date(), text: 'Fix add() this week.' })).messageId;
  });
  afterAll(async () => w.close());

  attack("a blocker an execution agent hangs under the CEO's command to the COO", 'library', 'SCHEMA_INVALID', () => blockerUnder(w, w.actors.codex, command));

  attack("a blocker an execution agent hangs under the COO's consult of an advisory agent", 'library', 'SCHEMA_INVALID', async () => {
    const { messageId } = await w.consult();
    return blockerUnder(w, w.actors.codex, messageId);
  });

  it("leaves the CEO's command all its fan-out: the COO sends as much work under it as the policy allows", async () => {
    const tried: string[] = [];
    for (let n = 0; n < 3; n += 1) tried.push(await blockerUnder(w, w.actors.codex, command, `attempt ${n}`));
    const limit = (await w.ledger.state()).policy!.doc.limits.max_fanout!;
    const sent: string[] = [];
    for (let n = 0; n < limit; n += 1) sent.push(await codeOf(() => w.consult({ parentMessageId: command, idempotencyKey: `under-command-${n}` })));
    expect(sent).toEqual(Array.from({ length: limit }, () => 'accepted'));
    expect(tried).toEqual(['SCHEMA_INVALID', 'SCHEMA_INVALID', 'SCHEMA_INVALID']);
  });

  it('takes a blocker the agent writes under the dispatch sent to it, and one under its own blocker (guard)', async () => {
    const dispatch = await enqueueDispatch({ ledger: w.ledger, key: w.actors.coo, now: new Date(), target: 'ea.codex', repo: w.target, task: 'Fix add().', scope: ['src/**'], accept: ['test.sh passes'], verify: ['sh test.sh'] });
    expect(await blockerUnder(w, w.actors.codex, dispatch.messageId)).toBe('accepted');
    const own = [...(await w.ledger.state()).messages.values()].find((record) => record.intent === 'blocker' && record.chain.at(-1) === dispatch.messageId)!;
    expect(await blockerUnder(w, w.actors.codex, own.id, 'still stuck')).toBe('accepted');
  });

  it("leaves a dispatch's fan-out to work: blockers its agent hangs under it take none of it, and the COO still sends the work the policy allows under it", async () => {
    const dispatch = await enqueueDispatch({ ledger: w.ledger, key: w.actors.coo, now: new Date(), target: 'ea.codex', repo: w.target, task: 'Fix add() again.', scope: ['src/**'], accept: ['test.sh passes'], verify: ['sh test.sh'], idempotencyKey: 'crowded' });
    const hung: string[] = [];
    for (let n = 0; n < 3; n += 1) hung.push(await blockerUnder(w, w.actors.codex, dispatch.messageId, `blocker ${n}`));
    expect(hung).toEqual(['accepted', 'accepted', 'accepted']);
    const limit = (await w.ledger.state()).policy!.doc.limits.max_fanout!;
    const sent: string[] = [];
    for (let n = 0; n < limit; n += 1) sent.push(await codeOf(() => w.consult({ parentMessageId: dispatch.messageId, idempotencyKey: `under-dispatch-${n}` })));
    expect(sent).toEqual(Array.from({ length: limit }, () => 'accepted'));
    // The work alone counts: one more is over the policy's max_fanout.
    expect(await codeOf(() => w.consult({ parentMessageId: dispatch.messageId, idempotencyKey: 'one-too-many' }))).toBe('POLICY_LIMIT');
  });

  it("lets the COO reply under the agent's blocker (guard)", async () => {
    const own = [...(await w.ledger.state()).messages.values()].find((record) => record.intent === 'blocker' && record.source === 'ea.codex')!;
    expect(await codeOf(() => w.consult({ parentMessageId: own.id, idempotencyKey: 'under-blocker' }))).toBe('accepted');
  });
});

describe("an orchestrator that is not the active COO, replying under the CEO's command to the COO", () => {
  let w: World;
  const backup = generatePrivateKey('coo.backup');
  beforeAll(async () => {
    // A second orchestrator with a key, and a policy edge that lets it tell the COO it is stuck.
    w = await makeWorld(join(dir, 'second-orchestrator'), { policy: (policy) => ({ ...policy, edges: [...policy.edges, { from: 'coo.backup', to: 'coo.hermes', intents: ['blocker'], requires: [] }] }) });
    const registry = (await w.ledger.state()).registry!.doc;
    await appendTrustVersion(w.ledger, { role: 'registry', document: { ...registry, version: undefined, actors: [...registry.actors, { id: 'coo.backup', class: 'orchestrator', keys: [] }] }, actorKeys: new Map([['coo.backup', backup.publicKey]]) }, w.actors.ceo, new Date());
  });
  afterAll(async () => w.close());

  attack("a blocker the second orchestrator hangs under the CEO's command to the active COO", 'library', 'SCHEMA_INVALID', async () => {
    const command = await sendCommand({ ledger: w.ledger, key: w.actors.ceo, now: new Date(), text: 'Fix add() this week.' });
    return blockerUnder(w, backup, command.messageId);
  });

  it('takes its blocker to the COO that names no parent (guard)', async () => {
    const now = new Date();
    const plan = planEnvelope(await w.ledger.state(), backup, 'coo.hermes', { maxRuntimeSeconds: 1 }, now, 'hand');
    const envelope = { ...plan.header, intent: 'blocker', authority_class: 'evidence', budget: { max_cost_usd: 0, max_runtime_seconds: 1 }, about_message_id: null, blocker: { code: 'needs_decision', detail: 'stuck' }, expected_receipt_schema: null };
    expect(await codeOf(() => appendEnvelope(w.ledger, Buffer.from(toYaml(envelope)), new Map(), backup, now))).toBe('accepted');
  });
});

describe('the same reply pushed with stock git to a ledger with its pre-receive hook', () => {
  const getKit = useKit(join(dir, 'hook'));

  attack("a blocker an execution agent signs with ssh-keygen under the CEO's command, pushed", 'hook', 'SCHEMA_INVALID', async () => {
    const kit = getKit();
    const command = await sendCommand({ ledger: kit.world.ledger, key: kit.world.actors.ceo, now: new Date(), text: 'Fix add() this week.' });
    const now = new Date();
    const plan = planEnvelope(await kit.world.ledger.state(), kit.world.actors.codex, 'coo.hermes', { parentMessageId: command.messageId, maxRuntimeSeconds: 1 }, now, 'hand');
    const envelope = { ...plan.header, intent: 'blocker', authority_class: 'evidence', budget: { max_cost_usd: 0, max_runtime_seconds: 1 }, about_message_id: null, blocker: { code: 'needs_decision', detail: 'Which base?' }, expected_receipt_schema: null };
    return kit.push({ [envelopePath(messageFolder(plan.messageId, plan.createdAt))]: toYaml(envelope) }, { key: kit.keys.codex.file });
  });
  it('verifies a history that holds such a reply written before the rule (coo verify judges history as it was, with no clock): a guard', async () => {
    const kit = getKit();
    const command = await sendCommand({ ledger: kit.world.ledger, key: kit.world.actors.ceo, now: new Date(), text: 'Ship the fix.' });
    const now = new Date();
    const plan = planEnvelope(await kit.world.ledger.state(), kit.world.actors.codex, 'coo.hermes', { parentMessageId: command.messageId, maxRuntimeSeconds: 1 }, now, 'hand');
    const envelope = { ...plan.header, intent: 'blocker', authority_class: 'evidence', budget: { max_cost_usd: 0, max_runtime_seconds: 1 }, about_message_id: null, blocker: { code: 'needs_decision', detail: 'Which base?' }, expected_receipt_schema: null };
    let codes: string[] = ['not run'];
    await kit.bypass({ [envelopePath(messageFolder(plan.messageId, plan.createdAt))]: toYaml(envelope) }, { key: kit.keys.codex.file }, () => {
      codes = kit.verifyCodes();
    });
    expect(codes).toEqual([]);
  });

  // The writers refuse a given key with a "~" (authority/idempotency.ts checkGivenKey); the hook held none of it.
  const blockerUnder = async (key: string): Promise<string> => {
    const kit = getKit();
    const now = new Date();
    const plan = planEnvelope(await kit.world.ledger.state(), kit.world.actors.codex, 'coo.hermes', { maxRuntimeSeconds: 1 }, now, 'hand');
    const envelope = { ...plan.header, idempotency_key: key, intent: 'blocker', authority_class: 'evidence', budget: { max_cost_usd: 0, max_runtime_seconds: 1 }, about_message_id: null, blocker: { code: 'needs_decision', detail: 'stuck' }, expected_receipt_schema: null };
    return kit.push({ [envelopePath(messageFolder(plan.messageId, plan.createdAt))]: toYaml(envelope) }, { key: kit.keys.codex.file });
  };

  attack("an envelope under a panel member's key form (k~aa.chatgpt) that is no panel member, pushed past every writer", 'hook', 'IDEMPOTENCY_CONFLICT', () => blockerUnder('k~aa.chatgpt'));

  it('takes the same envelope under a key without "~" (a guard)', async () => {
    expect(await blockerUnder('k-aa.chatgpt')).toBe('accepted');
  });
});
