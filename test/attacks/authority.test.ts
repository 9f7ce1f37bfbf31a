import { beforeAll, describe, expect } from 'vitest';
import { claimPath, messageFolder, promptPath, receiptPath } from '../../src/ledger/layout.js';
import type { CooMessage } from '../../src/schema/message.js';
import { appendTrustVersion } from '../../src/ledger/trust-update.js';
import { toYaml } from '../../src/schema/strict-yaml.js';
import { attack, useKit, type Kit } from '../helpers/attack-kit.js';
import { forgedReceipt } from '../helpers/forged.js';
import { dispatchEnvelope, eaReceiptDoc, messageFiles } from '../helpers/ledger.js';
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
  attack("a command whose principal is not the active COO", 'library', 'NOT_ACTIVE_COO', () => kit.append([...messageFiles(dispatchEnvelope({ principal: 'ceo' }))], kit.keys.coo.key));

  attack('a dispatch an execution agent sends on its own authority', 'library', 'NOT_ACTIVE_COO', () =>
    kit.append([...messageFiles(dispatchEnvelope({ source_actor: 'ea.codex', principal: 'ea.codex', target_actor: 'ea.claude_code' }))], kit.keys.codex.key),
  );

  attack('an advisory agent key signing a dispatch (AA -> EA)', 'library', 'POLICY_EDGE_FORBIDDEN', () =>
    kit.append([...messageFiles(dispatchEnvelope({ source_actor: 'aa.chatgpt', principal: 'aa.chatgpt' }))], kit.keys.aa.key),
  );

  attack('AA -> EA evidence', 'library', 'POLICY_EDGE_FORBIDDEN', () => kit.append([...messageFiles(evidence('aa.chatgpt', 'ea.codex'))], kit.keys.aa.key));

  attack('EA -> AA traffic', 'library', 'POLICY_EDGE_FORBIDDEN', () => kit.append([...messageFiles(evidence('ea.codex', 'aa.chatgpt'))], kit.keys.codex.key));

  attack('AA -> AA cross-talk', 'library', 'POLICY_EDGE_FORBIDDEN', () => kit.append([...messageFiles(evidence('aa.chatgpt', 'aa.gemini'))], kit.keys.aa.key));

  attack('an AA proposal turned into a dispatch (a dispatch descending from a consult)', 'library', 'POLICY_PROPOSAL_TO_DISPATCH', async () => {
    const consult = await kit.world.consult({ idempotencyKey: `proposal-${Date.now()}` });
    const dispatch = dispatchEnvelope({ parent_message_id: consult.messageId, causality_chain: [consult.messageId], hop_count: 1, correlation_id: consult.envelope.correlation_id });
    return kit.append([...messageFiles(dispatch)], kit.keys.coo.key);
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
    return kit.append([...messageFiles(dispatchEnvelope({ source_actor: 'coo.backup', principal: 'coo.backup' }))], backup);
  });

  attack('an envelope from an actor the registry does not know', 'library', 'ACTOR_UNKNOWN', () => kit.append([...messageFiles(dispatchEnvelope({ target_actor: 'ea.ghost' }))], kit.keys.coo.key));

  attack('a consult enqueued against an advisory agent the policy has no edge to', 'cli', 'POLICY_EDGE_NOT_ALLOWED', async () => {
    const { codeOf } = await import('../helpers/attack-kit.js');
    const { appendTrustVersion } = await import('../../src/ledger/trust-update.js');
    const registry = (await kit.world.ledger.state()).registry!.doc;
    if (!registry.actors.some((actor) => actor.id === 'aa.unlisted')) {
      const unlisted = { id: 'aa.unlisted', class: 'advisory_agent' as const, keys: [], transport: { kind: 'oracle' as const, engine: 'api' as const, model: 'gpt-5.5', provider_key_env: 'OPENAI_API_KEY' as const } };
      await appendTrustVersion(kit.world.ledger, { role: 'registry', document: { ...registry, version: undefined, actors: [...registry.actors, unlisted] } }, kit.keys.ceo.key, new Date());
    }
    return codeOf(() => kit.world.consult({ target: 'aa.unlisted' }));
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
    await kit.append([...messageFiles(message)], kit.keys.coo.key);
    return kit.append([...messageFiles(message)], kit.keys.coo.key);
  });

  attack('the same message id under another day', 'library', 'MESSAGE_DUPLICATE', async () => {
    const message = dispatchEnvelope();
    await kit.append([...messageFiles(message)], kit.keys.coo.key);
    const elsewhere = '2026-11-29T23:00:00Z';
    return kit.append([...messageFiles({ ...message, created_at: elsewhere, payload_ref: promptPath(messageFolder(message.message_id, elsewhere)) } as CooMessage)], kit.keys.coo.key);
  });

  attack('the same idempotency key with another payload', 'library', 'IDEMPOTENCY_CONFLICT', async () => {
    await kit.append([...messageFiles(dispatchEnvelope({ idempotency_key: 'replayed-key' }))], kit.keys.coo.key);
    return kit.append([...messageFiles(dispatchEnvelope({ idempotency_key: 'replayed-key', max_hops: 2 }))], kit.keys.coo.key);
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

/** The same folder under another hour of the same day (or the day before, at midnight). */
function elsewhere(folder: string): string {
  return folder.replace(/\/(\d{2})\/(msg_[^/]+)$/, (_all, hour: string, id: string) => `/${hour === '00' ? '01' : String(Number(hour) - 1).padStart(2, '0')}/${id}`);
}

const folderOfEnvelope = (envelope: { payload_ref: string }): string => envelope.payload_ref.replace(/\/prompt\.md$/, '');

function claimOf(messageId: string, claimedAt: string, attempt = 1, attemptId = `aa_attempt_${messageId.slice(4)}_${attempt}`): Buffer {
  return Buffer.from(toYaml({ schema_version: 'claim.v0', message_id: messageId, attempt_id: attemptId, attempt_number: attempt, runner_id: 'stray', transport_session_id: 'stray', claimed_at: claimedAt }));
}

let serial = 0;
const key = (what: string): string => `${what}-${(serial += 1)}-${Date.now()}`;

describe('kill switch ownership', () => {
  attack("a COO taking over the CEO's stop by setting it again, then releasing it", 'library', 'TRUST_AUTHORITY', async () => {
    const { appendKillSwitch } = await import('../../src/ledger/trust-update.js');
    const { codeOf } = await import('../helpers/attack-kit.js');
    await appendKillSwitch(kit.world.ledger, 'on', 'CEO stop', 'ceo', kit.keys.ceo.key, new Date());
    const takeover = await codeOf(() => appendKillSwitch(kit.world.ledger, 'on', 'COO re-asserts', 'coo.hermes', kit.keys.coo.key, new Date()));
    const release = await codeOf(() => appendKillSwitch(kit.world.ledger, 'off', 'COO releases', 'coo.hermes', kit.keys.coo.key, new Date()));
    const held = (await kit.world.ledger.state()).killSwitch!.doc;
    await appendKillSwitch(kit.world.ledger, 'off', 'CEO resume', 'ceo', kit.keys.ceo.key, new Date());
    if (held.state !== 'on' || held.set_by !== 'ceo') return 'accepted';
    return takeover === release ? takeover : `${takeover}/${release}`;
  });
});

describe('entries outside their own message folder', () => {
  attack("a COO-signed claim for a consult under another hour's folder", 'library', 'PATH_INVALID', async () => {
    const { messageId, envelope } = await kit.world.consult({ idempotencyKey: key('claim-elsewhere') });
    return kit.append([{ path: claimPath(elsewhere(folderOfEnvelope(envelope)), 1), bytes: claimOf(messageId, envelope.created_at) }], kit.keys.coo.key);
  });

  attack("a COO-signed aa_receipt under another hour's folder closing a claimed attempt", 'library', 'PATH_INVALID', async () => {
    const { messageId, envelope } = await kit.world.consult({ idempotencyKey: key('receipt-elsewhere') });
    const folder = folderOfEnvelope(envelope);
    await kit.append([{ path: claimPath(folder, 1), bytes: claimOf(messageId, envelope.created_at) }], kit.keys.coo.key);
    const receipt = { ...forgedReceipt(envelope), output_ref: null, output_hash: null, status: 'failed', blockers: [{ code: 'interrupted', detail: 'x' }], output_validation: { schema_id: 'aa_answer.v0', status: 'not_run', errors: [] } };
    const code = await kit.append([{ path: receiptPath(elsewhere(folder), 1), bytes: Buffer.from(toYaml(receipt)) }], kit.keys.coo.key);
    // Close the attempt where it belongs, so the runner of a later test does not recover it.
    await kit.append([{ path: receiptPath(folder, 1), bytes: Buffer.from(toYaml(receipt)) }], kit.keys.coo.key);
    return code;
  });

  attack("a claim under another hour's folder pushed with stock git", 'hook', 'PATH_INVALID', async () => {
    const { messageId, envelope } = await kit.world.consult({ idempotencyKey: key('pushed-elsewhere') });
    return kit.push({ [claimPath(elsewhere(folderOfEnvelope(envelope)), 1)]: claimOf(messageId, envelope.created_at) }, { key: kit.keys.coo.file });
  });

  attack("a receipt under another hour's folder written behind the hook's back", 'verify', 'PATH_INVALID', async () => {
    const { firstOr } = await import('../helpers/attack-kit.js');
    const { messageId, envelope } = await kit.world.consult({ idempotencyKey: key('bypass-elsewhere') });
    const folder = folderOfEnvelope(envelope);
    await kit.append([{ path: claimPath(folder, 1), bytes: claimOf(messageId, envelope.created_at) }], kit.keys.coo.key);
    const receipt = { ...forgedReceipt(envelope), output_ref: null, output_hash: null, status: 'failed', blockers: [{ code: 'interrupted', detail: 'x' }], output_validation: { schema_id: 'aa_answer.v0', status: 'not_run', errors: [] } };
    let codes: string[] = [];
    await kit.bypass({ [receiptPath(elsewhere(folder), 1)]: toYaml(receipt) }, { key: kit.keys.coo.file }, () => {
      codes = kit.verifyCodes();
    });
    await kit.append([{ path: receiptPath(folder, 1), bytes: Buffer.from(toYaml(receipt)) }], kit.keys.coo.key);
    return firstOr(codes, 'PATH_INVALID');
  });

  attack("an ea_receipt in one dispatch's folder naming another dispatch", 'library', 'ATTEMPT_INVALID', async () => {
    const [one, other] = [dispatchEnvelope(), dispatchEnvelope()];
    await kit.append([...messageFiles(one), ...messageFiles(other)], kit.keys.coo.key);
    const folder = messageFolder(one.message_id, one.created_at);
    await kit.append([{ path: claimPath(folder, 1), bytes: claimOf(one.message_id, one.created_at, 1, `ea_attempt_${one.message_id.slice(4)}_1`) }], kit.keys.coo.key);
    const receipt = eaReceipt(other.message_id, `ea_attempt_${other.message_id.slice(4)}_1`);
    return kit.append([{ path: receiptPath(folder, 1), bytes: Buffer.from(toYaml(receipt)) }], kit.keys.coo.key);
  });

  attack('an ea_receipt whose attempt_id is not its attempt', 'library', 'ATTEMPT_INVALID', async () => {
    const dispatch = dispatchEnvelope();
    await kit.append([...messageFiles(dispatch)], kit.keys.coo.key);
    const folder = messageFolder(dispatch.message_id, dispatch.created_at);
    await kit.append([{ path: claimPath(folder, 1), bytes: claimOf(dispatch.message_id, dispatch.created_at, 1, `ea_attempt_${dispatch.message_id.slice(4)}_1`) }], kit.keys.coo.key);
    const receipt = eaReceipt(dispatch.message_id, 'ea_attempt_someone_else_7');
    return kit.append([{ path: receiptPath(folder, 1), bytes: Buffer.from(toYaml(receipt)) }], kit.keys.coo.key);
  });

  attack('an ea_receipt signed by the execution agent instead of the COO', 'library', 'NOT_ACTIVE_COO', async () => {
    const dispatch = dispatchEnvelope();
    await kit.append([...messageFiles(dispatch)], kit.keys.coo.key);
    const folder = messageFolder(dispatch.message_id, dispatch.created_at);
    await kit.append([{ path: claimPath(folder, 1), bytes: claimOf(dispatch.message_id, dispatch.created_at, 1, `ea_attempt_${dispatch.message_id.slice(4)}_1`) }], kit.keys.coo.key);
    const receipt = { ...eaReceipt(dispatch.message_id, `ea_attempt_${dispatch.message_id.slice(4)}_1`), status: 'succeeded', blockers: [], inner_exit_codes: [0], head_sha: 'c'.repeat(40) };
    return kit.append([{ path: receiptPath(folder, 1), bytes: Buffer.from(toYaml(receipt)) }], kit.keys.codex.key);
  });
});

describe('claims the runner would never make', () => {
  attack('a claim on the next attempt of a failed dispatch without the CEO\'s approval', 'library', 'ATTEMPT_INVALID', async () => {
    const dispatch = dispatchEnvelope();
    await kit.append([...messageFiles(dispatch)], kit.keys.coo.key);
    const folder = messageFolder(dispatch.message_id, dispatch.created_at);
    const failed = eaReceipt(dispatch.message_id, `ea_attempt_${dispatch.message_id.slice(4)}_1`);
    expect(await kit.append([{ path: claimPath(folder, 1), bytes: claimOf(dispatch.message_id, dispatch.created_at, 1, `ea_attempt_${dispatch.message_id.slice(4)}_1`) }, { path: receiptPath(folder, 1), bytes: Buffer.from(toYaml(failed)) }], kit.keys.coo.key)).toBe('accepted');
    return kit.append([{ path: claimPath(folder, 2), bytes: claimOf(dispatch.message_id, dispatch.created_at, 2, `ea_attempt_${dispatch.message_id.slice(4)}_2`) }], kit.keys.coo.key);
  });

  attack('a claim on a blocker notice', 'library', 'ATTEMPT_INVALID', async () => {
    const notice = evidence('ea.codex', 'coo.hermes');
    expect(await kit.append([...messageFiles(notice)], kit.keys.codex.key)).toBe('accepted');
    return kit.append([{ path: claimPath(messageFolder(notice.message_id, notice.created_at), 1), bytes: claimOf(notice.message_id, notice.created_at) }], kit.keys.coo.key);
  });

  attack('a claim for the next attempt before its retry time', 'library', 'ATTEMPT_INVALID', async () => {
    const { messageId, envelope } = await kit.world.consult({ idempotencyKey: key('early-retry') });
    const folder = folderOfEnvelope(envelope);
    const retryAt = new Date(Date.parse(envelope.created_at) + 60_000).toISOString().replace(/\.\d{3}Z$/, 'Z');
    const failed = { ...forgedReceipt(envelope), output_ref: null, output_hash: null, status: 'failed', blockers: [{ code: 'interrupted', detail: 'x' }], next_attempt_at: retryAt, output_validation: { schema_id: 'aa_answer.v0', status: 'not_run', errors: [] } };
    await kit.append([{ path: claimPath(folder, 1), bytes: claimOf(messageId, envelope.created_at) }, { path: receiptPath(folder, 1), bytes: Buffer.from(toYaml(failed)) }], kit.keys.coo.key);
    const code = await kit.append([{ path: claimPath(folder, 2), bytes: claimOf(messageId, envelope.created_at, 2) }], kit.keys.coo.key);
    // End the message, so the runner of a later test leaves it alone.
    const final = { ...failed, attempt_id: `aa_attempt_${messageId.slice(4)}_2`, attempt_number: 2, next_attempt_at: null };
    await kit.append([{ path: claimPath(folder, 2), bytes: claimOf(messageId, retryAt, 2) }, { path: receiptPath(folder, 2), bytes: Buffer.from(toYaml(final)) }], kit.keys.coo.key);
    return code;
  });
});

describe('hop limits', () => {
  attack('a reply declaring more hops than its parent leaves', 'cli', 'POLICY_LIMIT', async () => {
    const { codeOf } = await import('../helpers/attack-kit.js');
    const parent = await kit.world.consult({ idempotencyKey: key('hop-parent'), maxHops: 2 });
    return codeOf(() => kit.world.consult({ idempotencyKey: key('hop-child'), parentMessageId: parent.messageId, maxHops: 3 }));
  });

  attack('a consult at its hop limit, which the runner would never run', 'cli', 'POLICY_LIMIT', async () => {
    const { codeOf } = await import('../helpers/attack-kit.js');
    const parent = await kit.world.consult({ idempotencyKey: key('limit-parent'), maxHops: 1 });
    return codeOf(() => kit.world.consult({ idempotencyKey: key('limit-child'), parentMessageId: parent.messageId }));
  });
});

describe('claims an envelope makes about the ledger', () => {
  attack("an envelope stating a correlation budget the ledger does not leave", 'library', 'POLICY_LIMIT', () =>
    kit.append([...messageFiles(dispatchEnvelope({ budget: { max_cost_usd: 1, max_runtime_seconds: 600, correlation_budget_remaining_usd: 999 } }))], kit.keys.coo.key),
  );

  attack('the same idempotency key and request under another correlation', 'library', 'IDEMPOTENCY_CONFLICT', async () => {
    const first = dispatchEnvelope({ idempotency_key: key('corr-key') });
    await kit.append([...messageFiles(first)], kit.keys.coo.key);
    return kit.append([...messageFiles(dispatchEnvelope({ idempotency_key: first.idempotency_key, correlation_id: 'corr_another' }))], kit.keys.coo.key);
  });
});

function eaReceipt(messageId: string, attemptId: string): Record<string, unknown> {
  return eaReceiptDoc(messageId, 1, { attempt_id: attemptId });
}
