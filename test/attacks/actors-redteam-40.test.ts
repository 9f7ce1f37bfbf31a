import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { enqueueCrossCheck } from '../../src/consult/cross-check.js';
import { formatPublicKeyLine, generatePrivateKey, type PrivateKey } from '../../src/crypto/keys.js';
import { approve } from '../../src/dispatch/approve.js';
import { enqueueDispatch } from '../../src/dispatch/enqueue.js';
import { CooError } from '../../src/errors.js';
import { appendEnvelope } from '../../src/ledger/append-envelope.js';
import { planEnvelope } from '../../src/ledger/envelope-plan.js';
import { trustPath } from '../../src/ledger/layout.js';
import { appendTrustVersion } from '../../src/ledger/trust-update.js';
import type { ActorPolicy } from '../../src/schema/policy.js';
import { toYaml } from '../../src/schema/strict-yaml.js';
import { attack, codeOf } from '../helpers/attack-kit.js';
import { makeWorld, type World } from '../helpers/lane.js';
import { git, gitEnv, run, tempDir } from '../helpers/tmp.js';

/**
 * The actor model attacked with signed documents moved where they were not signed for: a CEO
 * approval used after it expired, by a dispatch dated back into its life; the COO's right to sign
 * on an agent's behalf stretched to the CEO, to an execution agent, or taken by an orchestrator that
 * is not the active COO; and a key the registry hands from one actor to another, which then speaks
 * for the new holder alone.
 */

const dir = tempDir('actors-redteam-40');

/** The default policy, with every dispatch given to the CEO to approve. */
const approvedDispatches = (policy: ActorPolicy): ActorPolicy => ({ ...policy, edges: policy.edges.map((edge) => (edge.intents.includes('ea_dispatch') ? { ...edge, requires: [...edge.requires, 'ceo_approval' as const] } : edge)) });

/** The default policy, with an edge that lets the COO put one advisory agent's answer to another. */
const crossChecks = (policy: ActorPolicy): ActorPolicy => ({ ...policy, edges: [...policy.edges, { from: 'aa.*', to: 'aa.*', intents: ['cross_check'], requires: [] }] });

/** A blocker to the COO in `source`'s name: the fields over a planned header. */
const blocker = (source: string): Record<string, unknown> => ({ intent: 'blocker', authority_class: 'evidence', about_message_id: null, blocker: { code: 'needs_decision', detail: 'Which base?' }, source_actor: source, principal: source });

/** An envelope written by hand: the header planned for `planner`'s key, `fields` over it, signed with `signer`. The code, or 'accepted'. */
function writeAs(w: World, planner: PrivateKey, target: string, fields: Record<string, unknown>, signer = planner, parentMessageId?: string): Promise<string> {
  return codeOf(async () => {
    const now = new Date();
    const plan = planEnvelope(await w.ledger.state(), planner, target, parentMessageId === undefined ? {} : { parentMessageId }, now, 'hand');
    const envelope = { ...plan.header, budget: { max_cost_usd: 0, max_runtime_seconds: 1 }, expected_receipt_schema: null, ...fields };
    const withRef = 'payload_hash' in fields ? { ...envelope, payload_ref: `${plan.folder}/prompt.md` } : envelope;
    return appendEnvelope(w.ledger, Buffer.from(toYaml(withRef)), new Map(), signer, now);
  });
}

