/** The host names of this machine's loopback, as a URL's hostname gives them (IPv6 bracketed), and IPv6's bare. */
const LOOPBACK_HOSTS: ReadonlySet<string> = new Set(['127.0.0.1', 'localhost', '[::1]', '::1']);

/**
 * Whether `hostname` names this machine's loopback: one rule for where a token may go over plain
 * http (util/token-url.ts) and which model endpoint the runner's start reaches on this machine
 * (lane/endpoint.ts loopbackAddress).
 */
export function isLoopbackHost(hostname: string): boolean {
  return LOOPBACK_HOSTS.has(hostname);
}
