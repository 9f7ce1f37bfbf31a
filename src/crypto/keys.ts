import { createHash, randomBytes, type KeyObject } from 'node:crypto';
import { CooError } from '../errors.js';
import { privateKeyObject, publicKeyFromSeed } from './ed25519.js';
import { WireReader, encodeString, encodeUint32 } from './ssh-wire.js';

const KEY_TYPE = 'ssh-ed25519';
const PRIVATE_MAGIC = Buffer.from('openssh-key-v1\0', 'latin1');
const PRIVATE_BEGIN = '-----BEGIN OPENSSH PRIVATE KEY-----';
const PRIVATE_END = '-----END OPENSSH PRIVATE KEY-----';

/** An ed25519 public key, identified as `ssh-keygen -l` identifies it. */
export interface PublicKey {
  readonly bytes: Uint8Array;
  /** `SHA256:<unpadded base64 of sha256(blob)>`, the fingerprint `ssh-keygen -l` prints. */
  readonly keyId: string;
}

export interface PrivateKey {
  readonly publicKey: PublicKey;
  readonly seed: Uint8Array;
  readonly comment: string;
  readonly keyObject: KeyObject;
}

export function publicKeyBlob(bytes: Uint8Array): Buffer {
  return Buffer.concat([encodeString(KEY_TYPE), encodeString(bytes)]);
}

/**
 * Keys already seen, by their bytes: a replay meets the same few keys in every signature, and
 * fingerprinting each again cost a tenth of a long verification. Bounded; cleared when full.
 */
const knownKeys = new Map<string, PublicKey>();
const KNOWN_KEYS = 1024;

export function toPublicKey(bytes: Uint8Array): PublicKey {
  if (bytes.length !== 32) throw new CooError('KEY_MALFORMED', 'ed25519 public key must be 32 bytes');
  const lookup = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length).toString('latin1');
  const known = knownKeys.get(lookup);
  if (known !== undefined) return known;
  const digest = createHash('sha256').update(publicKeyBlob(bytes)).digest('base64').replace(/=+$/, '');
  const key: PublicKey = Object.freeze({ bytes: Uint8Array.from(bytes), keyId: `SHA256:${digest}` });
  if (knownKeys.size >= KNOWN_KEYS) knownKeys.clear();
  knownKeys.set(lookup, key);
  return key;
}

/** Reads an SSH public key blob (`string "ssh-ed25519" || string key`), nothing more and nothing less. */
export function parsePublicKeyBlob(blob: Buffer, code: 'KEY_MALFORMED' | 'SIG_MALFORMED' = 'KEY_MALFORMED'): PublicKey {
  const reader = new WireReader(blob, code, 'public key');
  const type = reader.utf8();
  if (type !== KEY_TYPE) {
    throw new CooError(code === 'KEY_MALFORMED' ? 'KEY_UNSUPPORTED' : code, `unsupported key type ${JSON.stringify(type)}: only ssh-ed25519`);
  }
  const key = reader.string();
  reader.end();
  if (key.length !== 32) reader.fail('ed25519 key must be 32 bytes');
  return toPublicKey(key);
}

/** The one-line OpenSSH form: `ssh-ed25519 AAAA... comment`. */
export function formatPublicKeyLine(key: PublicKey, comment = ''): string {
  const line = `${KEY_TYPE} ${publicKeyBlob(key.bytes).toString('base64')}`;
  return comment === '' ? line : `${line} ${comment}`;
}

const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;

/** Parses one OpenSSH public key line (an `authorized_keys` line without options). */
export function parsePublicKeyLine(text: string): { key: PublicKey; comment: string } {
  const line = text.trim();
  if (line.includes('\n')) throw new CooError('KEY_MALFORMED', 'a public key file holds exactly one line');
  const match = /^(\S+) (\S+)(?: (.*))?$/.exec(line);
  if (match === null) throw new CooError('KEY_MALFORMED', 'not an OpenSSH public key line ("ssh-ed25519 AAAA... comment")');
  const [, type, data, comment] = match;
  if (type !== KEY_TYPE) throw new CooError('KEY_UNSUPPORTED', `unsupported key type ${JSON.stringify(type)}: only ssh-ed25519`);
  if (data === undefined || !BASE64.test(data)) throw new CooError('KEY_MALFORMED', 'public key data is not base64');
  const blob = Buffer.from(data, 'base64');
  if (blob.toString('base64') !== data) throw new CooError('KEY_MALFORMED', 'public key base64 is not canonical');
  return { key: parsePublicKeyBlob(blob), comment: comment ?? '' };
}

function wrap(text: string, width: number): string {
  const lines: string[] = [];
  for (let i = 0; i < text.length; i += width) lines.push(text.slice(i, i + width));
  return lines.join('\n');
}

