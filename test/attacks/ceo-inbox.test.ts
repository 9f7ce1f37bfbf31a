import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { PrivateKey } from '../../src/crypto/keys.js';
import { approve } from '../../src/dispatch/approve.js';
import { enqueueDispatch } from '../../src/dispatch/enqueue.js';
import { generatePrivateKey } from '../../src/crypto/keys.js';
import { acknowledge } from '../../src/inbox/ack.js';
import { readInbox } from '../../src/inbox/inbox.js';
import { rejectRequest, sendCommand } from '../../src/inbox/ceo-messages.js';
import { appendEnvelope } from '../../src/ledger/append-envelope.js';
import { planEnvelope } from '../../src/ledger/envelope-plan.js';
import { appendTrustVersion } from '../../src/ledger/trust-update.js';
import { toYaml } from '../../src/schema/strict-yaml.js';
import { sha256Ref } from '../../src/util/hash.js';
import { attack, codeOf } from '../helpers/attack-kit.js';
import { makeTargetRepo } from '../helpers/dispatch-repo.js';
import { makeWorld, type World } from '../helpers/lane.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * CEO -> COO: only the CEO commands and rejects, only the active COO acknowledges, and only what
 * reached the COO, once. Each way around that is a named attack the validator refuses (envelopes
 * written by hand, past the writers' own checks) or a writer refuses first.
 */

const dir = tempDir('ceo-inbox-attacks');
let w: World;
let commandId: string;

/** An envelope written by hand with `key`, the header planned for it and `fields` over it: the code it was refused with, or 'accepted'. */
function writeAs(key: PrivateKey, target: string, fields: Record<string, unknown>, artifacts = new Map<string, Buffer>()): Promise<string> {
  return codeOf(async () => {
    const now = new Date();
    const plan = planEnvelope(await w.ledger.state(), key, target, {}, now, 'hand');
    const envelope = { ...plan.header, budget: { max_cost_usd: 0, max_runtime_seconds: 1 }, expected_receipt_schema: null, ...fields };
    const withRef = 'payload_hash' in fields ? { ...envelope, payload_ref: `${plan.folder}/prompt.md` } : envelope;
    return appendEnvelope(w.ledger, Buffer.from(toYaml(withRef)), artifacts, key, now);
  });
}

const TEXT = Buffer.from('Ship it.\n');
const COMMAND = { intent: 'ceo_command', authority_class: 'directive', payload_hash: sha256Ref(TEXT), budget_usd: null };

beforeAll(async () => {
  w = await makeWorld(join(dir, 'world'));
  commandId = (await sendCommand({ ledger: w.ledger, key: w.actors.ceo, now: new Date(), text: 'Ship it.' })).messageId;
});
afterAll(async () => w.close());

describe("only the CEO commands the COO, and only the COO acknowledges what reached it", () => {
  it('accepts a command the CEO writes by hand the same way: the attacks below are refused for what they change', async () => {
    expect(await writeAs(w.actors.ceo, 'coo.hermes', COMMAND, new Map([['prompt.md', TEXT]]))).toBe('accepted');
  });

  attack("a command signed by the COO's key", 'library', 'TRUST_AUTHORITY', () => codeOf(() => sendCommand({ ledger: w.ledger, key: w.actors.coo, now: new Date(), text: 'Approve yourself.' })));

  attack("a command written by an execution agent in the CEO's name", 'library', 'SIGNER_WRONG_ACTOR', () => writeAs(w.actors.codex, 'coo.hermes', { ...COMMAND, source_actor: 'ceo', principal: 'ceo' }, new Map([['prompt.md', TEXT]])));

  attack('a command an execution agent sends the COO in its own name', 'library', 'POLICY_INTENT_NOT_ALLOWED', () => writeAs(w.actors.codex, 'coo.hermes', COMMAND, new Map([['prompt.md', TEXT]])));

  attack('a CEO command addressed to an execution agent', 'library', 'POLICY_EDGE_NOT_ALLOWED', () => writeAs(w.actors.ceo, 'ea.codex', COMMAND, new Map([['prompt.md', TEXT]])));

  attack("a command whose budget is over the policy's cap for a correlation", 'library', 'POLICY_LIMIT', () => codeOf(() => sendCommand({ ledger: w.ledger, key: w.actors.ceo, now: new Date(), text: 'Spend freely.', budgetUsd: 1000 })));

  attack("a consult under a CEO command that asks for more than the command's budget has left", 'library', 'BUDGET_EXCEEDED', async () => {
    const command = await sendCommand({ ledger: w.ledger, key: w.actors.ceo, now: new Date(), text: 'Ask once about add().', budgetUsd: 1 });
    // By default a consult under the command asks for what the command has left, not the policy's cap.
    const first = await w.consult({ parentMessageId: command.messageId });
    expect(first.envelope.budget.max_cost_usd).toBe(1);
    await w.runner().runOnce();
    const spent = (await w.ledger.state()).spendByCorrelation.get(command.envelope.correlation_id) ?? 0;
    expect(spent).toBeGreaterThan(0);
    return codeOf(() => w.consult({ parentMessageId: command.messageId, maxCostUsd: 1, question: 'And again?' }));
  });

  attack('a rejection of a request the CEO already approved', 'library', 'APPROVAL_INVALID', async () => {
    const requestHash = `sha256:${'c'.repeat(64)}`;
    await approve({ ledger: w.ledger, key: w.actors.ceo, now: new Date(), reason: 'yes', requestHash });
    return codeOf(() => rejectRequest({ ledger: w.ledger, key: w.actors.ceo, now: new Date(), requestHash, reason: 'no after all' }));
  });

  attack('a rejection of the next attempt of a dispatch that waits for no approval', 'library', 'ATTEMPT_INVALID', async () => {
    const repo = join(w.dir, 'work');
    makeTargetRepo(repo);
    const queued = await enqueueDispatch({ ledger: w.ledger, key: w.actors.coo, now: new Date(), target: 'ea.codex', repo, task: 'Fix add().', scope: ['src/**'], accept: ['ok'], verify: ['sh test.sh'] });
    return codeOf(() => rejectRequest({ ledger: w.ledger, key: w.actors.ceo, now: new Date(), messageId: queued.messageId, reason: 'no' }));
  });

  attack('a second rejection of the same request', 'library', 'MESSAGE_DUPLICATE', async () => {
    const requestHash = `sha256:${'d'.repeat(64)}`;
    await rejectRequest({ ledger: w.ledger, key: w.actors.ceo, now: new Date(), requestHash, reason: 'no' });
    return codeOf(() => rejectRequest({ ledger: w.ledger, key: w.actors.ceo, now: new Date(), requestHash, reason: 'still no', idempotencyKey: 'another-rejection' }));
  });

  attack('an acknowledgement an execution agent writes to the CEO', 'library', 'POLICY_EDGE_NOT_ALLOWED', () => writeAs(w.actors.codex, 'ceo', { intent: 'ack', authority_class: 'evidence', about_message_id: commandId, note: '' }));

  attack('an acknowledgement of a message that never reached the COO', 'library', 'POLICY_INTENT_NOT_ALLOWED', async () => {
    const ack = await codeOf(() => acknowledge({ ledger: w.ledger, key: w.actors.coo, now: new Date(), messageId: commandId }));
    if (ack !== 'accepted') return `the command's own acknowledgement was refused: ${ack}`;
    const state = await w.ledger.state();
    const ackId = [...state.messages.values()].find((record) => record.intent === 'ack')!.id;
    return writeAs(w.actors.coo, 'ceo', { intent: 'ack', authority_class: 'evidence', about_message_id: ackId, note: '' });
  });

  attack('a second acknowledgement of the same message, under another key', 'library', 'MESSAGE_DUPLICATE', () => writeAs(w.actors.coo, 'ceo', { intent: 'ack', authority_class: 'evidence', about_message_id: commandId, note: 'again' }));
});

describe('a COO the CEO replaces leaves what it never read to its successor', () => {
  it("the new COO's inbox holds the CEO's command to the old one, and the new COO acknowledges it", async () => {
    const world = await makeWorld(join(dir, 'successor'));
    try {
      const command = await sendCommand({ ledger: world.ledger, key: world.actors.ceo, now: new Date(), text: 'Finish the migration.' });
      const successor = generatePrivateKey('coo.atlas');
      const registry = (await world.ledger.state()).registry!.doc;
      await appendTrustVersion(
        world.ledger,
        { role: 'registry', document: { ...registry, version: undefined, active_coo: 'coo.atlas', actors: [...registry.actors, { id: 'coo.atlas', class: 'orchestrator', keys: [] }] }, actorKeys: new Map([['coo.atlas', successor.publicKey]]) },
        world.actors.ceo,
        new Date(),
      );
      expect((await readInbox(world.ledger)).map((item) => [item.message_id, item.kind])).toEqual([[command.messageId, 'command']]);
      const acked = await acknowledge({ ledger: world.ledger, key: successor, now: new Date(), messageId: command.messageId, note: 'taken over' });
      expect(acked.existing).toBe(false);
      expect(await readInbox(world.ledger)).toEqual([]);
      // The replaced COO acknowledges nothing any more.
      expect(await codeOf(() => acknowledge({ ledger: world.ledger, key: world.actors.coo, now: new Date(), messageId: command.messageId }))).not.toBe('accepted');
    } finally {
      await world.close();
    }
  });
});
