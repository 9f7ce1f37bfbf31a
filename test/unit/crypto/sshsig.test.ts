import { createHash } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import nacl from 'tweetnacl';
import { describe, expect, it } from 'vitest';
import { formatPrivateKey, formatPublicKeyLine, generatePrivateKey } from '../../../src/crypto/keys.js';
import { ENTRY_NAMESPACE, armor, parseSshsig, signSshsig, verifySshsig, verifySshsigText } from '../../../src/crypto/sshsig.js';
import { codeOf } from '../../helpers/codes.js';
import { run, tempDir } from '../../helpers/tmp.js';

const dir = tempDir();
const key = generatePrivateKey('coo.hermes');
const keyPath = join(dir, 'coo.key');
writeFileSync(keyPath, formatPrivateKey(key), { mode: 0o600 });
const allowed = join(dir, 'allowed_signers');
writeFileSync(allowed, `coo.hermes namespaces="${ENTRY_NAMESPACE}" ${formatPublicKeyLine(key.publicKey)}\n`);


describe('SSHSIG detached signatures', () => {
  const message = Buffer.from('schema_version: coo_message.v0\nmessage_id: msg_x\n');

  it('produces exactly what ssh-keygen -Y sign produces for the same key and bytes', () => {
    const file = join(dir, 'entry.yaml');
    writeFileSync(file, message);
    const signed = run('ssh-keygen', ['-Y', 'sign', '-n', ENTRY_NAMESPACE, '-f', keyPath, file]);
    expect(signed.status).toBe(0);
    const theirs = run('cat', [`${file}.sig`]).stdout;
    expect(signSshsig(key, message, ENTRY_NAMESPACE)).toBe(theirs);
    expect(verifySshsigText(theirs, message, ENTRY_NAMESPACE).keyId).toBe(key.publicKey.keyId);
  });

  it('is accepted by ssh-keygen -Y verify', () => {
    const file = join(dir, 'ours.yaml');
    writeFileSync(file, message);
    writeFileSync(`${file}.sig`, signSshsig(key, message, ENTRY_NAMESPACE));
    const verified = run('ssh-keygen', ['-Y', 'verify', '-f', allowed, '-I', 'coo.hermes', '-n', ENTRY_NAMESPACE, '-s', `${file}.sig`], { input: message });
    expect(verified.status).toBe(0);
    expect(verified.stdout).toContain('Good "coo-commons.entry.v0" signature for coo.hermes');
  });

  it('verifies the same bytes with tweetnacl, independently', () => {
    const sig = parseSshsig(signSshsig(key, message, ENTRY_NAMESPACE));
    const digest = createHash('sha512').update(message).digest();
    const enc = (b: Buffer | string): Buffer => {
      const bytes = Buffer.from(b);
      const len = Buffer.alloc(4);
      len.writeUInt32BE(bytes.length);
      return Buffer.concat([len, bytes]);
    };
    const signed = Buffer.concat([Buffer.from('SSHSIG'), enc(ENTRY_NAMESPACE), enc(''), enc('sha512'), enc(digest)]);
    expect(nacl.sign.detached.verify(signed, sig.signature, key.publicKey.bytes)).toBe(true);
  });

  it('rejects another namespace, another message and another key', () => {
    const text = signSshsig(key, message, ENTRY_NAMESPACE);
    expect(codeOf(() => verifySshsigText(text, message, 'git'))).toBe('SIG_NAMESPACE');
    expect(codeOf(() => verifySshsigText(text, Buffer.concat([message, Buffer.from(' ')]), ENTRY_NAMESPACE))).toBe('SIG_INVALID');
    const other = generatePrivateKey('x');
    const sig = parseSshsig(text);
    expect(verifySshsig({ ...sig, publicKey: other.publicKey }, message, ENTRY_NAMESPACE)).toBe(false);
  });

  it('rejects armor that ssh-keygen would read but is not canonical', () => {
    const text = signSshsig(key, message, ENTRY_NAMESPACE);
    const blob = parseSshsig(text);
    expect(blob.namespace).toBe(ENTRY_NAMESPACE);
    const lines = text.trimEnd().split('\n');
    const rewrapped = [lines[0], lines.slice(1, -1).join(''), lines[lines.length - 1]].join('\n') + '\n';
    expect(codeOf(() => parseSshsig(rewrapped))).toBe('SIG_NONCANONICAL');
    expect(codeOf(() => parseSshsig(text.replace(/\n$/, '\n\n')))).toBe('SIG_MALFORMED');
    expect(codeOf(() => parseSshsig(text.replace(/\n/g, '\r\n')))).toBe('SIG_MALFORMED');
  });

  it('rejects trailing bytes, a wrong version and a wrong hash algorithm inside the blob', () => {
    const text = signSshsig(key, message, ENTRY_NAMESPACE);
    const body = Buffer.from(text.split('\n').slice(1, -2).join(''), 'base64');
    expect(codeOf(() => parseSshsig(armor(Buffer.concat([body, Buffer.from([0])]))))).toBe('SIG_MALFORMED');
    const wrongVersion = Buffer.from(body);
    wrongVersion.writeUInt32BE(2, 6);
    expect(codeOf(() => parseSshsig(armor(wrongVersion)))).toBe('SIG_MALFORMED');
    const sha256 = Buffer.from(body.toString('latin1').replace('sha512', 'sha256'), 'latin1');
    expect(codeOf(() => parseSshsig(armor(sha256)))).toBe('SIG_MALFORMED');
    expect(codeOf(() => parseSshsig(armor(body.subarray(0, 40))))).toBe('SIG_MALFORMED');
  });
});
