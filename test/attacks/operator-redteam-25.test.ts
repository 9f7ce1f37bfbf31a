import { generateKeyPairSync } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { sendCommand } from '../../src/inbox/ceo-messages.js';
import { derivedIdempotencyKey } from '../../src/lane/request-key.js';
import { credentialFileSecrets } from '../../src/util/credential-files.js';
import { displayUrl, withoutUserInfo } from '../../src/util/display-url.js';
import { environmentSecrets, Scrubber } from '../../src/util/scrub.js';
import { cooBounded } from '../helpers/damage.js';
import { worlds } from '../helpers/lane.js';
import { call, rawSession, refusal } from '../helpers/mcp-raw.js';
import { git, tempDir } from '../helpers/tmp.js';

/**
 * A careless operator, round 25: `--json` given to a verb that has no such flag; an MCP client's
 * idempotency_key that is the key derived for another request; a service account's JSON in a variable
 * of the environment whose `private_key_id` and `private_key` (a PEM block, on several lines) were not
 * known (nor, in the file GOOGLE_APPLICATION_CREDENTIALS names, the lines of its key), while a
 * `subject_token_type` (a URN) was taken for a token; a URL whose password holds an unencoded `/`,
 * whose user info was read as a host and a path.
 */

const fresh = worlds(tempDir('operator-redteam-25-'));

describe('--json given to a verb that has no --json of its own', () => {
  it('coo model --json, coo mcp --json and a misspelt command of coo model print the JSON error object too (USAGE, exit 2); before, only the text line', () => {
    const cases: Array<[string[], string]> = [
      [['model', '--json'], "unknown option '--json'"],
      [['mcp', '--json', '--remote'], "option '--remote <url>' argument missing"],
      [['mcp', '--json'], "unknown option '--json'"],
      [['mcp', '--bogus', '--json'], "unknown option '--bogus'"],
      [['model', 'nope', '--json'], "unknown command 'nope'"],
    ];
    for (const [args, message] of cases) {
      const result = cooBounded(args);
      expect(result.status, args.join(' ')).toBe(2);
      expect(JSON.parse(result.stdout), args.join(' ')).toEqual({ ok: false, error: { code: 'USAGE', message, where: null, findings: [] } });
      expect(result.stderr, args.join(' ')).toContain(`coo: USAGE: ${message}`);
    }
  });

  it('--json given as another flag\'s value or after -- is not asked for: the error stays text alone', () => {
    for (const args of [['mcp', '--remote', '--json'], ['mcp', '--remote', '--json', '--state-dir'], ['consult', '--prompt', '--json', '--ledger'], ['mcp', '--', '--json'], ['model', '--bogus']]) {
      const result = cooBounded(args);
      expect(result.status, args.join(' ')).toBe(2);
      expect(result.stdout, args.join(' ')).toBe('');
      expect(result.stderr, args.join(' ')).toMatch(/^coo: USAGE: /);
    }
  });
});

