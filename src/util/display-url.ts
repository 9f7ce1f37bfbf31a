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
/**
 * User info: anything up to the last `@` before the host's end; or a user and a password holding an
 * unencoded `/` (`user:ab/cd@host`), which a driver that splits at the first `@` takes as given
 * (SQLAlchemy's URLs): there the `/` cannot end a host, as `host:8443/` does, since what follows the
 * colon is no port, nor a placeholder for one (`${PORT}`). A path with an `@` in it
 * (`https://host/users/me@example.com`) names no user.
 */
const USER_INFO = String.raw`[^/?#]*|[^/?#:@\[]*:(?![0-9]*\/|\$\{[A-Za-z_][A-Za-z0-9_]*\}\/)[^?#@\s]*`;
const SCHEME_URL = new RegExp(`^(${SCHEME})(${USER_INFO})@`, 'i');
/** User info inside running text, as USER_INFO, ended also by a space or a quote. */
const USER_INFO_IN_TEXT = /\b([a-z][a-z0-9+.-]*:\/\/)(?:[^\s/?#'"<>`]*|[^\s/?#:@['"<>`]*:(?![0-9]*\/|\$\{[A-Za-z_][A-Za-z0-9_]*\}\/)[^\s?#@'"<>`]*)@/gi;

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
  return url.replace(SCHEME_URL, (_match, scheme: string, info: string) => shown(scheme, info)).replace(QUERY_SHOWN, QUERY_HIDDEN);
}

/** `text` with the credentials of every URL in it removed, as `displayUrl` removes them. */
export function withoutUserInfo(text: string): string {
  return text.replace(USER_INFO_IN_TEXT, (match, scheme: string) => shown(scheme, match.slice(scheme.length, -1))).replace(QUERY_IN_TEXT, QUERY_HIDDEN);
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
  const match = SCHEME_URL.exec(url);
  const info = match?.[2];
  if (match === null || info === undefined || info === '') return [];
  const colon = info.indexOf(':');
  if (SSH_SCHEME.test(match[1]!)) return decoded(colon < 0 ? [] : [info.slice(colon + 1)]);
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

/** The credentials of each URL given (util/scrub.ts Secret form, by `name`), long enough to be looked for: what a child handed those URLs holds. */
export function urlSecrets(urls: ReadonlyArray<string | undefined>, name: string, minChars: number): Array<{ name: string; value: string }> {
  return urls.flatMap((url) => (url === undefined ? [] : urlCredentials(url))).filter((value) => value.length >= minChars).map((value) => ({ name, value }));
}
