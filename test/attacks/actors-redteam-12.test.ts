import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { verifyLedger } from '../../src/audit/verify.js';
import { gateAttempt } from '../../src/authority/runnable.js';
import { formatPublicKeyLine, generatePrivateKey } from '../../src/crypto/keys.js';
import { approve } from '../../src/dispatch/approve.js';
import { sendCommand } from '../../src/inbox/ceo-messages.js';
import { enqueueDispatch } from '../../src/dispatch/enqueue.js';
import { defaultPolicy, defaultRegistry } from '../../src/ledger/init.js';
import { Ledger, type NewFile } from '../../src/ledger/ledger.js';
import { appendTrustVersion } from '../../src/ledger/trust-update.js';
import type { CooMessage } from '../../src/schema/message.js';
import { codeOfAsync } from '../helpers/codes.js';
import { blockersOf, handOver, makeTargetRepo, receiptsOf, worlds, type World } from '../helpers/lane.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * The actor model under attack, round 12: a COO that was active and is no longer, and a CEO
 * approval replayed for the same request under another parent or correlation.
 */

const dir = tempDir('actors-redteam-12');
const fresh = worlds(dir);

describe('a consult the active COO queued, the role handed to another COO before any runner claimed it', () => {
  it("is receipted blocked (policy_denied) by its successor's runner, naming the former COO, and nothing is sent or paid; the history verifies", async () => {
    const w = await fresh();
    const { messageId } = await w.consult();
    const next = await handOver(w);
    await w.runner({ key: next }).runOnce();
    expect(w.server.requests).toHaveLength(0);
    const receipts = await receiptsOf(w, messageId);
    expect(receipts.map((receipt) => [receipt['status'], blockersOf(receipt)])).toEqual([['blocked', ['policy_denied']]]);
    expect(JSON.stringify(receipts[0])).toContain('sent by coo.hermes, no longer the active COO');
    expect((await verifyLedger(w.gitdir, { full: true })).findings).toEqual([]);
  });

  it('the former COO can write no new command once the role is handed on (guard: held before)', async () => {
    const w = await fresh();
    await handOver(w);
    expect(await codeOfAsync(() => w.consult())).toBe('NOT_ACTIVE_COO');
  });

  it('a dispatch the former COO queued starts no attempt either: the same gate holds every lane', () => {
    const message = { intent: 'ea_dispatch', source_actor: 'coo.hermes', principal: 'coo.hermes', target_actor: 'ea.codex', hop_count: 0, max_hops: 3, expires_at: '2026-11-30T09:00:00Z', deadline_at: '2026-11-30T09:10:00Z' } as unknown as CooMessage;
    const registry = defaultRegistry();
    const facts = { now: new Date('2026-11-30T08:00:00Z'), message, attempt: 1, killSwitch: null, policy: defaultPolicy(), signerRevoked: null };
    expect(gateAttempt({ ...facts, registry })).toBeNull();
    const handedOn = { ...registry, active_coo: 'coo.next', actors: [...registry.actors, { ...registry.actors.find((actor) => actor.id === 'coo.hermes')!, id: 'coo.next' }] };
    expect(gateAttempt({ ...facts, registry: handedOn })).toMatchObject({ status: 'blocked', blocker: 'policy_denied' });
    // An agent's own word is no command: a blocker or a notice speaks for its sender whoever the COO is.
    expect(gateAttempt({ ...facts, registry: handedOn, message: { ...message, intent: 'receipt_notice', source_actor: 'ea.codex', principal: 'ea.codex', target_actor: 'coo.next' } as unknown as CooMessage })).toBeNull();
  });

  it('runs when only the COO key was rotated: the actor stays the active COO (guard: held before)', async () => {
    const w = await fresh();
    const { messageId } = await w.consult();
    const next = generatePrivateKey('coo.hermes');
    const registry = (await w.ledger.state()).registry!.doc;
    await appendTrustVersion(w.ledger, { role: 'registry', document: { ...registry, version: undefined }, actorKeys: new Map([['coo.hermes', next.publicKey]]) }, w.actors.ceo, new Date());
    await w.runner({ key: next }).runOnce();
    expect((await receiptsOf(w, messageId)).map((receipt) => receipt['status'])).toEqual(['succeeded']);
  });
});

