import { execFile, spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { CooError } from '../errors.js';
import { LIMITS } from '../limits.js';

/** Runs git with arguments (never a shell) and returns stdout as a buffer. */
export function runGit(args: readonly string[], cwd?: string): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    execFile('git', args as string[], { cwd, encoding: 'buffer', maxBuffer: 64 * 1024 * 1024 }, (error, stdout, stderr) => {
      if (error !== null) {
        const message = Buffer.from(stderr).toString('utf8').trim().split('\n')[0] ?? error.message;
        reject(new CooError('GIT_FAILED', `git ${args.slice(0, 2).join(' ')}: ${message.slice(0, LIMITS.pathChars)}`, { cause: error }));
        return;
      }
      resolve(Buffer.from(stdout));
    });
  });
}

export interface ObjectInfo {
  readonly type: string;
  readonly size: number;
}

const OID = /^[0-9a-f]{40}$/;
/** Longest reply line of `git cat-file --batch-check`: an id, a type and a size. */
const MAX_INFO_LINE = 128;

/**
 * An object's type and size without its bytes, from one long-lived `git cat-file --batch-check`:
 * git reads only the object's header, so a reader can refuse an object over its limit at a cost
 * that does not grow with the object.
 */
export class ObjectSizes {
  private child: ChildProcessWithoutNullStreams | null = null;
  private buffer = '';
  private readonly pending: Array<{ oid: string; resolve: (value: ObjectInfo | null) => void; reject: (error: Error) => void }> = [];
  private failure: Error | null = null;

  constructor(readonly gitdir: string) {}

  private start(): ChildProcessWithoutNullStreams {
    if (this.child !== null) return this.child;
    const child = spawn('git', ['--git-dir', this.gitdir, 'cat-file', '--batch-check'], { stdio: ['pipe', 'pipe', 'pipe'] });
    const fail = (error: Error): void => {
      this.failure = error;
      this.child = null;
      for (const request of this.pending.splice(0)) request.reject(error);
    };
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => {
      if (stderr.length < 4096) stderr += chunk.toString('utf8');
    });
    child.stdout.on('data', (chunk: Buffer) => {
      this.buffer += chunk.toString('latin1');
      this.drain(fail);
    });
    child.on('error', (error) => fail(new CooError('GIT_FAILED', `cannot run git (is it installed and on PATH?): ${error.message}`)));
    child.on('exit', (code) => {
      if (this.pending.length > 0) fail(new CooError('GIT_FAILED', `git cat-file --batch-check exited with ${code}: ${stderr.trim().slice(0, LIMITS.pathChars)}`));
      this.child = null;
    });
    child.stdin.on('error', () => undefined);
    this.child = child;
    return child;
  }

  private drain(fail: (error: Error) => void): void {
    for (;;) {
      const newline = this.buffer.indexOf('\n');
      if (newline < 0) {
        if (this.buffer.length > MAX_INFO_LINE) fail(new CooError('GIT_FAILED', 'git cat-file --batch-check replied with an overlong line'));
        return;
      }
      const line = this.buffer.slice(0, newline);
      this.buffer = this.buffer.slice(newline + 1);
      const request = this.pending.shift();
      if (request === undefined) return;
      const [oid, type, sizeText] = line.split(' ');
      if (oid !== request.oid) {
        request.reject(new CooError('GIT_FAILED', `unexpected git cat-file reply: ${line.slice(0, MAX_INFO_LINE)}`));
      } else if (type === 'missing') {
        request.resolve(null);
      } else {
        const size = Number(sizeText);
        if (type === undefined || !Number.isSafeInteger(size) || size < 0) request.reject(new CooError('GIT_FAILED', `unexpected git cat-file reply: ${line.slice(0, MAX_INFO_LINE)}`));
        else request.resolve({ type, size });
      }
    }
  }

  /** The object's type and size, or null when the repository does not have it. */
  info(oid: string): Promise<ObjectInfo | null> {
    if (!OID.test(oid)) return Promise.reject(new CooError('INTERNAL', `not an object id: ${oid}`));
    if (this.failure !== null) return Promise.reject(this.failure);
    const child = this.start();
    return new Promise((resolve, reject) => {
      this.pending.push({ oid, resolve, reject });
      child.stdin.write(`${oid}\n`);
    });
  }

  close(): void {
    if (this.child !== null) {
      this.child.stdin.end();
      this.child = null;
    }
  }
}
