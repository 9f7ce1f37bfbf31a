import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';
import { ownMemory } from '../util/bytes.js';

/**
 * ed25519 verification on worker threads, for replays of long histories: verification is most of
 * the CPU a full `coo verify` spends, and it is independent per signature. The workers run the same
 * check as crypto/ed25519.ts (canonical S, then OpenSSL). Requests made in one turn are sent as one
 * batch.
 */
const WORKER_SOURCE = `
const { parentPort } = require('node:worker_threads');
const { createPublicKey, verify } = require('node:crypto');
const L = (1n << 252n) + 27742317777372353535851937790883648493n;
const keys = new Map();
function canonical(sig) {
  let s = 0n;
  for (let i = 63; i >= 32; i -= 1) s = (s << 8n) | BigInt(sig[i]);
  return s < L;
}
parentPort.on('message', (batch) => {
  const results = new Uint8Array(batch.length);
  batch.forEach((job, index) => {
    let key = keys.get(job.keyHex);
    if (key === undefined) {
      key = createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: Buffer.from(job.key).toString('base64url') }, format: 'jwk' });
      keys.set(job.keyHex, key);
    }
    let ok = false;
    try {
      ok = job.sig.length === 64 && canonical(job.sig) && verify(null, job.data, key, job.sig);
    } catch {
      ok = false;
    }
    results[index] = ok ? 1 : 0;
  });
  parentPort.postMessage(results);
});
`;

interface Job {
  readonly key: Uint8Array;
  readonly keyHex: string;
  readonly data: Uint8Array;
  readonly sig: Uint8Array;
}

export class SignaturePool {
  private readonly workers: Array<{ readonly worker: Worker; readonly queue: Array<Array<(ok: boolean) => void>> }> = [];
  private next = 0;
  private batch: Job[] = [];
  private resolvers: Array<(ok: boolean) => void> = [];

  constructor(size = Math.max(1, availableParallelism() - 1)) {
    for (let i = 0; i < size; i += 1) {
      const worker = new Worker(WORKER_SOURCE, { eval: true });
      worker.unref();
      const queue: Array<Array<(ok: boolean) => void>> = [];
      worker.on('message', (results: Uint8Array) => {
        const resolvers = queue.shift() ?? [];
        resolvers.forEach((resolve, index) => resolve(results[index] === 1));
      });
      this.workers.push({ worker, queue });
    }
  }

  private flush = (): void => {
    const jobs = this.batch;
    const resolvers = this.resolvers;
    this.batch = [];
    this.resolvers = [];
    const target = this.workers[this.next % this.workers.length]!;
    this.next += 1;
    target.queue.push(resolvers);
    target.worker.postMessage(jobs);
  };

  /** Resolves to the verdict on `sig` over `data` by `key` (a raw 32-byte ed25519 key). */
  verify(key: Uint8Array, data: Uint8Array, sig: Uint8Array): Promise<boolean> {
    return new Promise((resolve) => {
      if (this.batch.push({ key: ownMemory(key), keyHex: Buffer.from(key).toString('hex'), data: ownMemory(data), sig: ownMemory(sig) }) === 1) queueMicrotask(this.flush);
      this.resolvers.push(resolve);
    });
  }

  close(): void {
    for (const { worker } of this.workers) void worker.terminate();
  }
}
