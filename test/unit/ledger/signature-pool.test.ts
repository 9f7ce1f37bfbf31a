import type { Worker } from 'node:worker_threads';
import { afterAll, describe, expect, it } from 'vitest';
import { ENTRY_NAMESPACE, GIT_NAMESPACE, parseSshsig, signSshsig, verifySshsig } from '../../../src/crypto/sshsig.js';
import { privateKeyFromSeed } from '../../../src/crypto/keys.js';
import { SignaturePool } from '../../../src/ledger/signature-pool.js';
import { ownMemory } from '../../../src/util/bytes.js';

const key = privateKeyFromSeed(Buffer.alloc(32, 7), 'pool-test');
const pool = new SignaturePool(1);
afterAll(() => pool.close());

/** `bytes` placed inside a larger shared buffer, as Node's allocation pool places small buffers. */
function viewInPool(bytes: Uint8Array): Buffer {
  const shared = Buffer.alloc(8192, 0xee);
  shared.set(bytes, 1000);
  return shared.subarray(1000, 1000 + bytes.length);
}

describe('bytes kept in memory of their own', () => {
  it('are copied into memory of their own when they are a view into a larger buffer', () => {
    const view = viewInPool(Buffer.from('signed data'));
    const own = ownMemory(view);
    expect(own.buffer.byteLength).toBe(view.length);
    expect(Buffer.from(own).equals(view)).toBe(true);
    expect(Buffer.from('x').buffer.byteLength).toBeGreaterThan(1);
    expect(ownMemory(Buffer.from('x')).buffer.byteLength).toBe(1);
  });

  it('are passed through when they already own their memory', () => {
    const whole = new Uint8Array(64);
    expect(ownMemory(whole)).toBe(whole);
  });
});

