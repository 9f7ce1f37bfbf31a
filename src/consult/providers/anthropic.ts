import type { BlockerCode } from '../../schema/receipt.js';
import { displayUrl } from '../../util/display-url.js';
import { endpointProblem, isOfflineUrl, type OracleProvider } from './provider.js';

/**
 * Anthropic (Claude) through Oracle's own Claude client: one non-streamed POST to the Messages API
 * with `x-api-key` (ANTHROPIC_API_KEY) and `anthropic-version: 2023-06-01`, no retries.
 *
 * - Oracle takes ANTHROPIC_BASE_URL as the full endpoint (…/v1/messages), and uses its Claude client
 *   only when the host is api.anthropic.com: any other host goes through its OpenAI adapter, with
 *   the Claude key as a Bearer token. So an override must keep that host (a gateway is an
 *   openai_compatible route), and an offline model is reached by pinning the host to a loopback
 *   address inside the sandbox.
 * - It sends `max_tokens: 2048` whatever `--max-output` says: the budget must pay for 2048, and an
 *   answer that reports 2048 output tokens was cut (Oracle counts it as completed).
 * - Errors come back as the provider's message alone (no status, transport reason `unknown`).
 */
export const ANTHROPIC_HOST = 'api.anthropic.com';
export const CLAUDE_MAX_TOKENS = 2048;

export const anthropic: OracleProvider = {
  route: 'anthropic',
  plan(entry, endpoints) {
    const url = endpoints.anthropic;
    if (url !== undefined) {
      const problem = endpointProblem(url, 'the Anthropic endpoint');
      if (problem !== null) return problem;
      if (new URL(url).hostname !== ANTHROPIC_HOST) {
        return `the Anthropic endpoint ${displayUrl(url)} is not on ${ANTHROPIC_HOST}: Oracle would send the Claude key to it as a Bearer token through its OpenAI adapter; name an openai_compatible route for a gateway, or pin ${ANTHROPIC_HOST} to an address (--oracle-host)`;
      }
      if (!new URL(url).pathname.endsWith('/v1/messages')) return `the Anthropic endpoint ${displayUrl(url)} must be the full Messages endpoint, ending in /v1/messages: Oracle posts to it unchanged`;
    }
    return {
      route: 'anthropic',
      keyEnv: entry.keyEnv,
      env: url === undefined ? {} : { ANTHROPIC_BASE_URL: url },
      args: [],
      label: { provider: 'anthropic', offline: isOfflineUrl(url, endpoints.hosts) },
      fixedOutputTokens: CLAUDE_MAX_TOKENS,
      endpoint: url ?? null,
    };
  },
  classify(text): BlockerCode | null {
    // Anthropic's billing error is a 400 whose text says so; its overload (529) is transient like a 5xx.
    if (/credit balance is too low|plans & billing/i.test(text)) return 'aa_unavailable:quota';
    if (/rate_limit_error|exceeded your per-minute rate limit/i.test(text)) return 'aa_unavailable:rate_limited';
    if (/authentication_error|invalid x-api-key/i.test(text)) return 'aa_unavailable:auth';
    return null;
  },
};
