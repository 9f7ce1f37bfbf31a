import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { gitRemoteSecrets } from '../../src/util/credential-files.js';
import { environmentSecrets, Scrubber } from '../../src/util/scrub.js';
import { coo } from '../helpers/cli.js';
import { agentScript, dispatchTo, hostilePlaces, receiptsFor, watchOnce } from '../helpers/hostile-agent.js';
import { git, tempDir } from '../helpers/tmp.js';

/**
 * "No secret ever enters the ledger", attacked a sixth time: a secret the operator's environment
 * holds in the query of a URL (a libpq `?password=`, a gateway's `?api-key=`, Gemini's `?key=`, an
 * Azure SAS URL's `&sig=`) or in a connection string (Azure's `AccountKey=`, ADO.NET's `Pwd=`), under a
 * name that is no secret's. The user info of such a URL was known; its query and a connection string's
 * fields were not, so a writer signed them and an agent that printed the runner's environment landed
 * them in the ledger.
 */
const dir = tempDir('secrets-6');
const places = hostilePlaces(dir, 'p');

/** Every run of 8 characters of `whole` that `text` still holds. */
const pieces = (text: string, whole: string): string[] => Array.from({ length: whole.length - 7 }, (_, at) => whole.slice(at, at + 8)).filter((piece) => text.includes(piece));
const ledgerOf = (gitdir: string): string => git(['--git-dir', gitdir, 'cat-file', '--batch-all-objects', '--batch']);

const SECRETS = {
  DATABASE_URL: 'DbQueryPass0123456789xyz',
  OPENAI_BASE_URL: 'GwQueryKey0123456789xyz',
  GEMINI_ENDPOINT: 'AIzaQueryKey0123456789xyz',
  AZURE_STORAGE_SAS_URL: 'AzSasSig0123456789abcXYZ+/=',
  AZURE_STORAGE_CONNECTION_STRING: 'AzStorKey0123456789abcdefXYZ/+==',
  SQLSERVER_CONNECTION: 'SqlPwd0123456789xyz',
};
const ENV = {
  DATABASE_URL: `postgres://db.internal:5432/app?sslmode=require&password=${SECRETS.DATABASE_URL}`,
  OPENAI_BASE_URL: `https://gateway.example/v1?api-key=${SECRETS.OPENAI_BASE_URL}`,
  GEMINI_ENDPOINT: `https://generativelanguage.googleapis.com/v1beta/models?key=${SECRETS.GEMINI_ENDPOINT}`,
  AZURE_STORAGE_SAS_URL: `https://acct.blob.core.windows.net/c?sv=2022-11-02&ss=b&sp=rl&se=2030-01-01T00:00:00Z&sig=${encodeURIComponent(SECRETS.AZURE_STORAGE_SAS_URL)}`,
  AZURE_STORAGE_CONNECTION_STRING: `DefaultEndpointsProtocol=https;AccountName=storageacct;AccountKey=${SECRETS.AZURE_STORAGE_CONNECTION_STRING};EndpointSuffix=core.windows.net`,
  SQLSERVER_CONNECTION: `Server=tcp:db.internal,1433;Database=app;User Id=sa;Pwd=${SECRETS.SQLSERVER_CONNECTION};Encrypt=true`,
};

describe("a secret in the query of a URL or in a connection string the operator's environment holds", () => {
  it('is known to the scrubber, percent-encoded or not, and the fields that are no secret are not', () => {
    const values = environmentSecrets({ ...ENV, PLAIN_URL: 'https://example.org/search?q=ordinary-words-here&page=1234567890' }).map((secret) => secret.value);
    for (const [name, value] of Object.entries(SECRETS)) expect(values, name).toContain(value);
    expect(values).toContain(encodeURIComponent(SECRETS.AZURE_STORAGE_SAS_URL));
    for (const plain of ['require', '2022-11-02', '2030-01-01T00:00:00Z', 'ordinary-words-here', '1234567890', 'storageacct', 'core.windows.net', 'tcp:db.internal,1433']) expect(values).not.toContain(plain);
    const scrubbed = new Scrubber(environmentSecrets(ENV)).text(Object.entries(ENV).map(([name, value]) => `${name}=${value}`).join('\n'));
    expect(scrubbed).toContain('sslmode=require&password=[removed: DATABASE_URL]');
    expect(scrubbed).toContain('sv=2022-11-02');
    expect(scrubbed).toContain('AccountName=storageacct;AccountKey=[removed: AZURE_STORAGE_CONNECTION_STRING];EndpointSuffix');
    for (const [name, value] of Object.entries(SECRETS)) expect(pieces(scrubbed, value), name).toEqual([]);
  });
});

