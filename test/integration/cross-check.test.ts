import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Ajv2020 from 'ajv/dist/2020.js';
import { describe, expect, it } from 'vitest';
import { formatPrivateKey } from '../../src/crypto/keys.js';
import { enqueueCrossCheck } from '../../src/consult/cross-check.js';
import { appendRequest } from '../../src/ledger/append-envelope.js';
import { appendTrustVersion } from '../../src/ledger/trust-update.js';
import type { CrossCheckMessage } from '../../src/schema/message.js';
import type { ActorPolicy } from '../../src/schema/policy.js';
import { sha256Ref } from '../../src/util/hash.js';
import { coo, json } from '../helpers/cli.js';
import { codeOfAsync } from '../helpers/codes.js';
import { siblingId } from '../helpers/forged.js';
import { blockersOf, receiptsOf, worlds, type World } from '../helpers/lane.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * Cross-checks: the COO puts one advisory agent's answer to another to challenge, where the policy
 * has an aa.* -> aa.* edge for cross_check. The message is COO-signed on the challenged agent's
 * behalf, its parent the message that agent answered, and the answer reaches the challenger quoted
 * as untrusted data under the hash the envelope pins.
 */
const fresh = worlds(tempDir());

const CROSS_CHECKS = { from: 'aa.*', to: 'aa.*', intents: ['cross_check' as const], requires: [] };
const withCrossChecks = (policy: ActorPolicy): ActorPolicy => ({ ...policy, edges: [...policy.edges, CROSS_CHECKS] });

/** A consult to aa.chatgpt answered by the offline model: the answer a cross-check challenges. */
async function answered(w: World, overrides: Parameters<World['consult']>[0] = {}): Promise<string> {
  const { messageId } = await w.consult(overrides);
  await w.runner().runOnce();
  expect((await receiptsOf(w, messageId)).map((receipt) => receipt['status'])).toEqual(['succeeded']);
  return messageId;
}

function crossCheck(w: World, of: string, target: string, overrides: Partial<Parameters<typeof enqueueCrossCheck>[0]> = {}): ReturnType<typeof enqueueCrossCheck> {
  return enqueueCrossCheck({ ledger: w.ledger, key: w.actors.coo, now: new Date(), of, target, maxRuntimeSeconds: 60, ...overrides });
}

