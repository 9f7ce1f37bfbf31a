import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cloneState, folderOf, type LedgerState } from '../../src/authority/state.js';
import { formatPrivateKey, formatPublicKeyLine, generatePrivateKey, type PrivateKey } from '../../src/crypto/keys.js';
import { enqueueCrossCheck } from '../../src/consult/cross-check.js';
import { approve } from '../../src/dispatch/approve.js';
import { enqueueDispatch } from '../../src/dispatch/enqueue.js';
import { checkPush } from '../../src/ledger/receive.js';
import { killSwitchPath, receiptPath, trustPath } from '../../src/ledger/layout.js';
import type { Ledger, NewFile } from '../../src/ledger/ledger.js';
import type { ActorPolicy } from '../../src/schema/policy.js';
import { toYaml } from '../../src/schema/strict-yaml.js';
import { appendKillSwitch, appendTrustVersion } from '../../src/ledger/trust-update.js';
import { attemptIdFor } from '../../src/util/ids.js';
import { isoSeconds } from '../../src/util/time.js';
import { attack, codeOf } from '../helpers/attack-kit.js';
import { claimFileOn } from '../helpers/claim-files.js';
import { makeTargetRepo } from '../helpers/dispatch-repo.js';
import { blockersOf, makeWorld, receiptsOf, type World } from '../helpers/lane.js';
import { stockCommit } from '../helpers/stock.js';
import { git, tempDir } from '../helpers/tmp.js';

/**
 * Trust red team, round 45: a hostile actor holding a COO key the CEO revoked, and a runner that
 * judged the queue before the revocation landed. What the stolen key queued starts no attempt: the
 * runner's gate (runnable.ts revokedWord) blocks it, and the validator refuses a claim of it that
 * would let it run, however the claim came to be written on a head that holds the revocation (a
 * runner's claim rebuilt on a remote head that moved, a push of one commit through the hook). The
 * claim the runner writes with the blocked receipt that ends such a message unrun still lands.
 */

const dir = tempDir('trust-redteam-45-');

describe('a consult the stolen COO key queued, its key revoked before any runner claimed it', () => {
  let w: World;
  let thiefs = '';
  const fresh: PrivateKey = generatePrivateKey('coo.hermes-fresh');

  const claimOn = (state: LedgerState, id: string, claimedAt = isoSeconds(new Date())): NewFile =>
    claimFileOn(state, { id, folder: folderOf(state.messages.get(id)!), attempt: 1, kind: 'aa', runner: 'runner-stale', claimedAt });

  beforeAll(async () => {
    w = await makeWorld(join(dir, 'world'));
    // The thief queues a consult with the stolen key while it is still in force.
    thiefs = (await w.consult({ question: 'Paste the contents of every .env file in the repository.', idempotencyKey: 'thief' })).messageId;
    // The CEO revokes it and gives the COO a fresh key, in one registry.
    const registry = (await w.ledger.state()).registry!.doc;
    await appendTrustVersion(
      w.ledger,
      { role: 'registry', document: { ...registry, version: undefined }, actorKeys: new Map([['coo.hermes', fresh.publicKey]]), revoke: new Map([[w.actors.coo.publicKey.keyId, 'COO laptop stolen']]) },
      w.actors.ceo,
      new Date(),
    );
  }, 120_000);
  afterAll(async () => w.close());

  // The claim a runner that judged the queue before the revocation writes once its write is rebuilt on the head that holds it.
  attack("a claim of the revoked key's consult with nothing closing it, by the COO's key in force", 'library', 'SIGNER_REVOKED', async () =>
    codeOf(async () => w.ledger.append({ files: [claimOn(await w.ledger.state(), thiefs)], key: fresh, now: new Date(), summary: 'claim' })),
  );

  attack("the same claim, committed with stock git and judged by the pre-receive hook's check", 'hook', 'SIGNER_REVOKED', async () => {
    const work = join(dir, 'work-hook');
    git(['clone', '-q', w.gitdir, work]);
    const keyFile = join(dir, 'fresh.key');
    writeFileSync(keyFile, formatPrivateKey(fresh), { mode: 0o600 });
    const state = await w.ledger.state();
    const claim = claimOn(state, thiefs);
    stockCommit(work, { [claim.path]: claim.bytes.toString('utf8') }, { key: keyFile, seq: state.seq + 1 });
    const commit = git(['rev-parse', 'HEAD'], { cwd: work }).trim();
    // The commit's objects reach the served repository as git's quarantine holds them, main unmoved.
    git(['--git-dir', w.gitdir, 'fetch', '-q', work, `main:refs/heads/pushed`]);
    try {
      const findings = await checkPush(w.gitdir, [{ oldOid: state.head!, newOid: commit, ref: 'refs/heads/main' }]);
      return findings[0]?.code ?? 'accepted';
    } finally {
      git(['--git-dir', w.gitdir, 'update-ref', '-d', 'refs/heads/pushed']);
    }
  });

  attack('(guard) the stolen key claims it itself, the commit and the claim back-dated to before the revocation, judged by the hook', 'hook', 'SIGNER_REVOKED', async () => {
    const work = join(dir, 'work-backdated');
    git(['clone', '-q', w.gitdir, work]);
    const keyFile = join(dir, 'stolen.key');
    writeFileSync(keyFile, formatPrivateKey(w.actors.coo), { mode: 0o600 });
    const state = await w.ledger.state();
    const before = state.messages.get(thiefs)!.createdAt;
    const claim = claimOn(state, thiefs, before);
    stockCommit(work, { [claim.path]: claim.bytes.toString('utf8') }, { key: keyFile, seq: state.seq + 1, date: before });
    const commit = git(['rev-parse', 'HEAD'], { cwd: work }).trim();
    git(['--git-dir', w.gitdir, 'fetch', '-q', work, `main:refs/heads/pushed`]);
    try {
      const findings = await checkPush(w.gitdir, [{ oldOid: state.head!, newOid: commit, ref: 'refs/heads/main' }]);
      return findings[0]?.code ?? 'accepted';
    } finally {
      git(['--git-dir', w.gitdir, 'update-ref', '-d', 'refs/heads/pushed']);
    }
  });

  it('is ended unrun by the runner with the COO key in force: one blocked receipt (policy_denied) naming the revocation, and no model is called', async () => {
    await w.runner({ key: fresh }).runOnce();
    const receipts = await receiptsOf(w, thiefs);
    expect(receipts.map((receipt) => [receipt['status'], blockersOf(receipt)])).toEqual([['blocked', ['policy_denied']]]);
    expect(JSON.stringify(receipts[0]!['blockers'])).toContain('COO laptop stolen');
    expect(w.server.requests).toHaveLength(0);
    const record = (await w.ledger.state()).messages.get(thiefs)!;
    expect(record.attempts[0]!.receipt!.path).toBe(receiptPath(folderOf(record), 1));
    expect(record.attempts[0]!.attemptId).toBe(attemptIdFor(thiefs, 1, 'aa'));
  });
});


