import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { formatPrivateKey, generatePrivateKey } from '../../../src/crypto/keys.js';
import { displayUrl, withoutUserInfo } from '../../../src/util/display-url.js';
import { credentialFileSecrets } from '../../../src/util/credential-files.js';
import { sentSecretIn, sentSecrets } from '../../../src/util/held-secrets.js';
import { environmentSecrets, MIN_SECRET_CHARS, privateKeySecrets, runnerPlaces, Scrubber } from '../../../src/util/scrub.js';

const KEY = 'sk-live-0123456789abcdef';

describe('the scrubber', () => {
  it('replaces a secret with a marker that names it, in text, bytes and nested values', () => {
    const scrub = new Scrubber([{ name: 'OPENAI_API_KEY', value: KEY }]);
    expect(scrub.text(`Incorrect API key provided: ${KEY}.`)).toBe('Incorrect API key provided: [removed: OPENAI_API_KEY].');
    expect(scrub.bytes(Buffer.from(`{"error":"${KEY}"}\n`)).toString()).toBe('{"error":"[removed: OPENAI_API_KEY]"}\n');
    expect(scrub.value({ a: [KEY, 1, null], [KEY]: Buffer.from(KEY), at: new Date(0) })).toEqual({ a: ['[removed: OPENAI_API_KEY]', 1, null], '[removed: OPENAI_API_KEY]': Buffer.from('[removed: OPENAI_API_KEY]'), at: new Date(0) });
  });

  it('finds a secret holding a quote, a backslash or a control character as JSON escapes it', () => {
    const odd = 'k"e\\y\u0001-0123456789';
    const scrub = new Scrubber([{ name: 'TOKEN', value: odd }]);
    const json = JSON.stringify({ said: `the key ${odd} is wrong` });
    expect(json).not.toContain(odd);
    const cleaned = scrub.text(json);
    expect(cleaned).not.toContain(JSON.stringify(odd).slice(1, -1));
    expect(JSON.parse(cleaned)).toEqual({ said: 'the key [removed: TOKEN] is wrong' });
    expect(scrub.value({ said: odd })).toEqual({ said: '[removed: TOKEN]' });
  });

  it('makes a folder of the runner relative to the place it names, and only where its name ends', () => {
    const scrub = new Scrubber([], [
      { name: 'runner-state', path: '/home/op/.local/state/coo' },
      { name: 'sandbox', path: '/home/op/.local/state/coo/sandboxes/aa_1/' },
      { name: 'home', path: '/home/op' },
    ]);
    expect(scrub.text('cwd=/home/op/.local/state/coo/sandboxes/aa_1/work/README.md')).toBe('cwd=[sandbox]/work/README.md');
    expect(scrub.text('/home/op/.local/state/coo/journal /home/op/x /home/opal /home/op')).toBe('[runner-state]/journal [home]/x /home/opal [home]');
    const root = new Scrubber([], [{ name: 'home', path: '/root' }]);
    expect(root.text('trust/root/000001.yaml at /root/x and "/root"')).toBe('trust/root/000001.yaml at [home]/x and "[home]"');
    // A path on the next line of a command's output, inside a JSON event: after the escape \n.
    expect(root.text(JSON.stringify({ out: 'ok\n/root/work\n' }))).toBe('{"out":"ok\\n[home]/work\\n"}');
  });

  it('leaves bytes that are not UTF-8 as they were, and returns the same buffer when nothing was found', () => {
    const scrub = new Scrubber([{ name: 'K', value: KEY }]);
    const binary = Buffer.from([0xff, 0xfe, 0x00, ...Buffer.from(KEY), 0xc3]);
    expect([...scrub.bytes(binary)]).toEqual([0xff, 0xfe, 0x00, ...Buffer.from('[removed: K]'), 0xc3]);
    const clean = Buffer.from('nothing here');
    expect(scrub.bytes(clean)).toBe(clean);
  });

  it('ignores values too short to be told from ordinary text', () => {
    const scrub = new Scrubber([{ name: 'K', value: 'abc' }], [{ name: 'root', path: '/' }]);
    expect(scrub.text('abc / abc')).toBe('abc / abc');
  });

  it('takes provider keys and tokens from an environment, and nothing else', () => {
    expect(environmentSecrets({ OPENAI_API_KEY: 'sk-live-123456', GITHUB_TOKEN: 'ghp_abcdefgh', HOME: '/home/op', SHORT_KEY: 'abc' }).map((secret) => secret.name).sort()).toEqual(['GITHUB_TOKEN', 'OPENAI_API_KEY']);
  });

  it("removes a private key's secret part from any file of it, whole or line by line, and its seed", () => {
    const key = generatePrivateKey('coo.hermes');
    const scrub = new Scrubber(privateKeySecrets(key));
    const file = formatPrivateKey(key);
    const cleaned = scrub.text(file);
    const lines = file.split('\n').slice(1, -2);
    // A file in its armor is removed whole, as any private key is; without it, the first lines hold the
    // public half and the check integers, and every line from the secret half on is gone.
    expect(cleaned).toBe('[removed: private key]\n');
    const bare = scrub.text(lines.join('\n'));
    expect(bare).not.toContain(lines[lines.length - 1]!);
    expect(bare).toContain('[removed: coo key]');
    expect(cleaned).not.toContain(Buffer.from(key.seed).toString('hex'));
    const other = formatPrivateKey(key);
    expect(scrub.text(other.split('\n').join(''))).not.toContain(other.split('\n').slice(1, -2).join('').slice(-100));
    expect(scrub.text(Buffer.from(key.seed).toString('hex'))).toBe('[removed: coo key]');
  });

  it("names the runner's folders, the user's home last", () => {
    expect(runnerPlaces({ stateDir: '/s', ledger: '/l', repo: '/r', hidden: ['/k'] }).map((place) => place.name)).toEqual(['runner-state', 'ledger', 'repo', 'hidden', 'home']);
    expect(runnerPlaces({ stateDir: '/s', ledger: '/l', repo: '/r' }).at(-1)!.path).toBe(homedir());
  });
});

