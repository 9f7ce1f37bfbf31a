import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { formatPublicKeyLine, generatePrivateKey, type PrivateKey } from '../../src/crypto/keys.js';
import { approve } from '../../src/dispatch/approve.js';
import { acknowledge } from '../../src/inbox/ack.js';
import { rejectRequest, sendCommand } from '../../src/inbox/ceo-messages.js';
import { inboxRecords } from '../../src/inbox/inbox.js';
import { appendEnvelope } from '../../src/ledger/append-envelope.js';
import { planEnvelope } from '../../src/ledger/envelope-plan.js';
import { laneStateOf } from '../../src/authority/state.js';
import { enqueueDispatch } from '../../src/dispatch/enqueue.js';
import { claimPath, messageFolder, receiptPath, trustPath } from '../../src/ledger/layout.js';
import type { NewFile } from '../../src/ledger/ledger.js';
import { appendTrustVersion } from '../../src/ledger/trust-update.js';
import { verifyLedger } from '../../src/audit/verify.js';
import { nextWork } from '../../src/authority/runnable.js';
import type { EaDispatchMessage } from '../../src/schema/message.js';
import { toYaml } from '../../src/schema/strict-yaml.js';
import { attemptIdFor } from '../../src/util/ids.js';
import { isoSeconds } from '../../src/util/time.js';
import { attack, codeOf, firstOr, useKit } from '../helpers/attack-kit.js';
import { makeTargetRepo } from '../helpers/dispatch-repo.js';
import { dispatchEnvelope, eaReceiptDoc, messageFiles } from '../helpers/ledger.js';
import { makeWorld, type World } from '../helpers/lane.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * The actor model, attacked where a key's authority outlives what the trust files say of it, or
 * speaks in two roles: approvals and commands a stolen CEO key signed and nothing used or read
 * before the key was revoked, and a root and registry that give one key to the CEO and to another actor (the COO, an
 * agent), or give the CEO's root a role the registry holds as something else.
 */

const dir = tempDir('actors-redteam-4');

/** The next root naming `next` as the CEO's one key, written by `coo trust --root` with the old key revoked or only rotated out. */
async function rotateCeo(w: World, next: PrivateKey, revoke: boolean): Promise<void> {
  const root = (await w.ledger.state()).root!.doc;
  const authorities = [{ actor: 'ceo', key_id: next.publicKey.keyId, public_key: formatPublicKeyLine(next.publicKey) }];
  await appendTrustVersion(w.ledger, { role: 'root', document: { ...root, version: undefined, created_at: undefined, authorities }, ...(revoke ? { revoke: new Map([[w.actors.ceo.publicKey.keyId, 'laptop stolen']]) } : {}) }, w.actors.ceo, new Date());
}

/** A dispatch to ea.claude_code, whose policy edge gives it to the CEO: the request hash the CEO approves, and the writer of the dispatch naming an approval. */
async function request(w: World, task: string): Promise<{ write: (approvalId: string) => Promise<unknown>; hash: string }> {
  const repo = join(w.dir, 'work');
  if (!existsSync(repo)) makeTargetRepo(repo);
  const base = { ledger: w.ledger, key: w.actors.coo, target: 'ea.claude_code', repo, task, scope: ['src/**'], accept: ['ok'], verify: ['sh test.sh'] };
  const refused = await enqueueDispatch({ ...base, now: new Date() }).then(
    () => null,
    (error: unknown) => error as Error & { code?: string },
  );
  expect(refused?.code).toBe('APPROVAL_REQUIRED');
  return { write: (approvalId) => enqueueDispatch({ ...base, now: new Date(), approvalId }), hash: /request (sha256:[0-9a-f]{64})/.exec(refused!.message)![1]! };
}

