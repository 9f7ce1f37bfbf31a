import { execFileSync, spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import { dirname, join } from 'node:path';
import { deflateSync } from 'node:zlib';
import { CooError } from '../errors.js';
import { LIMITS } from '../limits.js';
import { readBounded } from '../util/bounded-read.js';
import { gitEnvironment } from '../util/git-env.js';

export type ObjectType = 'blob' | 'tree' | 'commit' | 'tag';

export interface GitObject {
  readonly type: ObjectType;
  readonly content: Buffer;
}

/** An object over the bound its reader gave: its type and size, its bytes never held. */
export interface OversizedObject {
  readonly type: ObjectType;
  readonly size: number;
  readonly content: null;
}

/** Where new objects go: straight to disk, or held until a commit is accepted. */
export interface ObjectSink {
  write(type: ObjectType, content: Buffer): Promise<string>;
}

/**
 * Reads objects by id. The ledger reads through this port only. Given `limit`, an object larger
 * than that many bytes comes back as an OversizedObject, judged from git's header before any of its
 * bytes are kept, so what a hostile ledger holds bounds no reader's memory.
 */
export interface ObjectReader {
  readonly gitdir: string;
  read(oid: string): Promise<GitObject | null>;
  read(oid: string, limit: number): Promise<GitObject | OversizedObject | null>;
  close(): void;
}

const OID = /^[0-9a-f]{40}$/;
const OBJECT_TYPES: ReadonlySet<string> = new Set(['blob', 'tree', 'commit', 'tag']);
/** Longest reply header of `git cat-file --batch`: an id, a type and a size. */
const MAX_HEADER = 128;

interface Request {
  readonly oid: string;
  /** The most bytes this read keeps: a larger object is answered with its size alone. */
  readonly limit: number;
  readonly resolve: (value: GitObject | OversizedObject | null) => void;
  readonly reject: (error: Error) => void;
}

/**
 * How requests reach `git cat-file`. `--batch` (every git) writes each object with a system call
 * of its own; `--batch-command --buffer` (git 2.36 and later) writes a whole batch of replies when
 * told to `flush`, which measured two thirds less system time on a 10,000-commit replay.
 */
export type CatFileProtocol = 'batch' | 'batch-command';

let detected: CatFileProtocol | null = null;

/** The better protocol the installed git speaks (asked once per process). */
export function catFileProtocol(): CatFileProtocol {
  if (detected === null) {
    let version: RegExpExecArray | null = null;
    try {
      version = /git version (\d+)\.(\d+)/.exec(execFileSync('git', ['--version'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }));
    } catch {
      // no git: the reader's own start names the problem
    }
    const major = Number(version?.[1] ?? 0);
    const minor = Number(version?.[2] ?? 0);
    detected = major > 2 || (major === 2 && minor >= 36) ? 'batch-command' : 'batch';
  }
  return detected;
}

/**
 * One long-lived `git cat-file` per ledger. Measured about 10x faster than isomorphic-git reads,
 * and it sees objects in git's pre-receive quarantine (isomorphic-git does not), so the hook, the
 * runner, the writer and the auditor share this one read path.
 */
export class CatFileReader implements ObjectReader {
  /** The running `git cat-file`, or null before the first read and after close. */
  private session: CatFileSession | null = null;
  private failure: Error | null = null;
  private protocol: CatFileProtocol | null;

  constructor(
    readonly gitdir: string,
    options: { readonly protocol?: CatFileProtocol } = {},
  ) {
    this.protocol = options.protocol ?? null;
  }

  read(oid: string): Promise<GitObject | null>;
  read(oid: string, limit: number): Promise<GitObject | OversizedObject | null>;
  read(oid: string, limit = Number.POSITIVE_INFINITY): Promise<GitObject | OversizedObject | null> {
    if (!OID.test(oid)) return Promise.reject(new CooError('INTERNAL', `not an object id: ${oid}`));
    if (this.failure !== null) return Promise.reject(this.failure);
    this.protocol ??= catFileProtocol();
    if (this.session === null) {
      const session = new CatFileSession(this.gitdir, this.protocol, (error) => {
        // A git that fails while it is the reader's fails every later read; one closed already fails only its own.
        if (this.session !== session) return;
        if (error !== null) this.failure = error;
        this.session = null;
      });
      this.session = session;
    }
    return this.session.request(oid, limit);
  }

  /** Ends the running `git cat-file` once it has answered the reads already asked; a later read starts another. */
  close(): void {
    this.session?.end();
    this.session = null;
  }
}

/**
 * One `git cat-file` process and what is in flight on it: its own requests and its own reply
 * parser, so a process closed while it still sends (an oversized object being passed over) never
 * mixes its bytes into the replies of the next.
 */
class CatFileSession {
  private readonly child: ChildProcessWithoutNullStreams;
  /** The part of a reply's header line received so far. */
  private header: Buffer = Buffer.alloc(0);
  /** The reply whose bytes are arriving: copied into `content` when within the request's limit, passed over when not. */
  private body: { readonly request: Request; readonly type: ObjectType; readonly size: number; readonly content: Buffer | null; received: number } | null = null;
  private readonly pending: Request[] = [];
  private failed = false;
  private ended = false;
  /**
   * Requests made in one turn of the event loop go to git in one write: flushed after every
   * microtask of the turn has run, so a burst of reads that a reply sets off costs one system call.
   */
  private outgoing: string[] = [];

  constructor(
    gitdir: string,
    private readonly protocol: CatFileProtocol,
    /** Told when the process fails (the error) or exits with nothing left to answer (null). */
    private readonly onEnd: (error: Error | null) => void,
  ) {
    const mode = protocol === 'batch-command' ? ['--batch-command', '--buffer'] : ['--batch'];
    const child = spawn('git', ['--git-dir', gitdir, 'cat-file', ...mode], { env: gitEnvironment(), stdio: ['pipe', 'pipe', 'pipe'] });
    child.stdout.on('data', (chunk: Buffer) => this.receive(chunk));
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => {
      if (stderr.length < 4096) stderr += chunk.toString('utf8');
    });
    child.on('error', (error) => this.fail(new CooError('GIT_FAILED', `cannot run git (is it installed and on PATH?): ${error.message}`)));
    // close, not exit: what git wrote before it exited is read first, so answered reads are not failed.
    child.on('close', (code) => {
      if (this.pending.length > 0 || this.body?.content != null) this.fail(new CooError('GIT_FAILED', `git cat-file exited with ${code}: ${stderr.trim().slice(0, LIMITS.pathChars)}`));
      // A git gone with nothing asked of it: the next read starts another.
      else this.onEnd(null);
    });
    child.stdin.on('error', () => undefined);
    this.child = child;
  }

  request(oid: string, limit: number): Promise<GitObject | OversizedObject | null> {
    return new Promise((resolve, reject) => {
      this.pending.push({ oid, limit, resolve, reject });
      if (this.outgoing.push(this.protocol === 'batch-command' ? `contents ${oid}\n` : `${oid}\n`) === 1) setImmediate(this.flush);
    });
  }

  private flush = (): void => {
    if (this.outgoing.length === 0 || this.failed) return;
    const batch = this.outgoing.join('') + (this.protocol === 'batch-command' ? 'flush\n' : '');
    this.outgoing = [];
    this.child.stdin.write(batch);
  };

  /** Sends what is still queued, then ends git's input: git answers it and exits. */
  end(): void {
    if (this.ended) return;
    this.ended = true;
    this.flush();
    this.child.stdin.end();
  }

  /** Ends the process: every read waiting on it fails with `error`. */
  private fail(error: Error): void {
    if (this.failed) return;
    this.failed = true;
    const waiting = [...(this.body === null ? [] : [this.body.request]), ...this.pending.splice(0)];
    this.body = null;
    for (const request of waiting) request.reject(error);
    this.child.kill();
    this.onEnd(error);
  }

  /**
   * Takes git's replies as they arrive: a header line (`<oid> <type> <size>` or `<oid> missing`),
   * then that many bytes and a newline. An object's buffer is made once its header gives the size
   * and only when the size is within the request's limit; the bytes of a larger one are counted
   * and dropped, so no reply grows this process by more than its request allowed.
   */
  private receive(chunk: Buffer): void {
    let at = 0;
    while (at < chunk.length && !this.failed) {
      const body = this.body;
      if (body !== null) {
        const take = Math.min(body.size + 1 - body.received, chunk.length - at);
        if (body.content !== null && body.received < body.size) chunk.copy(body.content, body.received, at, at + Math.min(take, body.size - body.received));
        body.received += take;
        at += take;
        if (body.received === body.size + 1) {
          this.body = null;
          // The bytes are those of the id asked for, or nothing is read: no object passes under another's id.
          // Only this read fails: git's replies are still in step, so the reads after it go on.
          if (body.content !== null && hashObject(body.type, body.content) !== body.request.oid) {
            body.request.reject(new CooError('GIT_FAILED', `git cat-file answered ${body.request.oid} with the bytes of another object: the repository's objects are not what their ids name`));
          } else if (body.content !== null) body.request.resolve({ type: body.type, content: body.content });
        }
        continue;
      }
      const newline = chunk.indexOf(0x0a, at);
      if (newline < 0) {
        this.header = Buffer.concat([this.header, chunk.subarray(at)]);
        if (this.header.length > MAX_HEADER) this.fail(new CooError('GIT_FAILED', 'git cat-file replied with an overlong header'));
        return;
      }
      const line = Buffer.concat([this.header, chunk.subarray(at, newline)]).toString('latin1');
      this.header = Buffer.alloc(0);
      at = newline + 1;
      this.startReply(line);
    }
  }

  private startReply(line: string): void {
    const request = this.pending.shift();
    const [oid, type, sizeText] = line.split(' ');
    const size = Number(sizeText);
    if (request === undefined || oid !== request.oid) {
      if (request !== undefined) this.pending.unshift(request);
      this.fail(new CooError('GIT_FAILED', `unexpected git cat-file reply: ${line.slice(0, MAX_HEADER)}`));
    } else if (type === 'missing' && sizeText === undefined) {
      request.resolve(null);
    } else if (!OBJECT_TYPES.has(type ?? '') || !Number.isSafeInteger(size) || size < 0) {
      this.pending.unshift(request);
      this.fail(new CooError('GIT_FAILED', `unexpected git cat-file reply: ${line.slice(0, MAX_HEADER)}`));
    } else if (size > request.limit) {
      // Answered now; the bytes that follow are passed over as they arrive.
      request.resolve({ type: type as ObjectType, size, content: null });
      this.body = { request, type: type as ObjectType, size, content: null, received: 0 };
    } else {
      this.body = { request, type: type as ObjectType, size, content: Buffer.allocUnsafe(size), received: 0 };
    }
  }
}

