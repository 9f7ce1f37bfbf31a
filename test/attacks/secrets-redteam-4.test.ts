import { execFileSync, spawnSync } from 'node:child_process';
import { generateKeyPairSync } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { formatPrivateKey } from '../../src/crypto/keys.js';
import { CooError } from '../../src/errors.js';
import { watchRemote } from '../../src/runner/watch.js';
import { credentialFileSecrets, gitRemoteSecrets } from '../../src/util/credential-files.js';
import { environmentSecrets, Scrubber } from '../../src/util/scrub.js';
import { COO } from '../helpers/cli.js';
import { requireBubblewrap } from '../helpers/bubblewrap.js';
import { agentScript, dispatchTo, hostilePlaces, receiptsFor, watchOnce } from '../helpers/hostile-agent.js';
import { makeCase } from '../helpers/remote-runners.js';
import { git, tempDir } from '../helpers/tmp.js';

/**
 * "No secret ever enters the ledger", attacked a fourth time: the secrets of the runner's machine that
 * an execution agent run without bubblewrap can read for itself (the runner's own environment through
 * /proc, the logins a home folder keeps), the home folder's credentials bubblewrap left in view, and a
 * private key no one told the runner of (a key file of the repository an agent works in).
 */
const dir = tempDir('secrets-4');
const places = hostilePlaces(dir, 'p');

/** Every run of 8 characters of `whole` that `text` still holds. */
const pieces = (text: string, whole: string): string[] => Array.from({ length: whole.length - 7 }, (_, at) => whole.slice(at, at + 8)).filter((piece) => text.includes(piece));
const ledgerOf = (gitdir: string): string => git(['--git-dir', gitdir, 'cat-file', '--batch-all-objects', '--batch']);

/** Secrets of the environment under names the scrubber did not read as secret ones. */
const ENV = {
  PGPASSWORD: 'PgPassword0123456789xyz',
  MYSQL_PWD: 'MysqlPwd0123456789xyz',
  GPG_PASSPHRASE: 'GpgPhrase0123456789xyz',
  SECRET_KEY_BASE: 'RailsKeyBase0123456789xyz',
  GITHUB_TOKEN_RO: 'ghp_ReadOnlyToken0123456789xyz',
  TOKEN: 'BareToken0123456789xyz',
};

describe('a secret of the environment under a name the scrubber did not read as one, again', () => {
  it('is known: PGPASSWORD, a _PWD, a PASSPHRASE, a SECRET_ or _TOKEN_ word before another, a bare TOKEN', () => {
    const plain = { PWD: '/home/op/work/project', OLDPWD: '/home/op/work', GIT_ASKPASS: '/usr/lib/ssh/x11-ssh-askpass', TOKENIZERS_PARALLELISM: 'false-or-true', PASSWORD_STORE_DIR: '/home/op/.password-store', DB_PASSWORD_FILE: '/run/secrets/db_password' };
    const values = environmentSecrets({ ...ENV, ...plain }).map((secret) => secret.value);
    expect(values.sort()).toEqual(Object.values(ENV).sort());
  });
});