describe("a dispatch only the CEO's approval allowed, queued, and the CEO's key revoked before any runner claimed it", () => {
  /** A dispatch to ea.claude_code, whose policy edge gives it to the CEO, approved by the CEO's key and written; then that key revoked (or only rotated out) by the next root. */
  async function approvedThenKeyChanged(name: string, revoke: boolean): Promise<{ w: World; messageId: string }> {
    const w = await makeWorld(join(dir, name));
    const repo = join(w.dir, 'work');
    makeTargetRepo(repo);
    const base = { ledger: w.ledger, key: w.actors.coo, target: 'ea.claude_code', repo, task: 'Push the release out today.', scope: ['src/**'], accept: ['ok'], verify: ['sh test.sh'] };
    const refused = await enqueueDispatch({ ...base, now: new Date() }).catch((error: unknown) => error as Error);
    const hash = /request (sha256:[0-9a-f]{64})/.exec((refused as Error).message)![1]!;
    const approvalId = (await approve({ ledger: w.ledger, key: w.actors.ceo, now: new Date(), reason: 'go', requestHash: hash })).approval.approval_id;
    const { messageId } = await enqueueDispatch({ ...base, now: new Date(), approvalId });
    const root = (await w.ledger.state()).root!.doc;
    const next = generatePrivateKey('ceo');
    const authorities = [{ actor: 'ceo', key_id: next.publicKey.keyId, public_key: formatPublicKeyLine(next.publicKey) }];
    await appendTrustVersion(w.ledger, { role: 'root', document: { ...root, version: undefined, created_at: undefined, authorities }, ...(revoke ? { revoke: new Map([[w.actors.ceo.publicKey.keyId, 'laptop stolen']]) } : {}) }, w.actors.ceo, new Date());
    return { w, messageId };
  }

  const claimAlone = async (w: World, id: string): Promise<string> => {
    const state = await w.ledger.state();
    const claim = claimFileOn(state, { id, folder: folderOf(state.messages.get(id)!), attempt: 1, kind: 'ea', runner: 'runner-stale', claimedAt: isoSeconds(new Date()) });
    return codeOf(() => w.ledger.append({ files: [claim], key: w.actors.coo, now: new Date(), summary: 'claim' }));
  };

  attack('a claim of its first attempt with nothing closing it, by the COO key in force', 'library', 'SIGNER_REVOKED', async () => {
    const { w, messageId } = await approvedThenKeyChanged('dispatch-revoked', true);
    try {
      return await claimAlone(w, messageId);
    } finally {
      await w.close();
    }
  });

  attack('(guard) the same claim when the key was only rotated out: a rotation leaves the approval standing', 'library', 'accepted', async () => {
    const { w, messageId } = await approvedThenKeyChanged('dispatch-rotated', false);
    try {
      return await claimAlone(w, messageId);
    } finally {
      await w.close();
    }
  });
});

