import { homedir } from 'node:os';
import { resolve } from 'node:path';
import { formatPrivateKey, type PrivateKey } from '../crypto/keys.js';

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
 *   also broken into lines as `base64`, `openssl base64` and `xxd -p` break them, written or
 *   JSON-escaped; hex in either case; percent-encoded, whatever the encoder left alone. A value
 *   shorter than MIN_SECRET_CHARS is not looked for in any form. At two of the three base64
 *   alignments a few bits of the secret's first and last byte stand outside the characters looked
 *   for, and stay beside the marker.
 * - What no scrubber finds: a secret encrypted, compressed, hashed, split across outputs or
 *   encoded twice or in any way of a program's own choosing. A child that holds a key can always
 *   get it out; this catches the echo and the one-line encoding, not a determined agent. The defence
 *   against that is not handing it the key.
 * - A folder of the runner's machine is replaced by `[NAME]` (`[sandbox]`, `[worktree]`,
 *   `[runner-state]`, `[home]`), so a recorded path is relative to the place it names and the
 *   ledger does not tell its readers how the operator's machine is laid out. A folder matches only
 *   as a whole path (`/a/state` is not found in `/a/state2`, nor `/root` in `trust/root`).
 *
 * Longer values win where two overlap (a sandbox inside the state folder is `[sandbox]`). Every
 * form is in one regular expression built once per scrubber; a text is scrubbed whole (a secret
 * split across two texts is not found), so callers scrub a whole output, not its chunks.
 */

/** A secret value the runner holds or handed a child, by the name it goes by. */
export interface Secret {
  readonly name: string;
  readonly value: string;
}

/** A folder of the runner's machine, by the name its marker gives it. */
export interface Place {
  readonly name: string;
  readonly path: string;
}

/** Shorter values are not looked for: they would cut ordinary words apart. */
export const MIN_SECRET_CHARS = 8;

/** Environment variables whose values are secrets: provider keys, tokens, passwords. */
const SECRET_NAME = /(_KEY|_TOKEN|_SECRET|_PASSWORD|_CREDENTIALS?)$/;

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
  /** Base64 or hex, which an encoder may break into lines. */
  readonly encoded?: boolean;
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
 * A line break an encoder put inside its output (`base64` at 76 columns, `openssl base64` at 64,
 * `xxd -p` at 60), as written or JSON-escaped, before a line of base64 or hex (and after one of 16 or
 * more characters, MIN_LINE_CHARS). A run of such lines is looked in again with its breaks taken out.
 */
const BREAK_IN_ENCODED = /(?:\r?\n|(?:\\r)?\\n)(?=[A-Za-z0-9+/=_-])/g;
/** The shortest line of an encoder's wrapped output (a shorter one is ordinary text, or the last line). */
const MIN_LINE_CHARS = 16;
const LINE_BREAK = /\r?\n|(?:\\r)?\\n/g;
const ENCODED_CHAR = /[A-Za-z0-9+/=_-]/;

/** Where the runs of lines in `text` that an encoder broke start and end, breaks included. */
function wrappedRuns(text: string): Array<{ start: number; end: number }> {
  const runs: Array<{ start: number; end: number }> = [];
  for (const lineBreak of text.matchAll(BREAK_IN_ENCODED)) {
    let start = lineBreak.index;
    while (start > 0 && ENCODED_CHAR.test(text[start - 1]!)) start -= 1;
    if (lineBreak.index - start < MIN_LINE_CHARS) continue;
    const last = runs.at(-1);
    // The line before this break goes back to (or into, for the `n` of an escaped break) the end of the run so far: one run.
    if (last !== undefined && start <= last.end) last.end = lineBreak.index + lineBreak[0].length;
    else runs.push({ start, end: lineBreak.index + lineBreak[0].length });
  }
  for (const run of runs) while (run.end < text.length && ENCODED_CHAR.test(text[run.end]!)) run.end += 1;
  return runs;
}

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
    return { text: source, bytes: source, marker: named(form), length: chars.length, encoded: true };
  };
  const reversed = [...secret.value].reverse().join('');
  const patterns = [...new Set([secret.value, jsonForm(secret.value)])].map((text) => literal(text, ''));
  patterns.push(...[...new Set([reversed, jsonForm(reversed)])].map((text) => literal(text, 'reversed')));
  for (const core of base64Cores(secret.value)) if (core.length >= MIN_SECRET_CHARS) patterns.push(encoded([...core].map(base64Char), 'base64'));
  patterns.push(encoded([...Buffer.from(secret.value, 'utf8').toString('hex')].map(eitherCase), 'hex'));
  patterns.push({ text: percentForm(secret.value, (char) => char), bytes: percentForm(secret.value, latin1), marker: named('percent-encoded'), length: secret.value.length });
  return patterns;
}

export class Scrubber {
  private readonly patterns: readonly Pattern[];
  /** The patterns as one regular expression each over text and over bytes read as latin1 (bytes are scrubbed byte for byte, whatever their encoding), one group per pattern. */
  private compiled: { text: RegExp; bytes: RegExp; encoded: { regex: RegExp; patterns: readonly Pattern[] } | null } | null = null;