describe("one CEO approval of a request, replayed by the COO for the same request under another parent or correlation", () => {
  /** The approval of a dispatch to ea.claude_code (its edge asks for the CEO), and a writer of that same request under a given correlation. */
  async function approved(w: World): Promise<{ approvalId: string; write: (correlationId?: string) => Promise<unknown> }> {
    const repo = join(w.dir, 'work');
    if (!existsSync(repo)) makeTargetRepo(repo);
    const base = { ledger: w.ledger, key: w.actors.coo, target: 'ea.claude_code', repo, task: 'Ship the fix.', scope: ['src/**'], accept: ['ok'], verify: ['sh test.sh'] };
    const refused = await enqueueDispatch({ ...base, now: new Date() }).catch((error: unknown) => error as Error);
    const hash = /request (sha256:[0-9a-f]{64})/.exec((refused as Error).message)![1]!;
    const approvalId = (await approve({ ledger: w.ledger, key: w.actors.ceo, now: new Date(), reason: 'go', requestHash: hash })).approval.approval_id;
    return { approvalId, write: (correlationId) => enqueueDispatch({ ...base, now: new Date(), approvalId, ...(correlationId === undefined ? {} : { correlationId, idempotencyKey: `again-${correlationId}` }) }) };
  }

  it('acts once: a second dispatch of the same request under another correlation is APPROVAL_INVALID (guard: the approval is used once, so leaving parent and correlation out of its hash lets it act only once)', async () => {
    const w = await fresh();
    const { approvalId, write } = await approved(w);
    expect(await codeOfAsync(() => write())).toBe('no error');
    expect(await codeOfAsync(() => write('corr_other'))).toBe('APPROVAL_INVALID');
    expect((await w.ledger.state()).approvals.get(approvalId)!.usedBy).not.toBeNull();
  });
});

describe("the CEO's approval of a retry of a dispatch the former COO sent", () => {
  it('is NOT_ACTIVE_COO: the dispatch starts no attempt under the successor, so the approval would approve nothing', async () => {
    const w = await fresh();
    const { messageId } = await enqueueDispatch({ ledger: w.ledger, key: w.actors.coo, now: new Date(), target: 'ea.codex', repo: w.target, task: 'Ship the fix.', scope: ['src/**'], accept: ['ok'], verify: ['sh test.sh'] });
    const next = await handOver(w);
    await w.runner({ key: next }).runOnce();
    expect((await receiptsOf(w, messageId)).map((receipt) => [receipt['status'], blockersOf(receipt)])).toEqual([['blocked', ['policy_denied']]]);
    const head = w.ledger.head();
    expect(await codeOfAsync(() => approve({ ledger: w.ledger, key: w.actors.ceo, now: new Date(), reason: 'again', messageId }))).toBe('NOT_ACTIVE_COO');
    expect(w.ledger.head()).toBe(head);
    expect((await verifyLedger(w.gitdir, { full: true })).findings).toEqual([]);
  });
});

describe("a CEO command signed by the outgoing CEO key in the very commit that rotates it out", () => {
  it('is SIGNER_RETIRED: the entries of a commit are judged by the trust that commit puts in force (guard: held before)', async () => {
    const w = await fresh();
    // The command as the outgoing key signs it, written first in a copy of the ledger, then carried into the rotation's commit.
    const copy = join(w.dir, 'copy.git');
    execFileSync('git', ['clone', '-q', '--mirror', w.gitdir, copy]);
    const other = Ledger.open(copy);
    await sendCommand({ ledger: other, key: w.actors.ceo, now: new Date(), text: 'Spend it all.', budgetUsd: 5 });
    other.close();
    const names = execFileSync('git', ['-C', copy, 'diff-tree', '-r', '--name-only', '--no-commit-id', 'HEAD~1', 'HEAD']).toString().trim().split('\n');
    const command = names.filter((name) => !name.endsWith('.sig')).map((path) => ({ path, bytes: execFileSync('git', ['-C', copy, 'show', `HEAD:${path}`]) }));
    expect(command.map((file) => file.path.split('/').pop())).toEqual(['envelope.yaml', 'prompt.md']);
    const append = w.ledger.append.bind(w.ledger);
    Object.assign(w.ledger, { append: (request: Parameters<typeof append>[0]) => append({ ...request, files: [...(request.files as readonly NewFile[]), ...command] }) });
    const root = (await w.ledger.state()).root!.doc;
    const next = generatePrivateKey('ceo');
    const authorities = [{ actor: 'ceo', key_id: next.publicKey.keyId, public_key: formatPublicKeyLine(next.publicKey) }];
    const head = w.ledger.head();
    expect(await codeOfAsync(() => appendTrustVersion(w.ledger, { role: 'root', document: { ...root, version: undefined, created_at: undefined, authorities } }, w.actors.ceo, new Date()))).toBe('SIGNER_RETIRED');
    expect(w.ledger.head()).toBe(head);
  });
});
