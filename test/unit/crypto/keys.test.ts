import { spawnSync } from 'node:child_process';
import { chmodSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import {
  formatPrivateKey,
  formatPublicKeyLine,
  generatePrivateKey,
  parsePrivateKey,
  parsePublicKeyLine,
} from '../../../src/crypto/keys.js';
import { codeOf } from '../../helpers/codes.js';
import { run, tempDir } from '../../helpers/tmp.js';

const dir = tempDir();

/** The built module (npm test builds first): the check below runs in a process of its own. */
const BUILT_KEYS = pathToFileURL(join(import.meta.dirname, '..', '..', '..', 'dist', 'crypto', 'keys.js')).href;

describe('OpenSSH key files', () => {
  it('gives the same key id as ssh-keygen -l for a key we made', () => {
    const key = generatePrivateKey('coo.hermes');
    const pubPath = join(dir, 'ours.pub');
    writeFileSync(pubPath, formatPublicKeyLine(key.publicKey, 'coo.hermes') + '\n');
    const listed = run('ssh-keygen', ['-l', '-f', pubPath]);
    expect(listed.status).toBe(0);
    expect(listed.stdout.split(' ')[1]).toBe(key.publicKey.keyId);
  });

  it('makes keys without ever locking up the process (node 20: a GC inside a JWK export of a just-generated key deadlocked)', () => {
    // generateKeyPairSync followed by a JWK export of the same key hung node 20.20 for good, with
    // this loop's garbage after 500 to 5,000 keys (the bench hung once after a handful): a garbage
    // collection inside the export destroyed the key's generation job, which takes the mutex the
    // export holds. A hang is only visible as a process that does not finish, hence the child and
    // its kill bound (far above the seconds the loop takes).
    const script = `
      const { generatePrivateKey } = await import(${JSON.stringify(BUILT_KEYS)});
      const junk = [];
      const ids = new Set();
      for (let i = 0; i < 15000; i += 1) {
        const key = generatePrivateKey('k');
        ids.add(key.publicKey.keyId);
        junk.push({ seed: key.seed, filler: new Array(20).fill(i) });
        if (junk.length > 1000) junk.length = 0;
      }
      process.stdout.write(String(ids.size));
    `;
    const child = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', timeout: 120_000, killSignal: 'SIGKILL' });
    expect(child.signal).toBeNull();
    expect(child.status).toBe(0);
    expect(child.stdout).toBe('15000');
  }, 150_000);

  it('writes a private key that ssh-keygen reads and derives the same public key from', () => {
    const key = generatePrivateKey('ceo');
    const keyPath = join(dir, 'ours.key');
    writeFileSync(keyPath, formatPrivateKey(key), { mode: 0o600 });
    const derived = run('ssh-keygen', ['-y', '-f', keyPath]);
    expect(derived.status).toBe(0);
    expect(parsePublicKeyLine(derived.stdout).key.keyId).toBe(key.publicKey.keyId);
  });

  it('loads a key made by ssh-keygen -t ed25519', () => {
    const keyPath = join(dir, 'stock');
    const made = run('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', 'stock@test', '-f', keyPath]);
    expect(made.status).toBe(0);
    chmodSync(keyPath, 0o600);
    const key = parsePrivateKey(readFileSync(keyPath, 'utf8'));
    const pub = parsePublicKeyLine(readFileSync(`${keyPath}.pub`, 'utf8'));
    expect(key.publicKey.keyId).toBe(pub.key.keyId);
    expect(key.comment).toBe('stock@test');
    expect(pub.comment).toBe('stock@test');
    const listed = run('ssh-keygen', ['-l', '-f', `${keyPath}.pub`]);
    expect(listed.stdout.split(' ')[1]).toBe(key.publicKey.keyId);
  });

  it('round-trips a private key through its file format', () => {
    const key = generatePrivateKey('ea.codex');
    const again = parsePrivateKey(formatPrivateKey(key));
    expect(Buffer.from(again.seed).equals(Buffer.from(key.seed))).toBe(true);
    expect(again.publicKey.keyId).toBe(key.publicKey.keyId);
  });

  it('refuses an encrypted private key with a coded error that says what to do', () => {
    const keyPath = join(dir, 'encrypted');
    expect(run('ssh-keygen', ['-q', '-t', 'ed25519', '-N', 'secret-pass', '-f', keyPath]).status).toBe(0);
    expect(codeOf(() => parsePrivateKey(readFileSync(keyPath, 'utf8')))).toBe('KEY_UNSUPPORTED');
  });

  it('refuses other key types and malformed lines with coded errors', () => {
    const rsaPath = join(dir, 'rsa');
    expect(run('ssh-keygen', ['-q', '-t', 'rsa', '-b', '2048', '-N', '', '-f', rsaPath]).status).toBe(0);
    expect(codeOf(() => parsePublicKeyLine(readFileSync(`${rsaPath}.pub`, 'utf8')))).toBe('KEY_UNSUPPORTED');
    expect(codeOf(() => parsePrivateKey(readFileSync(rsaPath, 'utf8')))).toBe('KEY_UNSUPPORTED');
    expect(codeOf(() => parsePublicKeyLine('ssh-ed25519 not-base64!'))).toBe('KEY_MALFORMED');
    expect(codeOf(() => parsePublicKeyLine('ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIA=='))).toBe('KEY_MALFORMED');
    expect(codeOf(() => parsePublicKeyLine(''))).toBe('KEY_MALFORMED');
    expect(codeOf(() => parsePrivateKey('-----BEGIN OPENSSH PRIVATE KEY-----\nAAAA\n-----END OPENSSH PRIVATE KEY-----'))).toBe('KEY_MALFORMED');
    expect(codeOf(() => parsePrivateKey('hello'))).toBe('KEY_MALFORMED');
  });

  it('refuses a private key whose halves disagree', () => {
    const a = generatePrivateKey('a');
    const b = generatePrivateKey('b');
    const forged = formatPrivateKey({ ...a, publicKey: b.publicKey });
    expect(codeOf(() => parsePrivateKey(forged))).toBe('KEY_MALFORMED');
  });
});