describe('coo mcp given an idempotency_key of the derived form', () => {
  it("refuses a key that is the one derived for another request, and that request, sent without a key, is answered with its own message; before, it was told IDEMPOTENCY_CONFLICT", async () => {
    const w = await fresh();
    const commit = git(['-C', w.target, 'rev-parse', 'HEAD']).trim();
    const asked = { to: 'aa.chatgpt', files: ['src/add.ts'], prompt: 'Is add() right?' };
    const theirs = derivedIdempotencyKey({ target: asked.to, commit, patterns: asked.files, question: asked.prompt });
    const session = await rawSession(w);
    try {
      const head = w.ledger.head();
      const squat = await session.ask(call(1, 'consult', { ...asked, prompt: 'Something else entirely?', idempotency_key: theirs }), 1);
      expect(refusal(squat)).toBe('tool error IDEMPOTENCY_CONFLICT');
      expect(squat.result?.content?.[0]?.text).toContain(`"${theirs}" has the form of a key derived from a request`);
      // A panel member's key is made from a derived one: that form is refused too.
      const member = await session.ask(call(2, 'dispatch', { to: 'ea.codex', task: 'Fix add().', scope: ['src/**'], accept: ['add(1, 2) is 3'], verify: ['true'], idempotency_key: `${theirs}~aa.chatgpt` }), 2);
      expect(refusal(member)).toBe('tool error IDEMPOTENCY_CONFLICT');
      expect(w.ledger.head()).toBe(head);
      const own = await session.ask(call(3, 'consult', asked), 3);
      expect([refusal(own), own.result?.structuredContent?.['existing']]).toEqual(['answered', false]);
      const id = own.result?.structuredContent?.['message_id'];
      expect((await w.ledger.state()).messages.get(String(id))?.idempotencyKey).toBe(theirs);
      // The guards: a client that sends back the key it was shown for the same request finds its message,
      // and keys of any other form, even ones that start alike, are the client's own as before.
      const echoed = await session.ask(call(4, 'consult', { ...asked, idempotency_key: theirs }), 4);
      expect([refusal(echoed), echoed.result?.structuredContent?.['message_id'], echoed.result?.structuredContent?.['existing']]).toEqual(['answered', id, true]);
      // Sent back with a budget or a time changed, which the derived key counts and the request's fingerprint does not: the key
      // is one the ledger holds, and the idempotency rule finds the request it repeats.
      const changed = await session.ask(call(8, 'consult', { ...asked, idempotency_key: theirs, max_cost_usd: 0.4, ttl_seconds: 600 }), 8);
      expect([refusal(changed), changed.result?.structuredContent?.['message_id'], changed.result?.structuredContent?.['existing']]).toEqual(['answered', id, true]);
      // A key the ledger holds for another actor (the CEO's command under the key derived for a consult not sent yet) is
      // another slot: this server's request under it would take that key for its own holder, and is refused as before.
      const later = { ...asked, prompt: 'Is add() right for floats?' };
      const laterKey = derivedIdempotencyKey({ target: later.to, commit, patterns: later.files, question: later.prompt });
      // (A library caller writes a key of that form only as one it derived itself: the writer holds it to the rule.)
      await sendCommand({ ledger: w.ledger, key: w.actors.ceo, now: new Date(), text: 'Look at add().', idempotencyKey: laterKey, derivedKey: laterKey });
      const foreign = await session.ask(call(9, 'consult', { ...asked, prompt: 'Something else again?', idempotency_key: laterKey }), 9);
      expect(refusal(foreign)).toBe('tool error IDEMPOTENCY_CONFLICT');
      for (const [index, key] of [[5, 'my-review-1'], [6, 'req-later'], [7, theirs.toUpperCase()]] as const) {
        const mine = await session.ask(call(index, 'consult', { ...asked, prompt: `Another question ${index}?`, idempotency_key: key }), index);
        expect([key, refusal(mine), mine.result?.structuredContent?.['existing']]).toEqual([key, 'answered', false]);
      }
    } finally {
      await session.close();
    }
  });
});

