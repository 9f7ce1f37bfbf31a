import { readdirSync, renameSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadPrivateKey } from '../../src/cli/common.js';
import { generatePrivateKey } from '../../src/crypto/keys.js';
import { appendTrustVersion } from '../../src/ledger/trust-update.js';
import { enqueueCrossCheck } from '../../src/consult/cross-check.js';
import type { ActorPolicy } from '../../src/schema/policy.js';
import type { PrivateKey } from '../../src/crypto/keys.js';
import { blockersOf, makeWorld, receiptsOf, type World } from '../helpers/lane.js';
import { codeOf } from '../helpers/attack-kit.js';
import { coo, json } from '../helpers/cli.js';
import { dispatchRequestHash } from '../../src/authority/rules/intents/dispatch.js';
import { approve } from '../../src/dispatch/approve.js';
import { isCooError } from '../../src/errors.js';
import { appendEnvelope } from '../../src/ledger/append-envelope.js';
import { claimPath, envelopePath, messageFolder, receiptPath } from '../../src/ledger/layout.js';
import type { NewFile } from '../../src/ledger/ledger.js';
import type { CooMessage, EaDispatchMessage } from '../../src/schema/message.js';
import { toYaml } from '../../src/schema/strict-yaml.js';
import { isoSeconds } from '../../src/util/time.js';
import { attack, useKit, type Kit } from '../helpers/attack-kit.js';
import { dispatchEnvelope, eaReceiptDoc, messageFiles } from '../helpers/ledger.js';
import { awayOncePaid, makeCase, remoteReceipts, types } from '../helpers/remote-runners.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * Money and approvals, round 21: what a dispatch's attempts may cost the CEO's word, and what a
 * receipt may state about what was paid.
 */

const dir = tempDir('coo-attack-money-redteam-21-');
const getKit = useKit(dir);
let kit: Kit;
beforeAll(() => {
  kit = getKit();
});

const at = (offsetSeconds: number): string => isoSeconds(new Date(Date.now() + offsetSeconds * 1000));

function claimEntry(message: CooMessage, attempt: number, claimedAt: string): NewFile {
  const doc = { schema_version: 'claim.v0', message_id: message.message_id, attempt_id: `ea_attempt_${message.message_id.slice(4)}_${attempt}`, attempt_number: attempt, runner_id: 'r21', transport_session_id: 'r21', claimed_at: claimedAt };
  return { path: claimPath(messageFolder(message.message_id, message.created_at), attempt), bytes: Buffer.from(toYaml(doc)) };
}

function receiptEntry(message: CooMessage, attempt: number, overrides: Record<string, unknown>): NewFile {
  const doc = eaReceiptDoc(message.message_id, attempt, { created_at: at(0), commands_run: [], inner_exit_codes: [], tests_run: [], ...overrides });
  return { path: receiptPath(messageFolder(message.message_id, message.created_at), attempt), bytes: Buffer.from(toYaml(doc)) };
}

/** A dispatch queued and its first attempt claimed, as a runner leaves them. */
async function claimedDispatch(): Promise<CooMessage> {
  const message = dispatchEnvelope({}, new Date(Date.now() - 60_000));
  expect(await kit.append(messageFiles(message), kit.keys.coo.key)).toBe('accepted');
  expect(await kit.append([claimEntry(message, 1, at(-30))], kit.keys.coo.key)).toBe('accepted');
  return message;
}

describe('a dispatch receipt that schedules its own retry', () => {
  attack('an EA receipt whose next_attempt_at opens attempt 2 without the CEO', 'library', 'SCHEMA_INVALID', async () => {
    const message = await claimedDispatch();
    return kit.append([receiptEntry(message, 1, { next_attempt_at: at(30) })], kit.keys.coo.key);
  });
  attack('the same receipt pushed with stock git', 'hook', 'SCHEMA_INVALID', async () => {
    const message = await claimedDispatch();
    const entry = receiptEntry(message, 1, { next_attempt_at: at(30) });
    return kit.push({ [entry.path]: entry.bytes }, { key: kit.keys.coo.file });
  });

  attack('the receipt in history behind the hook, as coo verify replays it', 'verify', 'SCHEMA_INVALID', async () => {
    const message = await claimedDispatch();
    const entry = receiptEntry(message, 1, { next_attempt_at: at(30) });
    let codes: string[] = [];
    await kit.bypass({ [entry.path]: entry.bytes }, { key: kit.keys.coo.file }, () => {
      codes = kit.verifyCodes();
    });
    return codes.includes('SCHEMA_INVALID') ? 'SCHEMA_INVALID' : `accepted (${codes.join(', ')})`;
  });
});

