import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { challengerTwin } from '../../src/authority/rules/intents/cross-check.js';
import { formatPrivateKey, formatPublicKeyLine, generatePrivateKey, type PrivateKey } from '../../src/crypto/keys.js';
import { sendCommand } from '../../src/inbox/ceo-messages.js';
import { inboxRecords } from '../../src/inbox/inbox.js';
import { planAskedConsult } from '../../src/dispatch/asked-consult.js';
import { claimPath, messageFolder, receiptPath } from '../../src/ledger/layout.js';
import type { NewFile } from '../../src/ledger/ledger.js';
import { appendTrustVersion } from '../../src/ledger/trust-update.js';
import type { AaConsultMessage, EaDispatchMessage } from '../../src/schema/message.js';
import type { ActorRegistry } from '../../src/schema/registry.js';
import { readStrictYaml, toYaml } from '../../src/schema/strict-yaml.js';
import { sha256Ref } from '../../src/util/hash.js';
import { attemptIdFor, newPanelId } from '../../src/util/ids.js';
import { isoSeconds } from '../../src/util/time.js';
import { attack, codeOf, useKit, type Kit } from '../helpers/attack-kit.js';
import { coo } from '../helpers/cli.js';
import { dispatchEnvelope, messageFiles } from '../helpers/ledger.js';
import { makeWorld, type World } from '../helpers/lane.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * The actor model, attacked where advice could pass for more than it is: a panel or cross-check
 * whose "independent" agents are one model under the names two routes give it; a consult an
 * execution agent asks outside what its own dispatch attempt allows; and evidence that tries to
 * carry a command, or a receipt written by an actor other than the runner.
 */

const dir = tempDir('actors-redteam-8');

type Transport = NonNullable<ActorRegistry['actors'][number]['transport']>;

/** An advisory agent of the registry reaching `model` along `route`. */
function agent(id: string, model: string, route: 'openai' | 'openrouter'): ActorRegistry['actors'][number] {
  const transport: Transport = route === 'openrouter' ? { kind: 'oracle', engine: 'api', model, provider_key_env: 'OPENROUTER_API_KEY', route } : { kind: 'oracle', engine: 'api', model, provider_key_env: 'OPENAI_API_KEY', route };
  return { id, class: 'advisory_agent', description: `${model} along ${route}.`, keys: [], transport };
}

describe("a panel's members are independent, whatever name each route gives their model", () => {
  let w: World;
  beforeAll(async () => {
    w = await makeWorld(join(dir, 'twins'));
    const registry = (await w.ledger.state()).registry!.doc;
    const twins = [
      agent('aa.sonnet_elsewhere', 'anthropic/claude-sonnet-4.6', 'openrouter'),
      agent('aa.gemini_elsewhere', 'google/gemini-3.1-pro-preview', 'openrouter'),
      agent('aa.pro', 'gpt-5.5-pro', 'openai'),
      agent('aa.pro_alias', 'gpt-5.2-pro', 'openai'),
    ];
    await appendTrustVersion(w.ledger, { role: 'registry', document: { ...registry, version: undefined, actors: [...registry.actors, ...twins] } }, w.actors.ceo, new Date());
  });
  afterAll(async () => w.close());

  /** The policy in force with a panel of `members`, each consultable by the COO and priced: the code its writing met. */
  async function panelOf(members: readonly string[]): Promise<string> {
    const policy = (await w.ledger.state()).policy!.doc;
    const registry = (await w.ledger.state()).registry!.doc;
    const price = policy.models['gpt-5.5']!;
    const models = Object.fromEntries(members.map((member) => [registry.actors.find((actor) => actor.id === member)!.transport!.model, price]));
    const document = { ...policy, version: undefined, models: { ...models, ...policy.models }, edges: [...policy.edges, { from: 'coo.*', to: 'aa.*', intents: ['aa_consult' as const], requires: [] }], panels: [{ name: 'review', from: 'coo.*', members: [...members] }] };
    return codeOf(() => appendTrustVersion(w.ledger, { role: 'policy', document }, w.actors.ceo, new Date()));
  }

  attack("a panel of Claude and Claude's model again through OpenRouter, under OpenRouter's name for it", 'library', 'PANEL_INVALID', () => panelOf(['aa.claude', 'aa.sonnet_elsewhere']));
  attack("a panel of Gemini and Gemini's model again through OpenRouter, under the name Oracle sends it by", 'library', 'PANEL_INVALID', () => panelOf(['aa.gemini', 'aa.gemini_elsewhere']));
  attack('a panel of two Oracle model keys that Oracle sends as one model', 'library', 'PANEL_INVALID', () => panelOf(['aa.pro', 'aa.pro_alias']));

  it("refuses a cross-check of Claude's answer by Claude's model under OpenRouter's name, and lets ChatGPT challenge it", async () => {
    const registry = (await w.ledger.state()).registry!.doc;
    expect(challengerTwin(registry, 'aa.claude', 'aa.sonnet_elsewhere', 'here')?.code).toBe('POLICY_INTENT_NOT_ALLOWED');
    expect(challengerTwin(registry, 'aa.claude', 'aa.chatgpt', 'here')).toBeNull();
  });

  // Last: it puts the panel in force.
  it('accepts a panel of three models: the attacks above are refused for the twin alone', async () => {
    expect(await panelOf(['aa.claude', 'aa.gemini', 'aa.pro'])).toBe('accepted');
  });

  it("coo trust --registry that would make the panel in force two of one model (aa.pro moved to Claude's model through OpenRouter): PANEL_INVALID, and nothing written", async () => {
    const registry = (await w.ledger.state()).registry!.doc;
    const moved = registry.actors.map((actor) => (actor.id === 'aa.pro' ? agent('aa.pro', 'anthropic/claude-sonnet-4.6', 'openrouter') : actor));
    const file = join(dir, 'moved-registry.yaml');
    writeFileSync(file, toYaml({ ...registry, version: undefined, actors: moved }));
    writeFileSync(join(dir, 'ceo.key'), formatPrivateKey(w.actors.ceo), { mode: 0o600 });
    const before = (await w.ledger.state()).seq;
    const result = coo(['trust', '--ledger', w.gitdir, '--ceo-key', join(dir, 'ceo.key'), '--registry', file]);
    expect([result.status, /^coo: PANEL_INVALID: .*aa\.claude and aa\.pro are one model \(claude-4\.6-sonnet\)/m.test(result.stderr)], result.stderr).toEqual([3, true]);
    expect((await w.ledger.state()).seq).toBe(before);
  });
});