/** `bytes` in base64, as a script's `base64` prints it: broken into lines of `width` when one is given. */
function base64(bytes: Buffer | string, width = 0): string {
  const encoded = Buffer.from(bytes).toString('base64');
  return width === 0 ? encoded : (encoded.match(new RegExp(`.{1,${width}}`, 'g')) ?? []).join('\n');
}

const base64url = (bytes: Buffer | string): string => Buffer.from(bytes).toString('base64url');

/**
 * The characters of the base64 of `value` that depend on its bytes alone, when it stands after k
 * bytes of anything (k = 0, 1, 2): what must never survive the scrubber, whatever stands around it.
 */
function stableBase64(value: string): string[] {
  const n = Buffer.byteLength(value);
  return [0, 1, 2].map((k) => Buffer.concat([Buffer.alloc(k, 0x7e), Buffer.from(value)]).toString('base64').slice(Math.ceil((8 * k) / 6), Math.floor((8 * (k + n)) / 6)));
}

/** Every byte percent-encoded, lower-case hex, as an encoder that escapes everything writes it. */
const percentAll = (value: string): string => [...Buffer.from(value)].map((byte) => `%${byte.toString(16).padStart(2, '0')}`).join('');

/*
 * Speed, best of five on a loaded 2-core machine (node 20), 11 secrets (the COO key's forms and three
 * provider keys) and three folders, over 1 MB of a Codex-like event stream (with a percent escape in
 * every line) and 1 MB of base64:
 *   before (as written and JSON-escaped only): stream 17-30 ms as text, 17-31 ms as bytes; base64
 *     12-26 ms; building the expression 1-2 ms.
 *   after (also reversed, base64 and base64url at three alignments, hex, percent-encoded, wrapped
 *     lines): stream 10-29 ms as text, 15-37 ms as bytes; base64 10-28 ms; 1 MB of base64 wrapped at
 *     76 columns 23-44 ms; building 13-100 ms once per scrubber, of which the percent expression
 *     (built only when a text holds an escape) is most.
 *   then (also as a reader decodes it: JSON escapes decoded, invisible characters and line breaks taken
 *     out, a pass over the text so read): stream 45-95 ms as text, 60-95 ms as bytes; base64 18-20 ms.
 *   then (also YAML escapes, HTML references and runs of percent escapes decoded, folded lines joined,
 *     and the text read a second time): 1 MiB of a hostile escape repeated (`&#115;`, `%73`, `\x73`,
 *     `&amp;`, a line break and indentation, `\u0026#115;`) 20-170 ms as text or bytes; the key written
 *     in HTML references (inside a JSON string or not) repeated over 1 MiB 130-290 ms; with octal and Rust
 *     escapes too, on the same machine under a load average of 9: 3-420 ms, the key in HTML references
 *     inside a JSON string 270-820 ms.
 *   then (also base64 and hex split anywhere, and each run of either decoded at every alignment and
 *     looked in, as written and as read, twice deep), under a load average of 6, text and bytes together:
 *     1 MB of base64 180-400 ms, wrapped at 76 columns 330-520 ms, a Codex-like stream 450-820 ms, 1 MB
 *     of prose 400-760 ms.
 * A folder's check of what stands before it follows its first character, so the combined expression
 * skips ahead to that character (a lookbehind first made the same stream take 80-200 ms).
 */
