import { REDIRECT_STATUS_PATTERN, REDIRECT_STATUSES } from '../util/redirects.js';

/**
 * Oracle sends a provider's key in a header of every request (`Authorization`, `x-api-key`,
 * `x-goog-api-key`, Azure's `api-key`), through Node's fetch, which follows a redirect by itself.
 * The fetch standard takes only `Authorization` off a request redirected to another origin: the
 * other headers, and the prompt with the pinned files, go on to wherever the endpoint pointed. So
 * no redirect is followed: the key and the context go to the endpoint the operator named (or the
 * provider's own) and nowhere else.
 *
 * Oracle is another process (and its fetch is the SDKs' own), so the rule is put in front of it: a
 * module Node loads before Oracle's first line (`--import`, in NODE_OPTIONS, as a `data:` URL: no
 * file a sandbox must see) replaces fetch with one that asks for every response as it is
 * (`redirect: 'manual'`) and fails the request on a redirect, saying so on standard error in one
 * line that names the origin asked (never user info, never where the redirect pointed: a Location
 * may carry credentials of its own). judgeRun (outcome.ts) reads that line.
 */

/** The line's fixed part, as the module writes it and `redirectRefusal` finds it. */
const SAID = 'a redirect, which coo does not follow: a provider key goes to the endpoint named and nowhere else';

/** The module, in plain JavaScript: it runs in Oracle's Node, before Oracle. */
const MODULE = `
const send = globalThis.fetch;
const MOVED = new Set(${JSON.stringify(REDIRECT_STATUSES)});
globalThis.fetch = async function fetch(input, init) {
  const response = await send(input, { ...init, redirect: 'manual' });
  if (!MOVED.has(response.status)) return response;
  await response.body?.cancel().catch(() => undefined);
  const url = typeof input === 'string' || input instanceof URL ? String(input) : input.url;
  const line = 'coo: ' + new URL(url).origin + ' answered ' + response.status + ', ${SAID}';
  process.stderr.write(line + '\\n');
  throw new TypeError(line);
};
`;

/** The NODE_OPTIONS that load the module into every Node that Oracle's command starts. */
export const NO_REDIRECTS_NODE_OPTIONS = `--import=data:text/javascript;base64,${Buffer.from(MODULE, 'utf8').toString('base64')}`;

const REFUSAL = new RegExp(`^coo: \\S+ answered ${REDIRECT_STATUS_PATTERN}, ${SAID.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}$`, 'm');

/** The module's line in what Oracle wrote on standard error, or null when no redirect was refused. */
export function redirectRefusal(stderr: string): string | null {
  return REFUSAL.exec(stderr)?.[0] ?? null;
}