/**
 * Asks git to pack the ledger's loose objects once there are many (`git gc --auto`: git's own
 * threshold, `gc.auto`, 6,700 by default; `gc.auto=0` in the ledger's config turns it off). The
 * writer makes loose objects, about nine a commit, and nothing else packs a ledger that only coo
 * writes: a 10,001-commit ledger of loose objects took 7.1 to 8.4 s to verify against 5.0 to 5.8 s
 * packed, the difference mostly system time opening objects. Runs apart from this process, as git
 * itself runs it after a commit: packing those 10,001 commits' loose objects at once took 12.5 s,
 * and no append should wait for any of it. Leaves refs alone (`gc.packRefs=false`): the ledger's
 * head stays the file the runner watches. Keeps every reflog entry (`gc.reflogExpire*=never`):
 * they record how the head moved, and keep what they name. Runs no hook (`core.hooksPath=/dev/null`):
 * git runs `pre-auto-gc` from wherever the ledger's config points, and a ledger folder's writer is not
 * who runs the packing. Writes what no ref names compressed (`core.looseCompression=1`, no cruft
 * pack): once there are many packs, git writes the objects no ref names out of them as loose
 * objects for a later prune, and under the ledger's core.compression 0 (ledger/init.ts) they were
 * written whole. A remote chooses what a fetch brings before anything verifies it (the history of a
 * main refused after), so a pack of a few KiB holding a blob of zeros became hundreds of MiB.
 */
