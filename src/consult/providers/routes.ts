import { routeOf, type AaTransportEntry } from '../../schema/registry.js';
import type { BlockerCode } from '../../schema/receipt.js';
import { anthropic } from './anthropic.js';
import { gateway } from './gateway.js';
import { google } from './google.js';
import { openai } from './openai.js';
import { openrouter } from './openrouter.js';
import { ORACLE_MODELS, resolveOracleModel, type OracleFamily } from './oracle-models.js';
import type { OracleEndpoints, OracleProvider, OracleRouteName, RoutePlan } from './provider.js';

/** Every route a registry entry can name, by name. Pure. */
export const PROVIDERS: { readonly [R in OracleRouteName]: OracleProvider } = {
  openai,
  anthropic,
  google,
  openrouter,
  openai_compatible: gateway,
};

/** The model families a route's calls go to (an openai_compatible gateway takes any but OpenRouter's and xAI's). */
const FAMILIES: { readonly [R in OracleRouteName]: readonly OracleFamily[] } = {
  openai: ['openai'],
  anthropic: ['anthropic'],
  google: ['google'],
  openrouter: ['openrouter'],
  openai_compatible: ['openai', 'anthropic', 'google', 'other'],
};

/** The key variable Oracle reads for a model of `family` off its provider's own route (providerRoutePlan.js getKeyForRoute). */
const GATEWAY_KEYS: Readonly<Partial<Record<OracleFamily, string>>> = { openai: 'OPENAI_API_KEY', anthropic: 'ANTHROPIC_API_KEY', google: 'GEMINI_API_KEY', other: 'OPENAI_API_KEY' };

/**
 * The plan of a call to the advisory agent a registry entry describes, under the runner's endpoints,
 * or why it cannot be made here: the entry names no route coo supports, a model Oracle would send to
 * another provider than the route (or under another name), a key Oracle would not read, or the
 * runner lacks the route's endpoint.
 */
export function planRoute(entry: AaTransportEntry, endpoints: OracleEndpoints): RoutePlan | string {
  const route = routeOf(entry);
  if (route === null) return `${entry.provider_key_env} names no route coo runs (give the entry a route)`;
  const resolved = resolveOracleModel(entry.model);
  if (resolved === null) return `Oracle resolves the model name ${entry.model} by a rule coo does not follow: name one of Oracle's model keys (${Object.keys(ORACLE_MODELS).join(', ')})`;
  if (resolved.remapped) return `Oracle would call ${entry.model} as ${resolved.key}: name ${resolved.key} in the registry, or a name Oracle passes through unchanged`;
  if (!FAMILIES[route].includes(resolved.family)) return `Oracle sends ${entry.model} to ${resolved.family === 'other' ? 'no provider of its own' : resolved.family}, not along the ${route} route the registry names`;
  if (route === 'openai_compatible' && entry.provider_key_env !== GATEWAY_KEYS[resolved.family]) {
    return `through a gateway Oracle sends ${entry.model} with ${GATEWAY_KEYS[resolved.family]}, not ${entry.provider_key_env}`;
  }
  return PROVIDERS[route].plan({ model: entry.model, keyEnv: entry.provider_key_env, ...(entry.gateway === undefined ? {} : { gateway: entry.gateway }) }, endpoints);
}

/** What a route's provider reads in an error text, where it words things its own way. */
export function classifyFor(route: OracleRouteName | null): (text: string) => BlockerCode | null {
  const provider = route === null ? undefined : PROVIDERS[route];
  return (text) => provider?.classify?.(text) ?? null;
}

/**
 * The output tokens a route's provider may have billed for an attempt beyond what Oracle's usage
 * record counts, at most: the attempt's cap on a route whose record leaves output out, else null.
 */
export function uncountedOutputCap(route: OracleRouteName | null, maxOutputTokens: number): number | null {
  return route !== null && PROVIDERS[route].usageOmitsOutput === true ? maxOutputTokens : null;
}
