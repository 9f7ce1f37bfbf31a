import { homedir } from 'node:os';
import { resolve } from 'node:path';
import { formatPrivateKey, type PrivateKey } from '../crypto/keys.js';
import { PROVIDER_KEY_ENVS } from '../schema/registry.js';
import { secretFieldValues, userInfoCredentials } from './display-url.js';
import { htmlEntity } from './html-entities.js';
import { invisibleCharacters } from './invisible.js';
import { looksSecret, MIN_SECRET_CHARS } from './secret-shape.js';

/**
 * The one scrubber every transport's and executor's output passes before it is hashed, signed,
 * committed or printed: an answer, an error text, a session record, an event stream, a final
 * message, a stderr excerpt. Signed entries cannot be taken back, so what a child echoes (a
 * gateway that repeats the key it was given, a tool that prints a path) is removed here, once,
 * and every byte downstream (the hash, the judgement, the artifact) is of the scrubbed text.
 *
 * - A secret value is replaced by `[removed: NAME]`, NAME saying what it was (the environment
 *   variable it was handed under, `coo key`). It is looked for as written and as JSON escapes it,
 *   since most of what comes back is JSON; and, marked `[removed: NAME (FORM)]`, in what a script
 *   that holds it reaches for in one line: reversed; base64 and base64url at each of the three
 *   alignments (so inside a longer encoded text: the characters that hold only the secret's bits),
 *   also split anywhere by spaces, tabs, line breaks (written or JSON-escaped, as `base64`,
 *   `openssl base64` and `xxd -p` wrap it, or at any column) or colons; hex in either case, split
 *   so too (`od`, `xxd`); percent-encoded, whatever the encoder left alone.
 * - A key encoded up to three deep: a run of base64 or hex (split as above, as written or as read
 *   with its escapes decoded) is decoded at each alignment, and each stretch of text it decodes to
 *   is scrubbed as any text is, its escapes read twice (READ_DEPTH) and its own runs decoded in
 *   turn, DECODE_DEPTH (2) decodes deep.
 *   So base64 of a JSON string of `\u` escapes of a percent-encoded key, base64 of its hex, base64
 *   of base64 of its hex are found (`[removed: NAME (decoded)]`, the characters of the run that
 *   encode it replaced); a key under a third base64 or hex, or under escapes three times, is not. A value
 *   shorter than MIN_SECRET_CHARS is not looked for in any form. At two of the three base64
 *   alignments a few bits of the secret's first and last byte stand outside the characters looked
 *   for, and stay beside the marker.
 * - A secret or folder is also looked for as a reader takes it in without thinking: with its JSON
 *   and YAML escapes decoded (`\u0073k-…`, `\x73`, `\/`, what an encoder that escapes every
 *   character writes, a YAML escaped line break), its HTML character references (`&#115;`, `&#x73;`,
 *   `&sol;`) and percent escapes decoded, and with what a reader does not see taken out (a
 *   zero-width character, a soft hyphen, any invisible character of util/invisible.ts, a line break
 *   or control character, raw or JSON-escaped, a folded line's indentation); read so once, and once
 *   more for what a JSON text carries. The whole stretch that spells it is replaced.
 * - A text cut inside a secret (held to a length before it was scrubbed, or a tail of an output)
 *   that ends with MIN_SECRET_CHARS or more of its first characters, or starts with as many of its
 *   last, has them replaced, marked `[removed: NAME (cut)]`.
 * - What no scrubber finds: a secret encrypted, compressed, hashed, split across outputs, encoded
 *   deeper than the bounds above, or in any way of a program's own choosing. A child that holds a key can always
 *   get it out; this catches the echo and the one-line encoding, not a determined agent. The defence
 *   against that is not handing it the key.
 * - A private key in its armor (`-----BEGIN … PRIVATE KEY-----`, its body and END line) is replaced
 *   by `[removed: private key]` whoever's key it is: found by its shape, as written only.
 * - A folder of the runner's machine is replaced by `[NAME]` (`[sandbox]`, `[worktree]`,
 *   `[runner-state]`, `[home]`), so a recorded path is relative to the place it names and the
 *   ledger does not tell its readers how the operator's machine is laid out. A folder matches only
 *   as a whole path (`/a/state` is not found in `/a/state2`, nor `/root` in `trust/root`).
 *
 * Longer values win where two overlap (a sandbox inside the state folder is `[sandbox]`). The forms
 * are combined into a few regular expressions, each built once per scrubber when first needed (the
 * speed over 1 MB is in test/unit/util/scrub.test.ts). A text is scrubbed whole: a secret split
 * across two texts is not found, so callers scrub a whole output, never its chunks.
 */

/** A secret value the runner holds or handed a child, by the name it goes by. */
export interface Secret {
  readonly name: string;
  readonly value: string;
  /**
   * Set when the value is a secret only by a guess, not given to the runner as a credential: its
   * variable's name reads as one's (SECRET_NAME: `PGPASSWORD`, `GPG_KEY`; not a provider key's), in the
   * environment or a credential file's NAME=value; a URL's credentials in a variable the runner does not
   * use (not a proxy's); or the value of a URL's `api-version` field (urlSecrets). Masked all the same.
   */
  readonly guessed?: true;
}

/** A folder of the runner's machine, by the name its marker gives it. */
export interface Place {
  readonly name: string;
  readonly path: string;
}

export { looksSecret, MIN_SECRET_CHARS } from './secret-shape.js';

/**
 * Environment variables whose values are secrets: provider keys, tokens, passwords, by their name in
 * either case:
 * - its last word KEY, TOKEN, SECRET, PASSWORD, PASSWD, PASSPHRASE, PASS, PAT, AUTH or CREDENTIALS,
 *   after `_`, `API` or `AUTH` or as the whole name (`OPENAI_API_KEY`, `SERPAPI_APIKEY`, `DB_PASSWD`,
 *   `GITHUB_PAT`, npm's `…:_authToken`, `npm_config__auth`, `TOKEN`);
 * - an end PASSWORD, PASSWD or PASSPHRASE after anything (`PGPASSWORD`), or `_PWD` (`MYSQL_PWD`; not
 *   `PWD` nor `OLDPWD`, the shell's folders);
 * - a word SECRET, TOKEN, PASSWORD, PASSWD, PASSPHRASE or CREDENTIALS before another (`SECRET_KEY_BASE`,
 *   `GITHUB_TOKEN_RO`), unless the last says the value is where a secret is kept (`…_FILE`, `…_DIR`,
 *   `…_PATH`), not the secret;
 * - an end ACCESS_KEY_ID (`AWS_ACCESS_KEY_ID`): an identifier, but the half of a credential that finds
 *   its secret half and the account it opens, and written nowhere else, so that keeping it out of the
 *   ledger cuts out no other text (a credential file's `aws_access_key_id` is a secret field too);
 * - an end ASSERTION or VERIFIER after `_` or as the whole name: an OAuth client's signed
 *   `client_assertion` and the JWT of an `assertion` grant, which get a token as a client secret does,
 *   and a PKCE `code_verifier`, which gets one with the code;
 * - an end JWT after `_` or as the whole name, or JWT and a version (`CI_JOB_JWT_V2`): a signed token a
 *   CI job proves itself with to a cloud or a vault;
 * - `SSHPASS`, the password `sshpass -e` (a GIT_SSH_COMMAND of a remote over ssh) reads.
 * A secret under any other name (`SLACK_WEBHOOK`) is not known, unless it is a credential of a URL
 * or a secret field of a connection string (environmentSecrets).
 */