describe('a cross-check', () => {
  it('is refused when it is written where the policy has no aa -> aa edge for it: the default policy has none', async () => {
    const w = await fresh();
    const consult = await answered(w);
    const seq = (await w.ledger.state()).seq;
    expect(await codeOfAsync(() => crossCheck(w, consult, 'aa.claude'))).toBe('POLICY_EDGE_NOT_ALLOWED');
    expect((await w.ledger.state()).seq).toBe(seq);
  });

  it("puts A's answer to B quoted as untrusted data under its pinned hash, COO-signed on A's behalf, advisory only, one hop below A's message", async () => {
    const w = await fresh({ policy: withCrossChecks });
    const consult = await answered(w);
    const state = await w.ledger.state();
    const challengedReceipt = state.messages.get(consult)!.attempts[0]!.receipt!;
    const written = await crossCheck(w, challengedReceipt.path, 'aa.claude');
    const envelope = written.envelope;
    expect(envelope).toMatchObject({
      intent: 'cross_check',
      authority_class: 'advisory_only',
      source_actor: 'aa.chatgpt',
      principal: 'coo.hermes',
      target_actor: 'aa.claude',
      parent_message_id: consult,
      causality_chain: [consult],
      hop_count: 1,
      correlation_id: state.messages.get(consult)!.correlation,
      challenge: { receipt_ref: challengedReceipt.path, answer_ref: challengedReceipt.output!.path, answer_hash: challengedReceipt.output!.sha256 },
    });
    // The commit is the COO's: an advisory agent holds no key.
    const after = await w.ledger.state();
    expect(after.messages.get(written.messageId)!.source).toBe('aa.chatgpt');
    const answer = (await w.ledger.readFile(challengedReceipt.output!.path))!;
    expect(sha256Ref(answer)).toBe(envelope.challenge.answer_hash);

    await w.runner().runOnce();
    const [receipt] = await receiptsOf(w, written.messageId);
    expect(receipt).toMatchObject({ status: 'succeeded', target_actor: 'aa.claude', authority_class: 'advisory_only' });
    // What B was sent, kept beside its receipt: every line of A's answer behind "| ", with A's name and the pinned hash.
    const sent = (receipt!['attachments'] as Array<{ path: string; sha256: string }>).find((item) => item.path.endsWith('prompt-sent.md'))!;
    const prompt = (await w.ledger.readFile(sent.path))!.toString('utf8');
    expect(prompt).toContain('[coo-commons cross_check_v0]');
    expect(prompt).toContain(`aa.chatgpt, for you to challenge (sha256 of its text: ${envelope.challenge.answer_hash})`);
    const quoted = answer.toString('utf8').replace(/\n$/, '').split('\n').map((line) => `| ${line}`).join('\n');
    expect(prompt).toContain(quoted);
    const onTheWire = w.server.requests.filter((request) => request.path === '/v1/messages');
    expect(onTheWire).toHaveLength(1);
    expect(onTheWire[0]!.prompt).toContain(quoted);
    // B's own canary, never A's: a challenger that copies A's block fails the canary check.
    expect(onTheWire[0]!.canary).not.toBe(w.server.requests[0]!.canary);
  });

  it("warns that the challenged answer holds a line that reads as instructions, as a pinned file that does would, and B's answer stands on its own", async () => {
    const w = await fresh({ policy: withCrossChecks, modes: ['steer', 'ok'] });
    const consult = await answered(w);
    const written = await crossCheck(w, consult, 'aa.claude');
    await w.runner().runOnce();
    const [receipt] = await receiptsOf(w, written.messageId);
    expect(receipt).toMatchObject({ status: 'succeeded' });
    expect(receipt!['warnings']).toContain('context_injection_suspected');
    const [first] = await receiptsOf(w, consult);
    expect(first!['warnings']).not.toContain('context_injection_suspected');
  });

  it('challenges the latest answer of a message named by its id, and a chain of cross-checks stops at the hop limit, refused at write time', async () => {
    const w = await fresh({ policy: withCrossChecks });
    const consult = await answered(w, { maxHops: 2 });
    const first = await crossCheck(w, consult, 'aa.claude');
    expect(first.envelope).toMatchObject({ hop_count: 1, max_hops: 2, source_actor: 'aa.chatgpt' });
    await w.runner().runOnce();
    expect((await receiptsOf(w, first.messageId)).map((receipt) => receipt['status'])).toEqual(['succeeded']);
    // aa.gemini challenges aa.claude's challenge: hop 2 of at most 2, which no runner would run.
    const seq = (await w.ledger.state()).seq;
    expect(await codeOfAsync(() => crossCheck(w, first.messageId, 'aa.gemini'))).toBe('POLICY_LIMIT');
    expect((await w.ledger.state()).seq).toBe(seq);
  });

  it("stops at the correlation's budget: a challenge the correlation cannot pay for is blocked before it is paid", async () => {
    const w = await fresh({ policy: withCrossChecks });
    const consult = await answered(w);
    const state = await w.ledger.state();
    const correlation = state.messages.get(consult)!.correlation;
    const spent = state.spendByCorrelation.get(correlation)!;
    expect(spent).toBeGreaterThan(0);
    // The CEO tightens the correlation's budget to a hair above what the consult cost: the chain has nothing left to pay a challenge with.
    const policy = state.policy!.doc;
    await appendTrustVersion(w.ledger, { role: 'policy', document: { ...policy, version: undefined, budgets: { ...policy.budgets, max_cost_usd_per_correlation: spent + 0.00001 } } }, w.actors.ceo, new Date());
    const paid = w.server.requests.length;
    const challenge = await crossCheck(w, consult, 'aa.claude');
    await w.runner().runOnce();
    const receipts = await receiptsOf(w, challenge.messageId);
    expect(receipts.map((receipt) => receipt['status'])).toEqual(['blocked']);
    expect(blockersOf(receipts[0]!)).toEqual(['correlation_budget_exhausted']);
    expect(w.server.requests.length).toBe(paid);
  });

  it("is refused when it names an answer other than the one its receipt holds, or pins another context, or targets the COO, or is signed by anyone but the COO", async () => {
    const w = await fresh({ policy: (policy) => ({ ...withCrossChecks(policy), edges: [...withCrossChecks(policy).edges, { from: 'aa.*', to: 'coo.*', intents: ['cross_check'], requires: [] }] }) });
    const consult = await answered(w);
    const written = await crossCheck(w, consult, 'aa.claude', { idempotencyKey: 'honest' });
    const prompt = (await w.ledger.readFile(written.envelope.payload_ref))!;
    const manifest = (await w.ledger.readFile(written.envelope.context_pin.context_manifest_ref))!;
    const artifacts = new Map([
      ['prompt.md', prompt],
      ['context-manifest.yaml', manifest],
    ]);
    const forged = (changes: Partial<CrossCheckMessage>, n: number): (() => Promise<unknown>) => {
      const id = siblingId(written.envelope.message_id, n);
      const folder = `messages/${written.envelope.created_at.slice(0, 7)}/${written.envelope.created_at.slice(8, 10)}/${written.envelope.created_at.slice(11, 13)}/${id}`;
      const envelope = { ...written.envelope, message_id: id, idempotency_key: `forged-${n}`, payload_ref: `${folder}/prompt.md`, context_pin: { ...written.envelope.context_pin, context_manifest_ref: `${folder}/context-manifest.yaml` }, ...changes };
      return () => appendRequest(w.ledger, () => envelope as CrossCheckMessage, artifacts, w.actors.coo, new Date());
    };
    const seq = (await w.ledger.state()).seq;
    expect(await codeOfAsync(forged({ challenge: { ...written.envelope.challenge, answer_hash: sha256Ref(Buffer.from('another answer')) } }, 1))).toBe('ARTIFACT_HASH_MISMATCH');
    expect(await codeOfAsync(forged({ target_actor: 'coo.hermes' }, 2))).toBe('POLICY_INTENT_NOT_ALLOWED');
    // The challenger is not the one challenged: the parent is a question aa.chatgpt answered.
    expect(await codeOfAsync(forged({ source_actor: 'aa.gemini' }, 3))).toBe('SCHEMA_INVALID');
    // The challenger judges the context the answer was given, no other.
    expect(await codeOfAsync(forged({ context_pin: { ...written.envelope.context_pin, context_manifest_hash: sha256Ref(Buffer.from('another context')) } }, 5))).toBe('CONTEXT_INVALID');
    // A snapshot pin's bytes stand beside the consult an execution agent asked, never beside a cross-check.
    expect(await codeOfAsync(forged({ context_pin: { ...written.envelope.context_pin, snapshot_of: `ea_attempt_${consult.slice(4)}_1` } }, 7))).toBe('CONTEXT_INVALID');
    // A cross-check has a parent: the schema refuses one without.
    expect(await codeOfAsync(forged({ parent_message_id: null, causality_chain: [], hop_count: 0 } as unknown as Partial<CrossCheckMessage>, 4))).toBe('SCHEMA_INVALID');
    // Signed by the execution agent's key, on nobody's behalf it may claim.
    const byAgent = { ...written.envelope, message_id: siblingId(written.envelope.message_id, 6), idempotency_key: 'forged-6' };
    expect(await codeOfAsync(() => appendRequest(w.ledger, () => byAgent, artifacts, w.actors.codex, new Date()))).toBe('SIGNER_WRONG_ACTOR');
    expect((await w.ledger.state()).seq).toBe(seq);
  });
});

