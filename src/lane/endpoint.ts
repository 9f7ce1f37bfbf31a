import { displayUrl } from '../util/display-url.js';
import { isLoopbackHost } from '../util/loopback-host.js';

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

/** Where a call to an endpoint on this machine goes: the address and port a client connects to. */
export interface LoopbackAddress {
  readonly host: string;
  readonly port: number;
}

/**
 * Where `url` is reached when it reaches only this machine (its host is loopback, or pinned to a
 * loopback address in the sandbox, `--oracle-host`), or null: an offline model's endpoint, which
 * the start probes (runner/startup.ts), and which a receipt calls offline.
 */
export function loopbackAddress(url: string, hosts: ReadonlyArray<{ readonly name: string; readonly address: string }> = []): LoopbackAddress | null {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return null;
  }
  const port = parsed.port === '' ? (parsed.protocol === 'https:' ? 443 : 80) : Number(parsed.port);
  if (isLoopbackHost(parsed.hostname)) return { host: parsed.hostname.replace(/^\[(.*)\]$/, '$1'), port };
  const pinned = hosts.find((entry) => entry.name === parsed.hostname);
  return pinned !== undefined && (pinned.address === '127.0.0.1' || pinned.address === '::1') ? { host: pinned.address, port } : null;
}