describe("the CEO's approval of a dispatch is used within its life, by the clock of the hook that takes it", () => {
  let w: World;
  /** Two hours ago: the CEO approved the request for ten minutes. */
  const then = new Date(Date.now() - 2 * 3600_000);
  const request = (): Parameters<typeof enqueueDispatch>[0] => ({ ledger: w.ledger, key: w.actors.coo, now: then, target: 'ea.codex', repo: w.target, task: 'Fix add().', scope: ['src/**'], accept: ['test.sh passes'], verify: ['sh test.sh'] });
  let approvalId: string;

  beforeAll(async () => {
    w = await makeWorld(join(dir, 'expired'), { policy: approvedDispatches });
    const refused = await enqueueDispatch(request()).catch((error: unknown) => error);
    if (!(refused instanceof CooError) || refused.code !== 'APPROVAL_REQUIRED') throw new Error(`expected APPROVAL_REQUIRED, got ${String(refused)}`);
    approvalId = (await approve({ ledger: w.ledger, key: w.actors.ceo, now: then, reason: 'for ten minutes', requestHash: refused.where!, ttlSeconds: 600 })).approval.approval_id;
  });
  afterAll(async () => w.close());

  attack('a dispatch dated an hour after the approval it names expired', 'library', 'APPROVAL_INVALID', () => codeOf(() => enqueueDispatch({ ...request(), now: new Date(then.getTime() + 3600_000), approvalId })));

  attack('the same dispatch dated back into the approval\'s ten minutes, pushed alone two hours on', 'hook', 'CLOCK_SKEW', async () => {
    const before = git(['--git-dir', w.gitdir, 'rev-parse', 'main']).trim();
    // Written past the hook (the library judges a dispatch by the clock it is dated with), then pushed as its only commit.
    await enqueueDispatch({ ...request(), now: new Date(then.getTime() + 60_000), approvalId });
    const forged = git(['--git-dir', w.gitdir, 'rev-parse', 'main']).trim();
    const work = join(dir, 'expired-clone');
    git(['clone', '-q', w.gitdir, work]);
    git(['--git-dir', w.gitdir, 'update-ref', 'refs/heads/main', before]);
    const pushed = run('git', ['push', 'origin', `${forged}:refs/heads/main`], { cwd: work, env: gitEnv() });
    expect(git(['--git-dir', w.gitdir, 'rev-parse', 'main']).trim()).toBe(before);
    return pushed.status === 0 ? 'accepted' : (/^remote:\s+([A-Z][A-Z0-9_]*) \[/m.exec(pushed.stderr)?.[1] ?? 'DECLINED');
  });
});

describe("the COO signs on another's behalf only for the sources its intents name", () => {
  let w: World;
  /** A second orchestrator the registry lists, not the active COO. */
  let athena: PrivateKey;
  /** aa.chatgpt's own key. */
  let aa: PrivateKey;
  let consult: Awaited<ReturnType<World['consult']>>;

  beforeAll(async () => {
    w = await makeWorld(join(dir, 'behalf'), { policy: crossChecks });
    athena = generatePrivateKey('coo.athena');
    aa = generatePrivateKey('aa.chatgpt');
    const registry = (await w.ledger.state()).registry!.doc;
    const actors = [...registry.actors, { id: 'coo.athena', class: 'orchestrator' as const, keys: [{ key_id: athena.publicKey.keyId, public_key: formatPublicKeyLine(athena.publicKey) }] }];
    await appendTrustVersion(w.ledger, { role: 'registry', document: { ...registry, version: undefined, actors }, actorKeys: new Map([['aa.chatgpt', aa.publicKey]]) }, w.actors.ceo, new Date());
    consult = await w.consult({ question: 'Is add() right?' });
    await w.runner().runOnce();
  });
  afterAll(async () => w.close());

  /** A cross-check of the consult's answer, to aa.claude, in `source`'s name, signed with `signer`. */
  async function crossCheckAs(signer: PrivateKey, source: string): Promise<string> {
    const receipt = (await w.ledger.state()).messages.get(consult.messageId)!.attempts[0]!.receipt!;
    const fields = {
      intent: 'cross_check',
      authority_class: 'advisory_only',
      prompt_template_version: 'cross_check_v0',
      payload_hash: consult.envelope.payload_hash,
      context_pin: consult.envelope.context_pin,
      challenge: { receipt_ref: receipt.path, answer_ref: receipt.output!.path, answer_hash: receipt.output!.sha256 },
      expected_receipt_schema: 'aa_receipt.v0',
      budget: { max_cost_usd: 0.01, max_runtime_seconds: 60 },
      source_actor: source,
    };
    return writeAs(w, w.actors.coo, 'aa.claude', fields, signer, consult.messageId);
  }

  /** A consult to aa.claude in `source`'s name as one asked inside a dispatch attempt, signed by the COO. */
  function askedAs(source: string): Promise<string> {
    const { message_id: _id, created_at: _at, expires_at: _expires, deadline_at: _deadline, idempotency_key: _key, correlation_id: _correlation, payload_ref: _ref, ...asked } = consult.envelope;
    return writeAs(w, w.actors.coo, 'aa.claude', { ...asked, target_actor: 'aa.claude', source_actor: source, asked_in_attempt: 1, budget: { max_cost_usd: 0.01, max_runtime_seconds: 60 } });
  }

  it('takes the cross-check the COO writes on the answering agent\'s behalf: the attacks below are refused for who signs or is named alone', async () => {
    expect(await codeOf(() => enqueueCrossCheck({ ledger: w.ledger, key: w.actors.coo, now: new Date(), of: consult.messageId, target: 'aa.claude', maxRuntimeSeconds: 60 }))).toBe('accepted');
  });

  attack("a consult the COO signs in the CEO's name, as one asked inside a dispatch", 'library', 'TRUST_AUTHORITY', () => askedAs('ceo'));

  attack("a cross-check the COO signs in the CEO's name", 'library', 'TRUST_AUTHORITY', () => crossCheckAs(w.actors.coo, 'ceo'));

  attack("a cross-check the COO signs in an execution agent's name", 'library', 'POLICY_EDGE_FORBIDDEN', () => crossCheckAs(w.actors.coo, 'ea.codex'));

  attack("a cross-check signed on the advisory agent's behalf by an orchestrator that is not the active COO", 'library', 'SIGNER_WRONG_ACTOR', () => crossCheckAs(athena, 'aa.chatgpt'));

  attack("a cross-check of its own answer the advisory agent signs with its own key", 'library', 'NOT_ACTIVE_COO', () => crossCheckAs(aa, 'aa.chatgpt'));

  attack("a blocker the COO signs in an execution agent's name", 'library', 'SIGNER_WRONG_ACTOR', () => writeAs(w, w.actors.coo, 'coo.hermes', blocker('ea.codex')));
});

describe('a key the registry hands from one actor to another speaks for its new holder alone', () => {
  let w: World;

  beforeAll(async () => {
    w = await makeWorld(join(dir, 'handed'), { policy: (policy) => ({ ...policy, edges: [...policy.edges, { from: 'ea.*', to: 'coo.*', intents: ['blocker'], requires: [] }, { from: 'aa.*', to: 'coo.*', intents: ['blocker'], requires: [] }] }) });
    expect(await writeAs(w, w.actors.codex, 'coo.hermes', blocker('ea.codex'))).toBe('accepted');
    const registry = (await w.ledger.state()).registry!.doc;
    const keys = registry.actors.find((actor) => actor.id === 'ea.codex')!.keys;
    const actors = registry.actors.map((actor) => (actor.id === 'ea.codex' ? { ...actor, keys: [] } : actor.id === 'aa.chatgpt' ? { ...actor, keys } : actor));
    await appendTrustVersion(w.ledger, { role: 'registry', document: { ...registry, version: undefined, actors } }, w.actors.ceo, new Date());
  });
  afterAll(async () => w.close());

  it("takes a blocker in the new holder's name", async () => {
    expect(await writeAs(w, w.actors.codex, 'coo.hermes', blocker('aa.chatgpt'))).toBe('accepted');
  });

  attack("a blocker in the former holder's name, signed with the key handed on", 'library', 'SIGNER_WRONG_ACTOR', () => writeAs(w, w.actors.codex, 'coo.hermes', blocker('ea.codex')));

  attack('a registry signed by the CEO that lists the key for both actors at once', 'library', 'SCHEMA_INVALID', async () => {
    const registry = (await w.ledger.state()).registry!.doc;
    const keys = registry.actors.find((actor) => actor.id === 'aa.chatgpt')!.keys;
    const actors = registry.actors.map((actor) => (actor.id === 'ea.codex' ? { ...actor, keys } : actor));
    const next = { ...registry, version: registry.version + 1, actors };
    return codeOf(() => w.ledger.append({ files: [{ path: trustPath('registry', next.version), bytes: Buffer.from(toYaml(next)) }], key: w.actors.ceo, now: new Date(), summary: 'registry: one key for two actors' }));
  });
});
