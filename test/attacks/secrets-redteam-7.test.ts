import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { credentialFileSecrets, gitRemoteSecrets } from '../../src/util/credential-files.js';
import { urlCredentials } from '../../src/util/display-url.js';
import { environmentSecrets, Scrubber } from '../../src/util/scrub.js';
import { requireBubblewrap } from '../helpers/bubblewrap.js';
import { agentScript, dispatchTo, hostilePlaces, receiptsFor, watchOnce } from '../helpers/hostile-agent.js';
import { git, outsideTempDir, tempDir } from '../helpers/tmp.js';
import { expectRefusedInCommands, ledgerOf, pieces } from '../helpers/secret-text.js';

/**
 * "No secret ever enters the ledger", attacked a seventh time: a secret the runner's environment
 * holds with a line end, spaces or quotes around it (a key file read whole, a docker `--env-file`
 * line), which an HTTP client and every reader take bare; and the provider keys the tools the
 * runner starts keep in files of their own (Claude Code's settings, the `.env` Codex and the Gemini
 * CLI load, the Gemini CLI's login) and in the files its environment names (`*_FILE`, docker's
 * secrets; a service account key), which the runner never held; and a token that stands as the
 * user name of a URL before a password (`https://TOKEN:x-oauth-basic@github.com/…`).
 */
const dir = tempDir('secrets-7');
const places = hostilePlaces(dir, 'p');

/** Every run of 8 characters of `whole` that `text` still holds. */

/** Each secret bare, and how the environment holds it. */
const BARE = {
  DEPLOY_TOKEN: 'DeployTok4Q9vR2mX7kLp3ZwNa',
  SLACK_BOT_TOKEN: 'xoxb-5820461937-SlackBotQw',
  GEMINI_API_KEY: 'AIzaSyWrapped7Hq2Vd9Kx4Mb1Tz',
  DB_PASSWORD: 'DbPass8Rk3Wn6Yc1Jh',
};
const WRAPPED = {
  DEPLOY_TOKEN: `${BARE.DEPLOY_TOKEN}\n`,
  SLACK_BOT_TOKEN: `"${BARE.SLACK_BOT_TOKEN}"`,
  GEMINI_API_KEY: ` '${BARE.GEMINI_API_KEY}'\r\n`,
  DB_PASSWORD: `${BARE.DB_PASSWORD} `,
};

describe("a secret of the runner's environment given with a line end, spaces or quotes around it", () => {
  it('is found bare, as an HTTP client sends it and a server echoes it: as written, JSON-escaped, percent-encoded and in base64', () => {
    const scrubber = new Scrubber(environmentSecrets(WRAPPED));
    for (const [name, value] of Object.entries(BARE)) {
      const echoed = [`Incorrect API key provided: ${value}.`, JSON.stringify({ error: { message: `bad key ${value}` } }), `https://x.example/?q=${encodeURIComponent(value)}`, Buffer.from(value).toString('base64')].join('\n');
      const scrubbed = scrubber.text(echoed);
      expect(scrubbed, name).toContain(`[removed: ${name}`);
      expect(pieces(scrubbed, value), name).toEqual([]);
    }
  });

  it('is refused bare in what a writer signs (USAGE, exit 2, naming no secret), and nothing is written', () => {
    expectRefusedInCommands(dir, BARE, WRAPPED, 'Rotate the deploy token today.');
  });

  it("leaves no part of it in the ledger when an execution agent run without bubblewrap reads the runner's environment and prints each value bare", async () => {
    const place = await places('wrapped');
    const { messageId } = await dispatchTo(place, 'wrapped');
    // Each variable's value with what surrounds it taken off, as a person or a script reporting it would write it.
    const action = String.raw`tr '\0' '\n' < /proc/$PPID/environ | sed -n -E "s/^(DEPLOY_TOKEN|SLACK_BOT_TOKEN|GEMINI_API_KEY|DB_PASSWORD)=[ \"']*([^ \"'\r]+).*$/\1 is \2./p" >&2; exit 1`;
    const watch = watchOnce(place, agentScript(place.world.dir, action), { env: WRAPPED, isolation: 'none' });
    const [receipt] = await receiptsFor(place, messageId);
    expect(receipt, watch.stderr).toBeDefined();
    const ledger = ledgerOf(place.world.gitdir);
    expect(ledger).toContain('SLACK_BOT_TOKEN is [removed: SLACK_BOT_TOKEN].');
    for (const [name, value] of Object.entries(BARE)) expect(pieces(ledger, value), name).toEqual([]);
  }, 120_000);
});

