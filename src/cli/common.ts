import { closeSync, constants, lstatSync, openSync, statSync, type Stats } from 'node:fs';
import { dirname } from 'node:path';
import { LIMITS, MAX_FETCH_BYTES, MAX_TIME_LIMIT_MS } from '../limits.js';
import { fileType, readBounded, readStreamBounded } from '../util/bounded-read.js';
import { writeOwnFile } from '../util/own-write.js';
import { Option, type Command } from 'commander';
import { CooError, type ErrorCode } from '../errors.js';
import { parsePrivateKey, parsePublicKeyLine, type PrivateKey, type PublicKey } from '../crypto/keys.js';
import { lastPackingFailure } from '../ledger/object-store.js';
import { parseDuration } from '../util/time.js';
import { MAX_USD } from '../schema/common.js';
import { idempotencyKey as idempotencyKeyForm } from '../schema/message.js';
import { checkGivenKey } from '../authority/idempotency.js';
import { CLI_ARGUMENTS, type ArgumentNames } from '../util/argument-names.js';
import { writeErr } from './terminal.js';
import { inertJson, terminalText } from '../util/invisible.js';

/** Options every verb that touches a ledger shares. */
export function ledgerOption(): Option {
  return new Option('--ledger <path>', 'the ledger (a bare git repository); default $COO_LEDGER').env('COO_LEDGER');
}

export function keyOption(description = 'your OpenSSH ed25519 private key file; default $COO_KEY'): Option {
  return new Option('--key <file>', description).env('COO_KEY');
}

/** The CEO's key, for the verbs only the CEO may run (init, trust, approve): `--ceo-key`, else `$COO_CEO_KEY`. */
export function ceoKeyOption(description: string): Option {
  return new Option('--ceo-key <file>', `${description}; default $COO_CEO_KEY`).env('COO_CEO_KEY');
}

export function jsonOption(): Option {
  return new Option('--json', 'print machine-readable JSON');
}

export function required<T>(value: T | undefined, flag: string, hint: string): T {
  if (value === undefined || value === '') throw new CooError('USAGE', `${flag} is required (${hint})`);
  return value;
}

/**
 * A file the operator names (or `-`, standard input), read up to `maxBytes`: a regular file over
 * the bound is refused from its size before any byte is read, and a stream (standard input, a pipe
 * such as `<(...)`, a device such as /dev/zero) is read only to one byte past it, never whole. Over the
 * bound is `overCode`: USAGE, or YAML_TOO_LARGE for a YAML document, as the parser would say it.
 */