/** A home folder holding the logins a machine keeps: an ssh key, docker's, libpq's, the AWS CLI's, kubectl's, Vault's. */
function loginsHome(home: string): Record<string, string> {
  mkdirSync(join(home, '.ssh'), { recursive: true });
  execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', 'op@host', '-f', join(home, '.ssh', 'deploy')]);
  const files: Record<string, string> = {
    '.docker/config.json': JSON.stringify({ auths: { 'registry.example': { auth: Buffer.from('op:DockerHubPass0123456789').toString('base64') } } }),
    '.pgpass': '# host:port:db:user:password\ndb.example:5432:*:app:PgPassFile\\:0123456789\n',
    '.aws/credentials': '[default]\naws_access_key_id = AKIAEXAMPLE0123456789\naws_secret_access_key = AwsSecretAccess0123456789abcdefXYZ\n',
    '.kube/config': 'users:\n- name: op\n  user:\n    token: KubeBearerToken0123456789abcdef\n',
    '.vault-token': 'hvs.VaultToken0123456789abcdef\n',
  };
  for (const [path, content] of Object.entries(files)) {
    mkdirSync(join(home, path, '..'), { recursive: true });
    writeFileSync(join(home, path), content, { mode: 0o600 });
  }
  const body = readFileSync(join(home, '.ssh', 'deploy'), 'utf8').trim().split('\n').slice(1, -1);
  return {
    ssh: body.slice(1).join(''),
    docker: 'DockerHubPass0123456789',
    dockerAuth: Buffer.from('op:DockerHubPass0123456789').toString('base64'),
    pgpass: 'PgPassFile:0123456789',
    aws: 'AwsSecretAccess0123456789abcdef',
    kube: 'KubeBearerToken0123456789abcdef',
    vault: 'hvs.VaultToken0123456789abcdef',
  };
}

describe("the logins the runner's home folder keeps", () => {
  it('are known to the scrubber: an ssh private key line by line, docker auth and its password, a .pgpass password, AWS, kubectl and Vault tokens', () => {
    const home = join(dir, 'home-unit');
    const secrets = loginsHome(home);
    const values = credentialFileSecrets({}, home).map((secret) => secret.value);
    for (const [name, value] of Object.entries(secrets)) expect(values.some((known) => known.includes(value.slice(0, 24))), name).toBe(true);
    const lines = readFileSync(join(home, '.ssh', 'deploy'), 'utf8').trim().split('\n');
    for (const line of lines.slice(2, -1)) expect(values).toContain(line);
    // The first line of the body is the header every unencrypted ed25519 key of OpenSSH shares: not a secret.
    expect(values).not.toContain(lines[1]);
  });

  it('leave no part of them in the ledger when an execution agent run without bubblewrap reads them, and the environment of the runner through /proc', async () => {
    const place = await places('unsandboxed');
    const home = join(dir, 'home-agent');
    const secrets = loginsHome(home);
    const { messageId } = await dispatchTo(place, 'unsandboxed');
    const action = `{ tr '\\0' '\\n' < /proc/$PPID/environ; sed 1d ${home}/.ssh/deploy; cat ${home}/.docker/config.json ${home}/.pgpass ${home}/.aws/credentials ${home}/.kube/config ${home}/.vault-token; } >&2; exit 1`;
    const watch = watchOnce(place, agentScript(place.world.dir, action), { env: { ...ENV, HOME: home }, isolation: 'none' });
    const [receipt] = await receiptsFor(place, messageId);
    expect(receipt, watch.stderr).toBeDefined();
    const ledger = ledgerOf(place.world.gitdir);
    expect(ledger).toContain('[removed: PGPASSWORD]');
    expect(ledger).toContain('[removed: ssh private key]');
    // The key's first line, its header and the start of its public half, is printed and kept; what is in it (the key's type) may stand elsewhere too.
    const header = readFileSync(join(home, '.ssh', 'deploy'), 'utf8').split('\n')[1]!;
    for (const [name, value] of Object.entries({ ...ENV, ...secrets })) expect(pieces(ledger, value).filter((piece) => !header.includes(piece)), name).toEqual([]);
  }, 120_000);

  it('are hidden from an execution agent under bubblewrap: kubectl, gcloud, libpq, Vault, pip and cargo logins', async () => {
    requireBubblewrap('hiding the home folder credentials');
    const place = await places('sandboxed');
    const home = join(dir, 'home-sandboxed');
    const secrets = loginsHome(home);
    const more = { '.config/gcloud/application_default_credentials.json': '{"refresh_token":"GcloudRefresh0123456789abcdef"}', '.pypirc': '[pypi]\npassword = pypi-Upload0123456789abcdef\n', '.cargo/credentials.toml': '[registry]\ntoken = "cio_Cargo0123456789abcdef"\n', '.my.cnf': '[client]\npassword=MyCnfPass0123456789\n' };
    for (const [path, content] of Object.entries(more)) {
      mkdirSync(join(home, path, '..'), { recursive: true });
      writeFileSync(join(home, path), content);
    }
    const { messageId } = await dispatchTo(place, 'sandboxed');
    // How many bytes of each the agent could read: its output is scrubbed of what the runner knows, its sizes are not.
    const paths = ['.pgpass', '.kube/config', '.vault-token', ...Object.keys(more)].map((path) => join(home, path));
    const action = `{ printf 'seen:'; for f in ${paths.join(' ')}; do printf ' %s' "$(cat "$f" 2>/dev/null | wc -c)"; done; printf '\\n'; } >&2; exit 1`;
    const watch = watchOnce(place, agentScript(place.world.dir, action), { env: { HOME: home } });
    const [receipt] = await receiptsFor(place, messageId);
    expect(receipt, watch.stderr).toBeDefined();
    const ledger = ledgerOf(place.world.gitdir);
    expect(ledger).toContain(`seen:${' 0'.repeat(paths.length)}\n`);
    for (const [name, value] of Object.entries(secrets)) expect(pieces(ledger, value), name).toEqual([]);
  }, 120_000);
});

