import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { CooError, type ErrorCode } from '../errors.js';
import { fileType } from './bounded-read.js';

/**
 * Writing a file at a fixed name in a folder the runner owns (a journal entry, a kept or late
 * result, the head it last saw, a pid file, a sandbox's prompt), where someone may have left
 * something else at that name: a FIFO that would block the writer, a symbolic link the write would
 * follow, a folder. The bytes go to a fresh private file of a random name, created exclusively and
 * never through a link, and are renamed over the name: whatever was there is replaced, never
 * opened nor written through. A folder at the name is a coded error that names it and says what
 * to do.
 */

export interface OwnWriteOptions {
  /** The file's permission bits; 0o600 unless told. */
  readonly mode?: number;
  /** Make the file's folder when it is missing (the default); an operator's output path is taken as given. */
  readonly makeFolder?: boolean;
  /** The permission bits of folders made for it; the umask's unless told. */
  readonly folderMode?: number;
  /** Flushed to the disk before the rename, and its folder after it (a record that must survive a crash). */
  readonly durable?: boolean;
  /** What the file is, as the error names it (`the runner's journaled receipt`). */
  readonly what: string;
  /** What the operator should do about what is in the way. */
  readonly remedy: string;
  readonly code: ErrorCode;
}

function typeAt(path: string): string | null {
  try {
    return fileType(fs.lstatSync(path));
  } catch {
    return null;
  }
}

/** Writes `data` whole at `path` (its folder made if missing) by a private file and a rename. */
export function writeOwnFile(path: string, data: string | Buffer, options: OwnWriteOptions): void {
  const folder = dirname(path);
  if (options.makeFolder !== false) {
    try {
      fs.mkdirSync(folder, { recursive: true, ...(options.folderMode === undefined ? {} : { mode: options.folderMode }) });
    } catch (error) {
      const there = typeAt(folder);
      throw new CooError(options.code, `cannot make the folder of ${options.what} ${folder}${there === null || there === 'directory' ? '' : `: a ${there} is there`} (${(error as NodeJS.ErrnoException).code ?? 'EIO'}): ${options.remedy}`, { cause: error });
    }
  }
  const temp = join(folder, `.${basename(path)}.${randomBytes(6).toString('hex')}.tmp`);
  let fd: number;
  try {
    fd = fs.openSync(temp, fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_EXCL | fs.constants.O_NOFOLLOW, options.mode ?? 0o600);
  } catch (error) {
    throw new CooError(options.code, `cannot write ${options.what} ${path} (${(error as NodeJS.ErrnoException).code ?? 'EIO'}): ${options.remedy}`, { cause: error });
  }
  try {
    try {
      fs.writeFileSync(fd, data);
      if (options.durable === true) fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
    fs.renameSync(temp, path);
  } catch (error) {
    fs.rmSync(temp, { force: true });
    const code = (error as NodeJS.ErrnoException).code ?? 'EIO';
    const there = typeAt(path);
    if (there !== null && there !== 'file') throw new CooError(options.code, `cannot write ${options.what} ${path}: a ${there} is there (${code}): ${options.remedy}`, { cause: error });
    throw new CooError(options.code, `cannot write ${options.what} ${path} (${code}): ${options.remedy}`, { cause: error });
  }
  if (options.durable === true) syncFolder(folder);
}

/** Flushes a folder's entries (a rename into it) to the disk; a file system that cannot sync a folder is taken as it is. */
function syncFolder(folder: string): void {
  let fd: number;
  try {
    fd = fs.openSync(folder, fs.constants.O_RDONLY | fs.constants.O_DIRECTORY);
  } catch {
    return;
  }
  try {
    fs.fsyncSync(fd);
  } catch {
    // EINVAL on file systems that do not sync folders: the file itself was synced.
  } finally {
    fs.closeSync(fd);
  }
}

/**
 * A new file at `path` opened for writing, whatever was at that name removed first (never a
 * folder), created exclusively and never through a link: a FIFO or a link left there is neither
 * waited on nor written through. The descriptor is the caller's to close.
 */
export function createOwnFile(path: string, options: OwnWriteOptions): number {
  try {
    fs.rmSync(path, { force: true });
    return fs.openSync(path, fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_EXCL | fs.constants.O_NOFOLLOW, options.mode ?? 0o600);
  } catch (error) {
    const there = typeAt(path);
    throw new CooError(options.code, `cannot write ${options.what} ${path}${there === null ? '' : `: a ${there} is there`} (${(error as NodeJS.ErrnoException).code ?? 'EIO'}): ${options.remedy}`, { cause: error });
  }
}

/**
 * An existing regular file at `path` opened for reading (to hand to a child), never through a link
 * and never waiting on a FIFO: anything else there is a coded error. The descriptor is the caller's to close.
 */
export function openOwnFile(path: string, options: Omit<OwnWriteOptions, 'mode' | 'durable'>): number {
  let fd: number;
  try {
    fd = fs.openSync(path, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? 'EIO';
    throw new CooError(options.code, `cannot read ${options.what} ${path}${code === 'ELOOP' ? ': a symlink is there' : ''} (${code}): ${options.remedy}`, { cause: error });
  }
  const stats = fs.fstatSync(fd);
  if (stats.isFile()) return fd;
  fs.closeSync(fd);
  throw new CooError(options.code, `${options.what} ${path} is a ${fileType(stats)}, not a regular file: ${options.remedy}`);
}