export function readInput(path: string, what: string, maxBytes: number, overCode: ErrorCode = 'USAGE'): Buffer {
  const over = (size: string): CooError => new CooError(overCode, `the ${what} ${path === '-' ? 'on standard input' : path} is ${size} the ${maxBytes}-byte limit: give a smaller one`);
  // A FIFO is opened once only, below: a reader that opened and closed it first would wake a writer
  // waiting on it, and what that writer wrote would be dropped with that reader.
  let type: string | null = path !== '-' && isFifo(path) ? 'fifo' : null;
  if (path !== '-' && type === null) {
    const read = readBounded(path, { maxBytes, follow: true });
    if (read.kind === 'file') return read.bytes;
    if (read.kind === 'too_large') throw over(`${read.size} bytes, over`);
    if (read.kind === 'unreadable') throw unreadable(path, what, read.code);
    if (read.type === 'directory') throw new CooError('USAGE', `the ${what} ${path} is a folder: give a file`);
    type = read.type;
  }
  let fd: number;
  try {
    // Without blocking: a FIFO no program writes to is said below, never waited on for ever.
    fd = path === '-' ? 0 : openSync(path, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch (error) {
    throw unreadable(path, what, (error as NodeJS.ErrnoException).code ?? (error as Error).message);
  }
  try {
    const bytes = readStreamBounded(fd, maxBytes);
    if (bytes === null) throw over('over');
    if (type === 'fifo' && bytes.length === 0) throw new CooError('USAGE', `the ${what} ${path} is a FIFO that gave nothing (no program was writing to it): give a file, or start the program that writes it first`);
    return bytes;
  } catch (error) {
    if (error instanceof CooError) throw error;
    throw unreadable(path, what, (error as NodeJS.ErrnoException).code ?? (error as Error).message);
  } finally {
    if (fd !== 0) closeSync(fd);
  }
}

function isFifo(path: string): boolean {
  try {
    return statSync(path).isFIFO();
  } catch {
    return false;
  }
}

/** Errors by which a path the operator named is not there or not theirs to read: a mistake in the command line. */
const MISNAMED = new Set(['ENOENT', 'ENOTDIR', 'EACCES', 'EPERM', 'ELOOP', 'ENAMETOOLONG']);

/** A file the operator named that cannot be read: USAGE when the path is wrong (exit 2, as a missing option is), IO_ERROR when the file system failed. */
function unreadable(path: string, what: string, code: string): CooError {
  if (MISNAMED.has(code)) return new CooError('USAGE', `cannot read ${what} ${path} (${code}): check the path`);
  return new CooError('IO_ERROR', `cannot read ${what} ${path}: ${code}`);
}

/**
 * Throws USAGE when something other than a file is at `path` (a folder too, unless `folder` allows
 * it, when the write itself says why it cannot replace one): coo replaces only a file whole.
 */
export function refuseOutputPath(path: string, flag: string, folder = true): void {
  let there: Stats | null = null;
  try {
    there = lstatSync(path);
  } catch {
    // nothing there, or nothing this user may see: the write says which
  }
  if (there !== null && !there.isFile() && !(folder && there.isDirectory())) {
    throw new CooError('USAGE', `${flag} ${path} is a ${fileType(there)}, not a file: give ${flag} the path of a file to write (coo replaces it whole)`);
  }
}

/**
 * Writes a file the operator named (`--html`, `--out`, `--bundle`, `--revocations`) whole or not at
 * all: a temporary file beside it, renamed over it. Only a regular file at the name is replaced. A
 * device (/dev/stdout), a FIFO, a socket or a link there is refused (USAGE), neither written through
 * nor replaced: a FIFO no program reads would hold the verb for ever, and a device replaced by a
 * file (as root) would be gone for every program of the machine.
 */
export function writeOutput(path: string, data: string | Buffer, flag: string, what: string): void {
  refuseOutputPath(path, flag);
  writeOwnFile(path, data, { mode: 0o644, makeFolder: false, what, remedy: `give ${flag} a path of a file in a folder you can write`, code: 'IO_ERROR' });
}

/**
 * A private key file. One that others than its owner may read or write is used with a warning that
 * says how to close it (a key another user of the machine can read is a key they may sign with):
 * refusing it would stop a deployment whose keys were written by other tools. A stream (`-`, a pipe
 * such as `<(pass show ...)`) has no such mode and is read as it is.
 */
export function loadPrivateKey(path: string): PrivateKey {
  const text = readInput(path, 'key file', LIMITS.keyFileBytes).toString('utf8');
  // A public key given for the private one (ID.pub for ID.key) is a mistake in the command line, said as one.
  if (/^\s*ssh-[a-z0-9-]+ AAAA/.test(text)) throw new CooError('USAGE', `the key file ${path} holds a public key: give the private key file (coo keygen writes it as ID.key beside ID.pub)`);
  let mode: number | null = null;
  try {
    const stats = statSync(path);
    if (stats.isFile()) mode = stats.mode & 0o777;
  } catch {
    // read above, then gone: the key read is used
  }
  if (mode !== null && (mode & 0o077) !== 0) {
    writeErr(`coo: warning: the key file ${path} is open to others (mode ${mode.toString(8).padStart(4, '0')}): whoever may read it may sign as its actor; run chmod 600 ${path}\n`);
  }
  if (mode !== null) warnReplaceable(path, 'key file', 'the key coo signs with');
  // A key file that holds no usable private key is a mistake in the command line too: said naming the file, before anything runs.
  try {
    return parsePrivateKey(text);
  } catch (error) {
    if (!(error instanceof CooError)) throw error;
    throw new CooError('USAGE', `the key file ${path} holds no usable private key (${error.message}): give the unencrypted ed25519 private key coo keygen wrote (ID.key)`);
  }
}

export function loadPublicKey(path: string): PublicKey {
  const key = parsePublicKeyLine(readInput(path, 'public key file', LIMITS.keyFileBytes).toString('utf8')).key;
  let regular = false;
  try {
    regular = statSync(path).isFile();
  } catch {
    // read above, then gone: the key read is used
  }
  if (regular) warnReplaceable(path, 'public key file', 'the key it pins or gives');
  return key;
}

/**
 * A key file that every user of the machine may write, or that sits in a folder every user may write
 * without the sticky bit (where any of them may rename another file over it), is one another user
 * may have replaced: a pinned trust root that anyone chose pins nothing, a private key anyone chose
 * signs for them. Said as a warning, as a key file others may read is: the key read is used.
 */
function warnReplaceable(path: string, what: string, whose: string): void {
  const open = (file: string, folder: boolean): boolean => {
    try {
      const stats = statSync(file);
      return (stats.mode & 0o002) !== 0 && !(folder && (stats.mode & 0o1000) !== 0);
    } catch {
      return false;
    }
  };
  const where = open(path, false) ? `the ${what} ${path} may be written by every user` : open(dirname(path), true) ? `the ${what} ${path} is in a folder every user may write (${dirname(path)})` : null;
  if (where !== null) writeErr(`coo: warning: ${where}: another user may have replaced ${whose}; run chmod o-w on it, and check the key's fingerprint\n`);
}

const FINGERPRINT = /^SHA256:[A-Za-z0-9+/]{43}$/;

/** What `--genesis` says of itself in help: the ledger a pin holds the history to. */
export const GENESIS_HELP = "the ledger's genesis commit (genesis in coo verify --json, or git rev-list --max-parents=0 main): another ledger under the same keys, a staging copy, is refused";

/** `--genesis`: a full commit id, or undefined when the flag was not given. */
export function genesisFlag(value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  if (!/^[0-9a-f]{40}$/.test(value)) throw new CooError('USAGE', `--genesis takes a full commit id (40 lower-case hex digits), not ${JSON.stringify(value)}`);
  return value;
}

/** A pinned trust root (`--trust-root`): a public key file, or the SHA256 fingerprint `coo init` printed. */
export function pinnedKeyId(value: string): { keyId: string } {
  if (FINGERPRINT.test(value)) return { keyId: value };
  return { keyId: loadPublicKey(value).keyId };
}

/** `ID=VALUE` pairs of a repeatable option. */
export function collectPairs(value: string, previous: string[] = []): string[] {
  return [...previous, value];
}

export function splitPair(pair: string, flag: string): [string, string] {
  const at = pair.indexOf('=');
  if (at <= 0 || at === pair.length - 1) throw new CooError('USAGE', `${flag} takes ID=VALUE, got ${JSON.stringify(pair)}`);
  return [pair.slice(0, at), pair.slice(at + 1)];
}

/** Prints a result: JSON when asked, else the human lines, acting characters shown as code points (`terminalText`). */
export function emit(json: boolean | undefined, value: unknown, human: () => string): void {
  process.stdout.write(json === true ? `${inertJson(value, 2)}\n` : `${terminalText(human())}\n`);
}

/**
 * Prints a written message: with `--json` the whole result; otherwise only its id on standard
 * output, so `id=$(coo consult ...)` works, and what else there is to say on standard error.
 */
export function emitMessage<T extends { readonly message_id: string }>(verb: string, json: boolean | undefined, value: T, note: string): void {
  if (json === true) {
    process.stdout.write(`${inertJson(value, 2)}\n`);
    return;
  }
  process.stdout.write(`${value.message_id}\n`);
  if (note !== '') writeErr(`coo ${verb}: ${value.message_id}${note}\n`);
}

export function now(): Date {
  return new Date();
}

export type Verb = (program: Command) => void;

/** A note for the operator when git's background packing of the ledger failed (object-store.ts lastPackingFailure), or null. */
export function packingNote(gitdir: string): string | null {
  const failure = lastPackingFailure(gitdir);
  if (failure === null) return null;
  // The text is trimmed and not empty, so its first line is git's first words.
  const said = failure.text.split('\n', 1)[0]!.trim();
  return `git's last background packing of this ledger failed, and git skips packing it while ${failure.log} is there (for up to a day, gc.logExpiry; git said "${said}"). Fix the cause, remove that file, then run "git --git-dir ${gitdir} gc" (unpacked, the ledger verifies more slowly; its entries are unaffected)`;
}

/**
 * `--idempotency-key`, spread into a writer's request, its form checked before any I/O and refused
 * naming the flag (USAGE): what an envelope's key holds (the schema's idempotencyKey), and no `~`
 * (authority/idempotency.ts checkGivenKey). Whether a key of the derived form may be written is the
 * writer's to say, in the slot the envelope lands in (lane/request-key.ts derivedKeyRule): with the
 * key go the CLI's words (`names`), so that the writer's refusal names the flag, not a library field.
 */
export function idempotencyKeyFlag(given: string | undefined): { idempotencyKey?: string; names: ArgumentNames } {
  if (given === undefined) return { names: CLI_ARGUMENTS };
  const form = idempotencyKeyForm.safeParse(given).error?.issues[0];
  if (form != null) throw new CooError('USAGE', `--idempotency-key ${JSON.stringify(given.length > 64 ? `${given.slice(0, 63)}…` : given)}: ${form.message}`);
  checkGivenKey(given, CLI_ARGUMENTS.idempotencyKey, CLI_ARGUMENTS.idempotencyKey);
  return { idempotencyKey: given, names: CLI_ARGUMENTS };
}

/**
 * A number as a person writes it: decimal digits, a point, an exponent. JavaScript's Number() also
 * reads `0x4`, `0b100` and `0o4` (a cost of 0x4 was taken as $4).
 */
const DECIMAL_FORM = /^\s*[-+]?(\d+\.?\d*|\.\d+)(e[-+]?\d+)?\s*$/i;

/**
 * A flag's positive amount of USD (`--max-cost`, `--budget`), or undefined when the flag was not
 * given: at most MAX_USD, what an envelope's figures hold and the tools take. Over it, the envelope's
 * schema refused it in its own words (SCHEMA_INVALID "expected number to be <=1000000"), naming no flag.
 */
export function positiveNumber(value: string | undefined, flag: string): number | undefined {
  if (value === undefined) return undefined;
  const n = DECIMAL_FORM.test(value) ? Number(value) : Number.NaN;
  if (!Number.isFinite(n) || n <= 0) throw new CooError('USAGE', `${flag} takes a positive number, got ${JSON.stringify(value)}${readAs(value, n)}`);
  if (n > MAX_USD) throw new CooError('USAGE', `${flag} takes a positive number of USD of at most ${MAX_USD}, the most an envelope holds, got ${JSON.stringify(value)}`);
  return n;
}

/**
 * A flag's whole number from 1 (a runtime in seconds, a hop count, an attempt, a proposal, an issue),
 * or undefined when the flag was not given. Taken as any positive number and rounded, 0.4 became 0,
 * which the envelope's schema refused as "expected >0" of a flag given more, and a number past
 * 2^53 reached that schema to be refused in its words; the tools take whole numbers alone.
 */
export function wholeNumber(value: string | undefined, flag: string, what = 'a whole number', max = Number.MAX_SAFE_INTEGER): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!/^\s*\d+\s*$/.test(value) || !Number.isSafeInteger(n) || n < 1 || n > max) {
    throw new CooError('USAGE', `${flag} takes ${what} from 1 to ${max}, got ${JSON.stringify(value)}${readAs(value, n)}`);
  }
  return n;
}

