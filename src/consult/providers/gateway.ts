import { endpointProblem, isOfflineUrl, type OracleProvider } from './provider.js';

/**
 * An OpenAI-compatible gateway (LiteLLM, vLLM, Ollama): Oracle's Chat Completions adapter on the
 * gateway's base URL (`--base-url`), with the key of the model's family as a Bearer token
 * (OPENAI_API_KEY for gpt-* and for names of no known family, with `--provider openai`;
 * ANTHROPIC_API_KEY for claude-*; GEMINI_API_KEY for gemini-*). The registry entry names the
 * gateway; the runner says where it is (`--oracle-gateway NAME=URL`). Oracle lower-cases the model
 * name on the wire and never asks a streaming gateway for usage, so a gateway that sends none is
 * priced by the lane's own estimate.
 */
export const gateway: OracleProvider = {
  route: 'openai_compatible',
  plan(entry, endpoints) {
    const name = entry.gateway ?? '';
    const url = endpoints.gateways?.[name];
    if (url === undefined) return `the route's gateway ${name} is not configured here: give the runner --oracle-gateway ${name}=URL`;
    const problem = endpointProblem(url, `gateway ${name}`);
    if (problem !== null) return problem;
    return {
      route: 'openai_compatible',
      keyEnv: entry.keyEnv,
      env: {},
      args: ['--base-url', url, ...(entry.keyEnv === 'OPENAI_API_KEY' ? ['--provider', 'openai'] : [])],
      label: { provider: `gateway:${name}`, offline: isOfflineUrl(url, endpoints.hosts) },
      fixedOutputTokens: null,
      endpoint: url,
    };
  },
};