/** Keys the tools keep in files of their own, each under its own name. */
const TOOL_KEYS = {
  claudeSettings: 'sk-ant-oat01-ClaudeSettings5Gh8Pq2Lw',
  claudeGateway: 'GwSettingsKey8Jt3Rk6Yp',
  codexEnv: 'sk-proj-CodexDotenv3Nf7Rb1Xk',
  geminiEnv: 'AIzaSyGeminiDotenv9Tc4Mv6Jd',
  geminiExported: 'GeminiVertexToken2Ws5Hy8Qe',
  geminiAccess: 'ya29.GeminiAccess6Kb3Zn7Uf',
  geminiRefresh: '1//GeminiRefresh4Dx9Lm2Vr',
  homeEnv: 'sk-or-v1-HomeDotenv8Fq5Tw3Jc',
};

function toolHome(home: string): void {
  const files: Record<string, string> = {
    '.claude/settings.json': JSON.stringify({
      env: { ANTHROPIC_AUTH_TOKEN: TOOL_KEYS.claudeSettings, ANTHROPIC_BASE_URL: `https://gw.internal/v1?api-key=${TOOL_KEYS.claudeGateway}`, ANTHROPIC_MODEL: 'claude-sonnet-4-6' },
      apiKeyHelper: '/usr/local/bin/anthropic-key-helper.sh',
      permissions: { allow: ['Bash(npm test)'] },
    }),
    '.codex/.env': `# Codex loads this at start\nOPENAI_API_KEY=${TOOL_KEYS.codexEnv}\nCODEX_LOG=info\n`,
    '.gemini/.env': `GEMINI_API_KEY="${TOOL_KEYS.geminiEnv}"\nexport GOOGLE_CLOUD_ACCESS_TOKEN='${TOOL_KEYS.geminiExported}'\nGEMINI_MODEL=gemini-2.5-pro-0123456789\n`,
    '.env': `OPENROUTER_API_KEY=${TOOL_KEYS.homeEnv} # the home folder's own\n`,
    '.gemini/oauth_creds.json': JSON.stringify({ access_token: TOOL_KEYS.geminiAccess, refresh_token: TOOL_KEYS.geminiRefresh, token_type: 'Bearer', expiry_date: 1767225600000 }),
  };
  for (const [path, content] of Object.entries(files)) {
    mkdirSync(join(home, path, '..'), { recursive: true });
    writeFileSync(join(home, path), content, { mode: 0o600 });
  }
}

