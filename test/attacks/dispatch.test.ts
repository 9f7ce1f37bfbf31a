import { beforeAll, describe } from 'vitest';
import { dispatchRequestHash } from '../../src/authority/dispatch-rules.js';
import { approvalPath, claimPath, messageFolder, receiptPath } from '../../src/ledger/layout.js';
import type { CooMessage, EaDispatchMessage } from '../../src/schema/message.js';
import { toYaml } from '../../src/schema/strict-yaml.js';
import { newMessageId } from '../../src/util/ids.js';
import { addSeconds, isoSeconds } from '../../src/util/time.js';
import { attack, useKit, type Kit } from '../helpers/attack-kit.js';
import { dispatchEnvelope, eaReceiptDoc, messageFiles } from '../helpers/ledger.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * The dispatch lane's authority: who may approve, what an approval covers, and what a dispatch
 * must say before the runner may execute it. Entries are written past the writers' own checks, so
 * the validator (the same in the writer, the hook and verify) is what refuses them.
 */

const dir = tempDir('attacks-dispatch');
const getKit = useKit(dir);
let kit: Kit;
beforeAll(() => {
  kit = getKit();
});

function approval(fields: Record<string, unknown> = {}, now = new Date()): { path: string; bytes: Buffer; id: string } {
  const id = `apr_${newMessageId(now.getTime()).slice(4)}`;
  const doc = {
    schema_version: 'approval.v0',
    approval_id: id,
    approves: 'dispatch',
    request_hash: `sha256:${'0'.repeat(64)}`,
    message_id: null,
    attempt_number: null,
    reason: 'approved',
    approved_by: 'ceo',
    created_at: isoSeconds(now),
    expires_at: isoSeconds(addSeconds(now, 3600)),
    ...fields,
  };
  return { path: approvalPath(doc.approval_id as string, doc.created_at as string), bytes: Buffer.from(toYaml(doc)), id: doc.approval_id as string };
}

/** A dispatch to Claude Code, whose edge asks for the CEO's approval. */
function claudeDispatch(overrides: Record<string, unknown> = {}, now?: Date): EaDispatchMessage {
  const base = dispatchEnvelope({ target_actor: 'ea.claude_code' }, now) as EaDispatchMessage;
  return { ...base, dispatch: { ...base.dispatch, executor: 'claude_code' }, ...overrides } as EaDispatchMessage;
}

function failedReceipt(message: CooMessage, attempt: number): { path: string; bytes: Buffer } {
  const doc = eaReceiptDoc(message.message_id, attempt, { target_actor: message.target_actor, created_at: message.created_at, commands_run: [], inner_exit_codes: [], tests_run: [] });
  return { path: receiptPath(messageFolder(message.message_id, message.created_at), attempt), bytes: Buffer.from(toYaml(doc)) };
}

function claim(message: CooMessage, attempt: number, claimedAt = message.created_at): { path: string; bytes: Buffer } {
  const doc = { schema_version: 'claim.v0', message_id: message.message_id, attempt_id: `ea_attempt_${message.message_id.slice(4)}_${attempt}`, attempt_number: attempt, runner_id: 'attacker', transport_session_id: 'attacker', claimed_at: claimedAt };
  return { path: claimPath(messageFolder(message.message_id, message.created_at), attempt), bytes: Buffer.from(toYaml(doc)) };
}