/**
 * A new key: an ed25519 private key is 32 random bytes (RFC 8032 section 5.1.5), taken from the
 * operating system's generator. Not generateKeyPairSync and then a JWK export of the key: on node
 * 20 that pair can deadlock the process for good (a garbage collection inside the export destroys
 * the key's generation job, which waits for the mutex the export holds).
 */
export function generatePrivateKey(comment: string): PrivateKey {
  return privateKeyFromSeed(randomBytes(32), comment);
}

export function privateKeyFromSeed(seed: Uint8Array, comment = ''): PrivateKey {
  if (seed.length !== 32) throw new CooError('KEY_MALFORMED', 'ed25519 seed must be 32 bytes');
  const pub = publicKeyFromSeed(seed);
  return { publicKey: toPublicKey(pub), seed: Uint8Array.from(seed), comment, keyObject: privateKeyObject(seed, pub) };
}

/**
 * Writes the unencrypted OpenSSH private key format (PROTOCOL.key), as `ssh-keygen -t ed25519 -N ''`
 * does, so the same file signs with `ssh-keygen -Y sign` and `git commit -S`.
 */
export function formatPrivateKey(key: PrivateKey, checkInt = randomBytes(4).readUInt32BE(0)): string {
  const pub = key.publicKey.bytes;
  let inner = Buffer.concat([
    encodeUint32(checkInt),
    encodeUint32(checkInt),
    encodeString(KEY_TYPE),
    encodeString(pub),
    encodeString(Buffer.concat([Buffer.from(key.seed), Buffer.from(pub)])),
    encodeString(key.comment),
  ]);
  const padding: number[] = [];
  for (let i = 1; (inner.length + padding.length) % 8 !== 0; i += 1) padding.push(i);
  inner = Buffer.concat([inner, Buffer.from(padding)]);
  const body = Buffer.concat([
    PRIVATE_MAGIC,
    encodeString('none'),
    encodeString('none'),
    encodeString(''),
    encodeUint32(1),
    encodeString(publicKeyBlob(pub)),
    encodeString(inner),
  ]);
  return `${PRIVATE_BEGIN}\n${wrap(body.toString('base64'), 70)}\n${PRIVATE_END}\n`;
}

/** Reads an unencrypted OpenSSH ed25519 private key, ours or one `ssh-keygen -t ed25519 -N ''` made. */
export function parsePrivateKey(text: string): PrivateKey {
  const lines = text.replace(/\r\n/g, '\n').trim().split('\n');
  if (lines[0] !== PRIVATE_BEGIN || lines[lines.length - 1] !== PRIVATE_END) {
    throw new CooError('KEY_MALFORMED', 'not an OpenSSH private key (expected "-----BEGIN OPENSSH PRIVATE KEY-----")');
  }
  const data = lines.slice(1, -1).join('');
  if (!BASE64.test(data)) throw new CooError('KEY_MALFORMED', 'private key body is not base64');
  const body = Buffer.from(data, 'base64');
  if (!body.subarray(0, PRIVATE_MAGIC.length).equals(PRIVATE_MAGIC)) {
    throw new CooError('KEY_MALFORMED', 'private key lacks the openssh-key-v1 magic');
  }
  const reader = new WireReader(body.subarray(PRIVATE_MAGIC.length), 'KEY_MALFORMED', 'private key');
  const cipher = reader.utf8();
  const kdf = reader.utf8();
  reader.string();
  if (cipher !== 'none' || kdf !== 'none') {
    throw new CooError('KEY_UNSUPPORTED', 'encrypted private keys are not supported: decrypt a copy with `ssh-keygen -p -N ""`');
  }
  if (reader.uint32() !== 1) reader.fail('exactly one key expected');
  const outerPublic = parsePublicKeyBlob(reader.string());
  const inner = new WireReader(reader.string(), 'KEY_MALFORMED', 'private key');
  reader.end();
  if (inner.uint32() !== inner.uint32()) inner.fail('check integers differ (wrong passphrase or corrupt key)');
  const type = inner.utf8();
  if (type !== KEY_TYPE) throw new CooError('KEY_UNSUPPORTED', `unsupported key type ${JSON.stringify(type)}: only ssh-ed25519`);
  const pub = inner.string();
  const secret = inner.string();
  const comment = inner.utf8();
  const padding = inner.raw(inner.remaining());
  padding.forEach((byte, index) => {
    if (byte !== index + 1) inner.fail('bad padding');
  });
  if (secret.length !== 64 || pub.length !== 32) inner.fail('bad ed25519 key lengths');
  const seed = secret.subarray(0, 32);
  if (!secret.subarray(32).equals(pub) || !Buffer.from(outerPublic.bytes).equals(pub)) {
    inner.fail('public halves disagree');
  }
  const key = privateKeyFromSeed(seed, comment);
  if (!Buffer.from(key.publicKey.bytes).equals(pub)) inner.fail('seed does not match its public key');
  return key;
}