describe('a writer whose process holds such a URL or connection string', () => {
  const keys = join(dir, 'keys');
  const ledger = join(dir, 'ledger.git');
  beforeAll(() => {
    for (const actor of ['ceo', 'coo.hermes']) expect(coo(['keygen', '--actor', actor, '--out', keys]).status).toBe(0);
    expect(coo(['init', '--ledger', ledger, '--ceo-key', join(keys, 'ceo.key'), '--actor', `coo.hermes=${join(keys, 'coo.hermes.pub')}`]).status).toBe(0);
  });

  it("refuses a command whose text quotes the URL's password, its signature or the account key (USAGE, exit 2, naming no secret), and writes nothing", () => {
    const head = (): string => git(['--git-dir', ledger, 'rev-parse', 'main']).trim();
    const before = head();
    const env = { ...ENV, COO_LEDGER: ledger };
    for (const text of [`Reset the database password ${SECRETS.DATABASE_URL} today.`, `Rotate the SAS signature ${SECRETS.AZURE_STORAGE_SAS_URL}.`, `Rotate the storage key ${SECRETS.AZURE_STORAGE_CONNECTION_STRING}.`]) {
      const result = coo(['command', '--ledger', ledger, '--ceo-key', join(keys, 'ceo.key'), '--text', text], { env });
      expect([result.status, result.stderr.split(':').slice(0, 2).join(':')], result.stderr).toEqual([2, 'coo: USAGE']);
      for (const value of Object.values(SECRETS)) expect(pieces(result.stderr, value)).toEqual([]);
    }
    expect(head()).toBe(before);
    expect(coo(['command', '--ledger', ledger, '--ceo-key', join(keys, 'ceo.key'), '--text', 'Reset the database password today.'], { env }).status).toBe(0);
  });
});

describe('an execution agent run without bubblewrap that prints the environment of the runner through /proc', () => {
  it('leaves no part of a secret in the query of a URL or in a connection string there in the ledger', async () => {
    const place = await places('environ');
    const { messageId } = await dispatchTo(place, 'environ');
    const watch = watchOnce(place, agentScript(place.world.dir, "tr '\\0' '\\n' < /proc/$PPID/environ >&2; exit 1"), { env: ENV, isolation: 'none' });
    const [receipt] = await receiptsFor(place, messageId);
    expect(receipt, watch.stderr).toBeDefined();
    const ledger = ledgerOf(place.world.gitdir);
    expect(ledger).toContain('[removed: DATABASE_URL]');
    for (const [name, value] of Object.entries(SECRETS)) expect(pieces(ledger, value), name).toEqual([]);
  }, 120_000);
});

describe("a proxy's password in git's configuration (http.proxy, http.<url>.proxy, remote.<name>.proxy), and a tool's password or token kept there", () => {
  const PROXY = 'ProxyPass0123456789xyz';
  const PER_URL = 'UrlProxyPass0123456789xyz';
  const PER_REMOTE = 'RemoteProxyPass0123456789xyz';
  const SMTP = 'SmtpPass0123456789xyz';
  const HUB = 'ghp_HubToken0123456789xyz';

  it('is known to the scrubber, with the proxy written with its scheme or without (sendemail.smtpPass, github.token too; not a yes or no)', () => {
    const repo = join(dir, 'proxy-repo');
    git(['init', '-q', repo]);
    git(['-C', repo, 'config', 'http.proxy', `corp%5Cop:${PROXY}@proxy.internal:3128`]);
    git(['-C', repo, 'config', 'http.https://github.com/.proxy', `http://op:${PER_URL}@proxy2.internal:8080`]);
    git(['-C', repo, 'config', 'remote.origin.proxy', `socks5://op:${PER_REMOTE}@proxy3.internal:1080`]);
    git(['-C', repo, 'config', 'sendemail.smtpPass', SMTP]);
    git(['-C', repo, 'config', 'github.token', HUB]);
    git(['-C', repo, 'config', 'http.sslCertPasswordProtected', 'true']);
    const values = gitRemoteSecrets([repo], { helpers: false }).map((secret) => secret.value);
    for (const value of [PROXY, PER_URL, PER_REMOTE, SMTP, HUB]) expect(values).toContain(value);
    expect(values).not.toContain('true');
    expect(values).toContain(`corp\\op:${PROXY}`);
  });

  it("leaves no part of it in the ledger when an execution agent prints the target repository's git configuration", async () => {
    const place = await places('proxy');
    git(['config', 'http.proxy', `http://op:${PROXY}@proxy.internal:3128`], { cwd: place.repo });
    git(['config', 'sendemail.smtpPass', SMTP], { cwd: place.repo });
    const { messageId } = await dispatchTo(place, 'proxy');
    // Without bubblewrap, which hands the agent the repository's configuration without its credentials: here the agent reads them, and the scrubber must find them.
    const watch = watchOnce(place, agentScript(place.world.dir, "git config --get-regexp 'proxy|smtppass' >&2; exit 1"), { isolation: 'none' });
    const [receipt] = await receiptsFor(place, messageId);
    expect(receipt, watch.stderr).toBeDefined();
    const ledger = ledgerOf(place.world.gitdir);
    expect(ledger).toContain('[removed: git proxy credentials]');
    expect(ledger).toContain('[removed: git config secret]');
    expect(pieces(ledger, PROXY)).toEqual([]);
    expect(pieces(ledger, SMTP)).toEqual([]);
  }, 120_000);
});