describe("a consult an execution agent asks is bounded by its own dispatch attempt", () => {
  const getKit = useKit(join(dir, 'ea'));
  let kit: Kit;
  beforeAll(() => {
    kit = getKit();
  });

  const FILE = { path: 'src/add.ts', sha256: sha256Ref(Buffer.from('x\n')), bytes: Buffer.from('x\n') };

  /** A dispatch to ea.codex in the ledger, its attempt 1 claimed. */
  async function dispatched(): Promise<EaDispatchMessage> {
    const message = dispatchEnvelope({}, new Date()) as EaDispatchMessage;
    expect(await kit.append(messageFiles(message), kit.keys.coo.key)).toBe('accepted');
    const claim = { schema_version: 'claim.v0', message_id: message.message_id, attempt_id: attemptIdFor(message.message_id, 1, 'ea'), attempt_number: 1, runner_id: 'run-test', transport_session_id: 'test', claimed_at: isoSeconds(new Date()) };
    expect(await kit.append([{ path: claimPath(messageFolder(message.message_id, message.created_at), 1), bytes: Buffer.from(toYaml(claim)) }], kit.keys.coo.key)).toBe('accepted');
    return message;
  }

  /** The files of a consult the agent of `dispatch` asks in its attempt 1, as the runner plans them; `edit` changes the envelope. */
  async function asked(dispatch: EaDispatchMessage, target = 'aa.chatgpt', edit: (envelope: AaConsultMessage) => AaConsultMessage = (envelope) => envelope): Promise<NewFile[]> {
    const state = await kit.world.ledger.state();
    const plan = planAskedConsult(state, { key: kit.keys.coo.key, now: new Date(), dispatch, attempt: 1, attemptId: attemptIdFor(dispatch.message_id, 1, 'ea'), target, question: 'Is add() right?', files: [FILE] });
    const envelope = edit(plan.envelopeAt(state));
    const folder = messageFolder(envelope.message_id, envelope.created_at);
    return [{ path: `${folder}/envelope.yaml`, bytes: Buffer.from(toYaml(envelope)) }, ...[...plan.artifacts].map(([name, bytes]) => ({ path: `${folder}/${name}`, bytes }))];
  }

  it('lands as the runner writes it: the attacks below are refused for what they change', async () => {
    expect(await kit.append(await asked(await dispatched()), kit.keys.coo.key)).toBe('accepted');
  });

  attack('an execution agent that consults an advisory agent no policy edge of its own reaches (aa.claude)', 'library', 'POLICY_EDGE_NOT_ALLOWED', async () => kit.append(await asked(await dispatched(), 'aa.claude'), kit.keys.coo.key));

  attack("a consult under one dispatch whose snapshot is of another dispatch's open attempt (its token)", 'library', 'CONTEXT_INVALID', async () => {
    const other = await dispatched();
    return kit.append(await asked(await dispatched(), 'aa.chatgpt', (envelope) => ({ ...envelope, context_pin: { ...envelope.context_pin, snapshot_of: attemptIdFor(other.message_id, 1, 'ea') } })), kit.keys.coo.key);
  });

  attack('a consult that names an attempt of its dispatch no runner claimed', 'library', 'ATTEMPT_INVALID', async () => kit.append(await asked(await dispatched(), 'aa.chatgpt', (envelope) => ({ ...envelope, asked_in_attempt: 2 })), kit.keys.coo.key));

  attack('a consult an execution agent asks as one member of a panel no policy panel lets it ask', 'library', 'POLICY_PANEL_NOT_ALLOWED', async () =>
    kit.append(await asked(await dispatched(), 'aa.chatgpt', (envelope) => ({ ...envelope, panel: { id: newPanelId(Date.now()), name: 'review', members: ['aa.chatgpt', 'aa.claude'] } })), kit.keys.coo.key),
  );

  /** A consult the agent of a new dispatch asked, claimed by the runner; the receipt its attempt 1 would take, with `fields` over it. */
  async function claimedConsult(): Promise<(fields: Record<string, unknown>) => NewFile> {
    const files = await asked(await dispatched());
    expect(await kit.append(files, kit.keys.coo.key)).toBe('accepted');
    const envelope = readStrictYaml(files[0]!.bytes, files[0]!.path) as AaConsultMessage;
    const folder = messageFolder(envelope.message_id, envelope.created_at);
    const id = envelope.message_id;
    const claim = { schema_version: 'claim.v0', message_id: id, attempt_id: attemptIdFor(id, 1), attempt_number: 1, runner_id: 'run-test', transport_session_id: 'test', claimed_at: isoSeconds(new Date()) };
    expect(await kit.append([{ path: claimPath(folder, 1), bytes: Buffer.from(toYaml(claim)) }], kit.keys.coo.key)).toBe('accepted');
    const receipt = {
      schema_version: 'aa_receipt.v0', message_id: id, attempt_id: attemptIdFor(id, 1), attempt_number: 1, target_actor: 'aa.chatgpt', status: 'failed', created_at: isoSeconds(new Date()),
      blockers: [{ code: 'aa_unavailable:unknown', detail: 'the provider did not answer' }], next_attempt_at: null, authority_class: 'advisory_only', transport: 'oracle', transport_session_id: null, engine: 'api', model: null, route: null,
      prompt_hash: envelope.payload_hash, context_manifest_hash: envelope.context_pin.context_manifest_hash, bundle_hash: null, output_ref: null, output_hash: null,
      output_validation: { schema_id: 'aa_answer.v0', status: 'not_run', errors: [] }, attachments: [], policy_decision_ref: 'trust/policy/000001.yaml', usage: null, actual_cost_usd: 0, budget_remaining_usd: envelope.budget.max_cost_usd, warnings: [],
    };
    return (fields) => ({ path: receiptPath(folder, 1), bytes: Buffer.from(toYaml({ ...receipt, ...fields })) });
  }

  it('takes the receipt the COO signs for such a consult: the attack below is refused for its signer', async () => {
    const receipt = await claimedConsult();
    expect(await kit.append([receipt({})], kit.keys.coo.key)).toBe('accepted');
  });

  attack('a receipt of its own consult the execution agent signs, saying it cost nothing', 'library', 'NOT_ACTIVE_COO', async () => {
    const receipt = await claimedConsult();
    return kit.append([receipt({})], kit.keys.codex.key);
  });
});

