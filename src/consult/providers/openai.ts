import { endpointProblem, isOfflineUrl, type OracleProvider } from './provider.js';

/**
 * OpenAI (ChatGPT): `gpt-*` models with OPENAI_API_KEY, on the provider's own Responses API, or on
 * an OpenAI-compatible base URL the runner names (Oracle then speaks Chat Completions), or on Azure
 * OpenAI (Oracle's Responses API path; its key is AZURE_OPENAI_API_KEY or OPENAI_API_KEY).
 */
export const openai: OracleProvider = {
  route: 'openai',
  plan(entry, endpoints) {
    const url = endpoints.openaiBaseUrl ?? endpoints.azure?.endpoint;
    if (url !== undefined) {
      const problem = endpointProblem(url, 'the OpenAI endpoint');
      if (problem !== null) return problem;
    }
    return {
      route: 'openai',
      keyEnv: entry.keyEnv,
      env: {},
      args: [
        ...(endpoints.openaiBaseUrl === undefined ? [] : ['--base-url', endpoints.openaiBaseUrl]),
        ...(endpoints.azure === undefined ? [] : ['--azure-endpoint', endpoints.azure.endpoint, '--azure-deployment', endpoints.azure.deployment]),
      ],
      label: {
        provider: endpoints.azure !== undefined ? 'azure' : endpoints.openaiBaseUrl !== undefined ? 'openai-compatible' : 'provider-default',
        offline: isOfflineUrl(url, endpoints.hosts),
      },
      fixedOutputTokens: null,
      endpoint: url ?? null,
    };
  },
};