const SECRET_NAME = /(?:^|_|API|AUTH)(?:KEY|TOKEN|SECRET|PASS|PAT|AUTH|CREDENTIALS?)$|ACCESS_KEY_ID$|(?:^|_)(?:ASSERTION|VERIFIER)$|(?:^|_)JWT(?:_V\d+)?$|^SSHPASS$|(?:PASSWORD|PASSWD|PASSPHRASE)$|_PWD$|(?:^|_)(?:SECRETS?|TOKEN|PASSWORD|PASSWD|PASSPHRASE|CREDENTIALS?)_(?!(?:.*_)?(?:FILE|DIR|DIRECTORY|PATH)$)/i;

/** Whether an environment variable of this name holds a secret (SECRET_NAME): `OPENAI_API_KEY`, `PGPASSWORD`, `SSHPASS`, not `PWD` nor `KEY_FILE`. */
export function isSecretName(name: string): boolean {
  return SECRET_NAME.test(name);
}

/**
 * A field of a URL's query or a connection string that holds a secret, its words parted by `_`, `-`,
 * a space or a capital: one SECRET_NAME reads as one (`key`, `api-key`, `access_token`, `password`,
 * `X-Amz-Security-Token`, `AccountKey`, `SharedAccessKey`, AWS's `AccessKeyId`, `SecretAccessKey` and
 * `SessionToken`, `client_assertion`, `codeVerifier`), a `Pwd`, or a signature (`sig`,
 * `X-Goog-Signature`, `SharedAccessSignature`), which grants what the URL grants to whoever holds it;
 * and a service account's `private_key_id`, which names its key to Google. A field of a kind of token
 * (`token_type`, `subject_token_type`) holds a name (`Bearer`, `urn:ietf:params:oauth:token-type:jwt`),
 * no token.
 */
export function isSecretField(name: string): boolean {
  const word = fieldWords(name);
  if (/(?:^|_)TYPE$/i.test(word)) return false;
  return SECRET_NAME.test(word) || /(?:^|_)(?:SIG|SIGNATURE|PWD|PRIVATE_KEY_ID)$/i.test(word);
}

/** A field's name as words parted by `_`: `privateKeyId`, `PrivateKeyId`, `private-key-id` and `private key id` read as `private_Key_Id`. */
function fieldWords(name: string): string {
  return name.trim().replace(/([a-z0-9])([A-Z])/g, '$1_$2').replace(/[-\s]+/g, '_');
}

/**
 * Whether a field whose name speaks of a secret holds a name or a place instead of one: a kind of
 * token (`token_type`, `subject_token_type`: `Bearer`, a URN), or, under a name for a place (`_uri`,
 * `_url`, `_endpoint`), a URL (a service account's `token_uri`: where tokens are had). Every reader of
 * a document's secret fields asks it, so that no such value is cut out of every text the runner
 * writes (a question naming Google's token endpoint). A URL under another name (a `client_secret`
 * that is a webhook's URL) is the secret itself.
 */
