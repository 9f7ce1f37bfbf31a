import nacl from 'tweetnacl';
import { describe, expect, it } from 'vitest';
import { isCanonicalS, signEd25519, verifyEd25519 } from '../../../src/crypto/ed25519.js';
import { privateKeyFromSeed } from '../../../src/crypto/keys.js';

/** RFC 8032 section 7.1, tests 1 to 3 and the 1023-byte test's key. */
const RFC8032 = [
  {
    name: 'TEST 1 (empty message)',
    seed: '9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60',
    pub: 'd75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a',
    msg: '',
    sig: 'e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b',
  },
  {
    name: 'TEST 2 (one byte)',
    seed: '4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb',
    pub: '3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c',
    msg: '72',
    sig: '92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00',
  },
  {
    name: 'TEST 3 (two bytes)',
    seed: 'c5aa8df43f9f837bedb7442f31dcb7b166d38535076f094b85ce3a2e0b4458f7',
    pub: 'fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025',
    msg: 'af82',
    sig: '6291d657deec24024827e69c3abe01a30ce548a284743a445e3680d7db5ac3ac18ff9b538d16f290ae67f760984dc6594a7c15e9716ed28dc027beceea1ec40a',
  },
];

const hex = (value: string): Uint8Array => Uint8Array.from(Buffer.from(value, 'hex'));
const L = (1n << 252n) + 27742317777372353535851937790883648493n;

function addL(signature: Uint8Array): Uint8Array {
  const s = BigInt('0x' + Buffer.from(signature.subarray(32)).reverse().toString('hex')) + L;
  const bytes = Buffer.from(s.toString(16).padStart(64, '0'), 'hex').reverse();
  return Uint8Array.from([...signature.subarray(0, 32), ...bytes]);
}

describe('ed25519 over node:crypto', () => {
  for (const vector of RFC8032) {
    it(`signs ${vector.name} exactly as RFC 8032 says, and tweetnacl agrees`, () => {
      const key = privateKeyFromSeed(hex(vector.seed));
      expect(Buffer.from(key.publicKey.bytes).toString('hex')).toBe(vector.pub);
      const signature = signEd25519(key.keyObject, hex(vector.msg));
      expect(Buffer.from(signature).toString('hex')).toBe(vector.sig);
      const naclPair = nacl.sign.keyPair.fromSeed(hex(vector.seed));
      expect(Buffer.from(nacl.sign.detached(hex(vector.msg), naclPair.secretKey)).toString('hex')).toBe(vector.sig);
      expect(verifyEd25519(hex(vector.pub), hex(vector.msg), hex(vector.sig))).toBe(true);
    });
  }

  it('cross-verifies random messages both ways with tweetnacl', () => {
    for (let i = 0; i < 16; i += 1) {
      const seed = nacl.randomBytes(32);
      const message = nacl.randomBytes(i * 37);
      const ours = privateKeyFromSeed(seed);
      const theirs = nacl.sign.keyPair.fromSeed(seed);
      const oursSig = signEd25519(ours.keyObject, message);
      const theirSig = nacl.sign.detached(message, theirs.secretKey);
      expect(Buffer.from(oursSig).equals(Buffer.from(theirSig))).toBe(true);
      expect(nacl.sign.detached.verify(message, oursSig, theirs.publicKey)).toBe(true);
      expect(verifyEd25519(ours.publicKey.bytes, message, theirSig)).toBe(true);
    }
  });

  it('rejects the S+L malleation that tweetnacl accepts', () => {
    const vector = RFC8032[1]!;
    const malleated = addL(hex(vector.sig));
    expect(nacl.sign.detached.verify(hex(vector.msg), malleated, hex(vector.pub))).toBe(true);
    expect(isCanonicalS(malleated)).toBe(false);
    expect(verifyEd25519(hex(vector.pub), hex(vector.msg), malleated)).toBe(false);
  });

  it('rejects a flipped bit in the message, the signature or the key', () => {
    const vector = RFC8032[2]!;
    const msg = hex(vector.msg);
    const sig = hex(vector.sig);
    const pub = hex(vector.pub);
    expect(verifyEd25519(pub, Uint8Array.from([msg[0]! ^ 1, msg[1]!]), sig)).toBe(false);
    const badSig = Uint8Array.from(sig);
    badSig[10] = badSig[10]! ^ 0x40;
    expect(verifyEd25519(pub, msg, badSig)).toBe(false);
    const badPub = Uint8Array.from(pub);
    badPub[5] = badPub[5]! ^ 0x01;
    expect(verifyEd25519(badPub, msg, sig)).toBe(false);
    expect(verifyEd25519(pub.subarray(0, 31), msg, sig)).toBe(false);
    expect(verifyEd25519(pub, msg, sig.subarray(0, 63))).toBe(false);
  });
});
