/**
 * Which provider Oracle (the pinned 0.21.2) sends a `--model` name to, and under which of its model
 * keys. Pure: a mirror of `resolveApiModel` (dist/src/cli/options.js) and `MODEL_CONFIGS`
 * (dist/src/oracle/config.js) for the names that matter here; the contract test holds it to the
 * real functions on a table of names. The lane checks a registry entry with it: a name that Oracle
 * would route to another provider than the entry's route (any unknown name with "pro" in it becomes
 * gpt-5.5-pro; any gemini name but four becomes gemini-3-pro) is a configuration error, never a call.
 */

export type OracleFamily = 'openai' | 'anthropic' | 'google' | 'xai' | 'openrouter' | 'other';

/** Oracle's own model keys, by provider, with the id each sends on the wire when it differs. */
export const ORACLE_MODELS: Readonly<Record<string, { readonly family: OracleFamily; readonly wire?: string }>> = {
  'gpt-6-astra': { family: 'openai' },
  'gpt-5.6': { family: 'openai' },
  'gpt-5.6-sol': { family: 'openai' },
  'gpt-5.5-pro': { family: 'openai' },
  'gpt-5.5': { family: 'openai' },
  'gpt-5.1-pro': { family: 'openai', wire: 'gpt-5.5-pro' },
  'gpt-5-pro': { family: 'openai' },
  'gpt-5.1': { family: 'openai' },
  'gpt-5.1-codex': { family: 'openai' },
  'gpt-5.4': { family: 'openai' },
  'gpt-5.4-pro': { family: 'openai' },
  'gpt-5.2': { family: 'openai' },
  'gpt-5.2-instant': { family: 'openai', wire: 'gpt-5.2-chat-latest' },
  'gpt-5.2-pro': { family: 'openai', wire: 'gpt-5.5-pro' },
  'gemini-3.1-pro': { family: 'google', wire: 'gemini-3.1-pro-preview' },
  'gemini-3.5-flash': { family: 'google' },
  'gemini-3.1-flash-lite': { family: 'google' },
  'gemini-3-pro': { family: 'google', wire: 'gemini-3-pro-preview' },
  'claude-4.6-sonnet': { family: 'anthropic', wire: 'claude-sonnet-4-6' },
  'claude-4.1-opus': { family: 'anthropic', wire: 'claude-opus-4-1' },
  'grok-4.1': { family: 'xai', wire: 'grok-4-1-fast-reasoning' },
};

export interface ResolvedModel {
  /** The name Oracle resolves `--model` to: one of its keys, or the name itself when it passes it through. */
  readonly key: string;
  readonly family: OracleFamily;
  /** True when the key is not the name given: Oracle maps it by a rule (an alias, or a catch-all). */
  readonly remapped: boolean;
}

/** Names Oracle resolves by rules this mirror does not follow (GPT-6 and GPT-5.6 aliases, Deep Think): null. */
const UNMIRRORED = /gpt[\s._-]*6|(^|[^0-9.])5[._-]6|deep[\s_-]*think|gemini.*deep/;

function familyOf(key: string): OracleFamily {
  const known = ORACLE_MODELS[key];
  if (known !== undefined) return known.family;
  if (key.includes('/')) return 'openrouter';
  // Oracle routes a passed-through name by its prefix (providerRouting.js): claude-*, gemini-*, grok-* to their providers.
  if (key.startsWith('claude')) return 'anthropic';
  if (key.startsWith('gemini')) return 'google';
  if (key.startsWith('grok')) return 'xai';
  if (key.startsWith('gpt-')) return 'openai';
  return 'other';
}

/** What Oracle makes of `--model name`, or null for a name it resolves by a rule not mirrored here. */
export function resolveOracleModel(name: string): ResolvedModel | null {
  const n = name.trim().toLowerCase();
  const resolved = (key: string): ResolvedModel => ({ key, family: familyOf(key), remapped: key !== n });
  if (n in ORACLE_MODELS) return resolved(n);
  if (n.includes('/')) return resolved(n);
  if (UNMIRRORED.test(n)) return null;
  if (n.includes('grok')) return resolved('grok-4.1');
  if (n.includes('claude') && n.includes('sonnet')) return resolved('claude-4.6-sonnet');
  if (n.includes('claude') && n.includes('opus')) return resolved('claude-4.1-opus');
  if (n.includes('5.5') && n.includes('pro')) return resolved('gpt-5.5-pro');
  if (n.includes('5.5')) return resolved('gpt-5.5');
  if (n.includes('5.4') && n.includes('pro')) return resolved('gpt-5.4-pro');
  if (n.includes('5.4')) return resolved('gpt-5.4');
  if (n === 'claude' || n === 'sonnet' || /(^|\b)sonnet(\b|$)/.test(n)) return resolved('claude-4.6-sonnet');
  if (n === 'opus' || n === 'claude-4.1') return resolved('claude-4.1-opus');
  if (n.includes('5.0') || n === 'gpt-5-pro' || n === 'gpt-5') return resolved('gpt-5-pro');
  if (n.includes('5-pro') && !n.includes('5.1')) return resolved('gpt-5-pro');
  if (n.includes('5.2') && n.includes('pro')) return resolved('gpt-5.2-pro');
  if (n.includes('5.1') && n.includes('pro')) return resolved('gpt-5.1-pro');
  if (n.includes('codex')) return n.includes('max') ? null : resolved('gpt-5.1-codex');
  if (n.includes('gemini')) {
    if (n.includes('3.5') && n.includes('flash')) return resolved('gemini-3.5-flash');
    if ((n.includes('3.1') || n.includes('3_1')) && n.includes('flash') && n.includes('lite')) return resolved('gemini-3.1-flash-lite');
    if (n.includes('3.1') || n.includes('3_1')) return resolved('gemini-3.1-pro');
    return resolved('gemini-3-pro');
  }
  if (n.includes('pro')) return resolved('gpt-5.5-pro');
  return resolved(n);
}

/**
 * The model a registry's model name reaches, as one name whatever route or key reaches it: the id
 * Oracle sends on the wire for one of its keys (gpt-5.2-pro goes as gpt-5.5-pro, claude-4.6-sonnet
 * as claude-sonnet-4-6), without an OpenRouter vendor, in lower case, with dots read as dashes
 * (OpenRouter's anthropic/claude-sonnet-4.6 is Anthropic's claude-sonnet-4-6) and no `-preview` or
 * `-latest` at its end (names for the one model a provider serves under that name). A dated snapshot
 * (gpt-4o-2024-05-13 beside gpt-4o-2024-08-06) keeps its date: two snapshots are two models, as
 * they were before this rule read wire names, so a panel the validator once accepted stays valid on
 * replay. Two names with one identity are one model: a panel's members and a cross-check's author
 * and challenger are told apart by it (authority/rules/panel.ts sameModel).
 */
export function modelIdentity(name: string): string {
  const n = name.trim().toLowerCase();
  const wire = ORACLE_MODELS[n]?.wire ?? n;
  return wire
    .split('/')
    .pop()!
    .replace(/\./g, '-')
    .replace(/(-(preview|latest))+$/, '');
}
