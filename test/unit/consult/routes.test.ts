import { describe, expect, it } from 'vitest';
import { modelIdentity } from '../../../src/consult/providers/oracle-models.js';
import { planRoute } from '../../../src/consult/providers/routes.js';
import type { OracleEndpoints } from '../../../src/consult/providers/provider.js';
import { costUsd, planBudget } from '../../../src/lane/budget.js';
import { parseDocument } from '../../../src/schema/documents.js';
import type { AaTransportEntry } from '../../../src/schema/registry.js';
import { codeOf } from '../../helpers/codes.js';

const entry = (fields: Partial<AaTransportEntry>): AaTransportEntry => ({ kind: 'oracle', engine: 'api', model: 'gpt-5.5', provider_key_env: 'OPENAI_API_KEY', ...fields });
const none: OracleEndpoints = {};

describe('the route of a call to an advisory agent', () => {
  it('plans each provider with its one key, its endpoint variable or arguments, and its label', () => {
    expect(planRoute(entry({ route: 'openai' }), { openaiBaseUrl: 'http://127.0.0.1:9/v1' })).toMatchObject({ keyEnv: 'OPENAI_API_KEY', env: {}, args: ['--base-url', 'http://127.0.0.1:9/v1'], label: { provider: 'openai-compatible', offline: true }, fixedOutputTokens: null });
    expect(planRoute(entry({ model: 'claude-4.6-sonnet', provider_key_env: 'ANTHROPIC_API_KEY', route: 'anthropic' }), none)).toMatchObject({ keyEnv: 'ANTHROPIC_API_KEY', env: {}, args: [], label: { provider: 'anthropic', offline: false }, fixedOutputTokens: 2048 });
    expect(planRoute(entry({ model: 'claude-4.6-sonnet', provider_key_env: 'ANTHROPIC_API_KEY' }), { anthropic: 'http://api.anthropic.com:9/v1/messages', hosts: [{ name: 'api.anthropic.com', address: '127.0.0.1' }] })).toMatchObject({
      env: { ANTHROPIC_BASE_URL: 'http://api.anthropic.com:9/v1/messages' },
      label: { provider: 'anthropic', offline: true },
    });
    expect(planRoute(entry({ model: 'gemini-3.1-pro', provider_key_env: 'GEMINI_API_KEY' }), { google: 'http://127.0.0.1:9' })).toMatchObject({ keyEnv: 'GEMINI_API_KEY', env: { GOOGLE_GEMINI_BASE_URL: 'http://127.0.0.1:9' }, label: { provider: 'google', offline: true } });
    expect(planRoute(entry({ model: 'anthropic/claude-sonnet-4.5', provider_key_env: 'OPENROUTER_API_KEY', route: 'openrouter' }), none)).toMatchObject({ keyEnv: 'OPENROUTER_API_KEY', args: [], label: { provider: 'openrouter' } });
    expect(planRoute(entry({ model: 'llama-3.1-8b', route: 'openai_compatible', gateway: 'litellm' }), { gateways: { litellm: 'http://10.0.0.5:4000/v1' } })).toMatchObject({ keyEnv: 'OPENAI_API_KEY', args: ['--base-url', 'http://10.0.0.5:4000/v1', '--provider', 'openai'], label: { provider: 'gateway:litellm', offline: false } });
    expect(planRoute(entry({ model: 'claude-4.6-sonnet', provider_key_env: 'ANTHROPIC_API_KEY', route: 'openai_compatible', gateway: 'litellm' }), { gateways: { litellm: 'http://10.0.0.5:4000/v1' } })).toMatchObject({ args: ['--base-url', 'http://10.0.0.5:4000/v1'], fixedOutputTokens: null });
  });

  it.each([
    ['a gateway the runner does not know', entry({ model: 'llama-3.1-8b', route: 'openai_compatible', gateway: 'litellm' }), none, /gateway litellm is not configured here: give the runner --oracle-gateway litellm=URL/],
    ['an Anthropic endpoint on another host (Oracle would use its OpenAI adapter, the key as a Bearer token)', entry({ model: 'claude-4.6-sonnet', provider_key_env: 'ANTHROPIC_API_KEY' }), { anthropic: 'http://127.0.0.1:9/v1/messages' }, /not on api.anthropic.com/],
    ['an Anthropic endpoint that is not the Messages endpoint', entry({ model: 'claude-4.6-sonnet', provider_key_env: 'ANTHROPIC_API_KEY' }), { anthropic: 'https://api.anthropic.com/v1' }, /ending in \/v1\/messages/],
    ['an endpoint carrying credentials', entry({ model: 'gemini-3.1-pro', provider_key_env: 'GEMINI_API_KEY' }), { google: 'https://user:secret@example.com' }, /credentials/],
    ['a name Oracle maps to another model', entry({ model: 'claude-opus-4-7', provider_key_env: 'ANTHROPIC_API_KEY' }), none, /as claude-4.1-opus/],
    ['an unknown name with "pro" in it (Oracle makes it gpt-5.5-pro)', entry({ model: 'qwen3-coder-pro', route: 'openai_compatible', gateway: 'g' }), { gateways: { g: 'http://h/v1' } }, /as gpt-5.5-pro/],
    ['a gemini name Oracle folds into gemini-3-pro', entry({ model: 'gemini-2.5-flash', provider_key_env: 'GEMINI_API_KEY' }), none, /as gemini-3-pro/],
    ['a model of another provider than the route', entry({ model: 'gpt-5.5', provider_key_env: 'ANTHROPIC_API_KEY', route: 'anthropic' }), none, /sends gpt-5.5 to openai, not along the anthropic route/],
    ['a gateway key Oracle would not read', entry({ model: 'gemini-3.1-pro', provider_key_env: 'OPENAI_API_KEY', route: 'openai_compatible', gateway: 'g' }), { gateways: { g: 'http://h/v1' } }, /with GEMINI_API_KEY, not OPENAI_API_KEY/],
    ['an OpenRouter name through a gateway', entry({ model: 'anthropic/claude-sonnet-4.5', route: 'openai_compatible', gateway: 'g' }), { gateways: { g: 'http://h/v1' } }, /to openrouter/],
    ['xAI, which no route runs', entry({ model: 'grok-4.1', provider_key_env: 'XAI_API_KEY' }), none, /names no route/],
  ])('refuses %s', (_name, transport, endpoints, problem) => {
    const plan = planRoute(transport, endpoints);
    expect(typeof plan).toBe('string');
    expect(plan).toMatch(problem);
  });

  it('holds a registry entry to its route: the key the route hands Oracle, and a gateway for openai_compatible only', () => {
    const registry = (transport: Record<string, unknown>) => () =>
      parseDocument('actor_registry.v0', { schema_version: 'actor_registry.v0', version: 1, active_coo: 'coo.x', actors: [{ id: 'coo.x', class: 'orchestrator', keys: [] }, { id: 'aa.x', class: 'advisory_agent', keys: [], transport: { kind: 'oracle', engine: 'api', ...transport } }], revoked_keys: [] }, 'registry');
    expect(codeOf(registry({ model: 'claude-4.6-sonnet', provider_key_env: 'OPENAI_API_KEY', route: 'anthropic' }))).toBe('SCHEMA_INVALID');
    expect(codeOf(registry({ model: 'llama-3.1-8b', provider_key_env: 'OPENAI_API_KEY', route: 'openai_compatible' }))).toBe('SCHEMA_INVALID');
    expect(codeOf(registry({ model: 'gpt-5.5', provider_key_env: 'OPENAI_API_KEY', route: 'openai', gateway: 'g' }))).toBe('SCHEMA_INVALID');
    expect(codeOf(registry({ model: 'llama-3.1-8b', provider_key_env: 'OPENAI_API_KEY', route: 'openai_compatible', gateway: 'litellm' }))).toBe('no error');
    expect(codeOf(registry({ model: 'gemini-3.1-pro', provider_key_env: 'GEMINI_API_KEY' }))).toBe('no error');
  });
});

