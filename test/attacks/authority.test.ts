import { beforeAll, describe } from 'vitest';
import { appendTrustVersion } from '../../src/ledger/trust-update.js';
import { toYaml } from '../../src/schema/strict-yaml.js';
import { attack, useKit, type Kit } from '../helpers/attack-kit.js';
import { dispatchEnvelope, envelopeFile } from '../helpers/ledger.js';
import { tempDir } from '../helpers/tmp.js';

const dir = tempDir();
const getKit = useKit(dir);
let kit: Kit;
beforeAll(async () => {
  kit = getKit();
});

const evidence = (source: string, target: string) =>
  dispatchEnvelope({ source_actor: source, principal: source, target_actor: target, intent: 'blocker', authority_class: 'evidence', about_message_id: null, blocker: { code: 'needs_decision', detail: 'x' }, expected_receipt_schema: null, dispatch: undefined, payload_ref: undefined, payload_hash: undefined, context_pin: undefined });

describe('authority spoofing and forbidden edges', () => {
  attack("a command whose principal is not the active COO", 'library', 'NOT_ACTIVE_COO', () => kit.append([envelopeFile(dispatchEnvelope({ principal: 'ceo' }))], kit.keys.coo.key));

  attack('a dispatch an execution agent sends on its own authority', 'library', 'NOT_ACTIVE_COO', () =>
    kit.append([envelopeFile(dispatchEnvelope({ source_actor: 'ea.codex', principal: 'ea.codex', target_actor: 'ea.claude_code' }))], kit.keys.codex.key),
  );

  attack('an advisory agent key signing a dispatch (AA -> EA)', 'library', 'POLICY_EDGE_FORBIDDEN', () =>
    kit.append([envelopeFile(dispatchEnvelope({ source_actor: 'aa.chatgpt', principal: 'aa.chatgpt' }))], kit.keys.aa.key),
  );

  attack('AA -> EA evidence', 'library', 'POLICY_EDGE_FORBIDDEN', () => kit.append([envelopeFile(evidence('aa.chatgpt', 'ea.codex'))], kit.keys.aa.key));

  attack('EA -> AA traffic', 'library', 'POLICY_EDGE_FORBIDDEN', () => kit.append([envelopeFile(evidence('ea.codex', 'aa.chatgpt'))], kit.keys.codex.key));

  attack('AA -> AA cross-talk', 'library', 'POLICY_EDGE_FORBIDDEN', () => kit.append([envelopeFile(evidence('aa.chatgpt', 'aa.gemini'))], kit.keys.aa.key));

  attack('an AA proposal turned into a dispatch (a dispatch descending from a consult)', 'library', 'POLICY_PROPOSAL_TO_DISPATCH', async () => {
    const consult = await kit.world.consult({ idempotencyKey: `proposal-${Date.now()}` });
    const dispatch = dispatchEnvelope({ parent_message_id: consult.messageId, causality_chain: [consult.messageId], hop_count: 1, correlation_id: consult.envelope.correlation_id });
    return kit.append([envelopeFile(dispatch)], kit.keys.coo.key);
  });

  attack('a command from an orchestrator that is not the active COO', 'library', 'NOT_ACTIVE_COO', async () => {
    const { generatePrivateKey } = await import('../../src/crypto/keys.js');
    const backup = generatePrivateKey('coo.backup');
    const registry = (await kit.world.ledger.state()).registry!.doc;
    const { formatPublicKeyLine } = await import('../../src/crypto/keys.js');
    await appendTrustVersion(
      kit.world.ledger,
      { role: 'registry', document: { ...registry, version: undefined, actors: [...registry.actors, { id: 'coo.backup', class: 'orchestrator', keys: [{ key_id: backup.publicKey.keyId, public_key: formatPublicKeyLine(backup.publicKey) }] }] } },
      kit.keys.ceo.key,
      new Date(),
    );
    return kit.append([envelopeFile(dispatchEnvelope({ source_actor: 'coo.backup', principal: 'coo.backup' }))], backup);
  });

  attack('an envelope from an actor the registry does not know', 'library', 'ACTOR_UNKNOWN', () => kit.append([envelopeFile(dispatchEnvelope({ target_actor: 'ea.ghost' }))], kit.keys.coo.key));

  attack('a consult enqueued against an advisory agent the policy has no edge to', 'cli', 'POLICY_EDGE_NOT_ALLOWED', async () => {
    const { codeOf } = await import('../helpers/attack-kit.js');
    return codeOf(() => kit.world.consult({ target: 'aa.claude' }));
  });

  attack('a kill switch released by the COO after the CEO set it', 'library', 'TRUST_AUTHORITY', async () => {
    const { appendKillSwitch } = await import('../../src/ledger/trust-update.js');
    await appendKillSwitch(kit.world.ledger, 'on', 'CEO stop', 'ceo', kit.keys.ceo.key, new Date());
    const { codeOf } = await import('../helpers/attack-kit.js');
    const code = await codeOf(() => appendKillSwitch(kit.world.ledger, 'off', 'COO override', 'coo.hermes', kit.keys.coo.key, new Date()));
    await appendKillSwitch(kit.world.ledger, 'off', 'CEO resume', 'ceo', kit.keys.ceo.key, new Date());
    return code;
  });
});

