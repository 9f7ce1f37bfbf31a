import { hash } from 'node:crypto';
import { CooError } from '../errors.js';
import { LIMITS } from '../limits.js';
import { signEd25519, verifyEd25519 } from './ed25519.js';
import { parsePublicKeyBlob, publicKeyBlob, type PrivateKey, type PublicKey } from './keys.js';
import { WireReader, encodeString, encodeUint32 } from './ssh-wire.js';

/** OpenSSH PROTOCOL.sshsig. */
const MAGIC = Buffer.from('SSHSIG', 'latin1');
const BEGIN = '-----BEGIN SSH SIGNATURE-----';
const END = '-----END SSH SIGNATURE-----';
const HASH_ALG = 'sha512';
/** ssh-keygen wraps the base64 at 70 columns; we accept only that form, so one signature has one encoding. */
const ARMOR_WIDTH = 70;

/** Namespace of git commit signatures (what `git verify-commit` checks). */
export const GIT_NAMESPACE = 'git';
/** Namespace of detached ledger entry signatures: never valid as a commit signature, nor the reverse. */
export const ENTRY_NAMESPACE = 'coo-commons.entry.v0';

export interface Sshsig {
  readonly publicKey: PublicKey;
  readonly namespace: string;
  readonly signature: Uint8Array;
}

/** sha512's digest length, as SSH wire encoding prefixes it. */
const DIGEST_BYTES = 64;

/** The signed data before the message's digest: magic, namespace, reserved field, hash algorithm, digest length. */
export function signedPrefix(namespace: string): Buffer {
  return Buffer.concat([MAGIC, encodeString(namespace), encodeString(''), encodeString(HASH_ALG), encodeUint32(DIGEST_BYTES)]);
}

/** Everything before the digest, for the two namespaces the ledger checks on every commit. */
const PREFIXES = new Map([GIT_NAMESPACE, ENTRY_NAMESPACE].map((namespace) => [namespace, signedPrefix(namespace)]));

/**
 * The bytes an SSHSIG signature is computed over (PROTOCOL.sshsig): magic, namespace, reserved,
 * hash algorithm, H(message), in one allocation. The replay's signature workers build the same
 * bytes from signedPrefix and the digest they compute themselves.
 */
export function signedData(namespace: string, message: Uint8Array): Buffer {
  const prefix = PREFIXES.get(namespace) ?? signedPrefix(namespace);
  const out = Buffer.allocUnsafeSlow(prefix.length + DIGEST_BYTES);
  prefix.copy(out, 0);
  hash(HASH_ALG, message, 'buffer').copy(out, prefix.length);
  return out;
}

export function armor(blob: Buffer): string {
  const base64 = blob.toString('base64');
  const lines: string[] = [];
  for (let i = 0; i < base64.length; i += ARMOR_WIDTH) lines.push(base64.slice(i, i + ARMOR_WIDTH));
  return `${BEGIN}\n${lines.join('\n')}\n${END}\n`;
}

/** Signs `message` and returns the armored signature, byte-identical to `ssh-keygen -Y sign -n <namespace>`. */
export function signSshsig(key: PrivateKey, message: Uint8Array, namespace: string): string {
  if (namespace === '') throw new CooError('USAGE', 'SSHSIG namespace must not be empty');
  const raw = signEd25519(key.keyObject, signedData(namespace, message));
  const blob = Buffer.concat([
    MAGIC,
    encodeUint32(1),
    encodeString(publicKeyBlob(key.publicKey.bytes)),
    encodeString(namespace),
    encodeString(''),
    encodeString(HASH_ALG),
    encodeString(Buffer.concat([encodeString('ssh-ed25519'), encodeString(raw)])),
  ]);
  return armor(blob);
}

/**
 * Parses an armored SSHSIG strictly: the exact armor ssh-keygen writes (70 columns, one trailing
 * newline), version 1, an ed25519 key, sha512, an empty reserved field and no trailing bytes.
 * Anything else is SIG_MALFORMED or SIG_NONCANONICAL, so a signature has exactly one accepted encoding.
 */
export function parseSshsig(text: string): Sshsig {
  if (text.length > LIMITS.sigBytes) throw new CooError('SIG_MALFORMED', 'signature file too large');
  if (!text.startsWith(`${BEGIN}\n`) || !text.endsWith(`\n${END}\n`)) {
    throw new CooError('SIG_MALFORMED', 'not an armored SSH signature');
  }
  const body = text.slice(BEGIN.length + 1, text.length - END.length - 2);
  if (!/^[A-Za-z0-9+/=\n]+$/.test(body)) throw new CooError('SIG_MALFORMED', 'signature armor is not base64');
  const blob = Buffer.from(body.replace(/\n/g, ''), 'base64');
  if (armor(blob) !== text) throw new CooError('SIG_NONCANONICAL', 'signature armor is not in canonical form (70-column base64)');
  const reader = new WireReader(blob.subarray(MAGIC.length), 'SIG_MALFORMED', 'SSH signature');
  if (!blob.subarray(0, MAGIC.length).equals(MAGIC)) reader.fail('missing SSHSIG magic');
  if (reader.uint32() !== 1) reader.fail('unsupported version');
  const publicKey = parsePublicKeyBlob(reader.string(), 'SIG_MALFORMED');
  const namespace = reader.utf8();
  if (reader.string().length !== 0) reader.fail('reserved field must be empty');
  const hashAlg = reader.utf8();
  if (hashAlg !== HASH_ALG) reader.fail(`hash algorithm must be ${HASH_ALG}, got ${JSON.stringify(hashAlg)}`);
  const sigReader = new WireReader(reader.string(), 'SIG_MALFORMED', 'SSH signature');
  reader.end();
  if (sigReader.utf8() !== 'ssh-ed25519') sigReader.fail('signature type must be ssh-ed25519');
  const signature = sigReader.string();
  sigReader.end();
  if (signature.length !== 64) sigReader.fail('ed25519 signature must be 64 bytes');
  if (namespace === '') reader.fail('empty namespace');
  return { publicKey, namespace, signature: Uint8Array.from(signature) };
}

/** Checks the signature over `message` under `namespace`. A boolean: the caller names the failure. */
export function verifySshsig(sig: Sshsig, message: Uint8Array, namespace: string): boolean {
  if (sig.namespace !== namespace) return false;
  return verifyEd25519(sig.publicKey.bytes, signedData(namespace, message), sig.signature);
}

/** Parses and verifies, naming each failure with its code. Returns the signer's key. */
export function verifySshsigText(text: string, message: Uint8Array, namespace: string): PublicKey {
  const sig = parseSshsig(text);
  if (sig.namespace !== namespace) {
    throw new CooError('SIG_NAMESPACE', `signature namespace is ${JSON.stringify(sig.namespace)}, expected ${JSON.stringify(namespace)}`);
  }
  if (!verifySshsig(sig, message, namespace)) {
    throw new CooError('SIG_INVALID', `signature by ${sig.publicKey.keyId} does not verify`);
  }
  return sig.publicKey;
}