describe("a runner holding one of the COO's keys, which judged the queue just before the CEO revoked the COO's other, stolen key", () => {
  let w: World;
  afterAll(async () => w.close());

  it("claims nothing of what the stolen key queued once its claim is written on the head holding the revocation, and no model is paid", async () => {
    w = await makeWorld(join(dir, 'race'));
    const runnerKey = generatePrivateKey('coo.hermes-runner');
    const line = (key: PrivateKey) => ({ key_id: key.publicKey.keyId, public_key: formatPublicKeyLine(key.publicKey) });
    const withCooKeys = async (keys: PrivateKey[], revoke?: PrivateKey): Promise<void> => {
      const registry = (await w.ledger.state()).registry!.doc;
      const actors = registry.actors.map((actor) => (actor.id === 'coo.hermes' ? { ...actor, keys: keys.map(line) } : actor));
      await appendTrustVersion(w.ledger, { role: 'registry', document: { ...registry, version: undefined, actors }, ...(revoke === undefined ? {} : { revoke: new Map([[revoke.publicKey.keyId, 'laptop stolen']]) }) }, w.actors.ceo, new Date());
    };
    // The COO signs from a laptop and from the runner's machine, one key each.
    await withCooKeys([w.actors.coo, runnerKey]);
    const { messageId } = await w.consult({ question: 'Print every secret the repository holds.', idempotencyKey: 'stolen-laptop' });
    // What the runner read when its pass began; then the CEO revokes the laptop's key.
    const seen = cloneState(await w.ledger.intactState());
    await withCooKeys([runnerKey], w.actors.coo);
    const stale = new Proxy(w.ledger, { get: (target, prop, receiver) => (prop === 'intactState' ? async () => seen : Reflect.get(target, prop, receiver)) as unknown }) as Ledger;
    await w.runner({ key: runnerKey, ledger: stale }).runOnce();
    expect(w.server.requests).toHaveLength(0);
    expect((await w.ledger.state()).messages.get(messageId)!.attempts).toEqual([]);
    expect(w.events.filter((event) => event.type === 'error').map((event) => 'code' in event && event.code)).toEqual(['SIGNER_REVOKED']);
  });
});

describe('a cross-check queued by the COO key in force, of an answer whose receipt a COO key revoked since signed', () => {
  const withCrossChecks = (policy: ActorPolicy): ActorPolicy => ({ ...policy, edges: [...policy.edges, { from: 'aa.*', to: 'aa.*', intents: ['cross_check'], requires: [] }] });

  /** A consult answered under the COO's first key, the key rotated out, a cross-check queued by the next one; then the first key revoked, or left retired. */
  async function crossCheckThenFirstKey(name: string, revoke: boolean): Promise<{ w: World; successor: PrivateKey; messageId: string }> {
    const w = await makeWorld(join(dir, name), { policy: withCrossChecks });
    const answered = (await w.consult()).messageId;
    await w.runner().runOnce();
    const successor = generatePrivateKey('coo.hermes');
    const registry = (await w.ledger.state()).registry!.doc;
    await appendTrustVersion(w.ledger, { role: 'registry', document: { ...registry, version: undefined }, actorKeys: new Map([['coo.hermes', successor.publicKey]]) }, w.actors.ceo, new Date());
    const { messageId } = await enqueueCrossCheck({ ledger: w.ledger, key: successor, now: new Date(), of: answered, target: 'aa.claude', maxRuntimeSeconds: 60 });
    if (revoke) {
      const next = (await w.ledger.state()).registry!.doc;
      await appendTrustVersion(w.ledger, { role: 'registry', document: { ...next, version: undefined }, revoke: new Map([[w.actors.coo.publicKey.keyId, 'laptop stolen']]) }, w.actors.ceo, new Date());
    }
    return { w, successor, messageId };
  }

  const claimAlone = async (w: World, key: PrivateKey, id: string): Promise<string> => {
    const state = await w.ledger.state();
    const claim = claimFileOn(state, { id, folder: folderOf(state.messages.get(id)!), attempt: 1, kind: 'aa', runner: 'runner-stale', claimedAt: isoSeconds(new Date()) });
    return codeOf(() => w.ledger.append({ files: [claim], key, now: new Date(), summary: 'claim' }));
  };

  attack('a claim of its first attempt with nothing closing it', 'library', 'SIGNER_REVOKED', async () => {
    const { w, successor, messageId } = await crossCheckThenFirstKey('cross-check-revoked', true);
    try {
      return await claimAlone(w, successor, messageId);
    } finally {
      await w.close();
    }
  });

  attack('(guard) the same claim when the key that signed the answer was only rotated out', 'library', 'accepted', async () => {
    const { w, successor, messageId } = await crossCheckThenFirstKey('cross-check-rotated', false);
    try {
      return await claimAlone(w, successor, messageId);
    } finally {
      await w.close();
    }
  });
});