describe('what a receipt states it cost (guard: the schema bounds it)', () => {
  for (const [what, cost, code] of [
    ['a negative cost', -0.01, undefined],
    ['a cost beyond what a document can hold', 1e12, undefined],
    // YAML's .nan and .inf are no JSON numbers: refused as the document is read.
    ['a cost that is not a number', Number.NaN, 'YAML_NON_JSON'],
    ['an infinite cost', Number.POSITIVE_INFINITY, 'YAML_NON_JSON'],
  ] as const) {
    attack(`an EA receipt stating ${what}`, 'library', code ?? 'SCHEMA_INVALID', async () => {
      const message = await claimedDispatch();
      return kit.append([receiptEntry(message, 1, { actual_cost_usd: cost })], kit.keys.coo.key);
    });
  }
});

/** A dispatch to Claude Code, whose edge asks for the CEO's approval, with the CEO's approval of its exact request. */
async function approvedDispatch(overrides: Record<string, unknown> = {}): Promise<EaDispatchMessage> {
  const base = dispatchEnvelope({ target_actor: 'ea.claude_code', ...overrides }, new Date(Date.now() + 1000)) as EaDispatchMessage;
  const message = { ...base, dispatch: { ...base.dispatch, executor: 'claude_code' } } as EaDispatchMessage;
  const { approval } = await approve({ ledger: kit.world.ledger, key: kit.keys.ceo.key, now: new Date(), reason: 'go', requestHash: dispatchRequestHash(message) });
  return { ...message, approval_id: approval.approval_id } as EaDispatchMessage;
}

/** The code the ledger refused `files` with, when its message says `why`; the whole message otherwise. */
async function codeAndWhy(files: readonly NewFile[], why: string): Promise<string> {
  try {
    await kit.world.ledger.append({ files, key: kit.keys.coo.key, summary: 'attack', now: new Date() });
    return 'accepted';
  } catch (error) {
    if (isCooError(error)) return error.message.includes(why) ? error.code : `${error.code}: ${error.message}`;
    throw error;
  }
}

/** Another message asking what `first` asks: its own id, time, folder and default branch. */
function repeatOf(first: EaDispatchMessage, dispatch: Partial<EaDispatchMessage['dispatch']> = {}): EaDispatchMessage {
  const other = dispatchEnvelope({ target_actor: 'ea.claude_code' }, new Date(Date.now() + 2000)) as EaDispatchMessage;
  return { ...first, message_id: other.message_id, created_at: other.created_at, payload_ref: other.payload_ref, dispatch: { ...first.dispatch, attempt_id: other.dispatch.attempt_id, branch_name: other.dispatch.branch_name, ...dispatch } };
}

