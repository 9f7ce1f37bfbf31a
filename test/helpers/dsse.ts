import { createPublicKey } from 'node:crypto';
import { bundleFromJSON } from '@sigstore/bundle';
import { toSignedEntity, toTrustMaterial, Verifier } from '@sigstore/verify';
import { parsePublicKeyLine } from '../../src/crypto/keys.js';

export interface Dsse {
  readonly payload: string;
  readonly payloadType: string;
  readonly signatures: ReadonlyArray<{ readonly keyid: string; readonly sig: string }>;
}

/**
 * Verifies a DSSE envelope with @sigstore/verify given only an OpenSSH ed25519 public key line, as
 * a verifier that knows nothing of coo would: no transparency log, no certificate, no timestamp.
 * Throws when the signature does not verify.
 */
export function verifyDsse(dsse: Dsse, publicKeyLine: string): unknown {
  const key = parsePublicKeyLine(publicKeyLine).key;
  const publicKey = createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: Buffer.from(key.bytes).toString('base64url') }, format: 'jwk' });
  const bundle = bundleFromJSON({
    mediaType: 'application/vnd.dev.sigstore.bundle.v0.3+json',
    verificationMaterial: { publicKey: { hint: dsse.signatures[0]!.keyid }, tlogEntries: [], timestampVerificationData: { rfc3161Timestamps: [] } },
    dsseEnvelope: dsse,
  });
  const trust = toTrustMaterial({ mediaType: 'application/vnd.dev.sigstore.trustedroot+json;version=0.1', tlogs: [], certificateAuthorities: [], ctlogs: [], timestampAuthorities: [] }, () => ({ publicKey, validFor: () => true }));
  return new Verifier(trust, { tlogThreshold: 0, ctlogThreshold: 0, timestampThreshold: 0 }).verify(toSignedEntity(bundle));
}

/** The in-toto statement a DSSE envelope carries. */
export function statementOf<T>(dsse: Dsse): T {
  return JSON.parse(Buffer.from(dsse.payload, 'base64').toString('utf8')) as T;
}