describe('coo cross-check', () => {
  it('writes the challenge of an answer named by its message id and prints the envelope with --json, coo show says what it challenges, the ledger verifies, cites it naming the challenged answer, bundles it with that answer, attests it as a cross-check and reports, and an unknown challenger or answer is a coded refusal', async () => {
    const w = await fresh({ policy: withCrossChecks });
    const consult = await answered(w);
    const keyFile = join(w.dir, 'coo.key');
    writeFileSync(keyFile, formatPrivateKey(w.actors.coo), { mode: 0o600 });
    const env = { COO_LEDGER: w.gitdir, COO_KEY: keyFile };
    const result = coo(['cross-check', consult, '--to', 'aa.gemini', '--prompt', 'Is the NaN claim right?', '--max-cost', '0.5', '--json'], { env });
    expect(result.status, result.stderr).toBe(0);
    const written = json<{ message_id: string; envelope: CrossCheckMessage }>(result);
    expect(written.envelope).toMatchObject({ intent: 'cross_check', source_actor: 'aa.chatgpt', target_actor: 'aa.gemini', parent_message_id: consult });
    expect((await w.ledger.readFile(written.envelope.payload_ref))!.toString('utf8')).toBe('Is the NaN claim right?\n');
    const shown = json<{ consult: { challenges: Record<string, string> } }>(coo(['show', written.message_id, '--json'], { env }));
    expect(shown.consult.challenges).toEqual({ author: 'aa.chatgpt', ...written.envelope.challenge });
    // The ledger holding a cross-check verifies from its first commit, and the report reads it.
    await w.runner().runOnce();
    expect(coo(['verify', '--full'], { env }).status).toBe(0);
    const cited = coo(['cite', written.message_id], { env });
    expect(cited.status, cited.stderr).toBe(0);
    expect(cited.stdout).toContain(`| challenges | the answer of aa.chatgpt (\`${written.envelope.challenge.answer_hash}\`), receipt \`${written.envelope.challenge.receipt_ref}\` of \`${consult}\``);
    // Its evidence bundle holds the challenged answer under the hash the envelope pins, and verifies without the ledger.
    const bundle = join(w.dir, 'cross-check.tar');
    expect(coo(['cite', written.message_id, '--bundle', bundle], { env }).status).toBe(0);
    const checked = coo(['verify-bundle', bundle, '--json']);
    expect(checked.status, checked.stderr).toBe(0);
    const attested = coo(['attest', written.message_id], { env });
    expect(attested.status, attested.stderr).toBe(0);
    const statement = JSON.parse(Buffer.from((JSON.parse(attested.stdout) as { payload: string }).payload, 'base64').toString('utf8')) as { predicate: Record<string, unknown> };
    expect(statement.predicate['message']).toMatchObject({ intent: 'cross_check', source_actor: 'aa.chatgpt', target_actor: 'aa.gemini' });
    // The predicate keeps to its published JSON Schema.
    const schema = JSON.parse(readFileSync(join(import.meta.dirname, '..', '..', 'docs', 'attestation', 'agent-receipt.v0.schema.json'), 'utf8')) as object;
    const ajv = new Ajv2020.default({ strict: true, allErrors: true });
    ajv.validate(schema, statement.predicate);
    expect(ajv.errors ?? []).toEqual([]);
    expect(statement.predicate['challenges']).toEqual({ author: 'aa.chatgpt', message_id: consult, receipt_path: written.envelope.challenge.receipt_ref, answer_sha256: written.envelope.challenge.answer_hash.slice(7) });
    const report = coo(['report', '--html', join(w.dir, 'report.html')], { env });
    expect(report.status, report.stderr).toBe(0);
    const refused = coo(['cross-check', consult, '--to', 'aa.unknown'], { env });
    expect(refused.status).toBe(3);
    expect(refused.stderr).toMatch(/^coo: ACTOR_UNKNOWN: /m);
    expect(coo(['cross-check', 'msg_00000000000000000000000000', '--to', 'aa.claude'], { env }).stderr).toMatch(/^coo: MESSAGE_UNKNOWN: /m);
  });
});

describe('the policy', () => {
  it('cannot open an aa -> aa edge for any intent but cross_check, nor any aa -> ea edge', async () => {
    const w = await fresh();
    const state = await w.ledger.state();
    const policy = state.policy!.doc;
    const withEdge = (edge: ActorPolicy['edges'][number]): Promise<unknown> =>
      appendTrustVersion(w.ledger, { role: 'policy', document: { ...policy, version: undefined, edges: [...policy.edges, edge] } }, w.actors.ceo, new Date());
    expect(await codeOfAsync(() => withEdge({ from: 'aa.*', to: 'aa.*', intents: ['aa_consult'], requires: [] }))).toBe('POLICY_EDGE_FORBIDDEN');
    expect(await codeOfAsync(() => withEdge({ from: 'aa.*', to: 'aa.*', intents: ['cross_check', 'receipt_notice'], requires: [] }))).toBe('POLICY_EDGE_FORBIDDEN');
    expect(await codeOfAsync(() => withEdge({ from: 'aa.*', to: 'ea.*', intents: ['cross_check'], requires: [] }))).toBe('POLICY_EDGE_FORBIDDEN');
    expect((await w.ledger.state()).seq).toBe(state.seq);
  });
});
