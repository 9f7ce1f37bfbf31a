import * as fs from 'node:fs';
import { CooError, type ErrorCode } from '../errors.js';

/**
 * Reading a file someone else may have made hostile: a FIFO that blocks its reader, a device, a
 * symbolic link to /dev/zero, a file that grows while it is read. The file is opened without
 * following a last-component link (unless asked) and without blocking, checked to be a regular
 * file on the descriptor itself, and read up to a bound; nothing is read in part.
 */

export type BoundedRead =
  | { readonly kind: 'file'; readonly bytes: Buffer; readonly mode: number; readonly uid: number }
  | { readonly kind: 'not_regular'; readonly type: string }
  | { readonly kind: 'too_large'; readonly size: number }
  | { readonly kind: 'unreadable'; readonly code: string };

/** What a stat says a path is, in the words a receipt uses. */
export function fileType(stats: fs.Stats | fs.BigIntStats): string {
  if (stats.isFile()) return 'file';
  if (stats.isDirectory()) return 'directory';
  if (stats.isSymbolicLink()) return 'symlink';
  if (stats.isFIFO()) return 'fifo';
  if (stats.isSocket()) return 'socket';
  if (stats.isCharacterDevice() || stats.isBlockDevice()) return 'device';
  return 'unknown';
}

export interface BoundedReadOptions {
  readonly maxBytes: number;
  /** Follow a symbolic link at the last component (an operator's own file); never for an agent's. */
  readonly follow?: boolean;
  /**
   * Refuse a file reached through a link in any folder on the way, not only at the last
   * component: the file the descriptor opened must be at exactly `path` (absolute, without links),
   * as Linux names it (`/proc/self/fd`). For a path inside a folder its writer may still be changing.
   */
  readonly exact?: boolean;
}

/** Reads a regular file whole, or says why not, without ever blocking on or following what is there. */
export function readBounded(path: string | Buffer, options: BoundedReadOptions): BoundedRead {
  let fd: number;
  try {
    fd = fs.openSync(path, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK | (options.follow === true ? 0 : fs.constants.O_NOFOLLOW));
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? 'EIO';
    // O_NOFOLLOW on a link: ELOOP. Said as what it is.
    if (code === 'ELOOP') return { kind: 'not_regular', type: 'symlink' };
    return { kind: 'unreadable', code };
  }
  try {
    if (options.exact === true && fs.readlinkSync(`/proc/self/fd/${fd}`) !== path.toString()) return { kind: 'not_regular', type: 'symlink' };
    const stats = fs.fstatSync(fd);
    if (!stats.isFile()) return { kind: 'not_regular', type: fileType(stats) };
    if (stats.size > options.maxBytes) return { kind: 'too_large', size: stats.size };
    // Read to the bound plus one: a file that grew since fstat is read as it is now, and one that
    // passed the bound is too large, never cut.
    let buffer = Buffer.allocUnsafe(Math.min(options.maxBytes, stats.size) + 1);
    let length = 0;
    for (;;) {
      if (length === buffer.length) {
        if (length > options.maxBytes) return { kind: 'too_large', size: length };
        const grown = Buffer.allocUnsafe(Math.min(options.maxBytes + 1, buffer.length * 2));
        buffer.copy(grown, 0, 0, length);
        buffer = grown;
      }
      const read = fs.readSync(fd, buffer, length, buffer.length - length, null);
      if (read === 0) break;
      length += read;
    }
    return { kind: 'file', bytes: buffer.subarray(0, length), mode: stats.mode, uid: stats.uid };
  } catch (error) {
    return { kind: 'unreadable', code: (error as NodeJS.ErrnoException).code ?? 'EIO' };
  } finally {
    fs.closeSync(fd);
  }
}

export interface OwnFileOptions {
  readonly maxBytes: number;
  /** What the file is, as the error names it (`the ledger's ref refs/heads/main`). */
  readonly what: string;
  /** What the operator should do about what is there instead. */
  readonly remedy: string;
  readonly code: ErrorCode;
}

/**
 * A file in a folder the operator owns (a ref in the ledger's git folder, an entry of a runner's
 * journal, a checkpoint), read whole within a bound: null when nothing is there. Anything else there
 * (a FIFO, a device, a folder, a link, a file over the bound, one that cannot be read) is a coded
 * error that names it and says what to do: never a read that blocks, never one of gigabytes.
 */
export function readOwnFile(path: string, options: OwnFileOptions): Buffer | null {
  const read = readBounded(path, { maxBytes: options.maxBytes });
  switch (read.kind) {
    case 'file':
      return read.bytes;
    case 'unreadable':
      if (read.code === 'ENOENT') return null;
      throw new CooError(options.code, `cannot read ${options.what} ${path} (${read.code}): ${options.remedy}`);
    case 'too_large':
      throw new CooError(options.code, `${options.what} ${path} is ${read.size} bytes, over the ${options.maxBytes}-byte bound: ${options.remedy}`);
    case 'not_regular':
      throw new CooError(options.code, `${options.what} ${path} is a ${read.type}, not a regular file: ${options.remedy}`);
  }
}

/** How long a read of a stream opened without blocking waits before it asks again for what its writer has not yet written. */
const STREAM_WAIT_MS = 10;

/**
 * An open stream (standard input, a pipe, a device) read to its end, or to one byte past
 * `maxBytes`: null when it holds more, never read whole. A stream opened without blocking (a FIFO,
 * readInput) whose writer has written nothing yet is asked again until it writes or closes; a
 * FIFO no program writes to ends at once, with nothing read. Other read errors are thrown as they come.
 */
export function readStreamBounded(fd: number, maxBytes: number): Buffer | null {
  const chunks: Buffer[] = [];
  let length = 0;
  const chunk = Buffer.alloc(64 * 1024);
  const pause = new Int32Array(new SharedArrayBuffer(4));
  for (;;) {
    let read: number;
    try {
      read = fs.readSync(fd, chunk);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EAGAIN') throw error;
      Atomics.wait(pause, 0, 0, STREAM_WAIT_MS);
      continue;
    }
    if (read === 0) return Buffer.concat(chunks);
    length += read;
    if (length > maxBytes) return null;
    chunks.push(Buffer.from(chunk.subarray(0, read)));
  }
}