describe("a revoked key's approvals that nothing used approve nothing", () => {
  let w: World;
  beforeAll(async () => {
    w = await makeWorld(join(dir, 'approvals'));
  });
  afterAll(async () => w.close());

  /** A dispatch to ea.codex whose one attempt failed, waiting for the CEO's word on a retry. */
  async function failedDispatch(): Promise<EaDispatchMessage> {
    const now = new Date();
    const dispatch = dispatchEnvelope({}, now) as EaDispatchMessage;
    const folder = messageFolder(dispatch.message_id, dispatch.created_at);
    const claim = { schema_version: 'claim.v0', message_id: dispatch.message_id, attempt_id: attemptIdFor(dispatch.message_id, 1, 'ea'), attempt_number: 1, runner_id: 'run-test', transport_session_id: 'test', claimed_at: isoSeconds(now) };
    await w.ledger.append({ files: messageFiles(dispatch), key: w.actors.coo, summary: 'dispatch', now });
    await w.ledger.append({ files: [{ path: claimPath(folder, 1), bytes: Buffer.from(toYaml(claim)) }], key: w.actors.coo, summary: 'claim', now });
    await w.ledger.append({ files: [{ path: receiptPath(folder, 1), bytes: Buffer.from(toYaml(eaReceiptDoc(dispatch.message_id, 1, { created_at: isoSeconds(now) }))) }], key: w.actors.coo, summary: 'receipt', now });
    return dispatch;
  }

  function claimOf(dispatch: EaDispatchMessage, attempt: number): NewFile {
    const claim = { schema_version: 'claim.v0', message_id: dispatch.message_id, attempt_id: attemptIdFor(dispatch.message_id, attempt, 'ea'), attempt_number: attempt, runner_id: 'run-test', transport_session_id: 'test', claimed_at: isoSeconds(new Date()) };
    return { path: claimPath(messageFolder(dispatch.message_id, dispatch.created_at), attempt), bytes: Buffer.from(toYaml(claim)) };
  }

  let unused: { write: (approvalId: string) => Promise<unknown>; approvalId: string };
  let retried: EaDispatchMessage;
  let successor: PrivateKey;
  let unread: string;
  let read: string;
  let refused: EaDispatchMessage;
  let rejection: string;

  beforeAll(async () => {
    // The thief, holding the CEO key, approves a dispatch and a retry; the CEO finds out and revokes the key.
    const later = await request(w, 'Push the release out today.');
    unused = { write: later.write, approvalId: (await approve({ ledger: w.ledger, key: w.actors.ceo, now: new Date(), reason: 'go', requestHash: later.hash })).approval.approval_id };
    const used = await request(w, 'Fix add() for NaN.');
    await used.write((await approve({ ledger: w.ledger, key: w.actors.ceo, now: new Date(), reason: 'go', requestHash: used.hash })).approval.approval_id);
    retried = await failedDispatch();
    await approve({ ledger: w.ledger, key: w.actors.ceo, now: new Date(), reason: 'once more', messageId: retried.message_id });
    // And commands: one the COO read before the revocation, one it had not.
    read = (await sendCommand({ ledger: w.ledger, key: w.actors.ceo, now: new Date(), text: 'Report on the release.' })).messageId;
    await acknowledge({ ledger: w.ledger, key: w.actors.coo, now: new Date(), messageId: read, note: 'on it' });
    unread = (await sendCommand({ ledger: w.ledger, key: w.actors.ceo, now: new Date(), text: 'Adopt every proposal the agents make, without asking me.', budgetUsd: 5 })).messageId;
    // And a rejection, which would refuse the retry for good.
    refused = await failedDispatch();
    rejection = (await rejectRequest({ ledger: w.ledger, key: w.actors.ceo, now: new Date(), reason: 'never', messageId: refused.message_id })).messageId;
    successor = generatePrivateKey('ceo');
    await rotateCeo(w, successor, true);
  });

  attack('a dispatch naming an approval its key signed before the registry revoked it, unused until then', 'library', 'APPROVAL_INVALID', () => codeOf(() => unused.write(unused.approvalId)));

  attack('a claim of the retry only a since-revoked key approved', 'library', 'ATTEMPT_INVALID', () => codeOf(() => w.ledger.append({ files: [claimOf(retried, 2)], key: w.actors.coo, summary: 'claim', now: new Date() })));

  attack('the COO acknowledging, signed by hand, a command the revoked key sent and the COO had not read', 'library', 'POLICY_INTENT_NOT_ALLOWED', async () => {
    const now = new Date();
    const plan = planEnvelope(await w.ledger.state(), w.actors.coo, 'ceo', { maxRuntimeSeconds: 1 }, now, 'ack');
    const ack = { ...plan.header, intent: 'ack', authority_class: 'evidence', budget: { max_cost_usd: 0, max_runtime_seconds: 1 }, about_message_id: unread, note: 'will do', expected_receipt_schema: null };
    return codeOf(() => appendEnvelope(w.ledger, Buffer.from(toYaml(ack)), new Map(), w.actors.coo, now));
  });

  it("takes the revoked key's unread command out of the COO's inbox, and leaves the one the COO read acknowledged", async () => {
    const state = await w.ledger.state();
    expect(inboxRecords(state).map((record) => record.id)).not.toContain(unread);
    expect(laneStateOf(state.messages.get(unread)!, state.registry!.doc)).toBe('recorded');
    expect(laneStateOf(state.messages.get(read)!, state.registry!.doc)).toBe('acknowledged');
    expect(inboxRecords(state).map((record) => record.id)).not.toContain(rejection);
  });

  it("lets the CEO, by its new key, approve what the revoked key's rejection refused", async () => {
    expect(await codeOf(() => approve({ ledger: w.ledger, key: successor, now: new Date(), reason: 'the real CEO says yes', messageId: refused.message_id }))).toBe('accepted');
  });

  it('leaves the dispatch waiting for the CEO: the runner does not start it, and the new key approves the retry once more', async () => {
    expect(nextWork((await w.ledger.state()).messages.get(retried.message_id)!, new Date())).toEqual({ kind: 'none' });
    await approve({ ledger: w.ledger, key: successor, now: new Date(), reason: 'the real CEO says once more', messageId: retried.message_id });
    expect(nextWork((await w.ledger.state()).messages.get(retried.message_id)!, new Date())).toEqual({ kind: 'attempt', number: 2 });
    expect(await codeOf(() => w.ledger.append({ files: [claimOf(retried, 2)], key: w.actors.coo, summary: 'claim', now: new Date() }))).toBe('accepted');
    // What the key approved and was used before its revocation stands: the history verifies.
    expect((await verifyLedger(w.gitdir, { full: true })).findings).toEqual([]);
  });

  it('leaves an approval and an unread command standing when their key is only rotated out, not revoked', async () => {
    const u = await makeWorld(join(dir, 'rotated'));
    try {
      const fix = await request(u, 'Fix add() for NaN.');
      const { approval } = await approve({ ledger: u.ledger, key: u.actors.ceo, now: new Date(), reason: 'go', requestHash: fix.hash });
      const command = (await sendCommand({ ledger: u.ledger, key: u.actors.ceo, now: new Date(), text: 'Fix add() for NaN.' })).messageId;
      await rotateCeo(u, generatePrivateKey('ceo'), false);
      expect(await codeOf(() => fix.write(approval.approval_id))).toBe('accepted');
      expect(inboxRecords(await u.ledger.state()).map((record) => record.id)).toContain(command);
    } finally {
      await u.close();
    }
  });
});

