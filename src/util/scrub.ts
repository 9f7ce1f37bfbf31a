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
 *   since most of what comes back is JSON.
 * - A folder of the runner's machine is replaced by `[NAME]` (`[sandbox]`, `[worktree]`,
 *   `[runner-state]`, `[home]`), so a recorded path is relative to the place it names and the
 *   ledger does not tell its readers how the operator's machine is laid out. A folder matches only
 *   as a whole path (`/a/state` is not found in `/a/state2`, nor `/root` in `trust/root`).
 *
 * Longer values win where two overlap (a sandbox inside the state folder is `[sandbox]`).
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
const NOT_AFTER_PATH = '(?<=^|[^A-Za-z0-9._~/\\\\-]|\\\\[nrtbf"/\\\\])';

interface Pattern {
  readonly text: string;
  readonly marker: string;
  /** A folder: matches only where its name ends. */
  readonly place: boolean;
}

function escapeRegex(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** How JSON writes `text` inside a string, when that differs from the text. */
function jsonForm(text: string): string {
  return JSON.stringify(text).slice(1, -1);
}

export class Scrubber {
  private readonly patterns: readonly Pattern[];
  /** The same patterns over text read as latin1: bytes are scrubbed byte for byte, whatever their encoding. */
  private compiled: { text: RegExp | null; bytes: RegExp | null; markers: Map<string, Pattern> } | null = null;

  constructor(
    readonly secrets: readonly Secret[] = [],
    readonly places: readonly Place[] = [],
  ) {
    const patterns = new Map<string, Pattern>();
    for (const secret of secrets) {
      if (secret.value.length < MIN_SECRET_CHARS) continue;
      for (const form of new Set([secret.value, jsonForm(secret.value)])) patterns.set(form, { text: form, marker: `[removed: ${secret.name}]`, place: false });
    }
    for (const place of places) {
      const path = place.path.replace(/\/+$/, '');
      if (path.length < MIN_PLACE_CHARS || patterns.has(path)) continue;
      for (const form of new Set([path, jsonForm(path)])) patterns.set(form, { text: form, marker: `[${place.name}]`, place: true });
    }
    this.patterns = [...patterns.values()].sort((a, b) => b.text.length - a.text.length);
  }

  /** This scrubber with more secrets and folders (an attempt's own sandbox or worktree). */
  with(secrets: readonly Secret[], places: readonly Place[] = []): Scrubber {
    return new Scrubber([...this.secrets, ...secrets], [...this.places, ...places]);
  }

  private regexes(): NonNullable<Scrubber['compiled']> {
    if (this.compiled !== null) return this.compiled;
    const markers = new Map<string, Pattern>();
    const build = (encode: (text: string) => string): RegExp | null => {
      if (this.patterns.length === 0) return null;
      const alternatives = this.patterns.map((pattern) => {
        const text = encode(pattern.text);
        markers.set(text, pattern);
        return pattern.place ? `${NOT_AFTER_PATH}${escapeRegex(text)}(?!${PATH_CHAR.source})` : escapeRegex(text);
      });
      return new RegExp(alternatives.join('|'), 'g');
    };
    const text = build((value) => value);
    const bytes = build((value) => Buffer.from(value, 'utf8').toString('latin1'));
    this.compiled = { text, bytes, markers };
    return this.compiled;
  }

  /** `text` with every secret and folder replaced by its marker. */
  text(text: string): string {
    const { text: regex, markers } = this.regexes();
    return regex === null ? text : text.replace(regex, (match) => markers.get(match)!.marker);
  }

  /** `bytes` scrubbed byte for byte: bytes that are not UTF-8 pass unchanged. The same buffer when nothing was found. */
  bytes(bytes: Uint8Array): Buffer {
    const buffer = Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes);
    const { bytes: regex, markers } = this.regexes();
    if (regex === null) return buffer;
    const latin1 = buffer.toString('latin1');
    let found = false;
    const out = latin1.replace(regex, (match) => {
      found = true;
      return markers.get(match)!.marker;
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
