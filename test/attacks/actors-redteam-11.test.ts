import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifyBundle } from '../../src/audit/bundle-verify.js';
import { generatePrivateKey, type PrivateKey } from '../../src/crypto/keys.js';
import { adoptProposal } from '../../src/dispatch/adopt.js';
import { approve } from '../../src/dispatch/approve.js';
import { executorFactory } from '../../src/dispatch/executors.js';
import { CooError } from '../../src/errors.js';
import { appendTrustVersion } from '../../src/ledger/trust-update.js';
import { planAskedConsult } from '../../src/dispatch/asked-consult.js';
import { claimPath, messageFolder } from '../../src/ledger/layout.js';
import type { NewFile } from '../../src/ledger/ledger.js';
import type { CooMessage, EaDispatchMessage } from '../../src/schema/message.js';
import { toYaml } from '../../src/schema/strict-yaml.js';
import { sha256Ref } from '../../src/util/hash.js';
import { attemptIdFor } from '../../src/util/ids.js';
import { isoSeconds } from '../../src/util/time.js';
import { attack, codeOf, firstOr, useKit, type Kit } from '../helpers/attack-kit.js';
import { coo } from '../helpers/cli.js';
import { makeTargetRepo } from '../helpers/dispatch-repo.js';
import { makeWorld, type World } from '../helpers/lane.js';
import { dispatchEnvelope, messageFiles } from '../helpers/ledger.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * The actor model, round 11: who an envelope speaks for. The validator holds an envelope's
 * principal to the actor whose key signs it (the active COO for a command-class one, in its own
 * name or on an agent's behalf; the sender for any other), and every reader that asks who signed
 * an envelope asks the principal: the audit bundle's verifier too. And a revocation ends what the
 * revoked key vouched for that nothing used yet: a proposal only a revoked COO key's receipt stores is
 * adopted by no one.
 */

const dir = tempDir('actors-redteam-11-');
const getKit = useKit(dir);
let kit: Kit;
beforeAll(() => {
  kit = getKit();
});

/** A blocker from `source` to the COO naming `principal` as the authority it speaks on. */
const blocker = (source: string, principal: string): CooMessage =>
  dispatchEnvelope(
    { source_actor: source, principal, target_actor: 'coo.hermes', intent: 'blocker', authority_class: 'evidence', about_message_id: null, blocker: { code: 'needs_decision', detail: 'the COO approves the merge' }, expected_receipt_schema: null, dispatch: undefined, payload_ref: undefined, payload_hash: undefined, context_pin: undefined },
    new Date(),
  );

const filesOf = (message: CooMessage): Record<string, Buffer> => Object.fromEntries(messageFiles(message).map((file) => [file.path, file.bytes]));

describe("an agent's envelope speaks for its sender alone, never on the COO's authority", () => {
  attack("an execution agent's blocker that names the active COO as its principal", 'library', 'NOT_ACTIVE_COO', () => kit.append(messageFiles(blocker('ea.codex', 'coo.hermes')), kit.keys.codex.key));

  attack("an execution agent's blocker that names the active COO as its principal, pushed with stock git", 'hook', 'NOT_ACTIVE_COO', () => kit.push(filesOf(blocker('ea.codex', 'coo.hermes')), { key: kit.keys.codex.file }));

  attack("an execution agent's blocker that names the active COO as its principal, behind a hookless remote", 'verify', 'NOT_ACTIVE_COO', async () => {
    let codes: string[] = [];
    await kit.bypass(filesOf(blocker('ea.codex', 'coo.hermes')), { key: kit.keys.codex.file }, () => {
      codes = kit.verifyCodes();
    });
    return firstOr(codes, 'NOT_ACTIVE_COO');
  });

  attack("an advisory agent's blocker that names the active COO as its principal", 'library', 'NOT_ACTIVE_COO', () => kit.append(messageFiles(blocker('aa.chatgpt', 'coo.hermes')), kit.keys.aa.key));

  attack("an execution agent's blocker that names the CEO as its principal", 'library', 'NOT_ACTIVE_COO', () => kit.append(messageFiles(blocker('ea.codex', 'ceo')), kit.keys.codex.key));

  it('takes the same blocker in the agent\'s own name: the attacks above are refused for the principal alone', async () => {
    expect(await kit.append(messageFiles(blocker('ea.codex', 'ea.codex')), kit.keys.codex.key)).toBe('accepted');
  });
});

function claimFile(message: EaDispatchMessage): NewFile {
  const doc = { schema_version: 'claim.v0', message_id: message.message_id, attempt_id: attemptIdFor(message.message_id, 1, 'ea'), attempt_number: 1, runner_id: 'run-test', transport_session_id: 'test', claimed_at: isoSeconds(new Date()) };
  return { path: claimPath(messageFolder(message.message_id, message.created_at), 1), bytes: Buffer.from(toYaml(doc)) };
}

describe('the evidence bundle of a consult an execution agent asked, which the COO signed on its behalf', () => {
  let consult = '';
  beforeAll(async () => {
    const dispatch = dispatchEnvelope({}, new Date()) as EaDispatchMessage;
    expect(await kit.append(messageFiles(dispatch), kit.keys.coo.key)).toBe('accepted');
    expect(await kit.append([claimFile(dispatch)], kit.keys.coo.key)).toBe('accepted');
    const state = await kit.world.ledger.state();
    const bytes = Buffer.from('export const add = (a: number, b: number) => a + b;\n');
    const plan = planAskedConsult(state, { key: kit.keys.coo.key, now: new Date(), dispatch, attempt: 1, attemptId: attemptIdFor(dispatch.message_id, 1, 'ea'), target: 'aa.chatgpt', question: 'Is add() right for NaN?', files: [{ path: 'src/add.ts', sha256: sha256Ref(bytes), bytes }] });
    const envelope = plan.envelopeAt(state);
    const folder = messageFolder(envelope.message_id, envelope.created_at);
    const files = [{ path: `${folder}/envelope.yaml`, bytes: Buffer.from(toYaml(envelope)) }, ...[...plan.artifacts].map(([name, content]) => ({ path: `${folder}/${name}`, bytes: content }))];
    expect(await kit.append(files, kit.keys.coo.key)).toBe('accepted');
    await kit.world.runner({ transport: kit.world.fakeOracle('ok') }).runOnce();
    const record = (await kit.world.ledger.state()).messages.get(envelope.message_id)!;
    expect([record.source, record.askedIn, record.attempts.map((attempt) => attempt.receipt?.status)]).toEqual(['ea.codex', 1, ['succeeded']]);
    consult = envelope.message_id;
  }, 120_000);

  it('verifies: its envelope is signed by its principal, the active COO, on behalf of the agent it names as source', async () => {
    const out = join(dir, 'asked-consult.tar');
    expect(coo(['cite', consult, '--ledger', kit.world.gitdir, '--bundle', out]).status).toBe(0);
    expect(await codeOf(async () => verifyBundle(readFileSync(out)))).toBe('accepted');
    const cli = coo(['verify-bundle', out]);
    expect([cli.status, cli.stderr]).toEqual([0, '']);
  });
});

describe("a proposal that only a revoked COO key's receipt vouches for is adopted by no one", () => {
  let w: World;
  let repo: string;
  let adoptedBefore = '';
  let adoptedAfter = '';
  const next: PrivateKey = generatePrivateKey('coo.hermes-next');

  async function consultWithProposal(question: string): Promise<string> {
    const consult = await w.consult({ repo, patterns: ['src/add.js'], question, idempotencyKey: question.replace(/[^a-z]+/g, '-') });
    await w.runner({ repo, executors: executorFactory({ command: ['/bin/false'], hide: [w.gitdir] }) }).runOnce();
    return consult.messageId;
  }

  /** `coo adopt` of proposal 1 of `consultId` by `key`, under the CEO's approval of its exact request when the writer asks for one: the code, or 'accepted'. */
  function adopt(consultId: string, key: PrivateKey): Promise<string> {
    const write = (approvalId?: string) => adoptProposal({ ledger: w.ledger, key, now: new Date(), target: 'ea.codex', repo, consultId, proposal: 1, ...(approvalId === undefined ? {} : { approvalId }) });
    return codeOf(async () => {
      const refused = await write().catch((error: unknown) => error);
      if (!(refused instanceof CooError)) return refused;
      if (refused.code !== 'APPROVAL_REQUIRED') throw refused;
      const approved = await approve({ ledger: w.ledger, key: w.actors.ceo, now: new Date(), reason: 'approved as asked', requestHash: refused.where! });
      return write(approved.approval.approval_id);
    });
  }

  beforeAll(async () => {
    w = await makeWorld(join(dir, 'revoked-receipt'), { modes: ['propose'] });
    repo = join(w.dir, 'work');
    makeTargetRepo(repo);
    adoptedBefore = await consultWithProposal('How should add() be fixed?');
    adoptedAfter = await consultWithProposal('How else could add() be fixed?');
    const state = await w.ledger.state();
    const receipts = [adoptedBefore, adoptedAfter].map((id) => state.messages.get(id)!.attempts[0]!.receipt);
    expect(receipts.map((receipt) => [receipt?.status, receipt?.keyId, receipt?.proposals?.length])).toEqual([
      ['succeeded', w.actors.coo.publicKey.keyId, 1],
      ['succeeded', w.actors.coo.publicKey.keyId, 1],
    ]);
    expect(await adopt(adoptedBefore, w.actors.coo)).toBe('accepted');
    // The COO's key is revoked (stolen: whatever it signed may be a thief's), and the COO signs with a new one.
    const registry = (await w.ledger.state()).registry!.doc;
    await appendTrustVersion(w.ledger, { role: 'registry', document: { ...registry, version: undefined }, actorKeys: new Map([['coo.hermes', next.publicKey]]), revoke: new Map([[w.actors.coo.publicKey.keyId, 'COO laptop stolen']]) }, w.actors.ceo, new Date());
  }, 180_000);
  afterAll(async () => w.close());

  attack("an adoption, by the COO's new key, of a proposal stored by a receipt its revoked key signed", 'library', 'POLICY_PROPOSAL_TO_DISPATCH', () => adopt(adoptedAfter, next));

  it('leaves the adoption made before the revocation standing, and lands nothing for the refused one', async () => {
    const state = await w.ledger.state();
    const adoptions = [...state.messages.values()].filter((record) => record.intent === 'ea_dispatch').map((record) => record.adopted);
    expect(adoptions).toEqual([adoptedBefore]);
    const verified = coo(['verify', '--ledger', w.gitdir, '--no-checkpoint', '--json']);
    expect(verified.status).toBe(0);
  });
});
