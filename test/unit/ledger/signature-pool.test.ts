import { afterAll, describe, expect, it } from 'vitest';
import { signEd25519 } from '../../../src/crypto/ed25519.js';
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

describe('bytes sent to a worker', () => {
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
  it('gives the verdicts of node:crypto for good, altered and misplaced signatures, views included', async () => {
    const data = Buffer.from('a message the pool checks');
    const sig = signEd25519(key.keyObject, data);
    const altered = Uint8Array.from(sig);
    altered[10] = altered[10]! ^ 1;
    const verdicts = await Promise.all([
      pool.verify(key.publicKey.bytes, data, sig),
      pool.verify(viewInPool(key.publicKey.bytes), viewInPool(data), viewInPool(sig)),
      pool.verify(key.publicKey.bytes, data, altered),
      pool.verify(key.publicKey.bytes, Buffer.from('another message'), sig),
      pool.verify(key.publicKey.bytes, data, sig.subarray(0, 63)),
    ]);
    expect(verdicts).toEqual([true, true, false, false, false]);
  });
});