export function packLooseObjects(gitdir: string): void {
  try {
    const child = spawn(
      'git',
      ['--git-dir', gitdir, '-c', 'core.hooksPath=/dev/null', '-c', 'gc.packRefs=false', '-c', 'gc.reflogExpire=never', '-c', 'gc.reflogExpireUnreachable=never', '-c', 'core.looseCompression=1', '-c', 'gc.cruftPacks=false', 'gc', '--auto', '--quiet'],
      { env: gitEnvironment(), detached: true, stdio: 'ignore' },
    );
    child.on('error', () => undefined);
    child.unref();
  } catch {
    // packing only saves reading time; the commit has landed either way
  }
}

/**
 * What git's last background packing of the ledger reported, when it failed, and the file it is
 * in (`gc.log`), or null. While that file is there git skips automatic packing (for `gc.logExpiry`,
 * a day by default) and says so only on the standard error of the detached run, which no one
 * reads; `coo verify` and `coo watch` print it instead.
 */
/** Most of git's `gc.log` read: git writes a few lines there. */
const GC_LOG_BYTES = 64 * 1024;

export function lastPackingFailure(gitdir: string): { readonly log: string; readonly text: string } | null {
  const log = join(gitdir, 'gc.log');
  // Read as git writes it, a short regular file: never a FIFO that blocks, nor a device or a huge file read whole.
  const read = readBounded(log, { maxBytes: GC_LOG_BYTES });
  if (read.kind === 'too_large') return { log, text: `(a ${read.size}-byte gc.log)` };
  if (read.kind !== 'file') return null;
  const text = read.bytes.toString('utf8').trim();
  return text === '' ? null : { log, text };
}

