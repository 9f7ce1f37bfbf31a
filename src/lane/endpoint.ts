import { displayUrl } from '../util/display-url.js';

/**
 * Why `url` cannot be an endpoint (not http or https, or carrying credentials), or null: one rule
 * for Oracle's routes (consult/providers/) and the executors' model base URL (`--ea-base-url`),
 * each checked at start. The URL is named as displayUrl shows it: these reasons are printed at start
 * and in `--json`, and a URL that fails may still carry a token in its user info or query. What does
 * not parse as a URL is not quoted.
 */
export function endpointProblem(url: string, what: string): string | null {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return `${what} is not a URL (give http:// or https://, a host and a path)`;
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') return `${what} ${displayUrl(url)} is not an http or https URL`;
  if (parsed.username !== '' || parsed.password !== '') return `${what} carries credentials in its URL; give the key in the provider's variable instead`;
  return null;
}
