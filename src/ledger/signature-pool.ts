import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';
import { verifyEd25519 } from '../crypto/ed25519.js';
import { signedData, signedPrefix } from '../crypto/sshsig.js';

/**
 * SSHSIG verification on worker threads, for replays of long histories: verification is most of
 * the CPU a full `coo verify` spends, and it is independent per signature. The workers run the same
 * check as crypto/sshsig.ts and crypto/ed25519.ts (canonical S, then OpenSSL over the signed data,
 * which they complete with the message's sha512 themselves). Requests made in one turn go to a worker
 * as one batch in one transferred buffer; keys and namespace prefixes cross once, then by number.
 * Until a worker has started (tens of milliseconds, in which the first commits of a replay would
 * wait), batches are checked on the calling thread with crypto/ed25519.ts instead, and so are the
 * batches of a worker that stops: a replay never waits on a worker that is gone.
 *
 * A job in the batch: u8 prefix number, u32 key number, 64 signature bytes, u32 message length, the message.
 */
const JOB_HEADER = 1 + 4 + 64 + 4;

const WORKER_SOURCE = `
const { parentPort } = require('node:worker_threads');
const { createPublicKey, hash, verify } = require('node:crypto');
const L = (1n << 252n) + 27742317777372353535851937790883648493n;
const L_BYTES = Array.from({ length: 32 }, (_, i) => Number((L >> BigInt(8 * i)) & 0xffn));
const keys = [];
const prefixes = [];
/** S (little-endian, the signature's second half) below the group order, compared from its top byte. */
function canonical(sig) {
  for (let i = 31; i >= 0; i -= 1) {
    if (sig[32 + i] !== L_BYTES[i]) return sig[32 + i] < L_BYTES[i];
  }
  return false;
}
parentPort.on('message', ({ newKeys, newPrefixes, count, jobs }) => {
  for (const raw of newKeys) {
    try {
      keys.push(createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: Buffer.from(raw).toString('base64url') }, format: 'jwk' }));
    } catch {
      keys.push(null);
    }
  }
  for (const prefix of newPrefixes) {
    const data = Buffer.alloc(prefix.length + 64);
    data.set(prefix);
    prefixes.push({ data, at: prefix.length });
  }
  const view = Buffer.from(jobs.buffer, jobs.byteOffset, jobs.byteLength);
  const results = new Uint8Array(count);
  let offset = 0;
  for (let index = 0; index < count; index += 1) {
    const prefix = prefixes[view[offset]];
    const key = keys[view.readUInt32LE(offset + 1)];
    const sig = view.subarray(offset + 5, offset + 69);
    const length = view.readUInt32LE(offset + 69);
    const message = view.subarray(offset + ${JOB_HEADER}, offset + ${JOB_HEADER} + length);
    offset += ${JOB_HEADER} + length;
    let ok = false;
    try {
      if (key != null && canonical(sig)) {
        hash('sha512', message, 'buffer').copy(prefix.data, prefix.at);
        ok = verify(null, prefix.data, key, sig);
      }
    } catch {
      ok = false;
    }
    results[index] = ok ? 1 : 0;
  }
  parentPort.postMessage(results, [results.buffer]);
});
`;

interface Job {
  readonly namespace: string;
  readonly prefix: number;
  readonly key: number;
  readonly sig: Uint8Array;
  readonly message: Uint8Array;
}

interface Batch {
  readonly jobs: readonly Job[];
  readonly resolvers: ReadonlyArray<(ok: boolean) => void>;
}

interface PoolWorker {
  readonly worker: Worker;
  /** Batches sent and not yet answered, oldest first. */
  readonly queue: Batch[];
  /** Started and not stopped: batches go only to such workers. */
  online: boolean;
  /** How many of the pool's keys and prefixes this worker has been sent. */
  keysSent: number;
  prefixesSent: number;
}

export class SignaturePool {
  private readonly workers: PoolWorker[] = [];
  private next = 0;
  private batch: Job[] = [];
  private resolvers: Array<(ok: boolean) => void> = [];
  private readonly keys: Uint8Array[] = [];
  private readonly keyNumbers = new Map<string, number>();
  private readonly prefixes: Uint8Array[] = [];
  private readonly prefixNumbers = new Map<string, number>();
  private readonly started: Promise<void>;
  private closed = false;
  /** Signatures checked on the calling thread and by the workers, for tests and diagnostics. */
  readonly counts = { inline: 0, workers: 0 };

