import { chmodSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { generatePrivateKey } from '../../src/crypto/keys.js';
import { isCooError } from '../../src/errors.js';
import { OracleCli } from '../../src/consult/oracle.js';
import { ClaudeCodeExecutor } from '../../src/dispatch/claude-code.js';
import { CodexExecutor } from '../../src/dispatch/codex.js';
import { serverScrubber } from '../../src/mcp/results.js';
import { credentialHelperSecrets, gitRemoteSecrets } from '../../src/util/credential-files.js';
import { displayUrl, urlCredentials, withoutUserInfo } from '../../src/util/display-url.js';
import { environmentSecrets, Scrubber } from '../../src/util/scrub.js';
import { coo } from '../helpers/cli.js';
import { agentScript, dispatchTo, hostilePlaces, receiptsFor, watchOnce } from '../helpers/hostile-agent.js';
import { makeTargetRepo } from '../helpers/lane.js';
import { git, run, tempDir } from '../helpers/tmp.js';

/**
 * "No secret ever enters the ledger", attacked a third time: a key's base64 split at any point, a key
 * encoded three deep, the credentials git and ssh are handed by programs and helpers or a remote's
 * URL carries, and the other roads into what is signed.
 */
const KEY = 'sk-proj-Red/Team+3rd0123456789abcdefSECRET';
const scrub = new Scrubber([{ name: 'OPENAI_API_KEY', value: KEY }]);
const BASE64 = Buffer.from(KEY).toString('base64');
const HEX = Buffer.from(KEY).toString('hex');

/** Every run of 8 characters of `whole` that `text` still holds. */
const pieces = (text: string, whole: string): string[] => Array.from({ length: whole.length - 7 }, (_, at) => whole.slice(at, at + 8)).filter((piece) => text.includes(piece));
/** `text` cut at the given points, joined by `join`. */
const splitAt = (text: string, points: readonly number[], join: (at: number) => string): string => points.reduce((out, point, index) => out + text.slice(index === 0 ? 0 : points[index - 1], point) + join(index), '') + text.slice(points.at(-1));

describe('a key in base64 or hex split at any point', () => {
  const cases: Record<string, string> = {
    'base64 split by spaces into groups of 4': BASE64.match(/.{1,4}/g)!.join(' '),
    'base64 split by single spaces at uneven points': splitAt(BASE64, [3, 10, 11, 25, 31, 50], () => ' '),
    'base64 split by newlines at uneven points (short lines)': splitAt(BASE64, [5, 9, 20, 33, 40], () => '\n'),
    'base64 split by tabs, spaces and CRLF mixed': splitAt(BASE64, [7, 14, 22, 29, 41], (at) => ['\t', '  ', '\r\n', ' \n ', ' '][at]!),
    'base64 in a JSON string split by escaped newlines and spaces': JSON.stringify(splitAt(BASE64, [6, 13, 27, 44], (at) => (at % 2 === 0 ? '\n' : ' '))).slice(1, -1),
    'hex split by spaces into bytes, as xxd or od print it': HEX.match(/.{2}/g)!.join(' '),
    'hex split by colons': HEX.match(/.{2}/g)!.join(':'),
  };
  for (const [name, form] of Object.entries(cases)) {
    it(`is found as ${name}`, () => {
      const cleaned = scrub.text(`blob: ${form} end`);
      expect(cleaned).toContain('[removed: OPENAI_API_KEY');
      const joined = cleaned.replace(/\s|\\n|\\r|\\t|:/g, '');
      expect(pieces(joined, BASE64.slice(4, -4))).toEqual([]);
      expect(pieces(joined.toLowerCase(), HEX)).toEqual([]);
      expect(scrub.bytes(Buffer.from(`blob: ${form} end`)).toString('utf8')).toBe(cleaned);
    });
  }

  it('leaves ordinary words and numbers separated by spaces as they were', () => {
    const text = 'the quick brown fox jumps over the lazy dog 0123 4567 89ab cdef c2st LXBy';
    expect(scrub.text(text)).toBe(text);
  });
});

const percentAll = (text: string): string => [...Buffer.from(text)].map((byte) => `%${byte.toString(16).padStart(2, '0')}`).join('');
const unicodeAll = (text: string): string => [...text].map((char) => `\\u${char.charCodeAt(0).toString(16).padStart(4, '0')}`).join('');
const b64 = (text: string): string => Buffer.from(text).toString('base64');
const hex = (text: string): string => Buffer.from(text).toString('hex');

describe('a key encoded up to three deep', () => {
  const cases: Record<string, string> = {
    'base64 of a JSON string with \\u escapes of its percent-encoding': b64(`{"key": "${unicodeAll(percentAll(KEY))}"}`),
    'base64 of a JSON document holding its \\u escapes': b64(JSON.stringify({ k: unicodeAll(KEY) }).replace(/\\\\/g, '\\')),
    'base64 of its hex': b64(hex(KEY)),
    'base64 of its base64': b64(b64(KEY)),
    'hex of its base64': hex(b64(KEY)),
    'base64 of its percent-encoding, wrapped at 76 columns': b64(percentAll(KEY)).match(/.{1,76}/g)!.join('\n'),
    'base64 of base64 of its hex': b64(b64(hex(KEY))),
    'every character \\u-escaped, of base64 of its percent-encoding (a JSON event of it)': unicodeAll(b64(percentAll(KEY))),
    'base64url of its HTML references': Buffer.from([...KEY].map((char) => `&#${char.charCodeAt(0)};`).join('')).toString('base64url'),
  };
  for (const [name, form] of Object.entries(cases)) {
    it(`is found as ${name}`, () => {
      for (const text of [`value=${form}`, `{"out":${JSON.stringify(`x ${form}\n`)}}`]) {
        const cleaned = scrub.text(text);
        expect(cleaned, text).toContain('[removed: OPENAI_API_KEY');
        expect(cleaned, text).not.toContain(form.slice(8, 24));
        expect(pieces(cleaned.replace(/\\n/g, '\n'), form.slice(16, -8)), text).toEqual([]);
        expect(scrub.bytes(Buffer.from(text)).toString('utf8')).toBe(cleaned);
      }
    });
  }

  it('is found whole as base64 of it with a zero-width character inside: the run is replaced, not only the halves either side', () => {
    for (const at of [5, 20]) expect(scrub.text(`value=${b64(`${KEY.slice(0, at)}\u200b${KEY.slice(at)}`)}`)).toBe('value=[removed: OPENAI_API_KEY (decoded)]');
  });

  it('leaves base64 and hex that hold no secret as they were: a commit id, a digest, an encoded ordinary text', () => {
    const text = `commit 0123456789abcdef0123456789abcdef01234567 sha256-${Buffer.alloc(32, 7).toString('base64')} ${b64('hello world, nothing here at all')}`;
    expect(scrub.text(text)).toBe(text);
    const bytes = Buffer.from(text);
    expect(scrub.bytes(bytes)).toBe(bytes);
  });
});

const dir = tempDir('coo-secrets-redteam-3-');
const places = hostilePlaces(dir, 'place');
/** Every run of 8 characters of `token` the ledger's objects hold. */
const inLedger = (gitdir: string, token: string): string[] => pieces(git(['--git-dir', gitdir, 'cat-file', '--batch-all-objects', '--batch']), token);

/** An executable at `path` that runs `body` (a shell script). */
function script(path: string, body: string): string {
  writeFileSync(path, `#!/bin/sh\n${body}\n`);
  chmodSync(path, 0o755);
  return path;
}

describe("a token in a remote URL's query", () => {
  const TOKEN = 'ghs_QueryToken0123456789abcdefXYZ';
  const URL = `https://git.example.com/acme/ledger.git?access_token=${TOKEN}`;

  it('is a credential of the URL, and is not shown where the URL or git\'s message quoting it is', () => {
    expect(urlCredentials(URL)).toContain(TOKEN);
    expect(urlCredentials(`https://u:${TOKEN}@h/x?a=1`)).toContain(TOKEN);
    expect(displayUrl(URL)).not.toContain(TOKEN);
    expect(withoutUserInfo(`fatal: unable to access '${URL}/': Could not resolve host: git.example.com`)).not.toContain(TOKEN);
    expect(displayUrl('https://git.example.com/acme/ledger.git')).toBe('https://git.example.com/acme/ledger.git');
  });

  it("is known to the scrubber when a repository's remote carries it", () => {
    const repo = join(dir, 'query-repo');
    git(['init', '-q', repo]);
    git(['-C', repo, 'remote', 'add', 'origin', URL]);
    expect(gitRemoteSecrets([repo]).map((secret) => secret.value)).toContain(TOKEN);
  });
});

describe('a token git is handed by a credential helper or GIT_ASKPASS', () => {
  const HELPER_TOKEN = 'ghs_HelperToken0123456789abcdefQRS';
  const ASKPASS_TOKEN = 'ghs_AskpassToken0123456789abcdefTUV';
  const URL = 'https://git.example.com/acme/work.git';

  it("is learned from the repository's helper, and from GIT_ASKPASS only for the runner's own remote", () => {
    const repo = join(dir, 'helper-repo');
    git(['init', '-q', repo]);
    git(['-C', repo, 'config', 'credential.helper', `!f() { echo username=x-access-token; echo password=${HELPER_TOKEN}; }; f`]);
    expect(credentialHelperSecrets([{ url: URL, gitArgs: ['-C', repo], askpass: false }]).map((secret) => secret.value)).toEqual([HELPER_TOKEN]);
    const bare = join(dir, 'askpass-repo');
    git(['init', '-q', bare]);
    const askpass = script(join(dir, 'askpass.sh'), `echo ${ASKPASS_TOKEN}`);
    const saved = process.env['GIT_ASKPASS'];
    process.env['GIT_ASKPASS'] = askpass;
    try {
      expect(credentialHelperSecrets([{ url: URL, gitArgs: ['-C', bare], askpass: true }]).map((secret) => secret.value)).toContain(ASKPASS_TOKEN);
      expect(credentialHelperSecrets([{ url: URL, gitArgs: ['-C', bare], askpass: false }])).toEqual([]);
    } finally {
      if (saved === undefined) delete process.env['GIT_ASKPASS'];
      else process.env['GIT_ASKPASS'] = saved;
    }
  });

  it('fails the start closed (RUNNER_CONFIG, naming no secret) when a helper kills git rather than answer', () => {
    const repo = join(dir, 'broken-helper-repo');
    git(['init', '-q', repo]);
    git(['-C', repo, 'config', 'credential.helper', '!f() { kill -9 $PPID; }; f']);
    let thrown: unknown;
    try {
      credentialHelperSecrets([{ url: 'https://git.example.com/x.git?t=pw-not-shown-123', gitArgs: ['-C', repo], askpass: false }]);
    } catch (error) {
      thrown = error;
    }
    expect(isCooError(thrown) && thrown.code).toBe('RUNNER_CONFIG');
    expect(String((thrown as Error).message)).not.toContain('pw-not-shown');
  });

  it("is known to the runner: an execution agent that asks the target repository's helper with git credential fill and echoes it leaves no part of it in the ledger", async () => {
    const place = await places('helper');
    git(['remote', 'add', 'origin', URL], { cwd: place.repo });
    git(['config', 'credential.helper', `!f() { echo username=x-access-token; echo password=${HELPER_TOKEN}; }; f`], { cwd: place.repo });
    const { messageId } = await dispatchTo(place, 'helper');
    const stream = [
      `printf '%s\\n' '{"type":"thread.started","thread_id":"thread-helper"}'`,
      `printf '{"type":"item.completed","item":{"id":"i2","type":"agent_message","text":"filled: %s"}}\\n' "$(printf 'url=${URL}\\n\\n' | git credential fill | tr -d '"\\\\\\n\\t')"`,
      `printf '%s\\n' '{"type":"turn.completed","usage":{"input_tokens":100,"cached_input_tokens":0,"output_tokens":10}}'`,
    ].join('\n');
    // Without bubblewrap, which hands the agent the repository's configuration without its credentials: here the agent reads them, and the scrubber must find them.
    const watch = watchOnce(place, agentScript(place.world.dir, 'true', stream), { isolation: 'none' });
    const [receipt] = await receiptsFor(place, messageId);
    expect(receipt, watch.stderr).toBeDefined();
    const ledger = git(['--git-dir', place.world.gitdir, 'cat-file', '--batch-all-objects', '--batch']);
    expect(ledger).toContain('filled: ');
    expect(inLedger(place.world.gitdir, HELPER_TOKEN)).toEqual([]);
  }, 120_000);
});

describe("a COO that writes its ledger's remote token into what it signs", () => {
  it("is refused before anything is written (USAGE, naming no secret): the token of a remote of the ledger, in its user info or its query, in a consult's prompt and a command's text", () => {
    const home = join(dir, 'writer');
    const keys = join(home, 'keys');
    const ledger = join(home, 'ledger.git');
    const target = join(home, 'target');
    const TOKEN = 'glpat-LedgerMirrorToken0123456789xyz';
    const QUERY_TOKEN = 'sig-LedgerQueryToken0123456789uvw';
    for (const actor of ['ceo', 'coo.hermes']) expect(coo(['keygen', '--actor', actor, '--out', keys]).status).toBe(0);
    expect(coo(['init', '--ledger', ledger, '--ceo-key', join(keys, 'ceo.key'), '--actor', `coo.hermes=${join(keys, 'coo.hermes.pub')}`]).status).toBe(0);
    makeTargetRepo(target);
    // A place the ledger is copied to, not one it came from: writes go on without --remote.
    git(['--git-dir', ledger, 'remote', 'add', 'mirror', `https://oauth2:${TOKEN}@gitlab.example.com/acme/ledger.git`]);
    git(['--git-dir', ledger, 'remote', 'add', 'backup', `https://backup.example.com/ledger.git?sig=${QUERY_TOKEN}`]);
    const env = { COO_LEDGER: ledger, COO_KEY: join(keys, 'coo.hermes.key') };
    const head = (): string => git(['--git-dir', ledger, 'rev-parse', 'main']).trim();
    const before = head();
    const refused = [
      coo(['consult', '--to', 'aa.chatgpt', '--repo', target, '--file', 'src/**', '--prompt', `Is ${TOKEN} still valid?`], { env }),
      coo(['command', '--ledger', ledger, '--ceo-key', join(keys, 'ceo.key'), '--text', `Rotate ${QUERY_TOKEN} today.`], { env }),
    ];
    for (const result of refused) {
      expect([result.status, result.stderr.split(':').slice(0, 2).join(':')], result.stderr).toEqual([2, 'coo: USAGE']);
      expect(result.stderr).not.toContain(TOKEN.slice(8));
      expect(result.stderr).not.toContain(QUERY_TOKEN.slice(8));
    }
    expect(head()).toBe(before);
    expect(coo(['consult', '--to', 'aa.chatgpt', '--repo', target, '--file', 'src/**', '--prompt', 'Is the token still valid?'], { env }).status).toBe(0);
  }, 60_000);
});

describe('a secret of the environment under a name the scrubber did not read as one', () => {
  it('is known: a password in a URL (a proxy, a database), an API key spelled APIKEY, a PASSWD, an npm auth token, a PAT', () => {
    const env = {
      HTTPS_PROXY: 'http://op:ProxyPass0123456789@proxy.internal:3128',
      DATABASE_URL: 'postgres://app:DbPassword0123456789@db.internal/app',
      SERPAPI_APIKEY: 'serp0123456789abcdefghijkl',
      DB_PASSWD: 'hunter2-but-longer-0123',
      'npm_config_//registry.npmjs.org/:_authToken': 'npm_AuthToken0123456789abcdefgh',
      GITHUB_PAT: 'github_pat_0123456789abcdefghij',
      HOME: '/home/op',
      PATH: '/usr/bin:/bin',
      SSH_AUTH_SOCK: '/tmp/ssh-agent.sock',
      NO_PROXY: 'localhost,127.0.0.1',
    };
    const values = environmentSecrets(env).map((secret) => secret.value);
    for (const secret of ['ProxyPass0123456789', 'DbPassword0123456789', env.SERPAPI_APIKEY, env.DB_PASSWD, env['npm_config_//registry.npmjs.org/:_authToken'], env.GITHUB_PAT]) expect(values, secret).toContain(secret);
    for (const plain of [env.HOME, env.PATH, env.SSH_AUTH_SOCK, env.NO_PROXY]) expect(values).not.toContain(plain);
  });
});

describe('the writers that signed without the refusal', () => {
  const home = join(dir, 'genesis');
  const keys = join(home, 'keys');
  const KEY_IN_ENV = 'sk-proj-GenesisPasted0123456789abcdefKEY';

  it("coo init refuses a registry or policy holding a secret of its process, and makes no ledger (USAGE, naming no secret)", () => {
    for (const actor of ['ceo', 'coo.hermes']) expect(coo(['keygen', '--actor', actor, '--out', keys]).status).toBe(0);
    const registry = join(home, 'registry.yaml');
    writeFileSync(registry, readFileSync('policy/actor_registry.v0.yaml', 'utf8').replace('The human who owns the keys', `The human whose key is ${KEY_IN_ENV}`));
    const ledger = join(home, 'ledger.git');
    const result = coo(['init', '--ledger', ledger, '--ceo-key', join(keys, 'ceo.key'), '--actor', `coo.hermes=${join(keys, 'coo.hermes.pub')}`, '--registry', registry], { env: { OPENAI_API_KEY: KEY_IN_ENV } });
    expect([result.status, result.stderr.split(':').slice(0, 2).join(':')], result.stderr).toEqual([2, 'coo: USAGE']);
    expect(result.stderr).not.toContain(KEY_IN_ENV.slice(8));
    expect(existsSync(join(ledger, 'HEAD'))).toBe(false);
  });

  it('coo forge refuses a package URL that carries credentials, which the check on a public forge would publish (USAGE, naming no secret)', () => {
    const ledger = join(home, 'forge-ledger.git');
    expect(coo(['init', '--ledger', ledger, '--ceo-key', join(keys, 'ceo.key'), '--actor', `coo.hermes=${join(keys, 'coo.hermes.pub')}`]).status).toBe(0);
    const before = git(['--git-dir', ledger, 'rev-parse', 'main']).trim();
    const TOKEN = 'npm_PackageUrlToken0123456789abcdef';
    const result = coo(['forge', 'github', '--ledger', ledger, '--ceo-key', join(keys, 'ceo.key'), '--package', `https://ci:${TOKEN}@npm.example.com/coo-commons-1.0.0.tgz`]);
    expect([result.status, result.stderr.split(':').slice(0, 2).join(':')], result.stderr).toEqual([2, 'coo: USAGE']);
    expect(result.stderr).not.toContain(TOKEN.slice(8));
    expect(git(['--git-dir', ledger, 'rev-parse', 'main']).trim()).toBe(before);
  });
});

describe('an execution agent that writes the key it was handed into its work', () => {
  it('has its work not landed: the branch stays at its base, the receipt fails with the file named, and neither the ledger nor the branch holds the key', async () => {
    const place = await places('work-content');
    const { messageId } = await dispatchTo(place, 'work-content');
    const HANDED = 'sk-hostile-work-0123456789abcdefXYZ';
    // The fix test.sh wants, and the key it was handed, base64-encoded, in a file of its scope.
    const watch = watchOnce(place, agentScript(place.world.dir, `printf 'export const add = (a, b) => a + b;\\n' > src/add.js; printf 'const KEY = "%s";\\n' "$(printf %s "$OPENAI_API_KEY" | base64 -w0)" > src/config.js`), { env: { OPENAI_API_KEY: HANDED } });
    const [receipt] = await receiptsFor(place, messageId);
    expect(receipt, watch.stderr).toBeDefined();
    expect(receipt!['status']).toBe('failed');
    expect(receipt!['branch']).toBeNull();
    expect(JSON.stringify(receipt!['blockers'])).toContain('src/config.js');
    const ledger = git(['--git-dir', place.world.gitdir, 'cat-file', '--batch-all-objects', '--batch']);
    expect(ledger).not.toContain(Buffer.from(HANDED).toString('base64').slice(4, 24));
    const branches = git(['for-each-ref', '--format=%(refname) %(objectname)', 'refs/heads/'], { cwd: place.repo });
    for (const line of branches.trim().split('\n')) {
      const [ref, oid] = line.split(' ');
      expect(run('git', ['grep', '-l', '-F', Buffer.from(HANDED).toString('base64').slice(4, 24), oid!], { cwd: place.repo }).stdout, ref).toBe('');
    }
  }, 120_000);
});

describe("the MCP server's results and errors", () => {
  it('have the token of a remote of its ledger or repository removed, as the runner and the writers know it', () => {
    const TOKEN = 'glpat-McpMirrorToken0123456789abcdef';
    const ledger = join(dir, 'mcp-ledger.git');
    git(['init', '-q', '--bare', ledger]);
    git(['--git-dir', ledger, 'remote', 'add', 'mirror', `https://oauth2:${TOKEN}@gitlab.example.com/acme/ledger.git`]);
    const scrubber = serverScrubber({ key: generatePrivateKey('coo.test'), env: {}, places: [], repositories: [ledger] });
    expect(scrubber.text(`fatal: could not push to mirror with ${TOKEN}`)).not.toContain(TOKEN.slice(8));
  });
});

describe('a token in a model endpoint the runner hands a child', () => {
  it("is among what the executor or Oracle was handed: a base URL's user info or query", () => {
    const TOKEN = 'gw-UserInfoToken0123456789abcdef';
    const QUERY_TOKEN = 'gw-QueryToken0123456789abcdefgh';
    const url = `https://coo:${TOKEN}@gateway.example.com/v1?api-key=${QUERY_TOKEN}`;
    const env = { OPENAI_API_KEY: 'sk-handed-0123456789', ANTHROPIC_API_KEY: 'sk-ant-handed-0123456789' };
    for (const handed of [new CodexExecutor({ baseUrl: url, env }).handedSecrets(), new ClaudeCodeExecutor({ baseUrl: url, env }).handedSecrets(), new OracleCli({ env, isolation: 'none', route: { baseUrl: url } }).handedSecrets('OPENAI_API_KEY')]) {
      const values = handed.map((secret) => secret.value);
      expect(values).toContain(QUERY_TOKEN);
      expect(values).toContain(TOKEN);
    }
  });
});
