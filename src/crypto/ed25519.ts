import { createPrivateKey, createPublicKey, sign, verify, type KeyObject } from 'node:crypto';

/** The order of the ed25519 base point (RFC 8032 section 5.1). A signature's S must be below it. */
const L = (1n << 252n) + 27742317777372353535851937790883648493n;

const publicKeyCache = new Map<string, KeyObject>();

function b64url(bytes: Uint8Array): string {
  return Buffer.from(bytes).toString('base64url');
}

export function publicKeyObject(publicKey: Uint8Array): KeyObject {
  const id = Buffer.from(publicKey).toString('hex');
  let key = publicKeyCache.get(id);
  if (key === undefined) {
    key = createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: b64url(publicKey) }, format: 'jwk' });
    if (publicKeyCache.size > 4096) publicKeyCache.clear();
    publicKeyCache.set(id, key);
  }
  return key;
}

export function privateKeyObject(seed: Uint8Array, publicKey: Uint8Array): KeyObject {
  return createPrivateKey({
    key: { kty: 'OKP', crv: 'Ed25519', d: b64url(seed), x: b64url(publicKey) },
    format: 'jwk',
  });
}

/** Derives the 32-byte public key of a 32-byte seed. */
export function publicKeyFromSeed(seed: Uint8Array): Uint8Array {
  const jwk = createPrivateKey({
    key: Buffer.concat([Buffer.from('302e020100300506032b657004220420', 'hex'), Buffer.from(seed)]),
    format: 'der',
    type: 'pkcs8',
  }).export({ format: 'jwk' });
  return Buffer.from(String(jwk.x), 'base64url');
}

export function signEd25519(privateKey: KeyObject, message: Uint8Array): Uint8Array {
  return sign(null, message, privateKey);
}

/** True when S is canonical (S < L), read little-endian from the second half of the signature. */
export function isCanonicalS(signature: Uint8Array): boolean {
  if (signature.length !== 64) return false;
  const s = BigInt('0x' + Buffer.from(signature.subarray(32)).reverse().toString('hex'));
  return s < L;
}

/** Strict ed25519 verification: canonical S, then OpenSSL. Returns a boolean; callers turn false into a coded error. */
export function verifyEd25519(publicKey: Uint8Array, message: Uint8Array, signature: Uint8Array): boolean {
  if (publicKey.length !== 32 || !isCanonicalS(signature)) return false;
  try {
    return verify(null, message, publicKeyObject(publicKey), signature);
  } catch {
    return false;
  }
}
