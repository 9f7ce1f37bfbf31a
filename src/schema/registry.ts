import { z } from 'zod';
import { actorClass, actorId, keyId, oracleModelName, publicKeyLine, shortText, version } from './common.js';

export const REGISTRY_SCHEMA = 'actor_registry.v0';

export const actorKey = z.strictObject({ key_id: keyId, public_key: publicKeyLine });

/**
 * Which API Oracle calls for an advisory agent: a provider's own (openai, anthropic, google),
 * OpenRouter, or an OpenAI-compatible gateway the runner names (LiteLLM, vLLM).
 */
export const ORACLE_ROUTES = ['openai', 'anthropic', 'google', 'openrouter', 'openai_compatible'] as const;
export type OracleRoute = (typeof ORACLE_ROUTES)[number];

/** The one key each route with a fixed provider hands Oracle (a gateway's is its model family's). */
export const ROUTE_KEYS: Readonly<Record<Exclude<(typeof ORACLE_ROUTES)[number], 'openai_compatible'>, readonly string[]>> = {
  openai: ['OPENAI_API_KEY', 'AZURE_OPENAI_API_KEY'],
  anthropic: ['ANTHROPIC_API_KEY'],
  google: ['GEMINI_API_KEY'],
  openrouter: ['OPENROUTER_API_KEY'],
};

/** The provider keys a route or an executor is handed, by their variables' names. */
export const PROVIDER_KEY_ENVS = ['OPENAI_API_KEY', 'AZURE_OPENAI_API_KEY', 'GEMINI_API_KEY', 'ANTHROPIC_API_KEY', 'XAI_API_KEY', 'OPENROUTER_API_KEY'] as const;

/** How the runner reaches an advisory agent: Oracle's API engine, one model, one route, one provider key. */
export const aaTransport = z
  .strictObject({
    kind: z.literal('oracle'),
    engine: z.literal('api', { message: 'only engine "api" is allowed: the browser engine is out of the first slice' }),
    model: oracleModelName,
    provider_key_env: z.enum(PROVIDER_KEY_ENVS),
    /** Absent in entries written before routes: the route of the provider whose key it names (routeOf). */
    route: z.enum(ORACLE_ROUTES).optional(),
    /** An openai_compatible route's gateway, by name: the runner says where it is (`--oracle-gateway NAME=URL`). */
    gateway: z.string().regex(/^[a-z][a-z0-9_-]{0,31}$/, 'a gateway name such as litellm').optional(),
  })
  .superRefine((transport, ctx) => {
    if ((transport.route === 'openai_compatible') !== (transport.gateway !== undefined)) {
      ctx.addIssue({ code: 'custom', path: ['gateway'], message: 'an openai_compatible route names its gateway, and only it does' });
    }
    const keys = transport.route === undefined || transport.route === 'openai_compatible' ? null : ROUTE_KEYS[transport.route];
    if (keys !== null && !keys.includes(transport.provider_key_env)) {
      ctx.addIssue({ code: 'custom', path: ['provider_key_env'], message: `the ${transport.route} route hands Oracle ${keys.join(' or ')}` });
    }
    if (transport.route === 'openai_compatible' && !['OPENAI_API_KEY', 'ANTHROPIC_API_KEY', 'GEMINI_API_KEY'].includes(transport.provider_key_env)) {
      ctx.addIssue({ code: 'custom', path: ['provider_key_env'], message: 'through a gateway Oracle sends OPENAI_API_KEY, ANTHROPIC_API_KEY or GEMINI_API_KEY, as the model family says' });
    }
  });
export type AaTransportEntry = z.infer<typeof aaTransport>;

/** The route an entry names, or for an entry written before routes, that of the provider whose key it names; null for none coo runs. */
export function routeOf(transport: AaTransportEntry): OracleRoute | null {
  if (transport.route !== undefined) return transport.route;
  switch (transport.provider_key_env) {
    case 'OPENAI_API_KEY':
    case 'AZURE_OPENAI_API_KEY':
      return 'openai';
    case 'ANTHROPIC_API_KEY':
      return 'anthropic';
    case 'GEMINI_API_KEY':
      return 'google';
    case 'OPENROUTER_API_KEY':
      return 'openrouter';
    case 'XAI_API_KEY':
      return null;
  }
}

/** How the runner starts an execution agent: the CLI, the model it runs and the one provider key it gets. */
export const eaExecutor = z.strictObject({
  kind: z.enum(['codex', 'claude_code']),
  model: z.string().regex(/^[a-z0-9][a-z0-9.-]{0,60}$/, 'a model key the policy prices, such as gpt-5.5'),
  provider_key_env: z.enum(['OPENAI_API_KEY', 'ANTHROPIC_API_KEY']),
});

export const actor = z.strictObject({
  id: actorId,
  class: actorClass,
  description: shortText.optional(),
  keys: z.array(actorKey).max(16),
  transport: aaTransport.optional(),
  /** An execution agent the runner can dispatch to; without it, dispatches to the actor are refused. */
  executor: eaExecutor.optional(),
});

/** actor_registry.v0: who exists, in which class, with which keys, and which actor is the active COO. */
export const actorRegistry = z
  .strictObject({
    schema_version: z.literal(REGISTRY_SCHEMA),
    version,
    active_coo: actorId,
    actors: z.array(actor).min(1).max(500),
    revoked_keys: z.array(z.strictObject({ key_id: keyId, reason: shortText.min(1) })).max(1000),
  })
  .superRefine((registry, ctx) => {
    const ids = new Set<string>();
    const keys = new Map<string, string>();
    registry.actors.forEach((entry, index) => {
      if (ids.has(entry.id)) ctx.addIssue({ code: 'custom', path: ['actors', index, 'id'], message: `actor ${entry.id} is listed twice` });
      ids.add(entry.id);
      entry.keys.forEach((key, keyIndex) => {
        const owner = keys.get(key.key_id);
        if (owner !== undefined) {
          ctx.addIssue({ code: 'custom', path: ['actors', index, 'keys', keyIndex], message: `key ${key.key_id} already belongs to ${owner}` });
        }
        keys.set(key.key_id, entry.id);
      });
      if (entry.class === 'advisory_agent' && entry.transport === undefined) {
        ctx.addIssue({ code: 'custom', path: ['actors', index, 'transport'], message: 'an advisory agent needs a transport' });
      }
      if (entry.class !== 'advisory_agent' && entry.transport !== undefined) {
        ctx.addIssue({ code: 'custom', path: ['actors', index, 'transport'], message: 'only advisory agents have a transport' });
      }
      if (entry.class !== 'execution_agent' && entry.executor !== undefined) {
        ctx.addIssue({ code: 'custom', path: ['actors', index, 'executor'], message: 'only execution agents have an executor' });
      }
    });
    const coo = registry.actors.find((entry) => entry.id === registry.active_coo);
    if (coo === undefined || coo.class !== 'orchestrator') {
      ctx.addIssue({ code: 'custom', path: ['active_coo'], message: 'active_coo must name an orchestrator in this registry' });
    }
    registry.revoked_keys.forEach((revoked, index) => {
      if (keys.has(revoked.key_id)) {
        ctx.addIssue({ code: 'custom', path: ['revoked_keys', index], message: `revoked key ${revoked.key_id} is still given to ${keys.get(revoked.key_id)}` });
      }
    });
  });
export type ActorRegistry = z.infer<typeof actorRegistry>;
export type Actor = z.infer<typeof actor>;