describe("a Google service account's JSON in a variable of the environment", () => {
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 1024 });
  const pem = privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
  const keyId = '3f1c0a9b8e7d6c5b4a39281706f5e4d3c2b1a098';
  const account = {
    type: 'service_account',
    project_id: 'my-project-123',
    private_key_id: keyId,
    private_key: pem,
    client_email: 'bot@my-project-123.iam.gserviceaccount.com',
    client_id: '109876543210987654321',
    auth_uri: 'https://accounts.google.com/o/oauth2/auth',
    token_uri: 'https://oauth2.googleapis.com/token',
    auth_provider_x509_cert_url: 'https://www.googleapis.com/oauth2/v1/certs',
    client_x509_cert_url: 'https://www.googleapis.com/robot/v1/metadata/x509/bot%40my-project-123.iam.gserviceaccount.com',
    universe_domain: 'googleapis.com',
  };
  // Its full lines, of 64 characters: the last may be too short to look like a secret (no digit, under 20 characters), as any field's value may.
  const body = pem.split('\n').filter((line) => line.length === 64);

  it('knows its private_key_id and every line of its private_key, so no line of the key printed without its armor is left; before, neither was known', () => {
    const secrets = environmentSecrets({ SA_JSON: JSON.stringify(account) });
    const values = secrets.map((secret) => secret.value);
    expect(values).toContain(keyId);
    for (const line of body) expect(values).toContain(line);
    // The block whole is cut out by its armor; its lines without it (jq -r .private_key | sed -n 2,4p) by these.
    const printed = `${body.slice(0, 3).join('\n')}\nkey ${keyId}\n`;
    expect(new Scrubber(secrets).text(printed)).toBe(`${Array(3).fill('[removed: SA_JSON]').join('\n')}\nkey [removed: SA_JSON]\n`);
  });

  it('knows every line of its private_key in the file GOOGLE_APPLICATION_CREDENTIALS names too; before, only its private_key_id', () => {
    const home = tempDir('operator-redteam-25-home-');
    const file = join(home, 'service-account.json');
    writeFileSync(file, JSON.stringify(account), { mode: 0o600 });
    const values = credentialFileSecrets({ GOOGLE_APPLICATION_CREDENTIALS: file }, home).map((secret) => secret.value);
    expect(values).toContain(keyId);
    for (const line of body) expect(values).toContain(line);
  });

  it('takes none of the other fields of the file GOOGLE_APPLICATION_CREDENTIALS names for a secret either: its token_uri, a workload identity\'s token_url and subject_token_type; before, a question naming Google\'s token endpoint was cut', () => {
    const home = tempDir('operator-redteam-25-home-');
    const file = join(home, 'service-account.json');
    const external = { type: 'external_account', subject_token_type: 'urn:ietf:params:oauth:token-type:jwt', token_url: 'https://sts.googleapis.com/v1/token' };
    writeFileSync(file, JSON.stringify({ ...account, ...external }), { mode: 0o600 });
    const secrets = credentialFileSecrets({ GOOGLE_APPLICATION_CREDENTIALS: file }, home);
    const values = secrets.map((secret) => secret.value);
    const { private_key_id: _id, private_key: _key, ...plain } = { ...account, ...external };
    for (const value of Object.values(plain)) expect(values, value).not.toContain(value);
    const asked = 'Why does curl https://oauth2.googleapis.com/token answer 400?';
    expect(new Scrubber(secrets).text(asked)).toBe(asked);
    // A URL under a name that is no place's is the secret itself (a webhook's URL as a client_secret).
    writeFileSync(file, JSON.stringify({ client_secret: 'https://hooks.slack.com/services/T01/B02/SeCrEtToKeN123456' }), { mode: 0o600 });
    expect(credentialFileSecrets({ GOOGLE_APPLICATION_CREDENTIALS: file }, home).map((secret) => secret.value)).toContain('https://hooks.slack.com/services/T01/B02/SeCrEtToKeN123456');
    expect(environmentSecrets({ HOOK_JSON: JSON.stringify({ client_secret: 'https://hooks.slack.com/services/T01/B02/SeCrEtToKeN123456' }) }).map((secret) => secret.value)).toContain('https://hooks.slack.com/services/T01/B02/SeCrEtToKeN123456');
    // A URL under a place's name still gives up the credentials it carries.
    writeFileSync(file, JSON.stringify({ token_uri: 'https://robot:Zx81-secret-pass@tokens.example.com/token' }), { mode: 0o600 });
    expect(credentialFileSecrets({ GOOGLE_APPLICATION_CREDENTIALS: file }, home).map((secret) => secret.value)).toContain('Zx81-secret-pass');
  });

  it('takes none of its other fields for a secret, nor a kind of token: an OAuth token response\'s token_type, a workload identity\'s subject_token_type', () => {
    const external = { type: 'external_account', audience: '//iam.googleapis.com/projects/123/locations/global/workloadIdentityPools/p/providers/q', subject_token_type: 'urn:ietf:params:oauth:token-type:jwt', token_url: 'https://sts.googleapis.com/v1/token' };
    const answer = { access_token: 'ya29.a0AfH6SMBx1234567', token_type: 'Bearer1234', expires_in: 3599, refresh_token: '1//0gAbcdef123456' };
    const values = environmentSecrets({ SA_JSON: JSON.stringify(account), WIF_JSON: JSON.stringify(external), TOKEN_JSON: JSON.stringify(answer) }).map((secret) => secret.value);
    const { private_key_id: _id, private_key: _key, ...plain } = account;
    for (const value of [...Object.values(plain), ...Object.values(external), 'Bearer1234']) expect(values, value).not.toContain(value);
    // The tokens of the answer are still known.
    expect(values).toEqual(expect.arrayContaining(['ya29.a0AfH6SMBx1234567', '1//0gAbcdef123456']));
  });
});

describe('a URL whose password holds an unencoded /', () => {
  const PASSWORD = 'Pa55/w0rd-Zq81';
  const url = `postgresql://app:${PASSWORD}@db.internal:5432/app`;

  it('is known to the scrubber, and shown and quoted in text without it; before, the password was read as a host and a path and kept', () => {
    const secrets = environmentSecrets({ DATABASE_URL: url });
    expect(secrets.map((secret) => secret.value)).toContain(PASSWORD);
    expect(new Scrubber(secrets).text(`connecting with ${PASSWORD}`)).toBe('connecting with [removed: DATABASE_URL]');
    expect(displayUrl(`https://app:${PASSWORD}@git.example/ledger.git`)).toBe('https://git.example/ledger.git');
    expect(withoutUserInfo(`fatal: unable to access '${url}': refused`)).toBe("fatal: unable to access 'postgresql://db.internal:5432/app': refused");
  });

  it('is known when it starts with $ and a letter, as a shell variable would: only ${NAME} standing alone as the port is a placeholder', () => {
    const dollar = '$Up3r/s3cret';
    expect(environmentSecrets({ DATABASE_URL: `postgresql://app:${dollar}@db.internal/prod` }).map((secret) => secret.value)).toContain(dollar);
    expect(displayUrl(`postgresql://app:${dollar}@db.internal/prod`)).toBe('postgresql://db.internal/prod');
  });

  it('leaves a path with an @ in it as it is, after a host with or without a port: a path names no user', () => {
    for (const plain of ['https://host/users/me@example.com', 'https://host:8443/a/b@c', 'https://[::1]:8080/a@b', 'ssh://git@host:22/x@y', 'http://localhost:${PORT}/@vite/client']) {
      expect(environmentSecrets({ SOME_URL: plain }), plain).toEqual([]);
      expect(displayUrl(plain), plain).toBe(plain);
      expect(withoutUserInfo(`see ${plain} now`), plain).toBe(`see ${plain} now`);
    }
  });
});