export function namesNoSecret(field: string, value: string): boolean {
  const words = fieldWords(field);
  return /(?:^|_)TYPE$/i.test(words) || (/(?:^|_)(?:URI|URL|ENDPOINT)$/i.test(words) && /^https?:\/\//i.test(value.trim()));
}

/**
 * The secrets of the fields of a connection string (`DefaultEndpointsProtocol=https;AccountName=…;AccountKey=…`,
 * `Server=…;User Id=sa;Password=…`): the values of those isSecretField reads as secret, each up to the
 * next `;`, or, quoted (`Password="a;b"`, `'…'`, a quote doubled inside) or braced as ODBC writes it
 * (`PWD={a;b}`, `}}` inside), what the quotes hold, as the driver reads it and as it is written.
 */
function connectionStringSecrets(text: string): string[] {
  if (!text.includes(';')) return [];
  const values: string[] = [];
  let at = 0;
  while (at < text.length) {
    const equals = text.indexOf('=', at);
    if (equals < 0) break;
    const semicolon = text.indexOf(';', at);
    if (semicolon >= 0 && semicolon < equals) {
      at = semicolon + 1;
      continue;
    }
    let start = equals + 1;
    while (text[start] === ' ') start += 1;
    const close = text[start] === '"' || text[start] === "'" ? text[start] : text[start] === '{' ? '}' : undefined;
    let end = start;
    let value = '';
    if (close !== undefined) {
      for (end = start + 1; end < text.length && !(text[end] === close && text[end + 1] !== close); end += 1) {
        if (text[end] === close) end += 1;
        value += text[end];
      }
    }
    const next = text.indexOf(';', end);
    const stop = next < 0 ? text.length : next;
    if (isSecretField(text.slice(at, equals))) values.push(...(close === undefined ? [text.slice(start, stop).trim()] : [value, text.slice(start + 1, end)]));
    at = stop + 1;
  }
  return values;
}

/** A folder this short (`/`, `/a`) would match too much to mean anything. */
const MIN_PLACE_CHARS = 4;

const PATH_CHAR = /[A-Za-z0-9._-]/;
/**
 * Where a folder's path may start: not inside another path (`trust/root` is not `/root`), but after
 * a JSON escape such as `\n` (a path on the next line of a command's output, inside an event).
 */
const BEFORE_PATH = '(?:^|[^A-Za-z0-9._~/\\\\-]|\\\\[nrtbf"/\\\\])';

interface Pattern {
  /** What is looked for, as a regular expression over text. */
  readonly text: string;
  /** The same over bytes read as latin1 (a UTF-8 character is its bytes there). */
  readonly bytes: string;
  readonly marker: string;
  /** The fewest characters a match holds: the longer patterns are tried first, so the longer value wins. */
  readonly length: number;
  /** Base64 or hex (which an encoder may break into lines), or percent-encoding (looked for where a text holds an escape). */
  readonly kind?: 'encoded' | 'percent';
}

function escapeRegex(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** How JSON writes `text` inside a string, when that differs from the text. */
function jsonForm(text: string): string {
  return JSON.stringify(text).slice(1, -1);
}

/** `text` as latin1 reads its UTF-8 bytes. */
function latin1(text: string): string {
  return Buffer.from(text, 'utf8').toString('latin1');
}

/**
 * What an encoder or a script puts between the pieces of a base64 or hex text: spaces and tabs, a
 * line break at any column (raw or JSON-escaped, with the next line's indentation), a colon (hex
 * written byte by byte). Between two characters of base64 or hex it is taken out, and the text so
 * joined looked in again; a JSON-escaped slash (`\/`) is read as the slash it stands for.
 */
const GAP = String.raw`(?:[ \t:]|\r?\n|\\[nrt])`;
// The check of what stands before follows the first separator, so the expression can skip ahead to where one is.
const ENCODED_GAP = String.raw`${GAP}(?<=[A-Za-z0-9+/=_-]${GAP})${GAP}*(?=[A-Za-z0-9+=_-]|\\?/)|\\/`;
/** The shortest run of base64 or hex decoded to look inside (the base64 of the shortest secret, MIN_SECRET_CHARS bytes, is 11). */
const MIN_DECODED_RUN = 12;
/** How many times a run of base64 or hex is decoded, one inside the other (a text decoded from one is looked in as any text, escapes included). */
const DECODE_DEPTH = 2;
const BASE64_RUN = new RegExp(`[A-Za-z0-9+/_-]{${MIN_DECODED_RUN},}={0,2}`, 'g');
const HEX_RUN = new RegExp(`[0-9A-Fa-f]{${MIN_DECODED_RUN},}`, 'g');

/**
 * A stretch of text of MIN_SECRET_CHARS characters or more, over bytes read as latin1: printable
 * ASCII (tab and line breaks included) and whole UTF-8 characters past it (a zero-width character
 * inside a key is read past, as in any text). Random bytes seldom hold one.
 */
const PRINTABLE = new RegExp(String.raw`(?:[\x20-\x7e\t\r\n]|[\xc2-\xdf][\x80-\xbf]|[\xe0-\xef][\x80-\xbf]{2}|[\xf0-\xf4][\x80-\xbf]{3}){${MIN_SECRET_CHARS},}`, 'g');

/** A character of an encoding that comes in either case (a hex digit), as a class of both. */
function eitherCase(char: string): string {
  const lower = char.toLowerCase();
  const upper = char.toUpperCase();
  return lower === upper ? escapeRegex(char) : `[${lower}${upper}]`;
}

/** Standard base64 and base64url (and JSON's `\/`) alike. */
function base64Char(char: string): string {
  if (char === '+' || char === '-') return '[+-]';
  if (char === '/' || char === '_') return String.raw`(?:[/_]|\\/)`;
  return escapeRegex(char);
}

/**
 * The characters of `value`'s base64 that depend on its bytes alone, for each of the three ways its
 * first byte can fall in a 3-byte group: encoded after k filler bytes, the first ceil(8k/6) characters
 * hold filler bits and those past floor(8(k+n)/6) the bits of whatever follows; the core between them
 * is the same wherever the value stands in a longer encoded text.
 */
function base64Cores(value: string): string[] {
  const bytes = Buffer.from(value, 'utf8');
  const cores: string[] = [];
  for (let k = 0; k < 3; k += 1) {
    const encoded = Buffer.concat([Buffer.alloc(k), bytes]).toString('base64');
    cores.push(encoded.slice(Math.ceil((8 * k) / 6), Math.floor((8 * (k + bytes.length)) / 6)));
  }
  return cores;
}

/** Each character of `value` as itself or percent-encoded in either case (a space also as `+`), whatever an encoder left alone. */
function percentForm(value: string, view: (text: string) => string): string {
  return [...value]
    .map((char) => {
      const escaped = [...Buffer.from(char, 'utf8')].map((byte) => `%${[...byte.toString(16).toUpperCase().padStart(2, '0')].map(eitherCase).join('')}`).join('');
      return `(?:${escapeRegex(view(char))}|${escaped}${char === ' ' ? '|\\+' : ''})`;
    })
    .join('');
}

/**
 * The forms a secret is looked for in: as written and as JSON escapes it, reversed, and in the
 * encodings a script reaches for in one line (base64 and base64url at every alignment, hex in
 * either case, percent-encoding).
 */
function secretPatterns(secret: Secret): Pattern[] {
  const named = (form: string): string => `[removed: ${secret.name}${form === '' ? '' : ` (${form})`}]`;
  const literal = (text: string, form: string): Pattern => ({ text: escapeRegex(text), bytes: escapeRegex(latin1(text)), marker: named(form), length: text.length });
  const encoded = (chars: readonly string[], form: string): Pattern => {
    const source = chars.join('');
    return { text: source, bytes: source, marker: named(form), length: chars.length, kind: 'encoded' };
  };
  const reversed = [...secret.value].reverse().join('');
  const patterns = [...new Set([secret.value, jsonForm(secret.value)])].map((text) => literal(text, ''));
  patterns.push(...[...new Set([reversed, jsonForm(reversed)])].map((text) => literal(text, 'reversed')));
  for (const core of base64Cores(secret.value)) if (core.length >= MIN_SECRET_CHARS) patterns.push(encoded([...core].map(base64Char), 'base64'));
  patterns.push(encoded([...Buffer.from(secret.value, 'utf8').toString('hex')].map(eitherCase), 'hex'));
  patterns.push({ text: percentForm(secret.value, (char) => char), bytes: percentForm(secret.value, latin1), marker: named('percent-encoded'), length: secret.value.length, kind: 'percent' });
  return patterns;
}

/**
 * A private key in its armor, found by its shape whoever holds it (a key file of the pinned repository
 * an agent prints, a key an answer quotes), not only a key the runner knows: the BEGIN line of an
 * OpenSSH, PEM (`RSA`, `EC`, `ENCRYPTED`) or PGP (`PRIVATE KEY BLOCK`) key, its headers and base64
 * body, its lines broken raw or JSON-escaped, or not at all, up to and with its END line, or to the end
 * of its base64 where the text was cut inside it. Only the armor as written is looked for: a key without
 * it, or with its armor encoded, is found only when it is a key the scrubber knows.
 */
const ARMOR_BREAK = String.raw`(?:[ \t]|\r?\n|\\[rn])`;
const ARMOR_END = String.raw`-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----`;
/** A line of base64 too short to tell from a word, taken only where the key ends: at its END line, the end of the text, or a quote. */
const ARMOR_SHORT = String.raw`[A-Za-z0-9+/=]{1,15}(?=${ARMOR_BREAK}*(?:${ARMOR_END}|$|[^A-Za-z0-9+/=\s\\]))`;
const PRIVATE_KEY_BLOCK = new RegExp(
  String.raw`-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----(?:${ARMOR_BREAK}+(?=[A-Za-z-]+: |[A-Za-z0-9+/=]{16}|${ARMOR_SHORT}|${ARMOR_END})(?:[A-Za-z-]+: [^\r\n\\]*)?|[A-Za-z0-9+/=]{16,}|${ARMOR_SHORT})*(?:${ARMOR_END})?`,
  'g',
);
const PRIVATE_KEY_NAME = 'private key';
const PRIVATE_KEY_MARKER = `[removed: ${PRIVATE_KEY_NAME}]`;
const ARMOR_WORDS = 'PRIVATE KEY';

/** A percent escape (or a space written as `+`, when a secret holds a space): where a text holds none, no percent-encoded secret is looked for. */
const PERCENT_ESCAPE = /%[0-9A-Fa-f]{2}/;
const PERCENT_OR_PLUS = /%[0-9A-Fa-f]{2}|\+/;

/**
 * What a reader decodes or does not see inside a text, each read past in the one pass over it:
 * - an escape of JSON or YAML (`\u0073`, `\U00000073`, `\x73`, `\/`, `\"`, `\\`, `\ `, and those of
 *   line breaks and controls), and a YAML escaped line break (a backslash, the break and the next
 *   line's indentation);
 * - a line break followed by indentation, as a folded YAML string or a wrapped text continues;
 * - an HTML character reference: `&#115;`, `&#x73;` (the semicolon left out or not) and the named
 *   ones of HTML (`&amp;`, `&sol;`, `&plus;`, `&ZeroWidthSpace;`; util/html-entities.ts);
 * - a run of percent escapes (`%73%6B`) or of octal escapes (`\342\200\213`, as git quotes a
 *   path), as the UTF-8 it spells, and a Rust escape (`\u{200b}`, as a Rust program prints a string);
 * - an invisible character (util/invisible.ts: zero-width characters, bidirectional marks, controls,
 *   line breaks among them). Over bytes read as latin1, an invisible character is its UTF-8 bytes.
 * Every alternative is bounded or a plain run, so a pass stays linear on hostile input. A text is read
 * twice at most (READ_DEPTH: a YAML escape inside a JSON string): one escaped three times over is not found
 * (a decoded run of base64 or hex is read twice again: scrubDecoded).
 */
const READ_PAST_ESCAPES = [
  String.raw`\\\r?\n[ \t]*|\\\\(?:\\r)?\\n[ \t]*`,
  String.raw`(?:\r?\n|(?:\\r)?\\n)[ \t]+`,
  String.raw`(?:\\[0-3][0-7]{2})+`,
  String.raw`\\u[0-9A-Fa-f]{4}|\\u\{[0-9A-Fa-f]{1,6}\}|\\U[0-9A-Fa-f]{8}|\\x[0-9A-Fa-f]{2}|\\["\\/ bfnrt0aveN_LP]`,
  String.raw`&#[0-9]{1,7};?|&#[xX][0-9A-Fa-f]{1,6};?|&[A-Za-z][A-Za-z0-9]{1,31};`,
  String.raw`(?:%[0-9A-Fa-f]{2})+`,
].join('|');
const INVISIBLE = invisibleCharacters();
let readPastBytes: RegExp | undefined;

/** The invisible characters as their UTF-8 bytes read as latin1, one class per leading bytes. */
function invisibleBytes(): string {
  const byLead = new Map<string, Set<number>>();
  const ranges: Array<[number, number]> = [[0, 0x2100], [0xfe00, 0xffff], [0xe0000, 0xe007f]];
  for (const [from, to] of ranges) {
    for (let point = from; point <= to; point += 1) {
      const char = String.fromCodePoint(point);
      INVISIBLE.lastIndex = 0;
      if (!INVISIBLE.test(char)) continue;
      const bytes = Buffer.from(char, 'utf8');
      const lead = bytes.subarray(0, -1).toString('latin1');
      byLead.set(lead, (byLead.get(lead) ?? new Set()).add(bytes[bytes.length - 1]!));
    }
  }
  const hex = (code: number): string => `\\x${code.toString(16).padStart(2, '0')}`;
  return [...byLead]
    .sort((a, b) => b[0].length - a[0].length)
    .map(([lead, lasts]) => `${[...lead].map((char) => hex(char.charCodeAt(0))).join('')}[${[...lasts].map(hex).join('')}]`)
    .join('|');
}

function readPast(view: 'text' | 'bytes'): RegExp {
  if (view === 'text') return new RegExp(`${READ_PAST_ESCAPES}|${INVISIBLE.source}`, 'gu');
  readPastBytes ??= new RegExp(`${READ_PAST_ESCAPES}|${invisibleBytes()}`, 'g');
  return new RegExp(readPastBytes.source, 'g');
}

/** Characters as a reader takes them in: without the invisible ones, as their UTF-8 bytes over bytes. */
function readChars(chars: string, view: 'text' | 'bytes'): string {
  const visible = chars.replace(INVISIBLE, '');
  return view === 'text' ? visible : latin1(visible);
}

/** A code point as a character, or null when it is none (past U+10FFFF, or a lone surrogate's half). */
function codePoint(point: number): string | null {
  return point > 0x10ffff || (point >= 0xd800 && point <= 0xdfff) ? null : String.fromCodePoint(point);
}

/** The characters of a YAML or JSON escape that stand for themselves. */
const SELF_ESCAPED = new Set(['"', '\\', '/', ' ']);

/** What an escape, a character reference, a run of percent escapes or an invisible character is to a reader: the characters it stands for, or nothing. */
function readToken(token: string, view: 'text' | 'bytes'): string {
  const first = token[0]!;
  if (first === '%' || /^\\[0-3]/.test(token)) {
    const bytes = first === '%' ? Buffer.from(token.replace(/%/g, ''), 'hex') : Buffer.from(token.slice(1).split('\\').map((octal) => parseInt(octal, 8)));
    const text = bytes.toString('utf8');
    // Bytes that are not UTF-8 are, over bytes, what they are; over text, left as written.
    if (!Buffer.from(text, 'utf8').equals(bytes)) return view === 'text' ? token : bytes.toString('latin1');
    return readChars(text, view);
  }
  if (first === '&') {
    const char = token[1] === '#' ? codePoint(token[2] === 'x' || token[2] === 'X' ? parseInt(token.slice(3), 16) : parseInt(token.slice(2), 10)) : htmlEntity(token.slice(1, -1));
    return char === null ? token : readChars(char, view);
  }
  if (first !== '\\' || token.length === 1) return '';
  const escaped = token[1]!;
  // A YAML escaped line break, as written or inside a JSON string (`\\\n`): nothing.
  if (token.length > 2 && (escaped === '\\' || escaped === '\r' || escaped === '\n')) return '';
  if (escaped === 'u' || escaped === 'U' || escaped === 'x') {
    const char = codePoint(parseInt(token.slice(2).replace(/[{}]/g, ''), 16));
    return char === null ? token : readChars(char, view);
  }
  return SELF_ESCAPED.has(escaped) ? escaped : '';
}

/** A text as read some way, and where each of its characters stands in the text: from `start(index)` to `end(index)`. */
interface View {
  readonly read: string;
  start(index: number): number;
  end(index: number): number;
}

/**
 * `text` as a reader takes it in (JSON escapes decoded, invisible characters taken out), and where
 * each of its characters stands in `text`. Null when the two are the same.
 */
function asReadView(text: string, view: 'text' | 'bytes'): View | null {
  return mappedView(text, readPast(view), (token) => readToken(token, view));
}

/**
 * `text` with every separator between the characters of a base64 or hex text taken out (ENCODED_GAP),
 * and the backslash of a JSON-escaped slash. Null when there is none. Only characters are taken out,
 * so where each piece starts is all that is kept (a text of words has as many pieces as words).
 */
function joinedView(text: string): View | null {
  const reads: number[] = [];
  const texts: number[] = [];
  const parts: string[] = [];
  let length = 0;
  let from = 0;
  for (const gap of text.matchAll(new RegExp(ENCODED_GAP, 'g'))) {
    const cut = gap[0] === '\\/' ? 1 : gap[0].length;
    if (gap.index > from) {
      reads.push(length);
      texts.push(from);
      parts.push(text.slice(from, gap.index));
      length += gap.index - from;
    }
    from = gap.index + cut;
  }
  if (reads.length === 0 && from === 0) return null;
  reads.push(length);
  texts.push(from);
  parts.push(text.slice(from));
  const at = (index: number): number => {
    let low = 0;
    let high = reads.length - 1;
    while (low < high) {
      const middle = (low + high + 1) >> 1;
      if (reads[middle]! <= index) low = middle;
      else high = middle - 1;
    }
    return texts[low]! + index - reads[low]!;
  };
  return {
    read: parts.join(''),
    // A slash whose escape was taken out starts where its backslash stands.
    start: (index) => {
      const position = at(index);
      return text[position] === '/' && text[position - 1] === '\\' ? position - 1 : position;
    },
    end: (index) => at(index) + 1,
  };
}

/** `text` with each match of `tokens` replaced by what `read` makes of it, and where each character of the result stands in `text`. Null when nothing matched. */
function mappedView(text: string, tokens: RegExp, read: (token: string) => string): View | null {
  /** For each piece: where it starts in the text as read and in `text`, how long it is in `text`, and whether it is copied as it stands. */
  const pieces: Array<{ read: number; text: number; length: number; copied: boolean }> = [];
  const parts: string[] = [];
  let length = 0;
  let from = 0;
  const add = (part: string, at: number, sourceLength: number, copied: boolean): void => {
    if (part === '') return;
    pieces.push({ read: length, text: at, length: sourceLength, copied });
    parts.push(part);
    length += part.length;
  };
  for (const token of text.matchAll(tokens)) {
    add(text.slice(from, token.index), from, token.index - from, true);
    add(read(token[0]), token.index, token[0].length, false);
    from = token.index + token[0].length;
  }
  if (from === 0) return null;
  add(text.slice(from), from, text.length - from, true);
  const piece = (index: number): { read: number; text: number; length: number; copied: boolean } => {
    let low = 0;
    let high = pieces.length - 1;
    while (low < high) {
      const middle = (low + high + 1) >> 1;
      if (pieces[middle]!.read <= index) low = middle;
      else high = middle - 1;
    }
    return pieces[low]!;
  };
  return {
    read: parts.join(''),
    start: (index) => {
      const at = piece(index);
      return at.copied ? at.text + index - at.read : at.text;
    },
    end: (index) => {
      const at = piece(index);
      return at.copied ? at.text + index - at.read + 1 : at.text + at.length;
    },
  };
}

/** How many times a text is read past: once for its transport (a JSON event), once for what that carries (a YAML or an HTML text in it). */
const READ_DEPTH = 2;

/** `text`, then `text` as read once, twice, up to READ_DEPTH, as far as each reading still changes it. */
function readLayers(text: string, view: 'text' | 'bytes'): string[] {
  const layers = [text];
  while (layers.length <= READ_DEPTH) {
    let tokens = 0;
    const read = layers.at(-1)!.replace(readPast(view), (token) => {
      tokens += 1;
      return readToken(token, view);
    });
    if (tokens === 0) break;
    layers.push(read);
  }
  return layers;
}

/** `text` as read `depth` times, and where each of its characters stands in `text` (asReadView, composed). */
function readView(text: string, view: 'text' | 'bytes', depth: number): View | null {
  let composed = asReadView(text, view);
  for (let layer = 1; layer < depth && composed !== null; layer += 1) {
    const outer = composed;
    const inner = asReadView(outer.read, view);
    if (inner === null) return null;
    composed = { read: inner.read, start: (index) => outer.start(inner.start(index)), end: (index) => outer.end(inner.end(index) - 1) };
  }
  return composed;
}

/**
 * A secret as a cut text may hold part of it: for each character, the lengths (MIN_SECRET_CHARS or
 * more, short of the whole, longest first) of its first characters that end with it (`heads`) and of
 * its last characters that start with it (`tails`), so a text's last or first character finds them.
 */
interface CutForm {
  readonly value: string;
  readonly heads: ReadonlyMap<string, readonly number[]>;
  readonly tails: ReadonlyMap<string, readonly number[]>;
}

function cutForm(value: string): CutForm {
  const heads = new Map<string, number[]>();
  const tails = new Map<string, number[]>();
  for (let length = value.length - 1; length >= MIN_SECRET_CHARS; length -= 1) {
    const last = value[length - 1]!;
    heads.set(last, [...(heads.get(last) ?? []), length]);
    const first = value[value.length - length]!;
    tails.set(first, [...(tails.get(first) ?? []), length]);
  }
  return { value, heads, tails };
}

/** The marker of a secret found inside a decoded run: its name, marked decoded; a folder's as it is. */
function decodedMarker(inner: string): string {
  const name = /^\[removed: (.*?)(?: \([^()]*\))?\]$/.exec(inner)?.[1];
  return name === undefined ? inner : `[removed: ${name} (decoded)]`;
}

/** A stretch of a text to replace, from `start` up to `end`, by `marker`. */
interface Cut {
  readonly start: number;
  readonly end: number;
  readonly marker: string;
}

/** `text` with each cut replaced by its marker; of two that overlap, the first (the longer where they start together) wins. */
function applyCuts(text: string, cuts: readonly Cut[], found: (marker: string) => void): string {
  if (cuts.length === 0) return text;
  let out = '';
  let done = 0;
  for (const cut of [...cuts].sort((a, b) => a.start - b.start || b.end - a.end)) {
    if (cut.start < done) {
      done = Math.max(done, cut.end);
      continue;
    }
    found(cut.marker);
    out += text.slice(done, cut.start) + cut.marker;
    done = cut.end;
  }
  return out + text.slice(done);
}

/**
 * A secret as given and, when it is given wrapped, as what is sent: without the spaces or line break
 * around it (`KEY=$'sk-…\n'`, a line of a key file read whole), and without a pair of quotes around
 * it (docker's `--env-file` keeps `KEY="sk-…"` as written). An HTTP client trims a header's value, so
 * a provider that echoes the key it was sent echoes the bare key, which the scrubber did not know.
 */
function bareForms(secret: Secret): Secret[] {
  const forms = [secret];
  const trimmed = secret.value.trim();
  if (trimmed !== secret.value) forms.push({ name: secret.name, value: trimmed });
  const quoted = /^(["'])(.*)\1$/s.exec(trimmed);
  const inner = quoted?.[2]?.trim();
  if (inner !== undefined && inner !== '' && inner !== trimmed) forms.push({ name: secret.name, value: inner });
  return forms;
}

/** Patterns as one regular expression, one group each. */
interface Compiled {
  readonly regex: RegExp;
  readonly patterns: readonly Pattern[];
}

export class Scrubber {
  private readonly patterns: readonly Pattern[];
  private readonly percentEscape: RegExp;
  /** Each secret, as written and as JSON escapes it, for a text cut inside it (scrubCutEnds). */
  private readonly cuts: ReadonlyArray<{ readonly marker: string; readonly text: CutForm; readonly bytes: CutForm }>;
  /**
   * The patterns as one regular expression for each use, built when first needed, one group per
   * pattern: over text and over bytes read as latin1 (bytes are scrubbed byte for byte, whatever
   * their encoding); base64 and hex again over lines joined; percent-encoding where a text holds an
   * escape (its expression, one alternative per character, is the slowest to build).
   */
  private readonly compiled = new Map<string, Compiled | null>();

  constructor(
    readonly secrets: readonly Secret[] = [],
    readonly places: readonly Place[] = [],
  ) {
    const patterns = new Map<string, Pattern>();
    const known = secrets.flatMap(bareForms);
    for (const secret of known) {
      if (secret.value.length < MIN_SECRET_CHARS) continue;
      for (const pattern of secretPatterns(secret)) if (!patterns.has(pattern.text)) patterns.set(pattern.text, pattern);
    }
    for (const place of places) {
      const path = place.path.replace(/\/+$/, '');
      if (path.length < MIN_PLACE_CHARS || patterns.has(escapeRegex(path))) continue;
      for (const form of new Set([path, jsonForm(path)])) {
        // The check of what stands before comes after the first character, so the combined expression can skip ahead to where that character is.
        const whole = (text: string): string => `${escapeRegex(text[0]!)}(?<=${BEFORE_PATH}${escapeRegex(text[0]!)})${escapeRegex(text.slice(1))}(?!${PATH_CHAR.source})`;
        patterns.set(escapeRegex(form), { text: whole(form), bytes: whole(latin1(form)), marker: `[${place.name}]`, length: form.length });
      }
    }
    // A stable sort: of two patterns as long, the one added first (a value as written before its encodings) is tried first.
    this.patterns = [...patterns.values()].sort((a, b) => b.length - a.length);
    this.cuts = known
      .filter((secret) => secret.value.length > MIN_SECRET_CHARS)
      .flatMap((secret) => [...new Set([secret.value, jsonForm(secret.value)])].map((value) => ({ marker: `[removed: ${secret.name} (cut)]`, text: cutForm(value), bytes: cutForm(latin1(value)) })));
    this.percentEscape = known.some((secret) => secret.value.length >= MIN_SECRET_CHARS && secret.value.includes(' ')) ? PERCENT_OR_PLUS : PERCENT_ESCAPE;
  }

  /** This scrubber with more secrets and folders (an attempt's own sandbox or worktree). */
  with(secrets: readonly Secret[], places: readonly Place[] = []): Scrubber {
    return new Scrubber([...this.secrets, ...secrets], [...this.places, ...places]);
  }

  private regex(use: 'text' | 'bytes' | 'encoded' | 'percent-text' | 'percent-bytes'): Compiled | null {
    let compiled = this.compiled.get(use);
    if (compiled === undefined) {
      const percent = use.startsWith('percent');
      const patterns = this.patterns.filter((pattern) => (use === 'encoded' ? pattern.kind === 'encoded' : percent === (pattern.kind === 'percent')));
      const bytes = use.endsWith('bytes');
      compiled = patterns.length === 0 ? null : { regex: new RegExp(patterns.map((pattern) => `(${bytes ? pattern.bytes : pattern.text})`).join('|'), 'g'), patterns };
      this.compiled.set(use, compiled);
    }
    return compiled;
  }

  /** `text` (or bytes read as latin1) with every secret and folder replaced by its marker; `found` is told each marker put in. */
  private scrub(text: string, view: 'text' | 'bytes', found: (marker: string) => void, decoded = 0): string {
    const marker = ({ patterns }: Compiled, groups: readonly unknown[]): string => {
      const put = patterns[groups.findIndex((group) => group !== undefined)]!.marker;
      found(put);
      return put;
    };
    const replace = (input: string, compiled: Compiled | null): string => (compiled === null ? input : input.replace(compiled.regex, (_match, ...groups: unknown[]) => marker(compiled, groups)));
    const unarmored = text.includes(ARMOR_WORDS)
      ? text.replace(PRIVATE_KEY_BLOCK, () => {
          found(PRIVATE_KEY_MARKER);
          return PRIVATE_KEY_MARKER;
        })
      : text;
    let scrubbed = replace(unarmored, this.regex(view));
    if (this.percentEscape.test(scrubbed)) scrubbed = replace(scrubbed, this.regex(view === 'text' ? 'percent-text' : 'percent-bytes'));
    scrubbed = this.scrubAsRead(scrubbed, view, marker);
    const encoded = this.regex('encoded');
    let joined = encoded === null && decoded >= DECODE_DEPTH ? null : joinedView(scrubbed);
    if (encoded !== null && joined !== null) {
      const before = scrubbed;
      scrubbed = this.scrubJoined(scrubbed, joined, encoded, marker);
      if (scrubbed !== before) joined = joinedView(scrubbed);
    }
    if (decoded < DECODE_DEPTH) scrubbed = this.scrubDecoded(scrubbed, joined, view, found, decoded);
    return this.scrubCutEnds(scrubbed, view, found);
  }

  /** A secret's base64 or hex split anywhere (by spaces, line breaks, colons): looked for with the separators taken out, and the whole stretch replaced. */
  private scrubJoined(text: string, joined: View, encoded: Compiled, marker: (compiled: Compiled, groups: readonly unknown[]) => string): string {
    let out = '';
    let done = 0;
    for (const match of joined.read.matchAll(encoded.regex)) {
      const start = joined.start(match.index);
      if (start < done) continue;
      out += text.slice(done, start) + marker(encoded, match.slice(1));
      done = joined.end(match.index + match[0].length - 1);
    }
    return done === 0 ? text : out + text.slice(done);
  }

  /**
   * A secret inside a text that was base64- or hex-encoded (split anywhere as scrubJoined reads it):
   * each run of either is decoded at each alignment, and each stretch of printable ASCII it decodes
   * to is scrubbed as any text is, its escapes read and its own runs decoded in turn, up to
   * DECODE_DEPTH decodes deep. Where a secret is found, the characters of the run that encode what
   * the scrubber changed are replaced, marked `[removed: NAME (decoded)]`.
   */
  private scrubDecoded(text: string, joined: View | null, view: 'text' | 'bytes', found: (marker: string) => void, decoded: number): string {
    let out = applyCuts(text, this.decodedCuts(text, joined, decoded), found);
    // A run written with escapes (every character `\u`-escaped in a JSON event): looked for as read, and the whole stretch that spells it replaced.
    for (let depth = 1; depth <= READ_DEPTH; depth += 1) {
      const read = readLayers(out, view)[depth];
      if (read === undefined) break;
      const cuts = this.decodedCuts(read, joinedView(read), decoded);
      if (cuts.length === 0) continue;
      const mapped = readView(out, view, depth);
      if (mapped === null) break;
      out = applyCuts(out, cuts.map((cut) => ({ start: mapped.start(cut.start), end: mapped.end(cut.end - 1), marker: cut.marker })), found);
    }
    return out;
  }

  /** Where the runs of base64 or hex in `text` (joined as `view` joins them) encode a secret, and the marker of each. */
  private decodedCuts(text: string, view: View | null, decoded: number): Cut[] {
    const joined = view ?? { read: text, start: (index: number) => index, end: (index: number) => index + 1 };
    const cuts: Cut[] = [];
    const look = (run: RegExpExecArray, alignments: number, decode: (chars: string) => Buffer, perByte: (offset: number, up: boolean) => number): void => {
      for (let shift = 0; shift < alignments; shift += 1) {
        const bytes = decode(run[0].slice(shift)).toString('latin1');
        for (const stretch of bytes.matchAll(PRINTABLE)) {
          const plain = stretch[0];
          let put: string | null = null;
          const scrubbed = this.scrub(plain, 'bytes', (marker) => (put ??= marker), decoded + 1);
          if (put === null) continue;
          let head = 0;
          while (head < plain.length && plain[head] === scrubbed[head]) head += 1;
          let tail = 0;
          while (tail < plain.length - head && plain[plain.length - 1 - tail] === scrubbed[scrubbed.length - 1 - tail]) tail += 1;
          const from = run.index! + shift + perByte(stretch.index + head, false);
          const to = Math.min(run.index! + run[0].length, run.index! + shift + perByte(stretch.index + plain.length - tail, true));
          cuts.push({ start: joined.start(from), end: joined.end(to - 1), marker: decodedMarker(put) });
        }
      }
    };
    for (const run of joined.read.matchAll(BASE64_RUN)) look(run, 4, (chars) => Buffer.from(chars, 'base64'), (offset, up) => (up ? Math.ceil(offset / 3) : Math.floor(offset / 3)) * 4);
    for (const run of joined.read.matchAll(HEX_RUN)) look(run, 2, (chars) => Buffer.from(chars, 'hex'), (offset) => offset * 2);
    return cuts;
  }

  /**
   * A text cut inside a secret (a detail or an error held to a length before it reached the
   * scrubber, a tail of an output): its last characters that are the secret's first, or its first
   * that are the secret's last, MIN_SECRET_CHARS or more, are replaced (`[removed: NAME (cut)]`).
   */
  private scrubCutEnds(text: string, view: 'text' | 'bytes', found: (marker: string) => void): string {
    if (text.length < MIN_SECRET_CHARS) return text;
    let out = text;
    for (const cut of this.cuts) {
      const form = cut[view];
      const head = form.heads.get(out[out.length - 1]!)?.find((length) => length <= out.length && out.endsWith(form.value.slice(0, length)));
      if (head !== undefined) {
        out = `${out.slice(0, out.length - head)}${cut.marker}`;
        found(cut.marker);
      }
      const tail = form.tails.get(out[0]!)?.find((length) => length <= out.length && out.startsWith(form.value.slice(form.value.length - length)));
      if (tail !== undefined) {
        out = `${cut.marker}${out.slice(tail)}`;
        found(cut.marker);
      }
    }
    return out;
  }

  /**
   * `text` with every secret and folder that its escapes, references or invisible characters hid
   * replaced, the whole stretch that spells it: as read once (a JSON event's escapes decoded), then
   * twice (what that event carries, a YAML or an HTML text, decoded in turn).
   */
  private scrubAsRead(text: string, view: 'text' | 'bytes', marker: (compiled: Compiled, groups: readonly unknown[]) => string): string {
    const compiled = this.regex(view);
    if (compiled === null) return text;
    let out = text;
    let layers: string[] | null = null;
    for (let depth = 1; depth <= READ_DEPTH; depth += 1) {
      // The text as read is looked in first, and where each of its characters stands worked out only when something is found there: most texts hold nothing.
      layers ??= readLayers(out, view);
      const read = layers[depth];
      if (read === undefined) break;
      compiled.regex.lastIndex = 0;
      if (!compiled.regex.test(read)) continue;
      compiled.regex.lastIndex = 0;
      const mapped = readView(out, view, depth);
      if (mapped === null) break;
      let scrubbed = '';
      let done = 0;
      for (const match of mapped.read.matchAll(compiled.regex)) {
        const start = mapped.start(match.index);
        if (start < done) continue;
        scrubbed += out.slice(done, start) + marker(compiled, match.slice(1));
        done = mapped.end(match.index + match[0].length - 1);
      }
      if (done > 0) {
        out = scrubbed + out.slice(done);
        layers = null;
      }
    }
    return out;
  }

  /** `text` with every secret and folder replaced by its marker. */
  text(text: string): string {
    return this.patterns.length === 0 && !text.includes(ARMOR_WORDS) ? text : this.scrub(text, 'text', () => undefined);
  }

  /** `bytes` scrubbed byte for byte: bytes that are not UTF-8 pass unchanged. The same buffer when nothing was found. */
  bytes(bytes: Uint8Array): Buffer {
    const buffer = Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes);
    if (this.patterns.length === 0 && !buffer.includes(ARMOR_WORDS)) return buffer;
    let found = false;
    const out = this.scrub(buffer.toString('latin1'), 'bytes', () => {
      found = true;
    });
    return found ? Buffer.from(out, 'latin1') : buffer;
  }

  /**
   * Each of this scrubber's own secrets `bytes` hold, in order, by its name and the form it was found in
   * (null as written; `cut` for a text cut inside it, `base64`, `percent-encoded`, … as the marker names
   * it): in any form the scrubber reads, its own key inside that key's armor too, but never a private
   * key found by its armor alone, which is no secret of this scrubber's list. What is judged of them is
   * the caller's (util/held-secrets.ts sentSecretIn).
   */
  secretsIn(bytes: Uint8Array): Array<{ readonly name: string; readonly form: string | null }> {
    const found: Array<{ readonly name: string; readonly form: string | null }> = [];
    // The armor's words kept from the armor's rule, which would take a known key's lines for any key's.
    const text = Buffer.from(bytes).toString('latin1').replaceAll(ARMOR_WORDS, 'PRIVATE_KEY');
    this.scrub(text, 'bytes', (marker) => {
      const named = /^\[removed: (.*?)(?: \(([^()]*)\))?\]$/.exec(marker);
      if (named === null || named[1] === PRIVATE_KEY_NAME) return;
      found.push({ name: named[1]!, form: named[2] ?? null });
    });
    return found;
  }

  /**
   * A value with every string and byte buffer in it scrubbed, keys included: arrays and plain
   * objects are copied, anything else is kept as it is. For results that are serialised later:
   * scrubbing before serialisation finds a secret whatever escaping the serialiser would add.
   */
  value<T>(value: T): T {
    return this.walk(value) as T;
  }

  private walk(value: unknown): unknown {
    if (typeof value === 'string') return this.text(value);
    if (value instanceof Uint8Array) return this.bytes(value);
    if (Array.isArray(value)) return value.map((item) => this.walk(item));
    if (value !== null && typeof value === 'object') {
      const proto = Object.getPrototypeOf(value) as unknown;
      if (proto !== Object.prototype && proto !== null) return value;
      return Object.fromEntries(Object.entries(value).map(([key, item]) => [this.text(key), this.walk(item)]));
    }
    return value;
  }
}

/**
 * A proxy's variable (`HTTPS_PROXY`, `http_proxy`, `ALL_PROXY`, npm's `npm_config_https_proxy`): curl, git and npm read a value
 * without a scheme (`user:PASSWORD@proxy:3128`) as http://. Not `NO_PROXY`, a list of hosts that names no proxy.
 */
const PROXY_NAME = /(?<!(?:^|_)NO)(?:^|_)PROXY$/i;

/**
 * The password of a Go database DSN (`user:PASSWORD@tcp(db:3306)/app`, `@unix(/run/mysqld.sock)/`, as
 * go-sql-driver/mysql reads one): no URL, so no scheme says where its user info ends; the driver takes
 * the password to the last `@` before the protocol and its address.
 */
function dsnPassword(value: string): string[] {
  const password = /^[^\s:/@]+:(\S*)@[a-z0-9]*\([^()\s]*\)\//i.exec(value.trim())?.[1];
  return password === undefined ? [] : [password];
}

/**
 * The secrets of the headers a `*_HEADERS` variable gives an exporter (OpenTelemetry's
 * `OTEL_EXPORTER_OTLP_HEADERS=api-key=…,Authorization=Bearer%20…`, a list of `name=value` parted by
 * `,`, each value percent-encoded): the value of a header isSecretField reads as secret, and of an
 * `Authorization` header the value and the credential after its scheme; each as written and decoded.
 */
function headerListSecrets(name: string, value: string): string[] {
  if (!/(?:^|_)HEADERS$/i.test(name)) return [];
  const out: string[] = [];
  for (const pair of value.split(',')) {
    const equals = pair.indexOf('=');
    if (equals < 0) continue;
    const field = pair.slice(0, equals).trim();
    const written = pair.slice(equals + 1).trim();
    let read = written;
    try {
      read = decodeURIComponent(written);
    } catch {
      // Not percent-encoded as written: taken as it stands.
    }
    if (/^(?:proxy-)?authorization$/i.test(field)) out.push(written, read, ...(/^\S+\s+(\S+)$/.exec(read)?.slice(1) ?? []));
    else if (isSecretField(field)) out.push(written, read);
  }
  return out;
}

/**
 * Provider keys, tokens and passwords in an environment: the values of the variables SECRET_NAME
 * names (*_KEY, *_TOKEN, *_SECRET, *PASSWORD, *PASSPHRASE, *_CREDENTIALS, SECRET_*, …), and the credentials of
 * any URL a variable holds: in its user info (`HTTPS_PROXY=http://user:PASSWORD@proxy`, or without its
 * scheme, PROXY_NAME), and in the
 * fields of its query or fragment isSecretField reads as secret (`DATABASE_URL=postgres://db/app?password=…`,
 * a `jdbc:postgresql://…?password=…`, an endpoint's `?key=…`, an Azure SAS URL's `&sig=…`); the
 * password of a Go DSN (dsnPassword), the secret headers of a `*_HEADERS` list (headerListSecrets); and the
 * secret fields of a connection string (`AZURE_STORAGE_CONNECTION_STRING=…;AccountKey=…`, an ADO.NET
 * `Password="…"`), and of a JSON document (jsonFieldSecrets). A field's value counts when it looksSecret,
 * as a secret field of a configuration file does. A variable's value taken by its name alone, and a URL's credentials in a variable
 * not a proxy's, are guessed (Secret.guessed): masked, but no consult's files are refused for them.
 */
export function environmentSecrets(env: NodeJS.ProcessEnv): Secret[] {
  const secrets: Secret[] = [];
  for (const [name, value] of Object.entries(env)) {
    if (value === undefined) continue;
    // A URL's credentials are the runner's own only in a proxy's variable, which the git and clients it starts use; in any other
    // (`DATABASE_URL=postgres://postgres:postgres@localhost/app`, for the project's own tools) they are guessed, as that variable's
    // value would be by its name: masked, refusing no consult's files. Those of the URLs the runner is given and uses (--remote, its
    // base URLs, git remotes) are given where it reads them (display-url.ts urlSecrets). A URL under a secret's name
    // (`REDIS_PASSWORD_URL=redis://app:PW@host`, `..._SAS_URL=...&sig=SIG`) has its credentials masked alone too.
    const proxy = PROXY_NAME.test(name);
    const inUrl = new Set(userInfoCredentials(proxy && !/^[a-z][a-z0-9+.-]*:\/\//i.test(value.trim()) ? `http://${value.trim()}` : value).filter((credential) => credential.length >= MIN_SECRET_CHARS));
    for (const field of [...secretFieldValues(value, isSecretField), ...dsnPassword(value)]) if (looksSecret(field)) inUrl.add(field);
    // A provider key's variable names a key the runner or its agents are given (OPENAI_API_KEY, in the environment or a
    // credential file's NAME=value alike); another name only guesses.
    if (SECRET_NAME.test(name) && value.length >= MIN_SECRET_CHARS) {
      secrets.push((PROVIDER_KEY_ENVS as readonly string[]).includes(name) ? { name, value } : { name, value, guessed: true });
      for (const credential of inUrl) if (credential !== value) secrets.push(proxy ? { name, value: credential } : { name, value: credential, guessed: true });
    } else {
      const credentials = new Set<string>();
      for (const field of [...connectionStringSecrets(value), ...headerListSecrets(name, value)]) if (looksSecret(field)) credentials.add(field);
      for (const credential of credentials) secrets.push({ name, value: credential });
      for (const credential of inUrl) if (!credentials.has(credential)) secrets.push(proxy ? { name, value: credential } : { name, value: credential, guessed: true });
    }
    const parts = new Set<string>();
    for (const field of jsonFieldSecrets(value)) for (const part of pemSecrets(field) ?? [field]) parts.add(part);
    // A private key found by its armor, under any name and at any depth of a document.
    for (const part of pemSecrets(value) ?? []) parts.add(part);
    for (const part of parts) if (looksSecret(part)) secrets.push({ name, value: part });
  }
  return secrets;
}

/**
 * The string values of the fields isSecretField reads as secret in a JSON document a variable holds, at
 * any depth (`OAUTH_CLIENT={"installed":{"client_secret":…}}`, a service account's `GCP_SA_KEY`): a
 * field printed alone (`jq -r .client_secret`) is not the variable's whole value.
 */
function jsonFieldSecrets(value: string): string[] {
  if (!/^\s*[{[]/.test(value)) return [];
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch {
    return [];
  }
  const out: string[] = [];
  const walk = (item: unknown, field: string): void => {
    if (typeof item === 'string') {
      if (isSecretField(field) && !namesNoSecret(field, item)) out.push(item);
    } else if (Array.isArray(item)) {
      for (const each of item) walk(each, field);
    } else if (item !== null && typeof item === 'object') {
      for (const [key, each] of Object.entries(item)) walk(each, key);
    }
  };
  walk(parsed, '');
  return out;
}

/**
 * The private keys in PEM or PGP armor a value holds, wherever it stands in it (a service account's
 * `private_key`, a variable of any name, a credential file): of each, every line of its body, the
 * part of it that is printed or cut out alone, and the body whole; null when it holds none. Its
 * line breaks may be written as escapes, once or more (`\n`, `\r\n`, `\\n`), as a JSON text, a
 * `.env` file or a platform's variable keeps a key on one line, and its slashes escaped (`\/`). The
 * first line of an OpenSSH key is left out: it is the header and the start of the public half that
 * every unencrypted key of its kind shares (as util/credential-files.ts reads `~/.ssh`). The block
 * itself has line breaks, which no secret looksSecret reads as one has.
 */
export function pemSecrets(value: string): string[] | null {
  if (!value.includes(ARMOR_WORDS)) return null;
  const out: string[] = [];
  for (const block of value.matchAll(/-----BEGIN ([A-Z0-9 ]*)PRIVATE KEY(?: BLOCK)?-----([\s\S]*?)-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----/g)) {
    // Base64 lines only: a legacy block's headers (`Proc-Type: 4,ENCRYPTED`, PGP's `Comment:`) say how it is kept, a PGP block's `=` line is its checksum.
    const lines = block[2]!
      .replace(/\\+\//g, '/')
      .split(/(?:[\r\n]|\\+[rn])+/)
      .filter((line) => !/^\s*[A-Za-z-]+: /.test(line))
      .flatMap((line) => line.split(/\s+/))
      .filter((line) => /^[A-Za-z0-9+/][A-Za-z0-9+/=]*$/.test(line));
    out.push(...(block[1] === 'OPENSSH ' ? lines.slice(1) : lines), lines.join(''));
  }
  return out.length === 0 ? null : out;
}

/** The base64 body of an OpenSSH private key file, without its armor and line breaks. */
function keyBody(key: PrivateKey, checkInt: number): string {
  return formatPrivateKey(key, checkInt).split('\n').slice(1, -2).join('');
}

/** The DER of an Ed25519 key's PKCS #8 form before its 32-byte seed (RFC 8410): what `openssl genpkey`, Node's `export({ type: 'pkcs8' })` and PKCS #8 PEM write. */
const ED25519_PKCS8_PREFIX = Buffer.from('302e020100300506032b657004220420', 'hex');

/**
 * What of a private key could be echoed: its seed in base64 (padded or not), base64url (a JWK's
 * `d`) and hex, seed and public half together in base64 (NaCl's 64-byte form), its PKCS #8 DER in
 * base64 (the body of a PKCS #8 PEM, `-----BEGIN PRIVATE KEY-----`), and the part of its OpenSSH
 * file that does not depend on the random check integer (everything from the secret half on), whole
 * and cut where the file's 70-column lines cut it. Any file of this key, ours or ssh-keygen's, has
 * that part in common. Other forms (the seed in another encoding, or a base64 text that does not
 * start with it) are not found.
 */
export function privateKeySecrets(key: PrivateKey, name = 'coo key'): Secret[] {
  const seed = Buffer.from(key.seed);
  const values = [
    seed.toString('base64'),
    seed.toString('base64').replace(/=+$/, ''),
    seed.toString('base64url'),
    seed.toString('hex'),
    Buffer.concat([seed, Buffer.from(key.publicKey.bytes)]).toString('base64'),
    Buffer.concat([ED25519_PKCS8_PREFIX, seed]).toString('base64'),
  ];
  const a = keyBody(key, 0);
  const b = keyBody(key, 0xffffffff);
  let start = a.length;
  while (start > 0 && a[start - 1] === b[start - 1]) start -= 1;
  values.push(a.slice(start));
  for (let line = Math.floor(start / 70) * 70; line < a.length; line += 70) values.push(a.slice(Math.max(line, start), line + 70));
  return values.filter((value) => value.length >= MIN_SECRET_CHARS).map((value) => ({ name, value }));
}

/**
 * The folders of a runner's machine every output is scrubbed of: its state folder, the ledger,
 * the repository it works in, folders it hides from children (the key's), and the user's home.
 */
export function runnerPlaces(folders: { readonly stateDir: string; readonly ledger: string; readonly repo: string; readonly hidden?: readonly string[] }): Place[] {
  return [
    { name: 'runner-state', path: resolve(folders.stateDir) },
    { name: 'ledger', path: resolve(folders.ledger) },
    { name: 'repo', path: resolve(folders.repo) },
    ...(folders.hidden ?? []).map((path) => ({ name: 'hidden', path: resolve(path) })),
    { name: 'home', path: homedir() },
  ];
}