describe('the signature pool', () => {
  const message = Buffer.from('a message the pool checks');
  const sig = parseSshsig(signSshsig(key, message, ENTRY_NAMESPACE)).signature;
  const bytes = key.publicKey.bytes;

  /** Good, altered and misplaced signatures, views into shared buffers, a malleated S and a key that is no point. */
  function special(on: SignaturePool): { verdicts: Promise<boolean[]>; expected: boolean[] } {
    const commitSig = parseSshsig(signSshsig(key, message, GIT_NAMESPACE)).signature;
    const altered = Uint8Array.from(sig);
    altered[10] = altered[10]! ^ 1;
    const other = privateKeyFromSeed(Buffer.alloc(32, 8), 'other');
    const big = Buffer.alloc(100_000, 0x61);
    const bigSig = parseSshsig(signSshsig(other, big, ENTRY_NAMESPACE)).signature;
    // S + L: the same signature in a second encoding, which ssh-keygen and tweetnacl accept.
    const L = (1n << 252n) + 27742317777372353535851937790883648493n;
    const s = BigInt(`0x${Buffer.from(sig.subarray(32)).reverse().toString('hex')}`) + L;
    const malleated = Buffer.concat([Buffer.from(sig.subarray(0, 32)), Buffer.from(s.toString(16).padStart(64, '0'), 'hex').reverse()]);
    expect(malleated.length).toBe(64);
    const verdicts = Promise.all([
      on.verify(bytes, ENTRY_NAMESPACE, message, sig),
      on.verify(viewInPool(bytes), ENTRY_NAMESPACE, viewInPool(message), viewInPool(sig)),
      on.verify(bytes, GIT_NAMESPACE, message, commitSig),
      on.verify(other.publicKey.bytes, ENTRY_NAMESPACE, big, bigSig),
      on.verify(bytes, ENTRY_NAMESPACE, message, altered),
      on.verify(bytes, ENTRY_NAMESPACE, Buffer.from('another message'), sig),
      on.verify(bytes, GIT_NAMESPACE, message, sig),
      on.verify(other.publicKey.bytes, ENTRY_NAMESPACE, message, sig),
      on.verify(bytes, ENTRY_NAMESPACE, message, sig.subarray(0, 63)),
      on.verify(Buffer.alloc(32, 0xff), ENTRY_NAMESPACE, message, sig),
      on.verify(bytes, ENTRY_NAMESPACE, message, malleated),
    ]);
    return { verdicts, expected: [true, true, true, true, false, false, false, false, false, false, false] };
  }

  it('gives the verdicts of the SSHSIG check on a worker', async () => {
    await pool.whenStarted();
    const { verdicts, expected } = special(pool);
    expect(await verdicts).toEqual(expected);
    // Keys and prefixes already sent are named by number in later batches.
    expect(await Promise.all([pool.verify(bytes, ENTRY_NAMESPACE, message, sig), pool.verify(bytes, GIT_NAMESPACE, message, sig)])).toEqual([true, false]);
    expect(pool.counts).toEqual({ inline: 0, workers: 12 }); // the 63-byte signature is refused before any check
  });

  it('gives the same verdicts on the calling thread before a worker has started', async () => {
    const fresh = new SignaturePool(1);
    try {
      // Asked in the constructor's own turn: no worker can have reported that it started.
      const { verdicts, expected } = special(fresh);
      expect(await verdicts).toEqual(expected);
      expect(fresh.counts).toEqual({ inline: 10, workers: 0 });
    } finally {
      fresh.close();
    }
  });

  const cases = Array.from({ length: 40 }, (_, index) => {
    const message = Buffer.from(`message ${index}`);
    const namespace = index % 2 === 0 ? ENTRY_NAMESPACE : GIT_NAMESPACE;
    const parsed = parseSshsig(signSshsig(index % 3 === 0 ? key : privateKeyFromSeed(Buffer.alloc(32, index), 'k'), message, namespace));
    const signature = Uint8Array.from(parsed.signature);
    if (index % 5 === 0) signature[0] = signature[0]! ^ 0x80;
    return { sig: { ...parsed, signature }, message, namespace: index % 7 === 0 ? 'elsewhere' : namespace };
  });

  it('agrees with verifySshsig on every signature, across batches and workers', async () => {
    const twoWorkers = new SignaturePool(2);
    try {
      await twoWorkers.whenStarted();
      const first = await Promise.all(cases.slice(0, 20).map((c) => twoWorkers.verify(c.sig.publicKey.bytes, c.namespace, c.message, c.sig.signature)));
      const second = await Promise.all(cases.slice(20).map((c) => twoWorkers.verify(c.sig.publicKey.bytes, c.namespace, c.message, c.sig.signature)));
      expect([...first, ...second]).toEqual(cases.map((c) => verifySshsig(c.sig, c.message, c.namespace)));
      expect([...first, ...second].filter(Boolean).length).toBeGreaterThan(10);
      expect(twoWorkers.counts).toEqual({ inline: 0, workers: 40 });
    } finally {
      twoWorkers.close();
    }
  });

  it('checks on the calling thread what a worker that stopped had been sent, and what comes after', async () => {
    const dying = new SignaturePool(1);
    try {
      await dying.whenStarted();
      const expected = cases.map((c) => verifySshsig(c.sig, c.message, c.namespace));
      const sent = Promise.all(cases.map((c) => dying.verify(c.sig.publicKey.bytes, c.namespace, c.message, c.sig.signature)));
      await Promise.resolve(); // the batch is flushed to the worker on a microtask
      // Stopped with the batch sent: its answer may or may not have come back first; either way every verdict arrives.
      await (dying as unknown as { workers: Array<{ worker: Worker }> }).workers[0]!.worker.terminate();
      expect(await sent).toEqual(expected);
      const after = await Promise.all(cases.map((c) => dying.verify(c.sig.publicKey.bytes, c.namespace, c.message, c.sig.signature)));
      expect(after).toEqual(expected);
      expect(dying.counts.inline + dying.counts.workers).toBe(80);
      expect(dying.counts.inline).toBeGreaterThanOrEqual(40);
    } finally {
      dying.close();
    }
  });

  it('checks what it is asked before a worker has started on the calling thread, with the same verdicts', async () => {
    const fresh = new SignaturePool(1);
    try {
      // Asked in the constructor's own turn: no worker can have reported that it started.
      const early = await Promise.all(cases.map((c) => fresh.verify(c.sig.publicKey.bytes, c.namespace, c.message, c.sig.signature)));
      expect(fresh.counts).toEqual({ inline: 40, workers: 0 });
      expect(early).toEqual(cases.map((c) => verifySshsig(c.sig, c.message, c.namespace)));
      await fresh.whenStarted();
      const later = await Promise.all(cases.map((c) => fresh.verify(c.sig.publicKey.bytes, c.namespace, c.message, c.sig.signature)));
      expect(later).toEqual(early);
      expect(fresh.counts).toEqual({ inline: 40, workers: 40 });
    } finally {
      fresh.close();
    }
  });
});