describe('replay and duplication', () => {
  attack('the same envelope again', 'library', 'WRITE_ONCE', async () => {
    const message = dispatchEnvelope();
    await kit.append([envelopeFile(message)], kit.keys.coo.key);
    return kit.append([envelopeFile(message)], kit.keys.coo.key);
  });

  attack('the same message id under another day', 'library', 'MESSAGE_DUPLICATE', async () => {
    const message = dispatchEnvelope();
    await kit.append([envelopeFile(message)], kit.keys.coo.key);
    return kit.append([envelopeFile({ ...message, created_at: '2026-11-29T23:00:00Z' })], kit.keys.coo.key);
  });

  attack('the same idempotency key with another payload', 'library', 'IDEMPOTENCY_CONFLICT', async () => {
    await kit.append([envelopeFile(dispatchEnvelope({ idempotency_key: 'replayed-key' }))], kit.keys.coo.key);
    return kit.append([envelopeFile(dispatchEnvelope({ idempotency_key: 'replayed-key', max_hops: 2 }))], kit.keys.coo.key);
  });

  attack('the same idempotency key with the same payload: no second consult', 'cli', 'accepted-no-duplicate', async () => {
    const first = await kit.world.consult({ idempotencyKey: 'same-payload' });
    const again = await kit.world.consult({ idempotencyKey: 'same-payload' });
    return again.existing && again.messageId === first.messageId && again.commit === null ? 'accepted-no-duplicate' : 'accepted';
  });

  attack('an old receipt copied under a new attempt', 'library', 'ATTEMPT_INVALID', async () => {
    const { messageId, envelope } = await kit.world.consult({ idempotencyKey: `copied-receipt-${Date.now()}` });
    await kit.world.runner({ transport: kit.world.fakeOracle('ok') }).runOnce();
    const record = (await kit.world.ledger.state()).messages.get(messageId)!;
    const old = (await kit.world.ledger.readFile(record.attempts[0]!.receipt!.path))!;
    const base = envelope.payload_ref.replace(/\/prompt\.md$/, '');
    const copy = old.toString('utf8').replace('attempt_number: 1', 'attempt_number: 2').replace(/_1\n/, '_2\n');
    return kit.append([{ path: `${base}/receipts/002.yaml`, bytes: Buffer.from(copy) }], kit.keys.coo.key);
  });

  attack('a receipt for an attempt nobody claimed', 'library', 'ATTEMPT_INVALID', async () => {
    const { envelope } = await kit.world.consult({ idempotencyKey: `unclaimed-${Date.now()}` });
    const { forgedReceipt } = await import('../helpers/forged.js');
    const base = envelope.payload_ref.replace(/\/prompt\.md$/, '');
    return kit.append([{ path: `${base}/receipts/001.yaml`, bytes: Buffer.from(toYaml({ ...forgedReceipt(envelope), output_ref: null, output_hash: null, status: 'failed', blockers: [{ code: 'interrupted', detail: 'x' }], output_validation: { schema_id: 'aa_answer.v0', status: 'not_run', errors: [] } })) }], kit.keys.coo.key);
  });
});
