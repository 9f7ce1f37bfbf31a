import { describe, expect, it } from 'vitest';
import { agentScript, dispatchTo, hostilePlaces, receiptsFor, watchOnce } from '../helpers/hostile-agent.js';
import { expectRefusedInCommands, ledgerOf, pieces } from '../helpers/secret-text.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * "No secret ever enters the ledger", attacked an eighth time, through what the scrubber learns
 * from the runner's environment: a URL's password that a port-and-path reading took apart (nothing
 * before its first `/`, an `@` and a `/` inside it), a PEM private key kept on one line with
 * its line breaks written as `\n`, under a name that is no secret's, and the secret fields of the
 * JSON documents AWS's SDK and OAuth clients write (`AccessKeyId`, `SecretAccessKey`, `SessionToken`,
 * `client_assertion`, `code_verifier`).
 */
const dir = tempDir('secrets-8');
const places = hostilePlaces(dir, 'p');

/** Every run of 8 characters of `whole` that `text` still holds. */

const PEM_LINES = ['MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7Vx3Lq9', 'Zp4Rk8Wn2Yc6Jh1Tf5Dm9Xb3Qs7Lv0Ng4Hk8Pw2Ez6Ua1Ic5Oy9Ry3Mt7Jw', 'Fq2Xe6Sd0Vb4Nh8Kl3Gp7Za1=='];
const SECRETS = {
  emptyPort: '/Zq81+w0rd/Lm',
  atAndSlash: 'p@ss/w0rd-Kq81',
  accessKeyId: 'ASIAQX7EXAMPLE4KZ2PD',
  secretAccessKey: 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKEY',
  sessionToken: 'IQoJb3JpZ2luX2VjEXAMPLEsessiontoken0123456789',
  assertion: 'eyJhbGciOiJSUzI1NiJ9.eyJpc3MiOiJjbGllbnQifQ.c2lnbmF0dXJlMTIz',
  verifier: 'dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk',
  pemLine: PEM_LINES[1]!,
};
const ENV = {
  DATABASE_URL: `postgres://app:${SECRETS.emptyPort}@db.internal/app`,
  REPORTS_URL: `https://reporter:${SECRETS.atAndSlash}@reports.example/x`,
  JWT_SIGNER_PEM: `-----BEGIN PRIVATE KEY-----\\n${PEM_LINES.join('\\n')}\\n-----END PRIVATE KEY-----\\n`,
  AWS_SDK_JSON: JSON.stringify({ Version: 1, AccessKeyId: SECRETS.accessKeyId, SecretAccessKey: SECRETS.secretAccessKey, SessionToken: SECRETS.sessionToken, Expiration: '2026-12-06T21:00:00Z' }),
  OAUTH_REQUEST: JSON.stringify({ client_assertion_type: 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer', client_assertion: SECRETS.assertion, code_verifier: SECRETS.verifier }),
};

describe("a secret of the runner's environment that the scrubber did not learn before", () => {
  it('is refused in what a writer signs (USAGE, exit 2, naming no secret), and nothing is written; the words beside it are not', () => {
    expectRefusedInCommands(dir, SECRETS, ENV, 'Rotate the reporting password, http://localhost:$PORT/users/me@example.com, today.');
  });

  it("leaves no part of it in the ledger when an execution agent run without bubblewrap prints it from the runner's environment", async () => {
    const place = await places('env');
    const { messageId } = await dispatchTo(place, 'env');
    const action = [
      String.raw`tr '\0' '\n' < /proc/$PPID/environ > env.txt`,
      // Each URL's password, read up to its last @ as a driver that splits there reads it.
      String.raw`sed -n -E 's#^(DATABASE_URL|REPORTS_URL)=[a-z]+://[^:]+:(.*)@[^@]*$#\1 password \2#p' env.txt >&2`,
      // The key's body lines alone, its escapes turned into line breaks and its armor left out.
      String.raw`sed -n 's/^JWT_SIGNER_PEM=//p' env.txt | sed 's/\\n/\n/g' | grep -v -e ----- >&2`,
      String.raw`grep -oE '"(AccessKeyId|SecretAccessKey|SessionToken|client_assertion|code_verifier)":"[^"]*"' env.txt | sed -E 's/"([^"]*)":"(.*)"/field \1 is \2/' >&2`,
      'exit 1',
    ].join('\n');
    const watch = watchOnce(place, agentScript(place.world.dir, action), { env: ENV, isolation: 'none' });
    const [receipt] = await receiptsFor(place, messageId);
    expect(receipt, watch.stderr).toBeDefined();
    const ledger = ledgerOf(place.world.gitdir);
    expect(ledger).toContain('DATABASE_URL password [removed: DATABASE_URL]');
    expect(ledger).toContain('REPORTS_URL password [removed: REPORTS_URL]');
    expect(ledger).toContain(`${'[removed: JWT_SIGNER_PEM]\n'.repeat(PEM_LINES.length)}`);
    expect(ledger).toContain('field AccessKeyId is [removed: AWS_SDK_JSON]');
    expect(ledger).toContain('field code_verifier is [removed: OAUTH_REQUEST]');
    for (const [name, value] of [...Object.entries(SECRETS), ...PEM_LINES.map((line, at) => [`pem line ${at}`, line] as const)]) expect(pieces(ledger, value), name).toEqual([]);
  }, 120_000);
});
