import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { challengerTwin } from '../../src/authority/rules/intents/cross-check.js';
import { appendTrustVersion } from '../../src/ledger/trust-update.js';
import type { ActorRegistry } from '../../src/schema/registry.js';
import { attack, codeOf } from '../helpers/attack-kit.js';
import { makeWorld, type World } from '../helpers/lane.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * The actor model, attacked where advice could pass for more than it is: a panel or cross-check
 * whose "independent" agents are one model under the names two routes give it.
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
});