/**
 * What a number written in full was read as, when that is not what it says: a double holds no
 * number as large as 1e400 (read as Infinity) nor as near 0 as 1e-400 (read as 0).
 */
function readAs(text: string, n: number): string {
  if (!DECIMAL_FORM.test(text)) return '';
  if (!Number.isFinite(n)) return `, a number too large to hold (read as ${n})`;
  return n === 0 && /[1-9]/.test(text.replace(/e.*$/i, '')) ? ', a number too near 0 to hold (read as 0)' : '';
}

/**
 * Refuses (USAGE) each of `flags` given on the command line while `partner` is not: a flag that
 * does something only beside another (a runner's flag without `coo mcp --run`, a remote's without
 * `--remote`) is an operator's mistake said at start, never one silently left unused. A value
 * taken from the environment or a default is not the operator's word on this run: left alone.
 */
export function requireGivenWith(command: Command, flags: readonly string[], partner: string, present: boolean): void {
  if (present) return;
  for (const flag of flags) {
    const option = command.options.find((item) => item.long === flag);
    if (option === undefined) throw new CooError('INTERNAL', `${command.name()} has no option ${flag}`);
    if (command.getOptionValueSource(option.attributeName()) === 'cli') throw new CooError('USAGE', `${flag} goes with ${partner}`);
  }
}

