import { endpointProblem, isOfflineUrl, type OracleProvider } from './provider.js';

/**
 * OpenRouter: model names with a `/` (`anthropic/claude-sonnet-4.5`) and OPENROUTER_API_KEY, on
 * Chat Completions. Before the call Oracle fetches OpenRouter's catalog (https://openrouter.ai/api/v1/models,
 * with the key) and prices the call from it. Oracle also hands a Claude or Gemini call to OpenRouter
 * when that model's own key is missing and OPENROUTER_API_KEY is set: the lane gives Oracle one key
 * only, so that never happens on another route.
 */
export const openrouter: OracleProvider = {
  route: 'openrouter',
  plan(entry, endpoints) {
    const url = endpoints.openrouter;
    if (url !== undefined) {
      const problem = endpointProblem(url, 'the OpenRouter endpoint');
      if (problem !== null) return problem;
    }
    return {
      route: 'openrouter',
      keyEnv: entry.keyEnv,
      env: {},
      args: url === undefined ? [] : ['--base-url', url],
      label: { provider: 'openrouter', offline: isOfflineUrl(url, endpoints.hosts) },
      fixedOutputTokens: null,
      endpoint: url ?? null,
    };
  },
};