  constructor(size = Math.max(1, availableParallelism() - 1)) {
    const online: Array<Promise<void>> = [];
    for (let i = 0; i < size; i += 1) {
      const worker = new Worker(WORKER_SOURCE, { eval: true });
      worker.unref();
      const queue: Batch[] = [];
      worker.on('message', (results: Uint8Array) => {
        const batch = queue.shift();
        if (batch === undefined) return;
        this.counts.workers += batch.jobs.length;
        batch.resolvers.forEach((resolve, index) => resolve(results[index] === 1));
      });
      const entry: PoolWorker = { worker, queue, online: false, keysSent: 0, prefixesSent: 0 };
      // A worker that fails or stops (out of memory, say) hands back what it was sent: those
      // signatures are checked here, and later batches go to the others or stay here.
      const stopped = (): void => {
        entry.online = false;
        for (const batch of queue.splice(0)) if (!this.closed) this.checkHere(batch);
      };
      worker.on('error', stopped);
      worker.on('exit', stopped);
      online.push(
        new Promise((resolve) => {
          worker.once('online', () => {
            entry.online = true;
            resolve();
          });
        }),
      );
      this.workers.push(entry);
    }
    this.started = Promise.race(online);
  }

  /** Resolves once some worker has started; batches made before then are checked on this thread. */
  whenStarted(): Promise<void> {
    return this.started;
  }

  private flush = (): void => {
    const jobs = this.batch;
    const resolvers = this.resolvers;
    this.batch = [];
    this.resolvers = [];
    if (!this.workers.some((worker) => worker.online)) {
      this.checkHere({ jobs, resolvers });
      return;
    }
    let size = 0;
    for (const job of jobs) size += JOB_HEADER + job.message.length;
    const packed = Buffer.allocUnsafeSlow(size);
    let offset = 0;
    for (const job of jobs) {
      packed[offset] = job.prefix;
      packed.writeUInt32LE(job.key, offset + 1);
      packed.set(job.sig, offset + 5);
      packed.writeUInt32LE(job.message.length, offset + 69);
      packed.set(job.message, offset + JOB_HEADER);
      offset += JOB_HEADER + job.message.length;
    }
    let target = this.workers[this.next % this.workers.length]!;
    this.next += 1;
    if (!target.online) target = this.workers.find((worker) => worker.online)!;
    target.queue.push({ jobs, resolvers });
    const message = { newKeys: this.keys.slice(target.keysSent), newPrefixes: this.prefixes.slice(target.prefixesSent), count: jobs.length, jobs: packed };
    target.keysSent = this.keys.length;
    target.prefixesSent = this.prefixes.length;
    target.worker.postMessage(message, [packed.buffer]);
  };

  private checkHere({ jobs, resolvers }: Batch): void {
    this.counts.inline += jobs.length;
    jobs.forEach((job, index) => resolvers[index]!(this.verifyHere(job)));
  }

  /** The workers' check, on this thread. */
  private verifyHere(job: Job): boolean {
    return verifyEd25519(this.keys[job.key]!, signedData(job.namespace, job.message), job.sig);
  }

  private number(table: Uint8Array[], numbers: Map<string, number>, name: string, bytes: () => Uint8Array): number {
    let found = numbers.get(name);
    if (found === undefined) {
      found = table.push(Uint8Array.from(bytes())) - 1;
      numbers.set(name, found);
    }
    return found;
  }

  /**
   * Resolves to whether `sig` is the ed25519 signature by `key` (32 raw bytes) over the SSHSIG
   * signed data of `message` under `namespace`.
   */
  verify(key: Uint8Array, namespace: string, message: Uint8Array, sig: Uint8Array): Promise<boolean> {
    if (sig.length !== 64 || key.length !== 32) return Promise.resolve(false);
    const prefix = this.number(this.prefixes, this.prefixNumbers, namespace, () => signedPrefix(namespace));
    if (prefix > 0xff) return Promise.reject(new Error('signature pool: more than 256 namespaces'));
    const keyNumber = this.number(this.keys, this.keyNumbers, Buffer.from(key.buffer, key.byteOffset, key.length).toString('latin1'), () => key);
    return new Promise((resolve) => {
      if (this.batch.push({ namespace, prefix, key: keyNumber, sig, message }) === 1) queueMicrotask(this.flush);
      this.resolvers.push(resolve);
    });
  }

  close(): void {
    this.closed = true;
    for (const { worker } of this.workers) void worker.terminate();
  }
}
