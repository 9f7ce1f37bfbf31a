/**
 * A remote's URL as it is shown to people and written for machines (messages, events, --json):
 * git takes credentials in a URL's user info (`https://user:TOKEN@host/ledger.git`), and a URL
 * that is printed or logged must not carry them. The one rendering: every place that shows a
 * remote's URL uses it, and git's own messages (which quote the URL they were given) pass
 * `withoutUserInfo`.
 */

const SCHEME_URL = /^([a-z][a-z0-9+.-]*:\/\/)([^/?#]*)@/i;
/** User info inside running text: a scheme, then anything up to the last `@` before the host's end. */
const USER_INFO_IN_TEXT = /\b([a-z][a-z0-9+.-]*:\/\/)[^\s/?#'"<>`]*@/gi;

/** `url` without its user info; a path or git's scp-like `host:path` (which cannot carry a password) as it is. */
export function displayUrl(url: string): string {
  return url.replace(SCHEME_URL, '$1');
}

/** `text` with the user info of every URL in it removed. */
export function withoutUserInfo(text: string): string {
  return text.replace(USER_INFO_IN_TEXT, '$1');
}

/** The credentials a URL carries in its user info (the whole of it, and a password or token alone), for a scrubber. */
export function urlCredentials(url: string): string[] {
  const info = SCHEME_URL.exec(url)?.[2];
  if (info === undefined || info === '') return [];
  const colon = info.indexOf(':');
  const values = [info, ...(colon < 0 ? [] : [info.slice(colon + 1)])];
  return [...new Set([...values, ...values.map((value) => safeDecode(value))])].filter((value) => value !== '');
}

function safeDecode(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}