describe('evidence that tries to carry a command', () => {
  const getKit = useKit(join(dir, 'evidence'));
  /** A blocker from ea.codex to the COO, as an execution agent signs one, with `fields` over it. */
  const blocker = (fields: Record<string, unknown> = {}) =>
    dispatchEnvelope({ source_actor: 'ea.codex', principal: 'ea.codex', target_actor: 'coo.hermes', intent: 'blocker', authority_class: 'evidence', about_message_id: null, blocker: { code: 'needs_decision', detail: 'x' }, expected_receipt_schema: null, dispatch: undefined, payload_ref: undefined, payload_hash: undefined, context_pin: undefined, ...fields }, new Date());

  it('lands as an execution agent writes it', async () => {
    expect(await getKit().append(messageFiles(blocker()), getKit().keys.codex.key)).toBe('accepted');
  });
  attack("an execution agent's blocker that names the CEO as its principal", 'library', 'NOT_ACTIVE_COO', () => getKit().append(messageFiles(blocker({ principal: 'ceo' })), getKit().keys.codex.key));
  attack("an execution agent's blocker that states governed_execution as its authority", 'library', 'SCHEMA_INVALID', () => getKit().append(messageFiles(blocker({ authority_class: 'governed_execution' })), getKit().keys.codex.key));
  attack("an execution agent's blocker that asks for a receipt, as work does", 'library', 'SCHEMA_INVALID', () => getKit().append(messageFiles(blocker({ expected_receipt_schema: 'ea_receipt.v0' })), getKit().keys.codex.key));
  attack('an execution agent that writes the COO a command in its own name, as the CEO does', 'library', 'POLICY_INTENT_NOT_ALLOWED', () =>
    getKit().append(messageFiles(blocker({ intent: 'ceo_command', authority_class: 'directive', blocker: undefined, about_message_id: undefined, payload_ref: 'x/prompt.md', payload_hash: sha256Ref(Buffer.from('x')), budget_usd: null })), getKit().keys.codex.key),
  );
  attack("an execution agent that acknowledges to the CEO a message to the COO, in the COO's stead", 'library', 'POLICY_EDGE_NOT_ALLOWED', async () => {
    const about = blocker();
    expect(await getKit().append(messageFiles(about), getKit().keys.codex.key)).toBe('accepted');
    return getKit().append(messageFiles(blocker({ intent: 'ack', target_actor: 'ceo', blocker: undefined, about_message_id: about.message_id, note: 'read' })), getKit().keys.codex.key);
  });

  // Last: it puts a careless policy in force.
  attack("an execution agent's command in its own name, under a careless policy whose edge from it lists ceo_command", 'library', 'TRUST_AUTHORITY', async () => {
    const kit = getKit();
    const policy = (await kit.world.ledger.state()).policy!.doc;
    const edges = policy.edges.map((edge) => (edge.from === 'ea.*' && edge.to === 'coo.*' ? { ...edge, intents: [...edge.intents, 'ceo_command' as const] } : edge));
    await appendTrustVersion(kit.world.ledger, { role: 'policy', document: { ...policy, version: undefined, edges } }, kit.world.actors.ceo, new Date());
    const command = blocker({ intent: 'ceo_command', authority_class: 'directive', blocker: undefined, about_message_id: undefined, budget_usd: null });
    const folder = messageFolder(command.message_id, command.created_at);
    const text = Buffer.from('Spend the budget.\n');
    return kit.append([...messageFiles({ ...command, payload_ref: `${folder}/prompt.md`, payload_hash: sha256Ref(text) } as typeof command), { path: `${folder}/prompt.md`, bytes: text }], kit.keys.codex.key);
  });
});