describe('the keys a tool the runner starts keeps in files of its own', () => {
  const home = join(dir, 'tools-home');
  beforeAll(() => toolHome(home));

  it("are known to the scrubber: the variables of Claude Code's settings, the .env Codex and the Gemini CLI load (quoted, exported), the Gemini CLI's login, the home folder's .env; a model's name and a helper's path are not", () => {
    const values = credentialFileSecrets({}, home).map((secret) => secret.value);
    for (const [name, value] of Object.entries(TOOL_KEYS)) expect(values, name).toContain(value);
    for (const word of ['claude-sonnet-4-6', '/usr/local/bin/anthropic-key-helper.sh', 'info', 'gemini-2.5-pro-0123456789', 'Bearer']) expect(values).not.toContain(word);
  });

  it('leave no part of them in the ledger when an execution agent run without bubblewrap prints the files', async () => {
    const place = await places('tools-none');
    const { messageId } = await dispatchTo(place, 'tools-none');
    const action = `cat ${home}/.claude/settings.json ${home}/.codex/.env ${home}/.gemini/.env ${home}/.gemini/oauth_creds.json ${home}/.env >&2; exit 1`;
    const watch = watchOnce(place, agentScript(place.world.dir, action), { env: { HOME: home }, isolation: 'none' });
    const [receipt] = await receiptsFor(place, messageId);
    expect(receipt, watch.stderr).toBeDefined();
    const ledger = ledgerOf(place.world.gitdir);
    expect(ledger).toContain('[removed: gemini .env]');
    for (const [name, value] of Object.entries(TOOL_KEYS)) expect(pieces(ledger, value), name).toEqual([]);
  }, 120_000);

  it("hide the Gemini CLI's folder and the home folder's .env from an execution agent under bubblewrap, as Claude Code's and Codex's folders are", async () => {
    requireBubblewrap("hiding the Gemini CLI's folder");
    const place = await places('tools-bwrap');
    const { messageId } = await dispatchTo(place, 'tools-bwrap');
    const paths = ['.claude/settings.json', '.codex/.env', '.gemini/.env', '.gemini/oauth_creds.json', '.env'].map((path) => join(home, path));
    // How many bytes of each the agent could read: its output is scrubbed of what the runner knows, its sizes are not.
    const action = `{ printf 'seen:'; for f in ${paths.join(' ')}; do printf ' %s' "$(cat "$f" 2>/dev/null | wc -c)"; done; printf '\\n'; } >&2; exit 1`;
    const watch = watchOnce(place, agentScript(place.world.dir, action), { env: { HOME: home } });
    const [receipt] = await receiptsFor(place, messageId);
    expect(receipt, watch.stderr).toBeDefined();
    expect(ledgerOf(place.world.gitdir)).toContain(`seen:${' 0'.repeat(paths.length)}\n`);
  }, 120_000);
});

describe("a token standing as a URL's user name before a password, as GitHub's TOKEN:x-oauth-basic writes it", () => {
  const TOKEN = 'ghp_UserNameTok7Rv2Kq9Wm4Xb6Zc1Nd';
  const URL_WITH_TOKEN = `https://${TOKEN}:x-oauth-basic@github.com/acme/work.git`;

  it('is a credential of the URL alone, in the environment and in a repository\'s remote; a name such as x-access-token or oauth2 is not', () => {
    expect(urlCredentials(URL_WITH_TOKEN)).toContain(TOKEN);
    expect(urlCredentials(`https://${encodeURIComponent('ghp_a/b+Tok7Rv2Kq9Wm4')}:x@github.com/r.git`)).toContain('ghp_a/b+Tok7Rv2Kq9Wm4');
    for (const [user, plain] of [
      ['x-access-token', 'https://x-access-token:tok0123456789@github.com/r.git'],
      ['oauth2', 'https://oauth2:glpat-0123456789abcdef@gitlab.com/r.git'],
      ['operator', 'https://operator:pw0123456789@host/r.git'],
      ['jdoe1985', 'https://jdoe1985:ghp_0123456789abcdefghij@github.com/r.git'],
      ['proxyuser1', 'http://proxyuser1:Pr0xyPassw0rd@proxy.example:3128'],
    ]) {
      expect(urlCredentials(plain!)).not.toContain(user);
    }
    expect(urlCredentials('https://ghp_ShortTok1:x-oauth-basic@github.com/r.git')).toContain('ghp_ShortTok1');
    expect(new Scrubber(environmentSecrets({ HTTPS_PROXY: 'http://proxyuser1:Pr0xyPassw0rd@proxy.example:3128' })).text('github.com/proxyuser1/x')).toBe('github.com/proxyuser1/x');
    expect(environmentSecrets({ LEDGER_URL: URL_WITH_TOKEN }).map((secret) => secret.value)).toContain(TOKEN);
    const repo = join(dir, 'user-token-repo');
    git(['init', '-q', repo]);
    git(['-C', repo, 'remote', 'add', 'origin', URL_WITH_TOKEN]);
    expect(gitRemoteSecrets([repo], { helpers: false }).map((secret) => secret.value)).toContain(TOKEN);
    expect(new Scrubber(environmentSecrets({ LEDGER_URL: URL_WITH_TOKEN })).text(`remote: Permission to acme/work.git denied to ${TOKEN}.`)).toBe('remote: Permission to acme/work.git denied to [removed: LEDGER_URL].');
  });

  it("leaves no part of it in the ledger when an execution agent prints the user name of its worktree's remote", async () => {
    const place = await places('user-token');
    git(['remote', 'add', 'origin', URL_WITH_TOKEN], { cwd: place.repo });
    const { messageId } = await dispatchTo(place, 'user-token');
    // Without bubblewrap, which hands the agent the repository's configuration without its credentials: here the agent reads them, and the scrubber must find them.
    const watch = watchOnce(place, agentScript(place.world.dir, "git remote get-url origin | sed -E 's#^https://([^:@]+):.*#pushing as \\1#' >&2; exit 1"), { isolation: 'none' });
    const [receipt] = await receiptsFor(place, messageId);
    expect(receipt, watch.stderr).toBeDefined();
    const ledger = ledgerOf(place.world.gitdir);
    expect(ledger).toContain('pushing as [removed: git remote credentials]');
    expect(pieces(ledger, TOKEN)).toEqual([]);
  }, 120_000);
});