  constructor(
    readonly secrets: readonly Secret[] = [],
    readonly places: readonly Place[] = [],
  ) {
    const patterns = new Map<string, Pattern>();
    for (const secret of secrets) {
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
  }

  /** This scrubber with more secrets and folders (an attempt's own sandbox or worktree). */
  with(secrets: readonly Secret[], places: readonly Place[] = []): Scrubber {
    return new Scrubber([...this.secrets, ...secrets], [...this.places, ...places]);
  }

  private regexes(): NonNullable<Scrubber['compiled']> | null {
    if (this.patterns.length === 0) return null;
    const encoded = this.patterns.filter((pattern) => pattern.encoded === true);
    const combined = (patterns: readonly Pattern[], source: (pattern: Pattern) => string): RegExp => new RegExp(patterns.map((pattern) => `(${source(pattern)})`).join('|'), 'g');
    this.compiled ??= {
      text: combined(this.patterns, (pattern) => pattern.text),
      bytes: combined(this.patterns, (pattern) => pattern.bytes),
      encoded: encoded.length === 0 ? null : { regex: combined(encoded, (pattern) => pattern.text), patterns: encoded },
    };
    return this.compiled;
  }

  /** `text` with every secret and folder replaced by its marker; `found` is told when one was. */
  private scrub(text: string, regex: RegExp, found: () => void): string {
    const marker = (patterns: readonly Pattern[], groups: readonly unknown[]): string => {
      found();
      return patterns[groups.findIndex((group) => group !== undefined)]!.marker;
    };
    const scrubbed = text.replace(regex, (_match, ...groups: unknown[]) => marker(this.patterns, groups));
    const encoded = this.compiled!.encoded;
    if (encoded === null) return scrubbed;
    // A secret's base64 or hex broken into lines: looked for in each such run with its breaks taken out, and the whole stretch replaced.
    let out = '';
    let done = 0;
    for (const run of wrappedRuns(scrubbed)) {
      const block = scrubbed.slice(run.start, run.end);
      const kept: number[] = [];
      let joined = '';
      let from = 0;
      for (const lineBreak of [...block.matchAll(LINE_BREAK), null]) {
        const to = lineBreak === null ? block.length : lineBreak.index;
        for (let at = from; at < to; at += 1) kept.push(run.start + at);
        joined += block.slice(from, to);
        if (lineBreak !== null) from = to + lineBreak[0].length;
      }
      for (const match of joined.matchAll(encoded.regex)) {
        out += scrubbed.slice(done, kept[match.index]!) + marker(encoded.patterns, match.slice(1));
        done = kept[match.index + match[0].length - 1]! + 1;
      }
    }
    return done === 0 ? scrubbed : out + scrubbed.slice(done);
  }

  /** `text` with every secret and folder replaced by its marker. */
  text(text: string): string {
    const regexes = this.regexes();
    return regexes === null ? text : this.scrub(text, regexes.text, () => undefined);
  }

  /** `bytes` scrubbed byte for byte: bytes that are not UTF-8 pass unchanged. The same buffer when nothing was found. */
  bytes(bytes: Uint8Array): Buffer {
    const buffer = Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes);
    const regexes = this.regexes();
    if (regexes === null) return buffer;
    let found = false;
    const out = this.scrub(buffer.toString('latin1'), regexes.bytes, () => {
      found = true;
    });
    return found ? Buffer.from(out, 'latin1') : buffer;
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

/** Provider keys, tokens and passwords in an environment: the values of *_KEY, *_TOKEN, *_SECRET, *_PASSWORD and *_CREDENTIALS. */
export function environmentSecrets(env: NodeJS.ProcessEnv): Secret[] {
  return Object.entries(env)
    .filter((entry): entry is [string, string] => SECRET_NAME.test(entry[0]) && entry[1] !== undefined && entry[1].length >= MIN_SECRET_CHARS)
    .map(([name, value]) => ({ name, value }));
}

/** The base64 body of an OpenSSH private key file, without its armor and line breaks. */
function keyBody(key: PrivateKey, checkInt: number): string {
  return formatPrivateKey(key, checkInt).split('\n').slice(1, -2).join('');
}

/**
 * What of a private key could be echoed: its seed (raw base64 and hex), and the part of its
 * OpenSSH file that does not depend on the random check integer (everything from the secret half
 * on), whole and cut where the file's 70-column lines cut it. Any file of this key, ours or
 * ssh-keygen's, has that part in common.
 */
export function privateKeySecrets(key: PrivateKey, name = 'coo key'): Secret[] {
  const seed = Buffer.from(key.seed);
  const values = [seed.toString('base64'), seed.toString('base64').replace(/=+$/, ''), seed.toString('hex'), Buffer.concat([seed, Buffer.from(key.publicKey.bytes)]).toString('base64')];
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
