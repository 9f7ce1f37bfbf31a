import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { gitRemoteSecrets } from '../../src/util/credential-files.js';
import { displayUrl } from '../../src/util/display-url.js';
import { environmentSecrets, Scrubber } from '../../src/util/scrub.js';
import { coo } from '../helpers/cli.js';
import { git, tempDir } from '../helpers/tmp.js';

/**
 * A secret field inside a setting (a URL's query or fragment, a connection string, a git setting) as
 * the client that uses it reads it: a driver's URL (`jdbc:postgresql://…?password=`), a quoted or
 * braced connection-string value that holds a `;`, an OAuth fragment. And a value there that is a
 * word or a flag, or a path git names a program by, is no secret: as one it would be cut out of every
 * text that says it and every writer would refuse such a text.
 */
const dir = tempDir('secret-fields');

/** Every run of 8 characters of `whole` that `text` still holds. */
const pieces = (text: string, whole: string): string[] => Array.from({ length: whole.length - 7 }, (_, at) => whole.slice(at, at + 8)).filter((piece) => text.includes(piece));

const SECRETS = {
  JDBC_DATABASE_URL: 'JdbcPgPass0123456789',
  MYSQL_JDBC: 'JdbcMyPass0123456789',
  SQL_QUOTED: 'Quoted;Pass"0123456789',
  SQL_SINGLE: "Single'Pass0123456789",
  ODBC_BRACED: 'Brace;Pass}0123456789',
  CALLBACK_URL: 'FragmentTok0123456789',
};
const ENV = {
  JDBC_DATABASE_URL: `jdbc:postgresql://db.internal:5432/app?user=app&password=${SECRETS.JDBC_DATABASE_URL}&sslmode=require`,
  MYSQL_JDBC: `jdbc:mysql://app:${SECRETS.MYSQL_JDBC}@db.internal:3306/app`,
  SQL_QUOTED: `Server=db.internal;User Id=sa;Password="${SECRETS.SQL_QUOTED.replace(/"/g, '""')}";Encrypt=true`,
  SQL_SINGLE: `Server=db.internal;User Id=sa;Password='${SECRETS.SQL_SINGLE.replace(/'/g, "''")}'`,
  ODBC_BRACED: `Driver={ODBC Driver 18 for SQL Server};Server=db.internal;UID=sa;PWD={${SECRETS.ODBC_BRACED.replace(/\}/g, '}}')}};`,
  CALLBACK_URL: `https://app.example/callback#access_token=${SECRETS.CALLBACK_URL}&token_type=bearer`,
};

/** Settings whose secret-named fields hold a word, a flag or nothing. */
const PLAIN_ENV = {
  DEV_ENDPOINT: 'https://api.example/v1?key=development&sig=0',
  GATEWAY_URL: 'https://gateway.example/v1?api-key=placeholder&token=',
  SHORT_URL: 'https://maps.example/tiles?key=1',
  LOCAL_DB: 'Server=localhost;Database=app;User Id=sa;Password=changeme;',
  EMPTY_DB: 'Server=localhost;Pwd=x;Password=;',
};

describe('a secret field of a setting in the environment, written as its client reads it', () => {
  it('is known to the scrubber as the client reads it (a JDBC URL, a quoted or braced value, a fragment), and nothing of it is left in what an agent printed', () => {
    const values = environmentSecrets(ENV).map((secret) => secret.value);
    for (const [name, value] of Object.entries(SECRETS)) expect(values, name).toContain(value);
    const printed = [...Object.entries(ENV).map(([name, value]) => `${name}=${value}`), ...Object.values(SECRETS)].join('\n');
    const scrubbed = new Scrubber(environmentSecrets(ENV)).text(printed);
    for (const [name, value] of Object.entries(SECRETS)) expect(pieces(scrubbed, value), name).toEqual([]);
    expect(scrubbed).toContain('sslmode=require');
  });

  it("is not shown where a driver's URL is displayed", () => {
    expect(displayUrl(ENV.MYSQL_JDBC)).toBe('jdbc:mysql://db.internal:3306/app');
    expect(displayUrl(ENV.JDBC_DATABASE_URL)).toBe('jdbc:postgresql://db.internal:5432/app?[query removed]');
  });

  it('is not a word, a flag or nothing: those stay in every text', () => {
    expect(environmentSecrets(PLAIN_ENV)).toEqual([]);
    const text = 'Deploy the placeholder build to development; changeme is the local password.';
    expect(new Scrubber(environmentSecrets(PLAIN_ENV)).text(text)).toBe(text);
  });
});

describe('a writer whose process holds such settings', () => {
  const keys = join(dir, 'keys');
  const ledger = join(dir, 'ledger.git');
  beforeAll(() => {
    for (const actor of ['ceo', 'coo.hermes']) expect(coo(['keygen', '--actor', actor, '--out', keys]).status).toBe(0);
    expect(coo(['init', '--ledger', ledger, '--ceo-key', join(keys, 'ceo.key'), '--actor', `coo.hermes=${join(keys, 'coo.hermes.pub')}`]).status).toBe(0);
  });

  it('refuses a command that quotes the password of a JDBC URL or a quoted connection-string value (USAGE, exit 2), and writes nothing', () => {
    const head = (): string => git(['--git-dir', ledger, 'rev-parse', 'main']).trim();
    const before = head();
    for (const text of [`Rotate ${SECRETS.JDBC_DATABASE_URL} today.`, `Rotate ${SECRETS.SQL_QUOTED} today.`]) {
      const result = coo(['command', '--ledger', ledger, '--ceo-key', join(keys, 'ceo.key'), '--text', text], { env: { ...ENV, COO_LEDGER: ledger } });
      expect([result.status, result.stderr.split(':').slice(0, 2).join(':')], result.stderr).toEqual([2, 'coo: USAGE']);
      for (const value of Object.values(SECRETS)) expect(pieces(result.stderr, value)).toEqual([]);
    }
    expect(head()).toBe(before);
  });

  it("signs a command that says a word a setting's secret-named field holds, and a path core.askPass names", () => {
    git(['--git-dir', ledger, 'config', 'core.askPass', '/usr/libexec/git-core/git-gui--askpass']);
    const result = coo(['command', '--ledger', ledger, '--ceo-key', join(keys, 'ceo.key'), '--text', 'Ship the development build; git-gui--askpass at /usr/libexec/git-core/git-gui--askpass asks for changeme.'], { env: { ...PLAIN_ENV, COO_LEDGER: ledger } });
    expect(result.status, result.stderr).toBe(0);
  });
});

describe("git's configuration", () => {
  it('gives no secret for core.askPass, which names a program, and still gives a password a tool keeps there', () => {
    const repo = join(dir, 'askpass-repo');
    git(['init', '-q', repo]);
    git(['-C', repo, 'config', 'core.askPass', '/usr/libexec/git-core/git-gui--askpass']);
    git(['-C', repo, 'config', 'sendemail.smtpPass', 'SmtpPass0123456789']);
    const values = gitRemoteSecrets([repo], { helpers: false }).map((secret) => secret.value);
    expect(values).toContain('SmtpPass0123456789');
    expect(values).not.toContain('/usr/libexec/git-core/git-gui--askpass');
  });
});