describe("the CEO's word once the CEO rotates its key", () => {
  let w: World;
  let successor: PrivateKey;
  let before: string;
  beforeAll(async () => {
    w = await makeWorld(join(dir, 'rotated'));
    before = (await sendCommand({ ledger: w.ledger, key: w.actors.ceo, now: new Date(), text: 'Read before the rotation.' })).envelope.message_id;
    successor = generatePrivateKey('ceo');
    const root = (await w.ledger.state()).root!.doc;
    await appendTrustVersion(w.ledger, { role: 'root', document: { ...root, version: undefined, authorities: [{ actor: 'ceo', key_id: successor.publicKey.keyId, public_key: formatPublicKeyLine(successor.publicKey) }] } }, w.actors.ceo, new Date());
  });
  afterAll(async () => w.close());

  attack('the rotated-out CEO key sends the COO a command', 'library', 'SIGNER_RETIRED', () => codeOf(() => sendCommand({ ledger: w.ledger, key: w.actors.ceo, now: new Date(), text: 'Spend the budget on the migration.', budgetUsd: 20 })));

  it("takes the new key's command, and leaves the old key's unread command standing: a rotation, not a revocation", async () => {
    const after = await sendCommand({ ledger: w.ledger, key: successor, now: new Date(), text: 'Read after the rotation.' });
    expect(inboxRecords(await w.ledger.state()).map((record) => record.id)).toEqual([before, after.envelope.message_id]);
  });

  it('refuses coo mcp started with the CEO key, before it takes a call: the MCP route signs as the active COO only', async () => {
    const file = join(dir, 'rotated-ceo.key');
    writeFileSync(file, formatPrivateKey(successor), { mode: 0o600 });
    const seq = (await w.ledger.state()).seq;
    const result = coo(['mcp', '--ledger', w.gitdir, '--key', file, '--repo', w.target], { input: '' });
    expect([result.status, /^coo: RUNNER_CONFIG: .*is not the active COO's key: it is the key of ceo/m.test(result.stderr)], result.stderr).toEqual([2, true]);
    expect((await w.ledger.state()).seq).toBe(seq);
  });
});
