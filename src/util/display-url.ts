import type { Secret } from './scrub.js';
import { looksSecret } from './secret-shape.js';

/**
 * A remote's URL as it is shown to people and written for machines (messages, events, --json):
 * git takes credentials in a URL's user info (`https://user:TOKEN@host/ledger.git`) and sends its
 * query as given (`?access_token=TOKEN`), and a URL that is printed or logged must carry neither. The one rendering: every place that shows a
 * remote's URL uses it, and git's own messages (which quote the URL they were given) pass
 * `withoutUserInfo`.
 */

/** A URL's scheme, after the prefixes a driver's URL carries before it (`jdbc:postgresql://`, `jdbc:mysql://`). */
const SCHEME = String.raw`(?:[a-z][a-z0-9+.-]*:)*[a-z][a-z0-9+.-]*:\/\/`;
const SCHEME_AT_START = new RegExp(`^${SCHEME}`, 'i');
/** A scheme inside running text, and the characters of the URL after it: up to a space, a quote or a bracket. */
const SCHEME_IN_TEXT = /\b[a-z][a-z0-9+.-]*:\/\/[^\s'"<>`]*/gi;

/**
 * What after a host's colon is a port and the path after it, not a password's start: digits (five at
 * most, as a port has) or a placeholder for them (`${PORT}`, or `$PORT` in capitals, as a shell
 * variable for a port is written) and a `/`, wherever the `@` comes after it: `localhost:8080/me@example.com`,
 * `localhost:5000/alpine@sha256:…` and `host:4873/pkg@1.2.3` are a port and a path, and far more
 * common than a password of up to five digits and a `/` (`user:12/ab@db`, which stays unknown). So
 * are a port and a query or fragment (`localhost:8080?next=me@example.com`). An empty port
 * (`user:/abc@db`) is a password's start, as nobody writes one. A password starting with `$` and a
 * small letter (`user:$ecret/x@db`) is no placeholder.
 */
function portThenPath(afterColon: string): boolean {
  return /^(?:\$\{[A-Za-z_][A-Za-z0-9_]*\}|\$[A-Z_][A-Z0-9_]*|[0-9]{1,5})[/?#]/.test(afterColon);
}

/**
 * Where the user info of a URL may end, in `rest` (what follows `scheme://`, up to where the URL
 * ends): the index of its `@` in each way a reader may take it, the shortest first; none when it names
 * no user.
 * - As WHATWG and git read it: the last `@` before the host's end, the first `/`, `?` or `#`.
 * - As a driver that splits at an `@` reads it (SQLAlchemy's URLs), a password holding an unencoded
 *   `/` and `@` (`user:ab/cd@host`, `user:p@ss/w0rd@db.example`): each later `@` before the query,
 *   the fragment, a space or another URL's `://`, after a user without `/`, `@` or `[` and a colon not followed by a port
 *   and a path (portThenPath). A path with an `@` in it (`https://host/users/me@example.com`,
 *   `https://host:8443/a/b@c`, `https://[::1]:8080/a@b`) names no user.
 * - As libpq and SQLAlchemy read it, a password holding an unencoded `?` or `#`
 *   (`postgresql://app:Xk9#qL@db/prod`, `https://bot:ghp_…?…@host/x.git` pasted as generated): the first
 *   `@` after the colon, before a space or another URL's `://`, after the same user; not a port and a
 *   query or fragment (`localhost:8080?next=me@example.com`). WHATWG and git read such a URL as having
 *   no user and its password as a query or fragment, and print it so.
 * A scrubber learns the credentials of every reading (a longer one holds the shorter's password, so
 * it cuts nothing the shorter would not); a URL is shown without the longest.
 */
function userInfoEnds(rest: string): number[] {
  const hostEnd = rest.search(/[/?#]/);
  const first = (hostEnd < 0 ? rest : rest.slice(0, hostEnd)).lastIndexOf('@');
  const ends = first < 0 ? [] : [first];
  const colon = rest.indexOf(':');
  // A URL inside this one (`…/go/ssh://git@c/x`) starts after its end: no password holds a scheme.
  const urlEnd = rest.search(/\s|:\/\//);
  const queryAt = rest.search(/[?#\s]|:\/\//);
  const stop = queryAt < 0 ? rest.length : queryAt;
  if (colon < 0 || colon >= stop || /[/@[]/.test(rest.slice(0, colon))) return ends;
  for (let at = rest.indexOf('@', Math.max(first, colon) + 1); at >= 0 && at < stop; at = rest.indexOf('@', at + 1)) {
    const password = rest.slice(colon + 1, at);
    if (password.includes('/') && !portThenPath(password)) ends.push(at);
  }
  // Past the query's or fragment's start, so after every end above: the longest reading.
  const firstAt = rest.indexOf('@', colon + 1);
  const password = rest.slice(colon + 1, firstAt);
  if (firstAt >= stop && (urlEnd < 0 || firstAt < urlEnd) && /[?#]/.test(password) && !portThenPath(password)) ends.push(firstAt);
  return ends;
}

/** A URL's scheme and its user info as the longest reading takes it (userInfoEnds), or null when it names no user. */
function longestUserInfo(url: string): { readonly scheme: string; readonly info: string } | null {
  const scheme = SCHEME_AT_START.exec(url)?.[0];
  if (scheme === undefined) return null;
  const end = userInfoEnds(url.slice(scheme.length)).at(-1);
  return end === undefined ? null : { scheme, info: url.slice(scheme.length, scheme.length + end) };
}

/** A URL's query, which may carry a token (`?access_token=…`): shown without its values. */
const QUERY_SHOWN = new RegExp(`^(${SCHEME}[^?#]*)\\?[^#]*`, 'i');
const QUERY_IN_TEXT = /\b([a-z][a-z0-9+.-]*:\/\/[^\s?#'"<>`]*)\?[^\s#'"<>`]*/gi;
const QUERY_HIDDEN = '$1?[query removed]';

/** ssh takes no password from a URL: its user name says whom to log in as and is kept, anything after a colon is not. */
const SSH_SCHEME = /^(ssh|git\+ssh|ssh\+git):\/\/$/i;

function shown(scheme: string, info: string): string {
  if (!SSH_SCHEME.test(scheme)) return scheme;
  const user = info.split(':')[0] ?? '';
  return user === '' ? scheme : `${scheme}${user}@`;
}

/**
 * `url` without the user info that can carry a credential: all of it for http(s) and other
 * schemes (a token may stand as the user name), the password for ssh. A path, or git's scp-like
 * `user@host:path` (which cannot carry a password), is as it was.
 */
export function displayUrl(url: string): string {
  const scheme = SCHEME_AT_START.exec(url)?.[0];
  const bare = scheme === undefined || longestUserInfo(url) !== null ? displayUserInfo(url) : `${scheme}${withoutInnerUserInfo(url.slice(scheme.length))}`;
  return bare.replace(QUERY_SHOWN, QUERY_HIDDEN);
}

/**
 * `url` without its user info (its password over ssh), as the longest reading takes it; and so each
 * URL that stands inside it, after its path or in its query (`https://proxy/fetch/https://u:p@host/`).
 */
function displayUserInfo(url: string): string {
  const userInfo = longestUserInfo(url);
  if (userInfo === null) return url;
  return `${shown(userInfo.scheme, userInfo.info)}${withoutInnerUserInfo(url.slice(userInfo.scheme.length + userInfo.info.length + 1))}`;
}

/** `text` with the user info of every URL in it removed (displayUserInfo). */
function withoutInnerUserInfo(text: string): string {
  return text.replace(SCHEME_IN_TEXT, (url: string) => {
    const scheme = SCHEME_AT_START.exec(url)![0];
    return longestUserInfo(url) === null ? `${scheme}${withoutInnerUserInfo(url.slice(scheme.length))}` : displayUserInfo(url);
  });
}

/** `text` with the credentials of every URL in it removed, as `displayUrl` removes them. */
export function withoutUserInfo(text: string): string {
  return withoutInnerUserInfo(text).replace(QUERY_IN_TEXT, QUERY_HIDDEN);
}

/** The query of a URL with a scheme (`?access_token=…`), up to its fragment; and its fragment (`#access_token=…`). */
const QUERY = new RegExp(`^${SCHEME}[^?#]*\\?([^#]*)`, 'i');
const FRAGMENT = new RegExp(`^${SCHEME}[^#]*#(.*)`, 'is');

/**
 * The credentials a URL carries, for a scrubber: in its user info (the whole of it, and a password
 * or token alone), and the values of its query (`?access_token=TOKEN`, which git sends and quotes
 * in its errors as it was given).
 */
export function urlCredentials(url: string): string[] {
  return decoded([...userInfoCredentials(url), ...fields(QUERY.exec(url)?.[1]).map((field) => field.value)]);
}

/**
 * The values, as written and percent-decoded, of the fields of a URL's query and fragment that
 * `secretField` reads as secret ones (a libpq `?password=…`, a Gemini `?key=…`, an Azure SAS
 * `&sig=…`, an OAuth `#access_token=…`), where a URL stands as any setting (an environment
 * variable): not its other fields (`?sslmode=require`, a date), which would be cut out of every text
 * that says them.
 */
export function secretFieldValues(url: string, secretField: (name: string) => boolean): string[] {
  return decoded([...fields(QUERY.exec(url)?.[1]), ...fields(FRAGMENT.exec(url)?.[1])].filter((field) => secretField(field.name)).map((field) => field.value));
}

/**
 * The query fields of an endpoint URL known to say no secret, in every spelling (`api-version`, `api_version`, `apiVersion`): the
 * one list of them. Keep it small: a field missing here only refuses a file that repeats its value, one wrongly here sends a key.
 */
export function namesPlainQueryField(name: string): boolean {
  return /^api[-_.]?version$/i.test(name);
}

/** The fields of a query or fragment (`sslmode=require&password=…`, or parted by `;`) as written, a field without `=` by an empty name. */
function fields(part: string | undefined): Array<{ readonly name: string; readonly value: string }> {
  if (part === undefined) return [];
  return part.split(/[&;]/).map((pair) => {
    const equals = pair.indexOf('=');
    return equals < 0 ? { name: '', value: pair } : { name: safeDecode(pair.slice(0, equals)), value: pair.slice(equals + 1) };
  });
}

/**
 * The credentials in a URL's user info alone: the whole of it, and a password or token alone (ssh:
 * the password); and the user name before a password when it is a token: before a placeholder
 * password, as GitHub's `https://TOKEN:x-oauth-basic@github.com/…` writes one, or with a token's
 * length (TOKEN_USER_CHARS). A person's or a service's name (`jdoe1985`, `x-access-token`, `oauth2`)
 * is none: as a secret it would be cut out of every text that names that user, and every writer
 * would refuse one that does. A server that names the user it refused quotes that token alone.
 */
export function userInfoCredentials(url: string): string[] {
  const scheme = SCHEME_AT_START.exec(url)?.[0];
  if (scheme === undefined) return [];
  const rest = url.slice(scheme.length);
  return decoded(userInfoEnds(rest).flatMap((end) => infoCredentials(scheme, rest.slice(0, end))));
}

/** The credentials of one reading of a URL's user info (userInfoCredentials). */
function infoCredentials(scheme: string, info: string): string[] {
  if (info === '') return [];
  const colon = info.indexOf(':');
  if (SSH_SCHEME.test(scheme)) return decoded(colon < 0 ? [] : [info.slice(colon + 1)]);
  if (colon < 0) return decoded([info]);
  const user = info.slice(0, colon);
  const password = safeDecode(info.slice(colon + 1));
  const token = (name: string): boolean => looksSecret(name) && (PLACEHOLDER_PASSWORDS.has(password) || name.length >= TOKEN_USER_CHARS);
  return decoded([info, info.slice(colon + 1), ...(token(user) || token(safeDecode(user)) ? [user] : [])]);
}

/** Passwords that stand for none beside a token given as the user name (GitHub's, and an empty one). */
const PLACEHOLDER_PASSWORDS = new Set(['x-oauth-basic', '']);

/** A user name this long that looksSecret is a token (GitHub's are 40 characters, GitLab's 26), not a person's or a service's name. */
const TOKEN_USER_CHARS = 20;

/** `values` and each percent-decoded, without repeats or empty ones. */
function decoded(values: readonly string[]): string[] {
  return [...new Set([...values, ...values.map((value) => safeDecode(value))])].filter((value) => value !== '');
}

function safeDecode(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

/**
 * The credentials of each URL given (util/scrub.ts Secret form, by `name`), long enough to be looked for: what a child handed those
 * URLs holds. These are URLs the runner is given and sends to, so every query value counts as given, whatever its field is called
 * (an Azure Functions `?code=…`), but for the fields known to say no secret (namesPlainQueryField: `?api-version=2024-08-01-preview`):
 * those are masked all the same, git and clients quote them with the rest, but only guessed (Secret.guessed), refusing no consult's files.
 */
export function urlSecrets(urls: ReadonlyArray<string | undefined>, name: string, minChars: number): Secret[] {
  return urls.flatMap((url) => {
    if (url === undefined) return [];
    const given = new Set([...userInfoCredentials(url), ...secretFieldValues(url, (field) => !namesPlainQueryField(field))]);
    return urlCredentials(url)
      .filter((value) => value.length >= minChars)
      .map((value): Secret => (given.has(value) ? { name, value } : { name, value, guessed: true }));
  });
}
