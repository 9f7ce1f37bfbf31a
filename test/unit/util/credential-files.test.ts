import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { credentialFileSecrets } from '../../../src/util/credential-files.js';
import { tempDir } from '../../helpers/tmp.js';

const dir = tempDir('credential-files-');
const LINES = ['MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7Vx3Lq9', 'Zp4Rk8Wn2Yc6Jh1Tf5Dm9Xb3Qs7Lv0Ng4Hk8Pw2Ez6Ua1Ic5Oy9Ry3Mt7Jw', 'Fq2Xe6Sd0Vb4Nh8Kl3Gp7Za1=='];

/** The secrets of a home folder holding only `files`. */
function secretsOf(name: string, files: Record<string, string>, env: NodeJS.ProcessEnv = {}): string[] {
  const home = join(dir, name);
  for (const [path, content] of Object.entries(files)) {
    mkdirSync(join(home, path, '..'), { recursive: true });
    writeFileSync(join(home, path), content, { mode: 0o600 });
  }
  return credentialFileSecrets(env, home).map((secret) => secret.value);
}

describe('a PEM private key in a credential file', () => {
  it("gives each body line and the body whole from a .env, its line breaks escaped on one line or the value quoted over several, under a name that is no secret's too", () => {
    const escaped = `-----BEGIN PRIVATE KEY-----\\n${LINES.join('\\n')}\\n-----END PRIVATE KEY-----\\n`;
    const multiline = `-----BEGIN PRIVATE KEY-----\n${LINES.join('\n')}\n-----END PRIVATE KEY-----`;
    for (const [name, content] of [
      ['escaped', `FIREBASE_PRIVATE_KEY="${escaped}"\n`],
      ['escaped-plain-name', `JWT_SIGNER_PEM='${escaped}'\nLOG_LEVEL=debug\n`],
      ['multiline', `# the signing key\nJWT_SIGNER_PEM="${multiline}"\nLOG_LEVEL=debug\n`],
    ] as const) {
      const values = secretsOf(name, { '.env': content });
      for (const part of [...LINES, LINES.join('')]) expect(values, `${name}: ${part}`).toContain(part);
      expect(values, name).not.toContain('debug');
    }
  });
});

describe('the secret fields of a JSON credential file, named as the field rule of the environment names them', () => {
  it("give an OAuth client's assertion and a PKCE code verifier, not the assertion's type", () => {
    const assertion = 'eyJhbGciOiJSUzI1NiJ9.eyJpc3MiOiJjbGllbnQifQ.c2lnbmF0dXJlMTIz';
    const verifier = 'dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk';
    const file = join(dir, 'oauth-request.json');
    writeFileSync(file, JSON.stringify({ client_assertion_type: 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer', client_assertion: assertion, codeVerifier: verifier }), { mode: 0o600 });
    const values = secretsOf('oauth', {}, { GOOGLE_APPLICATION_CREDENTIALS: file });
    expect(values.sort()).toEqual([assertion, verifier].sort());
  });
});