describe('a secret in a file the environment names (a *_FILE variable beside a secret\'s name, a service account key)', () => {
  // Outside the shared temporary folders, which every sandbox sees empty anyway: as /run/secrets is.
  const folder = join(outsideTempDir('secrets-7-'), 'run-secrets');
  const FILE_KEYS = { openai: 'sk-proj-NamedFile6Vb2Nq8Ls', postgres: 'PgNamedPass3Hx7Wd1Ze', aws: 'AwsNamedSecret9Kc4Tf2Bq', google: '5d1f0c9b2e7a4468b3c0f6e2a9d8c7b1e4f3a2d0' };
  const ENV_FILES = {
    OPENAI_API_KEY_FILE: join(folder, 'openai_api_key'),
    POSTGRES_PASSWORD_FILE: join(folder, 'postgres_password'),
    AWS_SHARED_CREDENTIALS_FILE: join(folder, 'aws-credentials'),
    GOOGLE_APPLICATION_CREDENTIALS: join(folder, 'service-account.json'),
    SSL_CERT_FILE: join(folder, 'ca.pem'),
  };
  beforeAll(() => {
    mkdirSync(folder, { recursive: true });
    writeFileSync(ENV_FILES.OPENAI_API_KEY_FILE, `${FILE_KEYS.openai}\n`, { mode: 0o600 });
    writeFileSync(ENV_FILES.POSTGRES_PASSWORD_FILE, FILE_KEYS.postgres, { mode: 0o600 });
    writeFileSync(ENV_FILES.AWS_SHARED_CREDENTIALS_FILE, `[default]\naws_access_key_id = AKIAEXAMPLE\naws_secret_access_key = ${FILE_KEYS.aws}\n`, { mode: 0o600 });
    writeFileSync(ENV_FILES.GOOGLE_APPLICATION_CREDENTIALS, JSON.stringify({ type: 'service_account', project_id: 'acme-prod', private_key_id: FILE_KEYS.google, client_email: 'ci@acme-prod.iam.gserviceaccount.com' }), { mode: 0o600 });
    writeFileSync(ENV_FILES.SSL_CERT_FILE, 'CertificateAuthority2026Plain\n');
  });

  it('is known to the scrubber, the file whole when it is one line and by its fields when it is a configuration; a file under a name that is no secret\'s is not read', () => {
    const values = credentialFileSecrets(ENV_FILES, join(dir, 'empty-home')).map((secret) => secret.value);
    for (const [name, value] of Object.entries(FILE_KEYS)) expect(values, name).toContain(value);
    for (const plain of ['CertificateAuthority2026Plain', 'acme-prod', 'service_account']) expect(values).not.toContain(plain);
  });

  it('is hidden from an execution agent under bubblewrap, as the home folder\'s credentials are', async () => {
    requireBubblewrap('hiding the files the environment names');
    const place = await places('named-bwrap');
    const { messageId } = await dispatchTo(place, 'named-bwrap');
    const paths = Object.values(ENV_FILES).slice(0, 4);
    const action = `{ printf 'seen:'; for f in ${paths.join(' ')}; do printf ' %s' "$(cat "$f" 2>/dev/null | wc -c)"; done; printf '\\n'; } >&2; exit 1`;
    const watch = watchOnce(place, agentScript(place.world.dir, action), { env: ENV_FILES });
    const [receipt] = await receiptsFor(place, messageId);
    expect(receipt, watch.stderr).toBeDefined();
    expect(ledgerOf(place.world.gitdir)).toContain(`seen:${' 0'.repeat(paths.length)}\n`);
  }, 120_000);

  it('leaves no part of it in the ledger when an execution agent run without bubblewrap prints the files', async () => {
    const place = await places('named-none');
    const { messageId } = await dispatchTo(place, 'named-none');
    const watch = watchOnce(place, agentScript(place.world.dir, `cat ${Object.values(ENV_FILES).join(' ')} >&2; exit 1`), { env: ENV_FILES, isolation: 'none' });
    const [receipt] = await receiptsFor(place, messageId);
    expect(receipt, watch.stderr).toBeDefined();
    const ledger = ledgerOf(place.world.gitdir);
    expect(ledger).toContain('[removed: OPENAI_API_KEY_FILE]');
    expect(ledger).toContain('CertificateAuthority2026Plain');
    for (const [name, value] of Object.entries(FILE_KEYS)) expect(pieces(ledger, value), name).toEqual([]);
  }, 120_000);
});