export function hashObject(type: ObjectType, content: Buffer): string {
  return createHash('sha1').update(`${type} ${content.length}\0`).update(content).digest('hex');
}

function looseObjectPath(gitdir: string, oid: string): string {
  return join(gitdir, 'objects', oid.slice(0, 2), oid.slice(2));
}

/**
 * Tries at writing one object. A process packing the ledger (a background `git gc`, `git repack
 * -d`, `git prune-packed`, `git prune`) removes each fan-out folder it empties, also between the
 * writer finding the folder and creating its temporary file there; git then makes the folder again
 * and tries once more (object-file.c, create_tmpfile). Running out of tries here takes a packer
 * removing the same folder at that moment this many times in a row.
 */
const WRITE_TRIES = 8;

/**
 * Writes loose objects the way git does: deflate, write a temporary file, rename it into place, so
 * a crash never leaves a truncated object behind. Deflate at level 0 (zlib's stored blocks), as
 * the ledger's `core.compression 0` asks: a full verify reads every object. (isomorphic-git's
 * writeObject was the first writer here; measured on this machine it cost 28 ms per ledger commit
 * against 7.6 ms for this, through its asynchronous file calls and CompressionStream deflate, and
 * it writes in place, so a crash mid-write left a truncated object that later identical writes
 * kept. isomorphic-git still creates and configures new ledgers: ledger/init.ts.)
 *
 * Safe against git packing the same ledger at any moment: a folder removed under the writer is
 * made again (WRITE_TRIES), an object packed and removed while it is freshened is written again,
 * and the temporary file is named as git names its own (`tmp_obj_*` in the object's folder), which
 * git's prune leaves alone while it is young and removes once a crash has left it old; any other
 * name there is "garbage" to git, which `git gc` reports in `gc.log` and then packs nothing more.
 */
export class ObjectWriter implements ObjectSink {
  /** `level` is zlib's: 0 for a ledger (above); a target repository's work is written at zlib's default (-1), as git writes it. */
  constructor(
    private readonly gitdir: string,
    private readonly level = 0,
  ) {}

  async write(type: ObjectType, content: Buffer): Promise<string> {
    const oid = hashObject(type, content);
    const path = looseObjectPath(this.gitdir, oid);
    if (freshen(path)) return oid;
    const bytes = deflateSync(Buffer.concat([Buffer.from(`${type} ${content.length}\0`), content]), { level: this.level });
    const folder = dirname(path);
    for (let tries = 1; ; tries += 1) {
      const temp = join(folder, `tmp_obj_${randomBytes(6).toString('hex')}`);
      let created = false;
      try {
        // The folder usually exists: made (never its parents) only once creating the file says it is gone, as git does.
        if (tries > 1) makeFolder(folder);
        const fd = fs.openSync(temp, 'wx');
        created = true;
        try {
          fs.writeFileSync(fd, bytes);
        } finally {
          fs.closeSync(fd);
        }
        fs.renameSync(temp, path);
        return oid;
      } catch (error) {
        if (created) fs.rmSync(temp, { force: true });
        if (error instanceof CooError) throw error;
        const code = (error as NodeJS.ErrnoException).code;
        // ENOENT: the folder (or the temporary file) was removed under us; EEXIST: a name taken.
        if ((code === 'ENOENT' || code === 'EEXIST') && tries < WRITE_TRIES) continue;
        throw writeFailure(error);
      }
    }
  }
}

/** Makes an object's fan-out folder; a folder that cannot be made (the ledger gone, a full disk) is no race to retry. */
function makeFolder(folder: string): void {
  try {
    fs.mkdirSync(folder);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw writeFailure(error);
  }
}

function writeFailure(error: unknown): CooError {
  return new CooError('IO_ERROR', `cannot write to the ledger's objects: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}; the ledger is unchanged`, { cause: error });
}

/**
 * Marks a loose object as just written, as git does before reusing one (`git gc` prunes only
 * unreachable objects older than two weeks, and this one is about to be referenced again). False
 * when there is no loose copy, including one a packer packed and removed (or pruned) a moment ago:
 * the caller then writes it again, which is never wrong for content-addressed files.
 */
function freshen(path: string): boolean {
  try {
    const now = new Date();
    fs.utimesSync(path, now, now);
    return true;
  } catch (error) {
    // There but not ours to touch (another user's object, a read-only ledger): reused as it is.
    return (error as NodeJS.ErrnoException).code !== 'ENOENT' && fs.existsSync(path);
  }
}