describe("a repeated dispatch and the CEO's approval of the first (guard)", () => {
  it("the writer's repeat (same idempotency key, same request) returns the first and writes nothing: the approval stays the first's", async () => {
    const first = await approvedDispatch();
    expect(await kit.append(messageFiles(first), kit.keys.coo.key)).toBe('accepted');
    const head = kit.head();
    const repeat = repeatOf(first);
    const result = await appendEnvelope(kit.world.ledger, Buffer.from(toYaml(repeat)), new Map(), kit.keys.coo.key, new Date());
    expect(result).toMatchObject({ existing: true, messageId: first.message_id, path: envelopePath(messageFolder(first.message_id, first.created_at)) });
    expect(kit.head()).toBe(head);
    expect((await kit.world.ledger.state()).approvals.get(first.approval_id!)?.usedBy).toBe(first.message_id);
  });

  attack('a repeat of an approved dispatch written past the writer, naming the used approval', 'library', 'APPROVAL_INVALID', async () => {
    const first = await approvedDispatch();
    expect(await kit.append(messageFiles(first), kit.keys.coo.key)).toBe('accepted');
    return codeAndWhy(messageFiles(repeatOf(first)), 'was used by');
  });

  attack("a repeat under the first's idempotency key with another task, riding on the first's approval", 'library', 'APPROVAL_INVALID', async () => {
    const first = await approvedDispatch();
    expect(await kit.append(messageFiles(first), kit.keys.coo.key)).toBe('accepted');
    return codeAndWhy(messageFiles(repeatOf(first, { acceptance_criteria: ['anything goes'] })), 'approves another request');
  });
});

describe("a paid consult's receipt that waited in the journal while the CEO revoked the key that claimed it (guard)", () => {
  const closers: Array<() => Promise<void> | void> = [];
  afterAll(async () => {
    for (const close of closers.reverse()) await close();
  });

  it('is published once by the runner the COO restarts on that state folder with its new key, signed by that key: the model is paid once, nothing is run again', async () => {
    const world = await makeCase(join(dir, 'journal'), closers);
    const messageId = await world.consult();
    const machine = await world.machine('runner');
    const { away, onEvent } = awayOncePaid(world, machine);
    await machine.runner({ onEvent }).runOnce();
    expect(types(machine.events)).toEqual(expect.arrayContaining(['claimed', 'journaled']));
    renameSync(away, world.served.gitdir);
    // The CEO revokes the key that claimed the attempt (the laptop was stolen) and gives the COO a new one.
    const successor = generatePrivateKey('coo.hermes');
    const old = loadPrivateKey(world.served.keys.coo);
    await (await world.machine('ceo-desk')).remote.write(async (ledger) => {
      const registry = (await ledger.state()).registry!.doc;
      return appendTrustVersion(ledger, { role: 'registry', document: { ...registry, version: undefined }, actorKeys: new Map([['coo.hermes', successor.publicKey]]), revoke: new Map([[old.publicKey.keyId, 'laptop stolen']]) }, loadPrivateKey(world.served.keys.ceo), new Date());
    });
    await expect(machine.runner().runOnce()).rejects.toMatchObject({ code: 'RUNNER_CONFIG' });
    expect(readdirSync(join(machine.stateDir, 'journal'))).toHaveLength(1);

    await machine.runner({ key: successor }).runOnce();
    expect(readdirSync(join(machine.stateDir, 'journal'))).toHaveLength(0);
    expect(await remoteReceipts(world.served, messageId)).toEqual([{ attempt: 1, status: 'succeeded', blockers: [] }]);
    await machine.remote.sync();
    const attempt = (await machine.ledger.state()).messages.get(messageId)!.attempts;
    expect(attempt.map((item) => [item.claim?.runner !== undefined, item.receipt?.keyId])).toEqual([[true, successor.publicKey.keyId]]);
    expect(world.model.requests).toHaveLength(1);
    // A second pass finds nothing to do: the consult its revoked key queued starts no other attempt.
    await machine.runner({ key: successor }).runOnce();
    expect(world.model.requests).toHaveLength(1);
    expect(await remoteReceipts(world.served, messageId)).toHaveLength(1);
  }, 180_000);
});