describe('approvals', () => {
  attack('an approval the COO signs for itself', 'library', 'TRUST_AUTHORITY', () => kit.append([approval({ approved_by: 'coo.hermes' })], kit.keys.coo.key));

  attack('an approval signed by the CEO naming someone else as approver', 'library', 'SIGNER_WRONG_ACTOR', () => kit.append([approval({ approved_by: 'coo.hermes' })], kit.keys.ceo.key));

  attack('an approval filed under another hour than its creation', 'library', 'PATH_INVALID', () => {
    const entry = approval();
    return kit.append([{ ...entry, path: entry.path.replace(/\/\d{2}\/apr_/, '/00/apr_') === entry.path ? entry.path.replace(/\/\d{2}\/apr_/, '/01/apr_') : entry.path.replace(/\/\d{2}\/apr_/, '/00/apr_') }], kit.keys.ceo.key);
  });

  attack('an approval that outlives the policy time-to-live', 'library', 'POLICY_LIMIT', () => kit.append([approval({ expires_at: isoSeconds(addSeconds(new Date(), 40 * 86_400)) })], kit.keys.ceo.key));

  attack('a dispatch the policy gives to the CEO, written without an approval', 'library', 'APPROVAL_REQUIRED', () => kit.append(messageFiles(claudeDispatch()), kit.keys.coo.key));

  attack('a dispatch naming an approval of another request', 'library', 'APPROVAL_INVALID', async () => {
    const entry = approval();
    await kit.append([entry], kit.keys.ceo.key);
    return kit.append(messageFiles(claudeDispatch({ approval_id: entry.id })), kit.keys.coo.key);
  });

  attack('a second dispatch riding on an approval already used', 'library', 'APPROVAL_INVALID', async () => {
    const first = claudeDispatch({}, new Date(Date.now() + 1000));
    const entry = approval({ request_hash: dispatchRequestHash(first) });
    await kit.append([entry], kit.keys.ceo.key);
    const used = await kit.append(messageFiles({ ...first, approval_id: entry.id } as CooMessage), kit.keys.coo.key);
    if (used !== 'accepted') return `first use: ${used}`;
    return kit.append(messageFiles(claudeDispatch({ approval_id: entry.id, idempotency_key: 'second-ride' }, new Date(Date.now() + 2000))), kit.keys.coo.key);
  });

  attack('a dispatch written after its approval expired', 'library', 'APPROVAL_INVALID', async () => {
    const past = new Date(Date.now() - 7200_000);
    const later = claudeDispatch({}, new Date());
    const entry = approval({ request_hash: dispatchRequestHash(later), created_at: isoSeconds(past), expires_at: isoSeconds(addSeconds(past, 60)) }, past);
    await kit.append([entry], kit.keys.ceo.key);
    return kit.append(messageFiles({ ...later, approval_id: entry.id } as CooMessage), kit.keys.coo.key);
  });

  attack('a dispatch backdated to before its approval', 'library', 'APPROVAL_INVALID', async () => {
    const early = claudeDispatch();
    const entry = approval({ request_hash: dispatchRequestHash(early) });
    await kit.append([entry], kit.keys.ceo.key);
    return kit.append(messageFiles({ ...early, approval_id: entry.id } as CooMessage), kit.keys.coo.key);
  });

  attack('a retry approval for a dispatch that succeeded or never ran', 'library', 'ATTEMPT_INVALID', async () => {
    const message = dispatchEnvelope();
    await kit.append(messageFiles(message), kit.keys.coo.key);
    return kit.append([approval({ approves: 'retry', request_hash: null, message_id: message.message_id, attempt_number: 2 })], kit.keys.ceo.key);
  });

  attack('a retry approval for an attempt other than the next', 'library', 'ATTEMPT_INVALID', async () => {
    const message = dispatchEnvelope();
    await kit.append(messageFiles(message), kit.keys.coo.key);
    await kit.append([claim(message, 1), failedReceipt(message, 1)], kit.keys.coo.key);
    return kit.append([approval({ approves: 'retry', request_hash: null, message_id: message.message_id, attempt_number: 3 })], kit.keys.ceo.key);
  });

  attack('a claim on an approved retry after the approval expired', 'library', 'ATTEMPT_INVALID', async () => {
    const message = dispatchEnvelope();
    await kit.append(messageFiles(message), kit.keys.coo.key);
    await kit.append([claim(message, 1), failedReceipt(message, 1)], kit.keys.coo.key);
    const entry = approval({ approves: 'retry', request_hash: null, message_id: message.message_id, attempt_number: 2 });
    await kit.append([entry], kit.keys.ceo.key);
    return kit.append([claim(message, 2, isoSeconds(addSeconds(new Date(), 7200)))], kit.keys.coo.key);
  });

  attack('an approval pushed past the writer by an intruder with stock git', 'hook', 'SIGNER_UNKNOWN', () => kit.push({ [approval().path]: approval().bytes }, { key: kit.keys.intruder.file }));
});

describe('dispatches the runner could not execute', () => {
  attack('a dispatch naming another executor than its target runs', 'library', 'SCHEMA_INVALID', () => {
    const message = dispatchEnvelope() as EaDispatchMessage;
    return kit.append(messageFiles({ ...message, dispatch: { ...message.dispatch, executor: 'claude_code' } }), kit.keys.coo.key);
  });

  attack('a dispatch pinned to a branch name instead of a commit', 'library', 'SCHEMA_INVALID', () => {
    const message = dispatchEnvelope() as EaDispatchMessage;
    return kit.append(messageFiles({ ...message, dispatch: { ...message.dispatch, base_ref: 'main' } }), kit.keys.coo.key);
  });

  attack('a dispatch whose branch name git would refuse or read as an option', 'library', 'SCHEMA_INVALID', () => {
    const message = dispatchEnvelope() as EaDispatchMessage;
    return kit.append(messageFiles({ ...message, dispatch: { ...message.dispatch, branch_name: '-main/..' } }), kit.keys.coo.key);
  });

  attack('a dispatch without its task', 'library', 'SCHEMA_INVALID', () => kit.append(messageFiles(dispatchEnvelope({ payload_ref: null, payload_hash: null })), kit.keys.coo.key));

  attack('a dispatch whose first attempt id is not the lane\'s', 'library', 'ATTEMPT_INVALID', () => {
    const message = dispatchEnvelope() as EaDispatchMessage;
    return kit.append(messageFiles({ ...message, dispatch: { ...message.dispatch, attempt_id: 'ea_attempt_chosen_by_hand' } }), kit.keys.coo.key);
  });

  attack('a dispatch whose executor time box exceeds its runtime budget', 'library', 'POLICY_LIMIT', () => {
    const message = dispatchEnvelope() as EaDispatchMessage;
    return kit.append(messageFiles({ ...message, dispatch: { ...message.dispatch, timeout_seconds: 3000 } }), kit.keys.coo.key);
  });

  attack('a dispatch to an execution agent the registry gives no executor', 'library', 'POLICY_INTENT_NOT_ALLOWED', async () => {
    const { appendTrustVersion } = await import('../../src/ledger/trust-update.js');
    const state = await kit.world.ledger.state();
    const registry = state.registry!.doc;
    await appendTrustVersion(
      kit.world.ledger,
      { role: 'registry', document: { ...registry, version: undefined, actors: [...registry.actors, { id: 'ea.bare', class: 'execution_agent', keys: [] }] } },
      kit.keys.ceo.key,
      new Date(),
    );
    const policy = state.policy!.doc;
    await appendTrustVersion(kit.world.ledger, { role: 'policy', document: { ...policy, version: undefined, edges: [...policy.edges, { from: 'coo.*', to: 'ea.bare', intents: ['ea_dispatch'], requires: [] }] } }, kit.keys.ceo.key, new Date());
    return kit.append(messageFiles(dispatchEnvelope({ target_actor: 'ea.bare' })), kit.keys.coo.key);
  });
});