const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 1024 });
const PKCS8 = privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
const ENCRYPTED = privateKey.export({ type: 'pkcs1', format: 'pem', cipher: 'aes-128-cbc', passphrase: 'not-a-secret-here' }).toString();
/** The lines of a key's body, which no text that held the key may keep. */
const bodyLines = (pem: string): string[] => pem.trim().split('\n').filter((line) => !line.startsWith('-----') && !line.includes(': ') && line !== '');

describe('a private key in its armor that the runner was never told of', () => {
  const none = new Scrubber();
  const cases: Record<string, [string, string]> = {
    'as a file prints it': [`before\n${PKCS8}after`, 'before\n[removed: private key]\nafter'],
    'encrypted, with its headers': [`x\n${ENCRYPTED}`, 'x\n[removed: private key]\n'],
    'JSON-escaped in an event': [`{"text":${JSON.stringify(PKCS8)}}`, '{"text":"[removed: private key]\\n"}'],
    'on one line': [`one ${PKCS8.replace(/\n/g, '')} end`, 'one [removed: private key] end'],
    'cut inside its body': [`cut: ${PKCS8.slice(0, 300)}`, 'cut: [removed: private key]'],
  };
  for (const [name, [text, expected]] of Object.entries(cases)) {
    it(`is removed by any scrubber ${name}`, () => {
      expect(none.text(text)).toBe(expected);
      expect(none.bytes(Buffer.from(text)).toString('utf8')).toBe(expected);
    });
  }

  it('leaves a text that only names the armor, and a public key, as they were', () => {
    const prose = 'a file that starts with -----BEGIN OPENSSH PRIVATE KEY----- is a key, and -----BEGIN PUBLIC KEY----- is not';
    expect(none.text(prose)).toBe('a file that starts with [removed: private key] is a key, and -----BEGIN PUBLIC KEY----- is not');
    const pub = generateKeyPairSync('rsa', { modulusLength: 1024 }).publicKey.export({ type: 'spki', format: 'pem' }).toString();
    expect(none.text(pub)).toBe(pub);
  });

  it("leaves no part of it in the ledger when an execution agent prints a key file of the repository it works in", async () => {
    const place = await places('repo-key', { 'config/deploy.pem': PKCS8 });
    const { messageId } = await dispatchTo(place, 'repo-key');
    const watch = watchOnce(place, agentScript(place.world.dir, 'cat config/deploy.pem >&2; exit 1'));
    const [receipt] = await receiptsFor(place, messageId);
    expect(receipt, watch.stderr).toBeDefined();
    const ledger = ledgerOf(place.world.gitdir);
    expect(ledger).toContain('[removed: private key]');
    for (const line of bodyLines(PKCS8)) expect(pieces(ledger, line.slice(0, 40)), line).toEqual([]);
  }, 120_000);

  it('is refused in what a writer signs, as a secret of its process is (USAGE, naming no secret, nothing written)', async () => {
    const place = await places('writer');
    const ceoKey = join(place.world.dir, 'keys', 'ceo.key');
    writeFileSync(ceoKey, formatPrivateKey(place.world.actors.ceo), { mode: 0o600 });
    const head = (): string => git(['--git-dir', place.world.gitdir, 'rev-parse', 'main']).trim();
    const before = head();
    const result = spawnSync(process.execPath, [COO, 'command', '--ledger', place.world.gitdir, '--ceo-key', ceoKey, '--text', `Deploy with this key:\n${ENCRYPTED}`], { encoding: 'utf8' });
    expect([result.status, result.stderr.split(':').slice(0, 2).join(':')], result.stderr).toEqual([2, 'coo: USAGE']);
    expect(result.stderr).toContain('or a private key in its armor');
    for (const line of bodyLines(ENCRYPTED)) expect(result.stderr).not.toContain(line.slice(0, 16));
    expect(head()).toBe(before);
  });
});