describe('a secret field of a JSON document a variable of the environment holds', () => {
  const CLIENT_SECRET = 'GOCSPX-JsonClient4Rt8Wq2Zm';
  const REFRESH = '1//JsonRefresh7Hn3Kd9Lp';
  const ENV = {
    OAUTH_CLIENT_CONFIG: JSON.stringify({ installed: { client_id: '1234567890-abc.apps.googleusercontent.com', client_secret: CLIENT_SECRET, redirect_uris: ['http://localhost'] } }),
    GCP_SA_KEY: JSON.stringify({ type: 'authorized_user', refresh_token: REFRESH, token_uri: 'https://oauth2.googleapis.com/token' }),
  };

  it('is known alone, under a name that is no secret\'s or one that is; its other fields, and a URL where tokens are had, are not', () => {
    const values = environmentSecrets(ENV).map((secret) => secret.value);
    expect(values).toContain(CLIENT_SECRET);
    expect(values).toContain(REFRESH);
    for (const plain of ['1234567890-abc.apps.googleusercontent.com', 'http://localhost', 'https://oauth2.googleapis.com/token']) expect(values).not.toContain(plain);
  });

  it("leaves no part of it in the ledger when an execution agent run without bubblewrap prints the field from the runner's environment", async () => {
    const place = await places('json-env');
    const { messageId } = await dispatchTo(place, 'json-env');
    const action = String.raw`tr '\0' '\n' < /proc/$PPID/environ | grep -oE '"(client_secret|refresh_token)":"[^"]*"' | sed -E 's/.*:"(.*)"/field \1/' >&2; exit 1`;
    const watch = watchOnce(place, agentScript(place.world.dir, action), { env: ENV, isolation: 'none' });
    const [receipt] = await receiptsFor(place, messageId);
    expect(receipt, watch.stderr).toBeDefined();
    const ledger = ledgerOf(place.world.gitdir);
    expect(ledger).toContain('field [removed: OAUTH_CLIENT_CONFIG]');
    expect(pieces(ledger, CLIENT_SECRET)).toEqual([]);
    expect(pieces(ledger, REFRESH)).toEqual([]);
  }, 120_000);
});