describe('one key speaks for one actor: the trust root and the registry agree on whose its keys are', () => {
  let w: World;
  beforeAll(async () => {
    w = await makeWorld(join(dir, 'roles'));
  });
  afterAll(async () => w.close());

  /** The next root or registry written by hand (past `coo trust`'s agreement check), signed by the CEO. */
  async function writeTrust(role: 'root' | 'registry', change: (doc: Record<string, unknown>) => Record<string, unknown>): Promise<string> {
    const state = await w.ledger.state();
    const current = role === 'root' ? state.root! : state.registry!;
    const version = current.version + 1;
    const bytes = Buffer.from(toYaml({ ...change({ ...current.doc }), version }));
    return codeOf(() => w.ledger.append({ files: [{ path: trustPath(role, version), bytes }], key: w.actors.ceo, now: new Date(), summary: 'trust' }));
  }

  const key = (actor: string, holder: PrivateKey) => ({ actor, key_id: holder.publicKey.keyId, public_key: formatPublicKeyLine(holder.publicKey) });
  const actors = (doc: Record<string, unknown>) => doc['actors'] as Array<Record<string, unknown>>;

  attack("a trust root naming the COO's key as a trust-root authority of the COO", 'library', 'TRUST_CONFLICT', () => writeTrust('root', (doc) => ({ ...doc, authorities: [...(doc['authorities'] as unknown[]), key('coo.hermes', w.actors.coo)] })));

  attack("a trust root naming an execution agent's key as a CEO key", 'library', 'TRUST_CONFLICT', () => writeTrust('root', (doc) => ({ ...doc, authorities: [...(doc['authorities'] as unknown[]), key('ceo', w.actors.codex)] })));

  attack("a registry giving the CEO's root key to the COO instead of the CEO", 'library', 'TRUST_CONFLICT', () =>
    writeTrust('registry', (doc) => ({
      ...doc,
      actors: actors(doc).map((actor) => (actor['id'] === 'ceo' ? { ...actor, keys: [] } : actor['id'] === 'coo.hermes' ? { ...actor, keys: [{ key_id: w.actors.ceo.publicKey.keyId, public_key: formatPublicKeyLine(w.actors.ceo.publicKey) }] } : actor)),
    })),
  );

  attack('a registry that makes the actor the trust root names an orchestrator, and the active COO', 'library', 'TRUST_CONFLICT', () =>
    writeTrust('registry', (doc) => ({ ...doc, active_coo: 'ceo', actors: actors(doc).map((actor) => (actor['id'] === 'ceo' ? { ...actor, class: 'orchestrator' } : actor)) })),
  );

  describe('written behind a hookless remote', () => {
    const getKit = useKit(join(dir, 'hookless'));

    attack("a trust root naming the COO's key as a CEO key, committed with stock git past the hook, found by coo verify", 'verify', 'TRUST_CONFLICT', async () => {
      const kit = getKit();
      const root = (await kit.world.ledger.state()).root!;
      const version = root.version + 1;
      const doc = toYaml({ ...root.doc, version, authorities: [...root.doc.authorities, key('ceo', kit.keys.coo.key)] });
      let codes: string[] = [];
      await kit.bypass({ [trustPath('root', version)]: doc }, { key: kit.keys.ceo.file }, () => {
        codes = kit.verifyCodes();
      });
      return firstOr(codes, 'TRUST_CONFLICT');
    });
  });

  it('accepts a root that adds a second CEO key the registry gives the CEO in the same commit', async () => {
    const deputy = generatePrivateKey('ceo');
    const state = await w.ledger.state();
    const root = { ...state.root!.doc, version: state.root!.version + 1, authorities: [...state.root!.doc.authorities, key('ceo', deputy)] };
    const registry = { ...state.registry!.doc, version: state.registry!.version + 1, actors: state.registry!.doc.actors.map((actor) => (actor.id === 'ceo' ? { ...actor, keys: [...actor.keys, { key_id: deputy.publicKey.keyId, public_key: formatPublicKeyLine(deputy.publicKey) }] } : actor)) };
    const files = [
      { path: trustPath('root', root.version), bytes: Buffer.from(toYaml(root)) },
      { path: trustPath('registry', registry.version), bytes: Buffer.from(toYaml(registry)) },
    ];
    expect(await codeOf(() => w.ledger.append({ files, key: w.actors.ceo, now: new Date(), summary: 'a second CEO key' }))).toBe('accepted');
  });
});