describe("a model endpoint's token in the runner's start-up reasons", () => {
  it('is not printed, nor in --json, when the endpoint is refused: one that is not a URL, not http, or an Anthropic one not on its host', async () => {
    const place = await places('endpoints');
    const TOKEN = 'EndpointToken0123456789xyz';
    const endpoints = [
      ['--oracle-base-url', `http://op:${TOKEN}@[not-a-host/v1`],
      ['--oracle-base-url', `ftp://op:${TOKEN}@gw.example/v1`],
      ['--oracle-anthropic-url', `https://gw.example/v1/messages?key=${TOKEN}`],
      ['--oracle-anthropic-url', `https://api.anthropic.com/v1/complete?key=${TOKEN}`],
    ];
    for (const flags of endpoints) {
      const result = spawnSync(process.execPath, [COO, 'watch', '--once', '--json', '--ledger', place.world.gitdir, '--key', place.keyFile, '--repo', place.repo, '--state-dir', place.stateDir, '--isolation', 'none', ...flags], {
        encoding: 'utf8',
        env: { ...process.env, OPENAI_API_KEY: 'sk-endpoint-test-0123', ANTHROPIC_API_KEY: 'sk-ant-endpoint-test-0123' },
        timeout: 60_000,
      });
      const said = `${result.stdout}${result.stderr}`;
      expect(said, flags.join(' ')).toMatch(/is not a URL|is not an http or https URL|is not on api\.anthropic\.com|must be the full Messages endpoint/);
      expect(pieces(said, TOKEN), flags.join(' ')).toEqual([]);
    }
  }, 120_000);
});

