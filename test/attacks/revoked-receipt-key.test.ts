import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { renderCitation } from '../../src/audit/cite.js';
import { gatherEvidence } from '../../src/audit/evidence.js';
import { generatePrivateKey, type PrivateKey } from '../../src/crypto/keys.js';
import { adoptProposal } from '../../src/dispatch/adopt.js';
import { approve } from '../../src/dispatch/approve.js';
import { executorFactory } from '../../src/dispatch/executors.js';
import { CooError } from '../../src/errors.js';
import { appendTrustVersion } from '../../src/ledger/trust-update.js';
import { attack, codeOf } from '../helpers/attack-kit.js';
import { coo, json } from '../helpers/cli.js';
import { makeTargetRepo } from '../helpers/dispatch-repo.js';
import { makeWorld, type World } from '../helpers/lane.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * What a consult receipt whose signing key was revoked since still does: the proposal it stores is
 * adopted by no one, and the writer says so before it asks the CEO to approve an adoption the ledger
 * would refuse; a citation of its answer says the key was revoked. A key rotated out, not revoked,
 * leaves the proposals its receipts stored adoptable, and its answers cited as before. `coo show` names the key
 * that signed the envelope and each receipt, and says first when a registry revoked it.
 */

const dir = tempDir('revoked-receipt-key-');

describe("a consult receipt signed by a COO key revoked since", () => {
  let w: World;
  let repo: string;
  let byRotated = '';
  let byRevoked = '';
  const second: PrivateKey = generatePrivateKey('coo.hermes-second');
  const third: PrivateKey = generatePrivateKey('coo.hermes-third');

  async function consultWithProposal(key: PrivateKey, question: string): Promise<string> {
    const consult = await w.consult({ key, repo, patterns: ['src/add.js'], question, idempotencyKey: question.replace(/[^a-z]+/g, '-') });
    await w.runner({ key, repo, executors: executorFactory({ command: ['/bin/false'], hide: [w.gitdir] }) }).runOnce();
    return consult.messageId;
  }

  /** Moves the COO to `next`, revoking its current key `current` with `reason`, or retiring it when no reason is given. */
  async function moveCoo(current: PrivateKey, next: PrivateKey, reason?: string): Promise<void> {
    const registry = (await w.ledger.state()).registry!.doc;
    await appendTrustVersion(
      w.ledger,
      { role: 'registry', document: { ...registry, version: undefined }, actorKeys: new Map([['coo.hermes', next.publicKey]]), ...(reason === undefined ? {} : { revoke: new Map([[current.publicKey.keyId, reason]]) }) },
      w.actors.ceo,
      new Date(),
    );
  }

  const write = (consultId: string, key: PrivateKey, approvalId?: string) => adoptProposal({ ledger: w.ledger, key, now: new Date(), target: 'ea.codex', repo, consultId, proposal: 1, ...(approvalId === undefined ? {} : { approvalId }) });

  beforeAll(async () => {
    w = await makeWorld(join(dir, 'world'), { modes: ['propose'] });
    repo = join(w.dir, 'work');
    makeTargetRepo(repo);
    byRotated = await consultWithProposal(w.actors.coo, 'How should add() be fixed?');
    // The COO's first key is rotated out in the ordinary way: retired, not revoked.
    await moveCoo(w.actors.coo, second);
    byRevoked = await consultWithProposal(second, 'How else could add() be fixed?');
    // Its second key is revoked (stolen: whatever it signed may be a thief's), and the COO signs with a third.
    await moveCoo(second, third, 'COO laptop stolen');
    const state = await w.ledger.state();
    expect([byRotated, byRevoked].map((id) => state.messages.get(id)!.attempts[0]!.receipt?.keyId)).toEqual([w.actors.coo.publicKey.keyId, second.publicKey.keyId]);
  }, 180_000);
  afterAll(async () => w.close());

  attack('an adoption of a proposal its revoked key stored, before the CEO is asked to approve it', 'library', 'POLICY_PROPOSAL_TO_DISPATCH', () => codeOf(() => write(byRevoked, third)));

  it('asks the CEO for nothing: the refusal names the revoked key, and no approval is written', async () => {
    const approvals = (await w.ledger.state()).approvals.size;
    const refused = await write(byRevoked, third).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(CooError);
    expect((refused as CooError).message).toContain(second.publicKey.keyId);
    expect((refused as CooError).message).toContain('COO laptop stolen');
    expect((await w.ledger.state()).approvals.size).toBe(approvals);
  });

  it('adopts a proposal stored by a receipt the rotated, not revoked, key signed', async () => {
    const refused = await write(byRotated, third).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(CooError);
    expect((refused as CooError).code).toBe('APPROVAL_REQUIRED');
    const approved = await approve({ ledger: w.ledger, key: w.actors.ceo, now: new Date(), reason: 'approved as asked', requestHash: (refused as CooError).where! });
    const adopted = await write(byRotated, third, approved.approval.approval_id);
    expect((await w.ledger.state()).messages.get(adopted.messageId)?.adopted).toBe(byRotated);
  });

  it("cites the answer it signed as signed by a revoked key, and a rotated key's answer as before", async () => {
    const revoked = await gatherEvidence(w.gitdir, byRevoked);
    expect(revoked.revokedSigner?.keyId).toBe(second.publicKey.keyId);
    const markdown = renderCitation(revoked);
    expect(markdown).toContain(`**SIGNED BY A REVOKED KEY**: the receipt's key \`${second.publicKey.keyId}\``);
    expect(markdown).toContain('COO laptop stolen');
    const rotated = await gatherEvidence(w.gitdir, byRotated);
    expect(rotated.revokedSigner).toBeUndefined();
    expect(renderCitation(rotated)).not.toContain('REVOKED');
  });

  it("is shown by coo show as signed by a revoked key, envelope and receipt, and a rotated key's as the COO's, unmarked", () => {
    type Signer = { key_id: string; actor: string | null; revoked: { seq: number; reason: string } | null };
    type Shown = { envelope_signer: Signer | null; attempts: Array<{ receipt: { signer: Signer | null } | null }> };
    const revoked = coo(['show', byRevoked, '--ledger', w.gitdir]);
    expect(revoked.status, revoked.stderr).toBe(0);
    const stolen = `SIGNED BY A REVOKED KEY: coo.hermes (key ${second.publicKey.keyId}), revoked at Ledger-Seq`;
    expect(revoked.stdout.split('\n').filter((line) => line.includes(stolen) && line.includes('COO laptop stolen'))).toHaveLength(2);
    const shown = json<Shown>(coo(['show', byRevoked, '--ledger', w.gitdir, '--json']));
    for (const signer of [shown.envelope_signer, shown.attempts[0]!.receipt!.signer]) {
      expect(signer).toMatchObject({ key_id: second.publicKey.keyId, actor: 'coo.hermes', revoked: { reason: 'COO laptop stolen' } });
    }
    const rotated = coo(['show', byRotated, '--ledger', w.gitdir]);
    expect(rotated.status, rotated.stderr).toBe(0);
    const rotatedSigners = json<Shown>(coo(['show', byRotated, '--ledger', w.gitdir, '--json']));
    for (const signer of [rotatedSigners.envelope_signer, rotatedSigners.attempts[0]!.receipt!.signer]) {
      expect(signer).toEqual({ key_id: w.actors.coo.publicKey.keyId, actor: 'coo.hermes', revoked: null });
    }
    expect(rotated.stdout).not.toContain('REVOKED');
  });
});