/**
 * A flag's seconds that end in a timer (`coo clone --timeout`, the runners' flags below), or undefined
 * when not given: above 0 and at most a day. Past 2^31 - 1 ms a timer's delay overflows and Node runs
 * it at once: a time box of 2147484 s killed git the moment it started, and a poll meant to be rare
 * would ask the remote without pause.
 */
export function timerSeconds(flag: string, text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  const value = DECIMAL_FORM.test(text) ? Number(text) : Number.NaN;
  const max = MAX_TIME_LIMIT_MS / 1000;
  if (!Number.isFinite(value) || value <= 0 || value > max) throw new CooError('USAGE', `${flag} takes a number of seconds above 0 and at most ${max}, got ${JSON.stringify(text)}`);
  return value;
}

/** A runner's seconds flag (`--poll-interval`, `--poll-max`, `--lease-grace` of coo watch and coo mcp --run), or `fallback` when not given. */
export function runnerSeconds(flag: string, text: string | undefined, fallback: number): number {
  return timerSeconds(flag, text) ?? fallback;
}

/** The most `--max-fetch` may be set to, in MiB (1 TiB, as a library caller's maxFetchBytes). */
const MAX_FETCH_MIB = MAX_FETCH_BYTES / (1024 * 1024);

/**
 * `--max-fetch <MiB>` (coo clone, coo watch): the most one fetch of the remote's main may bring, in
 * bytes, or undefined when the flag was not given (LIMITS.remoteFetchBytes, 1024 MiB, then bounds it).
 */