describe('a token in a header git is told to send (http.extraHeader), as actions/checkout leaves one', () => {
  const TOKEN = 'ghs_CheckoutToken0123456789abcdefXYZ';
  const BASIC = Buffer.from(`x-access-token:${TOKEN}`).toString('base64');
  const GITLAB = 'glpat-GitlabHeader0123456789';

  it('is known to the scrubber: the basic credential, its password decoded, a bearer or a private token', () => {
    const repo = join(dir, 'header-repo');
    git(['init', '-q', repo]);
    git(['-C', repo, 'config', 'http.https://github.com/.extraheader', `AUTHORIZATION: basic ${BASIC}`]);
    git(['-C', repo, 'config', 'http.extraHeader', `PRIVATE-TOKEN: ${GITLAB}`]);
    const values = gitRemoteSecrets([repo], { helpers: false }).map((secret) => secret.value);
    for (const value of [BASIC, TOKEN, GITLAB]) expect(values).toContain(value);
  });

  it("leaves no part of it in the ledger when an execution agent prints the target repository's git configuration", async () => {
    const place = await places('header');
    git(['config', 'http.https://github.com/.extraheader', `AUTHORIZATION: basic ${BASIC}`], { cwd: place.repo });
    const { messageId } = await dispatchTo(place, 'header');
    // Without bubblewrap, which hands the agent the repository's configuration without its credentials: here the agent reads them, and the scrubber must find them.
    const watch = watchOnce(place, agentScript(place.world.dir, `{ git config --get-regexp extraheader; git config --get-regexp extraheader | sed 's/.* //' | base64 -d; echo; } >&2; exit 1`), { isolation: 'none' });
    const [receipt] = await receiptsFor(place, messageId);
    expect(receipt, watch.stderr).toBeDefined();
    const ledger = ledgerOf(place.world.gitdir);
    expect(ledger).toContain('[removed: git http header]');
    expect(pieces(ledger, BASIC)).toEqual([]);
    expect(pieces(ledger, TOKEN)).toEqual([]);
  }, 120_000);
});

describe('a secret of its process the operator gives coo where a path or an id goes', () => {
  it('is not printed back in the error, nor in --json: a provider key as the key file, as a message id, as a repository', async () => {
    const place = await places('typed');
    const KEY = 'sk-proj-TypedWhereAPathGoes0123456789';
    const env = { ...process.env, OPENAI_API_KEY: KEY };
    const runs = [
      ['watch', '--once', '--json', '--ledger', place.world.gitdir, '--key', KEY, '--repo', place.repo, '--state-dir', place.stateDir],
      ['show', KEY, '--json', '--ledger', place.world.gitdir],
      ['watch', '--once', '--json', '--ledger', place.world.gitdir, '--key', place.keyFile, '--repo', `/tmp/${KEY}`, '--state-dir', place.stateDir],
    ];
    for (const args of runs) {
      const result = spawnSync(process.execPath, [COO, ...args], { encoding: 'utf8', env, timeout: 60_000 });
      expect(result.status, args.join(' ')).not.toBe(0);
      expect(result.stderr, args.join(' ')).toContain('[removed: OPENAI_API_KEY]');
      expect(result.stdout, args.join(' ')).toContain('[removed: OPENAI_API_KEY]');
      expect(pieces(`${result.stdout}${result.stderr}`, KEY), args.join(' ')).toEqual([]);
    }
  }, 120_000);
});

describe("a watch's failed pass through a remote", () => {
  const closers: Array<() => Promise<void> | void> = [];
  afterAll(async () => {
    for (const close of closers.reverse()) await close();
  });

  it('is reported as the runner reports its events: coded, and without a secret the runner knows', async () => {
    const world = await makeCase(join(dir, 'pass-error'), closers);
    const machine = await world.machine('one');
    const secret = `sk-pass-${'q'.repeat(40)}`;
    process.env['COO_PASS_TEST_API_KEY'] = secret;
    try {
      const runner = machine.runner();
      const controller = new AbortController();
      vi.spyOn(runner, 'runOnce').mockRejectedValue(new CooError('LEDGER_LOCKED', `the clone is held; its holder said ${secret}`));
      const reported: unknown[] = [];
      await watchRemote(runner, {
        remote: machine.remote,
        signal: controller.signal,
        pollSeconds: 0.05,
        maxPollSeconds: 0.1,
        onError: (event) => {
          reported.push(event);
          controller.abort();
        },
      });
      expect(reported).toEqual([{ type: 'error', messageId: null, code: 'LEDGER_LOCKED', message: expect.stringContaining('the clone is held; its holder said') }]);
      expect(JSON.stringify(reported)).not.toContain(secret);
    } finally {
      delete process.env['COO_PASS_TEST_API_KEY'];
    }
  });
});