describe('the scrubber, against a secret encoded in one line', () => {
  const scrub = new Scrubber([{ name: 'K', value: KEY }]);
  /** A text that shares its first characters with KEY and then differs in three whole bytes. */
  const NEAR = `${KEY.slice(0, -3)}XYZ`;

  /** That no part of any alignment's stable base64 of KEY longer than 8 characters is left in `text`. */
  function noBase64Left(text: string): void {
    for (const core of stableBase64(KEY)) for (const form of [core, core.replace(/\+/g, '-').replace(/\//g, '_')]) for (let at = 0; at + 9 <= form.length; at += 1) expect(text).not.toContain(form.slice(at, at + 9));
  }

  it('finds its base64 and base64url at each of the three alignments, inside a longer encoded text', () => {
    for (const before of ['', 'a', 'ab', 'abc', 'token: ']) {
      for (const encode of [base64, base64url]) {
        const encoded = encode(`${before}${KEY}","expires":3600}`);
        const cleaned = scrub.text(`got ${encoded} back`);
        expect(cleaned, `${before} ${encode.name}`).toContain('[removed: K (base64)]');
        noBase64Left(cleaned);
      }
    }
    // And where JSON escaped its slashes.
    const slashed = '\x3f\xff\xfe\x00sk-live-0123456789abcdef\xfb\xff';
    const encoded = Buffer.from(slashed, 'latin1').toString('base64');
    expect(scrub.text(JSON.stringify(encoded).replace(/\//g, '\\/'))).toContain('[removed: K (base64)]');
  });

  it('finds its base64 broken into lines, as written and inside a JSON string, with \\n or \\r\\n, its slashes escaped or not', () => {
    for (const width of [60, 64, 76]) {
      for (let before = 0; before < 80; before += 7) {
        const encoded = base64(`${'?'.repeat(before)}${KEY}${'~'.repeat(40)}`, width);
        const json = JSON.stringify({ out: encoded });
        for (const text of [encoded, encoded.replace(/\n/g, '\r\n'), json, JSON.stringify({ out: encoded.replace(/\n/g, '\r\n') }), json.replace(/\//g, '\\/')]) {
          const cleaned = scrub.text(text);
          expect(cleaned).toContain('[removed: K (base64)]');
          noBase64Left(cleaned.replace(/\r|\n|\\r|\\n/g, '').replace(/\\\//g, '/'));
        }
      }
    }
  });

  it('finds its hex in lower and upper case, at any byte offset and broken into lines as xxd -p breaks them', () => {
    const hex = Buffer.from(KEY).toString('hex');
    for (const text of [`a1b2${hex}c3d4`, `0x${hex.toUpperCase()}`, `{"hex":"ff${hex}00"}`]) {
      const cleaned = scrub.text(text);
      expect(cleaned).toContain('[removed: K (hex)]');
      expect(cleaned.toLowerCase()).not.toContain(hex.slice(0, 16));
      expect(cleaned.toLowerCase()).not.toContain(hex.slice(-16));
    }
    const wrapped = `${'0'.repeat(50)}${hex}${'f'.repeat(30)}`.match(/.{1,60}/g)!.join('\n');
    expect(scrub.text(wrapped).replace(/\n/g, '')).not.toContain(hex.slice(20, 36));
  });

  it('finds it percent-encoded, whatever the encoder left alone and in either case, and a space written as +', () => {
    const odd = 'p@ss word/0123+&é';
    const oddScrub = new Scrubber([{ name: 'K', value: odd }]);
    for (const encoded of [encodeURIComponent(odd), encodeURI(odd), percentAll(odd), percentAll(odd).toUpperCase(), encodeURIComponent(odd).replace(/%20/g, '+')]) {
      expect(oddScrub.text(`url?key=${encoded}&x=1`), encoded).toBe('url?key=[removed: K (percent-encoded)]&x=1');
    }
    expect(scrub.text(`?k=${percentAll(KEY)}`)).toBe('?k=[removed: K (percent-encoded)]');
    expect(new Scrubber([{ name: 'K', value: 'my secret pass' }]).text('p=my+secret+pass&q=1')).toBe('p=[removed: K (percent-encoded)]&q=1');
    // As written it is the secret itself, under the plain marker.
    expect(oddScrub.text(`key ${odd}.`)).toBe('key [removed: K].');
  });

  it('finds it reversed, as written and as JSON escapes it', () => {
    const reversed = [...KEY].reverse().join('');
    expect(scrub.text(`rev: ${reversed}!`)).toBe('rev: [removed: K (reversed)]!');
    const odd = 'k"e\\y-0123456789';
    expect(new Scrubber([{ name: 'K', value: odd }]).text(JSON.stringify({ r: [...odd].reverse().join('') }))).toBe('{"r":"[removed: K (reversed)]"}');
  });

  it('does not take a text that shares only its first characters for it, in any encoding', () => {
    for (const text of [NEAR, base64(NEAR), base64(`a${NEAR}`), base64(`ab${NEAR}`), base64url(NEAR), Buffer.from(NEAR).toString('hex'), Buffer.from(NEAR).toString('hex').toUpperCase(), percentAll(NEAR), [...NEAR].reverse().join('')]) {
      expect(scrub.text(`say ${text} end`)).toBe(`say ${text} end`);
    }
  });

  it('scrubs the encoded forms in bytes too, and returns the same buffer when nothing was found', () => {
    const bytes = Buffer.from([0xff, 0x00, ...Buffer.from(`${base64(`xy${KEY}`)} ${Buffer.from(KEY).toString('hex')}`), 0xc3]);
    const cleaned = scrub.bytes(bytes);
    expect(cleaned.toString('latin1')).toContain('[removed: K (base64)]');
    expect(cleaned.toString('latin1')).toContain('[removed: K (hex)]');
    expect([...cleaned.subarray(0, 2)]).toEqual([0xff, 0x00]);
    const clean = Buffer.from(base64('nothing secret here, just a long enough text to wrap around', 16));
    expect(scrub.bytes(clean)).toBe(clean);
  });

  it('does not look for the encodings of a value too short to be a secret', () => {
    const short = 'x'.repeat(MIN_SECRET_CHARS - 1);
    const text = `${short} ${base64(short)} ${Buffer.from(short).toString('hex')} ${percentAll(short)}`;
    expect(new Scrubber([{ name: 'K', value: short }]).text(text)).toBe(text);
  });

  it("finds the COO key's secret part in its key file base64-encoded again, as `base64 < coo.key` prints it", () => {
    const key = generatePrivateKey('coo.hermes');
    const keyScrub = new Scrubber(privateKeySecrets(key));
    const file = formatPrivateKey(key);
    const secretTail = file.split('\n').slice(1, -2).join('').slice(-64);
    for (const width of [0, 76]) {
      const cleaned = keyScrub.text(base64(file, width));
      expect(cleaned).toContain('[removed: coo key (base64)]');
      expect(Buffer.from(cleaned.replace(/\[removed: [^\]]*\]/g, '').replace(/\n/g, ''), 'base64').toString('latin1')).not.toContain(secretTail.slice(0, 24));
    }
  });

  it('finds any secret in any of these encodings wherever it stands (property)', () => {
    const encodings: Record<string, (text: string) => string> = {
      base64: (text) => base64(text),
      base64url,
      'base64, 76 columns': (text) => base64(text, 76),
      'base64, JSON, 64 columns': (text) => JSON.stringify(base64(text, 64)),
      hex: (text) => Buffer.from(text).toString('hex'),
      HEX: (text) => Buffer.from(text).toString('hex').toUpperCase(),
    };
    fc.assert(
      fc.property(fc.string({ minLength: MIN_SECRET_CHARS, maxLength: 48, unit: 'grapheme' }), fc.string({ maxLength: 90 }), fc.string({ maxLength: 20 }), fc.constantFrom(...Object.keys(encodings)), (secret, before, after, name) => {
        fc.pre(secret.length >= MIN_SECRET_CHARS);
        const s = new Scrubber([{ name: 'K', value: secret }]);
        const cleaned = s.text(`<${encodings[name]!(`${before}${secret}${after}`)}>`);
        expect(cleaned).toContain('[removed: K');
        const joined = cleaned.replace(/\r|\n|\\r|\\n/g, '');
        if (name.startsWith('base64')) for (const core of stableBase64(secret)) expect(joined.replace(/-/g, '+').replace(/_/g, '/')).not.toContain(core);
        else expect(joined.toLowerCase()).not.toContain(Buffer.from(secret).toString('hex'));
      }),
      { numRuns: 300, seed: 20261202 },
    );
    fc.assert(
      fc.property(fc.string({ minLength: MIN_SECRET_CHARS, maxLength: 48 }), fc.string({ maxLength: 40 }), fc.string({ maxLength: 40 }), fc.boolean(), (secret, before, after, reversed) => {
        const shown = reversed ? [...secret].reverse().join('') : encodeURIComponent(secret);
        const cleaned = new Scrubber([{ name: 'K', value: secret }]).text(`${before}${shown}${after}`);
        expect(cleaned).toContain('[removed: K');
        expect(cleaned.replace(/\[removed: K[^\]]*\]/g, '')).not.toContain(shown);
      }),
      { numRuns: 300, seed: 20261202 },
    );
  });
});

describe('a remote URL shown to people and machines', () => {
  it('has the user info that can carry a credential removed: all of it over http(s), the password over ssh', () => {
    expect(displayUrl('http://user:TOKEN@127.0.0.1:8080/L.git')).toBe('http://127.0.0.1:8080/L.git');
    expect(displayUrl('https://x-access-token:ghs_abc@github.com/o/r.git')).toBe('https://github.com/o/r.git');
    expect(displayUrl('ssh://git@host:22/srv/L.git')).toBe('ssh://git@host:22/srv/L.git');
    expect(displayUrl('ssh://git:secret@host/srv/L.git')).toBe('ssh://git@host/srv/L.git');
    expect(displayUrl('https://ghp_TokenAsUserName@github.com/o/r.git')).toBe('https://github.com/o/r.git');
    expect(displayUrl('https://a%40b:p@ss@host/L.git')).toBe('https://host/L.git');
    expect(displayUrl('git@github.com:o/r.git')).toBe('git@github.com:o/r.git');
    expect(displayUrl('/srv/ledger.git')).toBe('/srv/ledger.git');
  });

  it("is removed from git's own messages, wherever the URL stands in them", () => {
    expect(withoutUserInfo("fatal: unable to access 'http://user:TOKEN@127.0.0.1:1/L.git/': Failed to connect")).toBe("fatal: unable to access 'http://127.0.0.1:1/L.git/': Failed to connect");
    expect(withoutUserInfo('from https://u:p@a/x and http://v:q@b/y and ssh://git:s@c/z')).toBe('from https://a/x and http://b/y and ssh://git@c/z');
  });
});

describe('a PEM private key a variable holds with its line breaks written as \\n escapes, as JSON and .env files keep it', () => {
  const LINES = ['MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7Vx3Lq9', 'Zp4Rk8Wn2Yc6Jh1Tf5Dm9Xb3Qs7Lv0Ng4Hk8Pw2Ez6Ua1Ic5Oy9Ry3Mt7Jw', 'Fq2Xe6Sd0Vb4Nh8Kl3Gp7Za1=='];
  const ESCAPED = `-----BEGIN PRIVATE KEY-----\\n${LINES.join('\\n')}\\n-----END PRIVATE KEY-----\\n`;

  it('gives each body line and the body whole, under any name, in a JSON field escaped twice, and in a .env line', () => {
    const join = LINES.join('');
    for (const env of [{ FIREBASE_PRIVATE_KEY: ESCAPED }, { JWT_SIGNING_PEM: ESCAPED }, { APP_CONFIG: JSON.stringify({ signer: ESCAPED }) }, { JWT_SIGNING_PEM: ESCAPED.replace(/\\n/g, '\\r\\n') }]) {
      const values = environmentSecrets(env).map((secret) => secret.value);
      for (const part of [...LINES, join]) expect(values, `${Object.keys(env)[0]}: ${part}`).toContain(part);
    }
    const scrub = new Scrubber(environmentSecrets({ JWT_SIGNING_PEM: ESCAPED }));
    expect(scrub.text(`line two: ${LINES[1]}`)).toBe('line two: [removed: JWT_SIGNING_PEM]');
    expect(scrub.text(`key=${ESCAPED}`)).not.toMatch(/MIIE|Zp4Rk|Fq2Xe/);
    expect(scrub.text(`key=${ESCAPED.replace(/\\n/g, '\n')}`)).not.toMatch(/MIIE|Zp4Rk|Fq2Xe/);
  });

  it("gives each line of a PGP private key block too, its headers and checksum left out, as a CI's GPG_PRIVATE_KEY holds one", () => {
    const pgp = ['lQOYBGVxQ2kBCAC7Vx3Lq9Zp4Rk8Wn2Yc6Jh1Tf5Dm9Xb3Qs7Lv0Ng4Hk8Pw2E', 'z6Ua1Ic5Oy9Ry3Mt7JwFq2Xe6Sd0Vb4Nh8Kl3Gp7Za1Bc5De9Fg3Hj7Kl1Mn5P'];
    const block = `-----BEGIN PGP PRIVATE KEY BLOCK-----\nComment: ci signing key\n\n${pgp.join('\n')}\n=Xq3T\n-----END PGP PRIVATE KEY BLOCK-----\n`;
    const values = environmentSecrets({ GPG_PRIVATE_KEY: block, RELEASE_SIGNER: block }).map((secret) => secret.value);
    for (const part of [...pgp, pgp.join('')]) expect(values.filter((value) => value === part), part).toHaveLength(2);
    expect(environmentSecrets({ RELEASE_SIGNER: block }).filter((secret) => /Comment|=Xq3T/.test(secret.value))).toEqual([]);
  });

  it("gives no line an unencrypted OpenSSH key shares with every other (its first), and nothing for a public key or a certificate", () => {
    const file = formatPrivateKey(generatePrivateKey('deploy'), 7);
    const body = file.split('\n').slice(1, -2);
    const values = environmentSecrets({ DEPLOY_SSH: file.replace(/\n/g, '\\n') }).map((secret) => secret.value);
    expect(values).not.toContain(body[0]);
    for (const line of body.slice(1)) expect(values).toContain(line);
    expect(environmentSecrets({ CA_PEM: '-----BEGIN CERTIFICATE-----\\nMIIBszCCAVmgAwIBAgIUQ2x3Lq9Zp4Rk8Wn2Yc6Jh1Tf5Dm9\\n-----END CERTIFICATE-----\\n' })).toEqual([]);
  });
});

describe('the secret fields of a JSON document, named in camelCase, PascalCase or snake_case', () => {
  const AWS = { AccessKeyId: 'ASIAQX7EXAMPLE4KZ2PD', SecretAccessKey: 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKEY', SessionToken: 'IQoJb3JpZ2luX2VjEXAMPLEsessiontoken0123456789' };

  it("give an AWS credential's three parts, from the SDK's credential JSON and from aws sts output; its expiry, version and role are no secret", () => {
    const process = { Version: 1, ...AWS, Expiration: '2026-12-06T21:00:00Z' };
    const sts = { Credentials: { ...AWS, Expiration: '2026-12-06T21:00:00+00:00' }, AssumedRoleUser: { AssumedRoleId: 'AROAEXAMPLE123:ci', Arn: 'arn:aws:sts::123456789012:assumed-role/ci/ci' } };
    for (const json of [process, sts, { accessKeyId: AWS.AccessKeyId, secretAccessKey: AWS.SecretAccessKey, sessionToken: AWS.SessionToken }]) {
      const values = environmentSecrets({ AWS_JSON: JSON.stringify(json) }).map((secret) => secret.value);
      expect(values.sort()).toEqual(Object.values(AWS).sort());
    }
    expect(environmentSecrets({ AWS_ACCESS_KEY_ID: AWS.AccessKeyId }).map((secret) => secret.value)).toEqual([AWS.AccessKeyId]);
    expect(environmentSecrets({ S3_URL: `https://b.s3.amazonaws.com/k?AWSAccessKeyId=${AWS.AccessKeyId}&Expires=1767225600&Signature=Zm9vYmFyYmF6cXV4MTIz` }).map((secret) => secret.value)).toContain(AWS.AccessKeyId);
  });

  it("give an OAuth client's assertion and a PKCE code verifier; the assertion's type names a kind and is none", () => {
    const assertion = 'eyJhbGciOiJSUzI1NiJ9.eyJpc3MiOiJjbGllbnQifQ.c2lnbmF0dXJlMTIz';
    const verifier = 'dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk';
    const values = environmentSecrets({ OAUTH_REQUEST: JSON.stringify({ grant_type: 'client_credentials', client_assertion_type: 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer', client_assertion: assertion, codeVerifier: verifier }) }).map((secret) => secret.value);
    expect(values.sort()).toEqual([assertion, verifier].sort());
    expect(environmentSecrets({ CALLBACK: `https://app.example/cb?code_verifier=${verifier}&state=abc` }).map((secret) => secret.value)).toEqual([verifier]);
  });
});

describe("the credentials of a proxy or a driver's address written without a scheme", () => {
  it('are known from a *_PROXY variable in either case, which curl, git and npm read as http://', () => {
    for (const [name, value, secret] of [
      ['HTTPS_PROXY', 'proxyuser:Pr0xy/Pass9@proxy.internal:3128', 'Pr0xy/Pass9'],
      ['http_proxy', 'proxyuser:Pr0xyPass9@10.0.0.1:3128', 'Pr0xyPass9'],
      ['ALL_PROXY', 'ghp_TokenAsProxyUser0123456789@proxy.internal:3128', 'ghp_TokenAsProxyUser0123456789'],
    ] as const) {
      expect(environmentSecrets({ [name]: value }).map((known) => known.value), name).toContain(secret);
    }
    // A proxy without credentials, a list of hosts, and a scheme-less value of another variable give none.
    expect(environmentSecrets({ HTTPS_PROXY: 'proxy.internal:3128', NO_PROXY: 'localhost,127.0.0.1,.internal', IMAGE: 'python:3.12-slim@sha256:0123456789abcdef' })).toEqual([]);
  });
});

describe("the password of a Go database DSN, which has no scheme", () => {
  it('is known up to the last @ before the protocol and its address; a DSN without one, and an image reference, give none', () => {
    for (const [dsn, password] of [
      ['app:Db/Pass9@tcp(db.internal:3306)/app?parseTime=true', 'Db/Pass9'],
      ['root:p@ss/w0rd9@unix(/run/mysqld/mysqld.sock)/app', 'p@ss/w0rd9'],
      ['app:S3cretPass@(db:3306)/app', 'S3cretPass'],
    ] as const) {
      expect(environmentSecrets({ MYSQL_DSN: dsn }).map((secret) => secret.value), dsn).toEqual([password]);
    }
    expect(environmentSecrets({ MYSQL_DSN: 'app@tcp(db:3306)/app', IMAGE: 'python:3.12-slim@sha256:0123456789abcdef', TIME: 'at 10:30@(home)/x' })).toEqual([]);
  });
});

describe('the headers an OpenTelemetry exporter is given in a *_HEADERS variable', () => {
  it('give the value of a secret-named header and the credential of an Authorization header, as written and percent-decoded; other headers give none', () => {
    const values = environmentSecrets({ OTEL_EXPORTER_OTLP_HEADERS: 'api-key=NrLicense0123456789abcdef,x-scope=tenant-1,Authorization=Bearer%20otlpTok4Rv9Kq2Wm' }).map((secret) => secret.value);
    expect(values).toEqual(expect.arrayContaining(['NrLicense0123456789abcdef', 'Bearer%20otlpTok4Rv9Kq2Wm', 'otlpTok4Rv9Kq2Wm']));
    expect(values).not.toContain('tenant-1');
    expect(environmentSecrets({ OTEL_EXPORTER_OTLP_TRACES_HEADERS: 'x-scope=tenant-1,x-region=eu-west-1' })).toEqual([]);
  });
});

describe('a URL in a variable named like a secret', () => {
  it('has its credentials masked alone too, not only as the whole value: REDIS_PASSWORD_URL=redis://app:PW@host, and the agent writes PW alone', () => {
    // Made up for this test, never a real password.
    const password = 'madeUpRedisPassword0123';
    const scrubber = new Scrubber(environmentSecrets({ REDIS_PASSWORD_URL: `redis://app:${password}@cache.example.invalid:6379/0` }));
    expect(scrubber.text(`the password is ${password}`)).not.toContain(password);
    const signature = 'madeUpSasSignature0123456789abcdef';
    const sas = new Scrubber(environmentSecrets({ STORAGE_SAS_TOKEN_URL: `https://acct.blob.example.invalid/c?sv=2024-01-01&sig=${signature}` }));
    expect(sas.text(`sig ${signature}`)).not.toContain(signature);
  });
});

describe('a name=value in a credential file (util/credential-files.ts), read by the rule of the environment', () => {
  it("is guessed or given as the same variable in the process environment is: a GPG_KEY fingerprint in ~/.env, ~/.codex/.env, ~/.gemini/.env or Claude's settings.json env is guessed (before, every value found counted as given); a ~/.git-credentials URL's api-version is guessed, its token given", () => {
    const home = mkdtempSync(join(tmpdir(), 'scrub-credential-files-'));
    try {
      // Made up for this test, never real credentials.
      const fingerprint = 'A035C8C19219BA821ECEA86B64E628F8D684696D';
      const token = 'ghp_madeUpForThisTest0123456789abcdefXY';
      mkdirSync(join(home, '.codex'));
      mkdirSync(join(home, '.gemini'));
      mkdirSync(join(home, '.claude'));
      for (const file of ['.env', join('.codex', '.env'), join('.gemini', '.env')]) writeFileSync(join(home, file), `GPG_KEY=${fingerprint}\n`);
      writeFileSync(join(home, '.claude', 'settings.json'), JSON.stringify({ env: { GPG_KEY: fingerprint } }));
      writeFileSync(join(home, '.git-credentials'), `https://coo:${token}@git.example.invalid/?api-version=2024-08-01-preview\n`);
      expect(environmentSecrets({ GPG_KEY: fingerprint })).toEqual([{ name: 'GPG_KEY', value: fingerprint, guessed: true }]);
      const found = credentialFileSecrets({}, home);
      const byValue = (value: string): Array<boolean | undefined> => found.filter((secret) => secret.value === value).map((secret) => secret.guessed);
      expect(byValue(fingerprint)).toEqual([true, true, true, true]);
      expect(byValue('2024-08-01-preview')).toEqual([true]);
      expect(byValue(token)).toEqual([undefined]);
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  });

  it("a provider key's variable is given, in a credential file as in the process environment: OPENAI_API_KEY kept only in ~/.codex/.env still refuses a consult's committed copy of it", () => {
    const home = mkdtempSync(join(tmpdir(), 'scrub-credential-provider-'));
    try {
      // Made up for this test, never a real key.
      const key = 'sk-proj-madeUpForThisTest0123456789abcdef';
      mkdirSync(join(home, '.codex'));
      writeFileSync(join(home, '.codex', '.env'), `OPENAI_API_KEY=${key}\n`);
      expect(environmentSecrets({ OPENAI_API_KEY: key })).toEqual([{ name: 'OPENAI_API_KEY', value: key }]);
      const found = credentialFileSecrets({}, home).filter((secret) => secret.value === key);
      expect(found.map((secret) => secret.guessed)).toEqual([undefined]);
      const sent = sentSecrets(generatePrivateKey('coo.hermes'), found);
      expect(sentSecretIn(sent, Buffer.from(`OPENAI_API_KEY=${key}\n`))).toBe('codex .env');
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  });
});