describe('a cross-check of an answer whose receipt was signed by a COO key revoked since', () => {
  let w: World;
  let answered = '';
  const successor: PrivateKey = generatePrivateKey('coo.hermes');
  const withCrossChecks = (policy: ActorPolicy): ActorPolicy => ({ ...policy, edges: [...policy.edges, { from: 'aa.*', to: 'aa.*', intents: ['cross_check'], requires: [] }] });
  beforeAll(async () => {
    w = await makeWorld(join(dir, 'cross-check'), { policy: withCrossChecks });
    answered = (await w.consult()).messageId;
    await w.runner().runOnce();
    expect((await receiptsOf(w, answered)).map((receipt) => receipt['status'])).toEqual(['succeeded']);
    // A cross-check written while the key stood.
    await enqueueCrossCheck({ ledger: w.ledger, key: w.actors.coo, now: new Date(), of: answered, target: 'aa.claude', maxRuntimeSeconds: 60 });
    // The key that signed the answer's receipt is revoked (stolen: the answer it vouches for may be a thief's).
    const registry = (await w.ledger.state()).registry!.doc;
    await appendTrustVersion(w.ledger, { role: 'registry', document: { ...registry, version: undefined }, actorKeys: new Map([['coo.hermes', successor.publicKey]]), revoke: new Map([[w.actors.coo.publicKey.keyId, 'laptop stolen']]) }, w.actors.ceo, new Date());
  }, 120_000);
  afterAll(async () => w.close());

  attack('the COO, with its new key, pays a second model to challenge it', 'library', 'SIGNER_REVOKED', () =>
    codeOf(() => enqueueCrossCheck({ ledger: w.ledger, key: successor, now: new Date(), of: answered, target: 'aa.claude', maxRuntimeSeconds: 60, idempotencyKey: 'after-revocation' })),
  );

  it('leaves the cross-check written while the key stood valid on replay (coo verify finds nothing), and writes nothing itself', async () => {
    const head = (await w.ledger.state()).head;
    await expect(enqueueCrossCheck({ ledger: w.ledger, key: successor, now: new Date(), of: answered, target: 'aa.claude', maxRuntimeSeconds: 60, idempotencyKey: 'again' })).rejects.toMatchObject({ code: 'SIGNER_REVOKED', message: expect.stringContaining('laptop stolen') });
    expect((await w.ledger.state()).head).toBe(head);
    expect(json<{ findings: Array<{ code: string }> }>(coo(['verify', '--ledger', w.gitdir, '--no-checkpoint', '--json'])).findings).toEqual([]);
  });
});

describe('a cross-check written while the key of the answer it challenges stood, that key revoked before it ran', () => {
  let w: World;
  afterAll(async () => w.close());

  it('starts no attempt: blocked (policy_denied) naming the revoked key, and no model is paid', async () => {
    const withCrossChecks = (policy: ActorPolicy): ActorPolicy => ({ ...policy, edges: [...policy.edges, { from: 'aa.*', to: 'aa.*', intents: ['cross_check'], requires: [] }] });
    w = await makeWorld(join(dir, 'queued-cross-check'), { policy: withCrossChecks });
    const answered = (await w.consult()).messageId;
    await w.runner().runOnce();
    // The COO's key is rotated out (retired, not revoked), and the new key queues the cross-check.
    const successor = generatePrivateKey('coo.hermes');
    const registry = (await w.ledger.state()).registry!.doc;
    await appendTrustVersion(w.ledger, { role: 'registry', document: { ...registry, version: undefined }, actorKeys: new Map([['coo.hermes', successor.publicKey]]) }, w.actors.ceo, new Date());
    const { messageId } = await enqueueCrossCheck({ ledger: w.ledger, key: successor, now: new Date(), of: answered, target: 'aa.claude', maxRuntimeSeconds: 60 });
    // Then the old key turns out stolen: the answer its receipt vouches for may be a thief's.
    const rotated = (await w.ledger.state()).registry!.doc;
    await appendTrustVersion(w.ledger, { role: 'registry', document: { ...rotated, version: undefined }, revoke: new Map([[w.actors.coo.publicKey.keyId, 'laptop stolen']]) }, w.actors.ceo, new Date());
    const paid = w.server.requests.length;
    await w.runner({ key: successor }).runOnce();
    const receipts = await receiptsOf(w, messageId);
    expect(receipts.map((receipt) => [receipt['status'], blockersOf(receipt), receipt['actual_cost_usd']])).toEqual([['blocked', ['policy_denied'], 0]]);
    expect(JSON.stringify(receipts[0]!['blockers'])).toContain('the key of the challenged receipt');
    expect(w.server.requests.length).toBe(paid);
  }, 120_000);
});
