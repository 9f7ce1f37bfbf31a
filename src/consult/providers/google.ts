import type { BlockerCode } from '../../schema/receipt.js';
import { endpointProblem, isOfflineUrl, type OracleProvider } from './provider.js';

/**
 * Google (Gemini) through Oracle's client, the real @google/genai SDK: a streamed
 * `models/M:streamGenerateContent?alt=sse` with `x-goog-api-key` (GEMINI_API_KEY), no retries, and no
 * HTTP timeout (the lane's kill timer is the bound). Oracle passes the SDK no base URL; the SDK
 * reads GOOGLE_GEMINI_BASE_URL itself, which points the real Oracle and the real SDK at another
 * endpoint (an offline model) with nothing else changed. `--max-output` becomes
 * `generationConfig.maxOutputTokens`. Oracle's usage leaves out `thoughtsTokenCount`, which Google
 * bills as output and counts within `maxOutputTokens`: the receipt charges the whole cap.
 */
export const google: OracleProvider = {
  route: 'google',
  usageOmitsOutput: true,
  plan(entry, endpoints) {
    const url = endpoints.google;
    if (url !== undefined) {
      const problem = endpointProblem(url, 'the Gemini endpoint');
      if (problem !== null) return problem;
    }
    return {
      route: 'google',
      keyEnv: entry.keyEnv,
      env: url === undefined ? {} : { GOOGLE_GEMINI_BASE_URL: url },
      args: [],
      label: { provider: 'google', offline: isOfflineUrl(url, endpoints.hosts) },
      fixedOutputTokens: null,
      endpoint: url ?? null,
    };
  },
  classify(text): BlockerCode | null {
    // The SDK's message is Google's JSON error body: RESOURCE_EXHAUSTED is a rate limit unless it says the quota is spent.
    if (/exceeded your current quota|billing/i.test(text)) return 'aa_unavailable:quota';
    if (/RESOURCE_EXHAUSTED/.test(text)) return 'aa_unavailable:rate_limited';
    if (/API key not valid|PERMISSION_DENIED|UNAUTHENTICATED/.test(text)) return 'aa_unavailable:auth';
    if (/"status":\s*"NOT_FOUND"/.test(text)) return 'aa_unavailable:model';
    return null;
  },
};