describe('a budget for a route that always asks for the same output', () => {
  const price = { input_usd_per_million: 3, output_usd_per_million: 15, max_output_tokens: 2048 };
  it('pays for the fixed output or blocks, and caps at it', () => {
    const worst = costUsd(1000, 2048, price);
    expect(planBudget({ price, inputTokens: 1000, messageMaxUsd: worst, correlationRemainingUsd: 10, dailyRemainingUsd: 10, fixedOutputTokens: 2048 })).toMatchObject({ ok: true, maxOutputTokens: 2048, worstCaseUsd: worst });
    expect(planBudget({ price, inputTokens: 1000, messageMaxUsd: worst - 0.0001, correlationRemainingUsd: 10, dailyRemainingUsd: 10, fixedOutputTokens: 2048 })).toMatchObject({ ok: false, blocker: 'budget_preflight' });
    // Without a fixed size the same budget runs with a smaller cap.
    expect(planBudget({ price, inputTokens: 1000, messageMaxUsd: worst - 0.0001, correlationRemainingUsd: 10, dailyRemainingUsd: 10 })).toMatchObject({ ok: true });
  });
});

describe('the model a registry model name reaches, as a panel and a cross-check tell models apart', () => {
  it.each([
    ['claude-4.6-sonnet', 'anthropic/claude-sonnet-4.6'],
    ['gemini-3.1-pro', 'google/gemini-3.1-pro-preview'],
    ['gemini-3.1-pro', 'google/gemini-3.1-pro'],
    ['gpt-5.5', 'openai/gpt-5.5'],
    ['gpt-5.5-pro', 'gpt-5.2-pro'],
    ['gpt-5.5-pro', 'gpt-5.1-pro'],
    ['claude-4.1-opus', 'anthropic/claude-opus-4.1'],
  ])('reads %s and %s as one model', (one, other) => {
    expect(modelIdentity(one)).toBe(modelIdentity(other));
  });

  it.each([
    ['gpt-5.5', 'gpt-5.5-pro'],
    ['gpt-5.2', 'gpt-5.2-instant'],
    ['gemini-3-pro', 'gemini-3.1-pro'],
    ['gemini-3.1-pro', 'gemini-3.1-flash-lite'],
    ['claude-4.6-sonnet', 'claude-4.1-opus'],
    // Dated snapshots are two models, as the validator read them before wire names: a panel of two stays valid on replay.
    ['gpt-4o-2024-05-13', 'gpt-4o-2024-08-06'],
    ['gpt-4o-2024-05-13', 'openai/gpt-4o-2024-08-06'],
    ['claude-3-5-sonnet-20240620', 'claude-3-5-sonnet-20241022'],
  ])('reads %s and %s as two models', (one, other) => {
    expect(modelIdentity(one)).not.toBe(modelIdentity(other));
  });
});