export function maxFetchFlag(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const mib = Number(value);
  if (!/^\s*\d+\s*$/.test(value) || !Number.isSafeInteger(mib) || mib < 1 || mib > MAX_FETCH_MIB) {
    throw new CooError('USAGE', `--max-fetch takes a whole number of MiB from 1 to ${MAX_FETCH_MIB} (default ${LIMITS.remoteFetchBytes / (1024 * 1024)}), got ${JSON.stringify(value)}`);
  }
  return mib * 1024 * 1024;
}

/** The help text of `--max-fetch`. */
export const MAX_FETCH_HELP = `the most one fetch of the remote's main may bring, in MiB (default ${LIMITS.remoteFetchBytes / (1024 * 1024)}): a remote that sends more is stopped there and what it sent removed; raise it for a ledger larger than that`;

/**
 * The longest duration a flag takes: no policy allows a time-to-live or a runtime of more than 30
 * days (schema/policy.ts), and past a year a duration is a typo. Unbounded, a duration such as
 * 9007199254740993 seconds put an expiry past the last date a time can name: an internal error.
 */
const MAX_DURATION_SECONDS = 366 * 86_400;

/**
 * A flag's duration (`90`, `30m`, `2h`) in seconds, or undefined when the flag was not given. `max`
 * (seconds) bounds a flag the envelope bounds more closely, such as a dispatch's time box (a day).
 */
export function durationFlag(value: string | undefined, flag: string, max?: number): number | undefined {
  if (value === undefined) return undefined;
  const seconds = parseDuration(value);
  if (seconds === null || seconds === 0) throw new CooError('USAGE', `${flag} takes a duration such as 90s, 30m or 2h, got ${JSON.stringify(value)}`);
  if (max !== undefined && seconds > max) throw new CooError('USAGE', `${flag} takes a duration of at most ${max}s, got ${JSON.stringify(value)}`);
  if (seconds > MAX_DURATION_SECONDS) throw new CooError('USAGE', `${flag} takes a duration of at most 366d (no policy allows more than 30d), got ${JSON.stringify(value)}`);
  return seconds;
}