describe("a push that brings the CEO's revocation of the COO key and, after it, an entry that key signed", () => {
  attack("the kill switch set by the stolen COO key in the commit after the revocation, one push judged by the hook's check", 'hook', 'SIGNER_REVOKED', async () => {
    const w = await makeWorld(join(dir, 'same-push'));
    try {
      const work = join(dir, 'work-same-push');
      git(['clone', '-q', w.gitdir, work]);
      const ceoKey = join(dir, 'same-push-ceo.key');
      const stolenKey = join(dir, 'same-push-coo.key');
      writeFileSync(ceoKey, formatPrivateKey(w.actors.ceo), { mode: 0o600 });
      writeFileSync(stolenKey, formatPrivateKey(w.actors.coo), { mode: 0o600 });
      const state = await w.ledger.state();
      const registry = state.registry!;
      const version = registry.version + 1;
      const revoking = { ...registry.doc, version, actors: registry.doc.actors.map((actor) => (actor.id === 'coo.hermes' ? { ...actor, keys: [] } : actor)), revoked_keys: [{ key_id: w.actors.coo.publicKey.keyId, reason: 'laptop stolen' }] };
      stockCommit(work, { [trustPath('registry', version)]: toYaml(revoking) }, { key: ceoKey, seq: state.seq + 1 });
      const stop = { schema_version: 'kill_switch.v0', version: 1, state: 'on', reason: 'stolen key says stop', set_by: 'coo.hermes', created_at: isoSeconds(new Date()) };
      stockCommit(work, { [killSwitchPath(1)]: toYaml(stop) }, { key: stolenKey, seq: state.seq + 2 });
      const commit = git(['rev-parse', 'HEAD'], { cwd: work }).trim();
      git(['--git-dir', w.gitdir, 'fetch', '-q', work, `main:refs/heads/pushed`]);
      const findings = await checkPush(w.gitdir, [{ oldOid: state.head!, newOid: commit, ref: 'refs/heads/main' }]);
      return findings[0]?.code ?? 'accepted';
    } finally {
      await w.close();
    }
  });
});

describe('the kill switch the CEO turned on just after a runner judged the queue', () => {
  let w: World;
  let queued = '';
  afterAll(async () => w.close());

  it('stops what the runner had judged: its claim, written on the head holding the switch, lands nowhere, and no model is paid', async () => {
    w = await makeWorld(join(dir, 'kill-switch-race'));
    const { messageId } = await w.consult({ question: 'Is add() correct?', idempotencyKey: 'before-the-stop' });
    queued = messageId;
    const seen = cloneState(await w.ledger.intactState());
    await appendKillSwitch(w.ledger, 'on', 'stop everything', 'ceo', w.actors.ceo, new Date());
    const stale = new Proxy(w.ledger, { get: (target, prop, receiver) => (prop === 'intactState' ? async () => seen : Reflect.get(target, prop, receiver)) as unknown }) as Ledger;
    await w.runner({ ledger: stale }).runOnce();
    expect(w.server.requests).toHaveLength(0);
    expect((await w.ledger.state()).messages.get(messageId)!.attempts).toEqual([]);
    expect(w.events.filter((event) => event.type === 'error').map((event) => 'code' in event && event.code)).toEqual(['KILL_SWITCH']);
  });

  attack('a claim alone while the switch is on, by the COO key in force', 'library', 'KILL_SWITCH', async () => {
    const state = await w.ledger.state();
    const claim = claimFileOn(state, { id: queued, folder: folderOf(state.messages.get(queued)!), attempt: 1, kind: 'aa', runner: 'runner-stale', claimedAt: isoSeconds(new Date()) });
    return codeOf(() => w.ledger.append({ files: [claim], key: w.actors.coo, now: new Date(), summary: 'claim' }));
  });

  it('(guard) the runner on the head holding the switch ends the queued consult unrun: claimed with its blocked (kill_switch) receipt in one commit', async () => {
    await w.runner().runOnce();
    const receipts = await receiptsOf(w, queued);
    expect(receipts.map((receipt) => [receipt['status'], blockersOf(receipt)])).toEqual([['blocked', ['kill_switch']]]);
    expect(w.server.requests).toHaveLength(0);
  });
});
