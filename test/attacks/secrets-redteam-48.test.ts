import { spawnSync } from 'node:child_process';
import { mkdirSync, renameSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { environmentCredentialPlaces } from '../../src/util/credential-files.js';
import { displayUrl, withoutUserInfo } from '../../src/util/display-url.js';
import { environmentSecrets, Scrubber } from '../../src/util/scrub.js';
import { requireBubblewrap } from '../helpers/bubblewrap.js';
import { COO, coo } from '../helpers/cli.js';
import { agentScript, dispatchTo, hostilePlaces, receiptsFor, watchOnce, type HostilePlace } from '../helpers/hostile-agent.js';
import { git, outsideTempDir, tempDir } from '../helpers/tmp.js';
import { expectRefusedInCommands, ledgerOf, pieces } from '../helpers/secret-text.js';

/**
 * "No secret ever enters the ledger", attacked again: a URL whose password holds an unencoded `#`
 * or `?`, as a password generator writes one and libpq and SQLAlchemy take it (the first `@` after
 * the colon ends it). WHATWG and git read such a URL as having no user at all and its password as a
 * fragment or query, so neither the scrubber nor the URL's display knew it.
 */
const dir = tempDir('secrets-48');
const places = hostilePlaces(dir, 'p');

/** Every run of 8 characters of `whole` that `text` still holds. */

const SECRETS = {
  DATABASE_URL: 'Xk9#qLm2Vp7zRt4w',
  REDIS_URL: 'Rd4?wN8bTq2LmZ6c',
  BACKUP_URL: 'Bk7qW#2nZ?9vLp3x',
};
const ENV = {
  DATABASE_URL: `postgresql://app:${SECRETS.DATABASE_URL}@db.internal:5432/prod`,
  REDIS_URL: `redis://default:${SECRETS.REDIS_URL}@cache.internal:6379/0`,
  BACKUP_URL: `https://backup:${SECRETS.BACKUP_URL}@backup.internal/store`,
};

describe('a password with an unencoded # or ? in a URL', () => {
  it('is known to the scrubber and not shown where the URL is; a port before a query or fragment with an @ in it is no password', () => {
    const scrubber = new Scrubber(environmentSecrets(ENV));
    for (const [name, value] of Object.entries(SECRETS)) {
      const url = ENV[name as keyof typeof ENV];
      const scrubbed = scrubber.text(`connecting to ${url} failed; password was ${value}`);
      expect(scrubbed, name).toContain(`[removed: ${name}]`);
      expect(pieces(scrubbed, value), name).toEqual([]);
      expect(pieces(displayUrl(url), value), name).toEqual([]);
      expect(pieces(withoutUserInfo(`git said: fatal: unable to access '${url}'`), value), name).toEqual([]);
    }
    expect(displayUrl(ENV.DATABASE_URL)).toBe('postgresql://db.internal:5432/prod');
    expect(environmentSecrets({ APP_URL: 'http://localhost:8080?next=me@example.com', DOCS_URL: 'https://docs.internal:8443#/users/me@example.com' })).toEqual([]);
    expect(displayUrl('https://docs.internal:8443#/users/me@example.com')).toBe('https://docs.internal:8443#/users/me@example.com');
  });

  it('given to coo clone, is in no error it prints, nor in --json (REMOTE_UNREACHABLE, nothing cloned)', () => {
    const keys = join(dir, 'clone-keys');
    expect(coo(['keygen', '--actor', 'ceo', '--out', keys]).status).toBe(0);
    for (const [name, value] of Object.entries(SECRETS)) {
      const url = `https://bot:${value}@127.0.0.1:1/ledger.git`;
      for (const flags of [[], ['--json']]) {
        const result = coo(['clone', url, join(dir, `clone-${name}`), '--trust-root', join(keys, 'ceo.pub'), ...flags]);
        expect(result.status, name).not.toBe(0);
        expect(`${result.stdout}${result.stderr}`, name).toContain('REMOTE_UNREACHABLE');
        expect(pieces(`${result.stdout}${result.stderr}`, value), name).toEqual([]);
      }
    }
  });

  it('is refused in what a writer signs when its process holds the URL (USAGE, exit 2, naming no secret), and nothing is written', () => {
    expectRefusedInCommands(dir, SECRETS, ENV, 'Rotate the database password, see http://localhost:8080?next=me@example.com, today.');
  });

  it("leaves no part of it in the ledger when an execution agent run without bubblewrap prints it from the runner's environment", async () => {
    const place = await places('env');
    const { messageId } = await dispatchTo(place, 'env');
    const action = [
      String.raw`tr '\0' '\n' < /proc/$PPID/environ > env.txt`,
      // Each URL's password as libpq reads it: up to the first @ after the user's colon.
      String.raw`sed -n -E 's#^(DATABASE_URL|REDIS_URL|BACKUP_URL)=[a-z]+://[^:]+:([^@]*)@.*$#\1 password \2#p' env.txt >&2`,
      'exit 1',
    ].join('\n');
    const watch = watchOnce(place, agentScript(place.world.dir, action), { env: ENV, isolation: 'none' });
    const [receipt] = await receiptsFor(place, messageId);
    expect(receipt, watch.stderr).toBeDefined();
    const ledger = ledgerOf(place.world.gitdir);
    for (const [name, value] of Object.entries(SECRETS)) {
      expect(ledger, name).toContain(`${name} password [removed: ${name}]`);
      expect(pieces(ledger, value), name).toEqual([]);
    }
  }, 120_000);
});

describe("the runner's signing key given as a link to a file in another folder", () => {
  it('is hidden from an execution agent under bubblewrap where it really is, as the folder the link is in is', async () => {
    requireBubblewrap("hiding the signing key's own folder");
    const place = await places('key-link');
    const vault = outsideTempDir('s48-vault-');
    const real = join(vault, 'coo.key');
    renameSync(place.keyFile, real);
    symlinkSync(real, place.keyFile);
    const { messageId } = await dispatchTo(place, 'key-link');
    // How many bytes of the key the agent could read: the scrubber knows the key, not what an agent makes of it (reversed, encoded).
    const action = `{ printf 'seen: %s\\n' "$(cat ${real} 2>/dev/null | wc -c)"; ls ${vault} 2>/dev/null | wc -l | sed 's/^/listed: /'; } >&2; exit 1`;
    const watch = watchOnce(place, agentScript(place.world.dir, action));
    const [receipt] = await receiptsFor(place, messageId);
    expect(receipt, watch.stderr).toBeDefined();
    const ledger = ledgerOf(place.world.gitdir);
    expect(ledger).toContain('seen: 0\n');
    expect(ledger).toContain('listed: 0\n');
  }, 120_000);
});

describe('the target repository an execution agent works on a worktree of', () => {
  it("has its work tree hidden under bubblewrap, from the agent and from the verification commands: an untracked .env there is not read; git works in the worktree", async () => {
    requireBubblewrap("hiding the target repository's work tree");
    // Outside the shared temporary folders, where an operator's checkout is: every sandbox empties those.
    const outside = hostilePlaces(outsideTempDir('s48-repo-'), 'r');
    const place = await outside('repo');
    const secret = 'sk_live_RepoEnv4Q9vR2mX7kLp3Zw';
    writeFileSync(join(place.repo, '.env'), `STRIPE_SECRET_KEY=${secret}\n`);
    // Where the repository is, as the worktree's .git file names it; what the agent could read of its .env, and whether git works.
    // The repository's git folder must be found there (the positive control): a sed that matched nothing would read /.env.
    const look = String.raw`repo=$(sed -n 's#^gitdir: \(.*\)/\.git/worktrees/.*#\1#p' .git); if test -n "$repo" && test -d "$repo/.git"; then printf 'WHO repo: found\n'; fi; printf 'WHO env: %s\n' "$(cat "$repo/.env" 2>/dev/null | wc -c)"; printf 'WHO git: %s\n' "$(git log -1 --format=%H)"`;
    const { messageId } = await dispatchTo(place, 'repo', { verify: [look.replaceAll('WHO', 'verification')] });
    const watch = watchOnce(place, agentScript(place.world.dir, `{ ${look.replaceAll('WHO', 'agent')}; } >&2`));
    const [receipt] = await receiptsFor(place, messageId);
    expect(receipt, watch.stderr).toBeDefined();
    const ledger = ledgerOf(place.world.gitdir);
    for (const who of ['agent', 'verification']) {
      expect(ledger, who).toContain(`${who} repo: found\n`);
      expect(ledger, who).toContain(`${who} env: 0\n`);
      expect(ledger, who).toContain(`${who} git: ${place.base}\n`);
    }
    expect(pieces(ledger, secret)).toEqual([]);
  }, 120_000);

  it("runs an agent whose command lies inside the repository (<repo>/tools/agent.sh, reading a file beside it), and hides the repository's work tree from it all the same", async () => {
    requireBubblewrap("hiding the target repository's work tree from an agent installed in it");
    const outside = hostilePlaces(outsideTempDir('s48-inside-'), 'i');
    const place = await outside('inside');
    const secret = 'sk_live_InsideEnv7Hn2Qw9Lx4Vb';
    writeFileSync(join(place.repo, '.env'), `STRIPE_SECRET_KEY=${secret}\n`);
    const tools = join(place.repo, 'tools');
    mkdirSync(tools);
    writeFileSync(join(tools, 'sibling.txt'), 'beside the agent\n');
    const { messageId } = await dispatchTo(place, 'inside');
    const agent = agentScript(tools, `{ printf 'agent sibling: %s\\n' "$(cat '${join(tools, 'sibling.txt')}')"; printf 'agent env: %s\\n' "$(cat '${join(place.repo, '.env')}' 2>/dev/null | wc -c)"; } >&2`);
    const watch = watchOnce(place, agent);
    const [receipt] = await receiptsFor(place, messageId);
    expect(receipt, watch.stderr).toBeDefined();
    const ledger = ledgerOf(place.world.gitdir);
    expect(ledger, watch.stderr).toContain('agent sibling: beside the agent\n');
    expect(ledger).toContain('agent env: 0\n');
    expect(pieces(ledger, secret)).toEqual([]);
  }, 120_000);

  it("gives the agent and the verification commands its git configuration without its remotes' credentials: a token in a remote's URL or an extra header is not there to write out in a cipher no scrubber knows", async () => {
    requireBubblewrap("the target repository's git configuration");
    const outside = hostilePlaces(outsideTempDir('s48-config-'), 'c');
    const place = await outside('config');
    const token = 'ghs_RepoRemote8Kq2Wn5Yc1Jh7TfXz';
    const header = 'glpat-RepoHeader3Vb6Nm9Qw2Er5T';
    git(['remote', 'add', 'origin', `https://x-access-token:${token}@127.0.0.1/o/r.git`], { cwd: place.repo });
    git(['config', 'http.https://127.0.0.1/.extraheader', `PRIVATE-TOKEN: ${header}`], { cwd: place.repo });
    const rot13 = (text: string): string => text.replace(/[a-z]/gi, (c) => String.fromCharCode(((c.toLowerCase().charCodeAt(0) - 97 + 13) % 26) + (c === c.toLowerCase() ? 97 : 65)));
    // The repository's configuration as git in the worktree reads it, in ROT13; and whether git works there.
    const look = String.raw`printf 'WHO config: %s\n' "$(git config --list | tr 'A-Za-z' 'N-ZA-Mn-za-m' | tr '\n' ' ')"; printf 'WHO git: %s\n' "$(git log -1 --format=%H)"`;
    const { messageId } = await dispatchTo(place, 'config', { verify: [look.replaceAll('WHO', 'verification')] });
    const watch = watchOnce(place, agentScript(place.world.dir, `{ ${look.replaceAll('WHO', 'agent')}; } >&2`));
    const [receipt] = await receiptsFor(place, messageId);
    expect(receipt, watch.stderr).toBeDefined();
    const ledger = ledgerOf(place.world.gitdir);
    for (const who of ['agent', 'verification']) {
      // What git needs of it is there: its format.
      expect(ledger, who).toMatch(new RegExp(`${who} config: [^\n]*${rot13('core.repositoryformatversion=0')}`));
      expect(ledger, who).toContain(`${who} git: ${place.base}\n`);
    }
    for (const value of [token, header]) expect(pieces(ledger, rot13(value))).toEqual([]);
  }, 120_000);
});

describe("a tool's logins the runner's environment keeps outside the home folder", () => {
  // Outside the shared temporary folders, which every sandbox sees empty anyway.
  const root = outsideTempDir('s48-logins-');
  const files: Record<string, string> = {
    'codex/auth.json': '{"OPENAI_API_KEY":"sk-proj-CodexHomeKey7Qw2Er"}',
    'claude/.credentials.json': '{"claudeAiOauth":{"accessToken":"sk-ant-oat01-ClaudeDir5Ty8"}}',
    'gh/hosts.yml': 'github.com:\n    oauth_token: gho_GhConfigDir4Kp9Lm2\n',
    'gcloud/credentials.db': 'refresh_token 1//CloudSdk6Hn3Vb8',
    'docker/config.json': '{"auths":{"r.example":{"auth":"dXNlcjpEb2NrZXJDb25maWc="}}}',
    'kube/one.yaml': 'users:\n- user:\n    token: KubeConfigTok3Zx7Cv\n',
    'pgpass': 'db:5432:*:app:PgPassFile8Nm4Qr\n',
    'gitconfig': '[http]\n\textraHeader = AUTHORIZATION: bearer GitGlobalTok2Wd6\n',
    'xdg/git/credentials': 'https://bot:XdgGitCred9Ls3Fh@git.example\n',
    'xdg/gh/hosts.yml': 'github.com:\n    oauth_token: gho_XdgGhHosts5Jk1\n',
  };
  beforeAll(() => {
    for (const [path, text] of Object.entries(files)) {
      mkdirSync(join(root, path, '..'), { recursive: true });
      writeFileSync(join(root, path), text, { mode: 0o600 });
    }
  });
  const env = {
    CODEX_HOME: join(root, 'codex'),
    CLAUDE_CONFIG_DIR: join(root, 'claude'),
    GH_CONFIG_DIR: join(root, 'gh'),
    CLOUDSDK_CONFIG: join(root, 'gcloud'),
    DOCKER_CONFIG: join(root, 'docker'),
    KUBECONFIG: `${join(root, 'kube', 'one.yaml')}:${join(root, 'kube', 'absent.yaml')}`,
    PGPASSFILE: join(root, 'pgpass'),
    GIT_CONFIG_GLOBAL: join(root, 'gitconfig'),
    XDG_CONFIG_HOME: join(root, 'xdg'),
  };

  it('are hidden from an execution agent under bubblewrap, as the home folder\'s are: CODEX_HOME, CLAUDE_CONFIG_DIR, GH_CONFIG_DIR, CLOUDSDK_CONFIG, DOCKER_CONFIG, KUBECONFIG, PGPASSFILE, GIT_CONFIG_GLOBAL and XDG_CONFIG_HOME\'s git and gh', async () => {
    requireBubblewrap('hiding the logins the environment names');
    const place = await places('logins');
    const { messageId } = await dispatchTo(place, 'logins');
    const paths = Object.keys(files).map((path) => join(root, path));
    const action = `{ printf 'seen:'; for f in ${paths.join(' ')}; do printf ' %s' "$(cat "$f" 2>/dev/null | wc -c)"; done; printf '\\n'; } >&2; exit 1`;
    const watch = watchOnce(place, agentScript(place.world.dir, action), { env });
    const [receipt] = await receiptsFor(place, messageId);
    expect(receipt, watch.stderr).toBeDefined();
    expect(ledgerOf(place.world.gitdir)).toContain(`seen:${' 0'.repeat(paths.length)}\n`);
  }, 120_000);

  it('never hide the home folder, a folder holding it, the root or a relative path a variable was pointed at', () => {
    const home = '/home/operator';
    expect(environmentCredentialPlaces({ CODEX_HOME: home, CLAUDE_CONFIG_DIR: '/', GH_CONFIG_DIR: '/home', DOCKER_CONFIG: 'docker', KUBECONFIG: '/dev/stdin' }, home)).toEqual([]);
    expect(environmentCredentialPlaces({ XDG_CONFIG_HOME: `${home}/.config`, KUBECONFIG: '/etc/kube/a:/etc/kube/b' }, home).sort()).toEqual(['/etc/kube/a', '/etc/kube/b', `${home}/.config/gcloud`, `${home}/.config/gh`, `${home}/.config/git`]);
  });

  it('leave no part of them in the ledger when an execution agent run without bubblewrap prints them: the scrubber reads them where the environment says', async () => {
    const place = await places('logins-none');
    const { messageId } = await dispatchTo(place, 'logins-none');
    const paths = ['gh/hosts.yml', 'xdg/gh/hosts.yml', 'xdg/git/credentials', 'kube/one.yaml', 'pgpass'].map((path) => join(root, path));
    const watch = watchOnce(place, agentScript(place.world.dir, `cat ${paths.join(' ')} >&2; exit 1`), { env, isolation: 'none' });
    const [receipt] = await receiptsFor(place, messageId);
    expect(receipt, watch.stderr).toBeDefined();
    const ledger = ledgerOf(place.world.gitdir);
    expect(ledger).toContain('oauth_token: [removed: gh hosts.yml]');
    expect(ledger).toContain('db:5432:*:app:[removed: .pgpass]');
    for (const secret of ['gho_GhConfigDir4Kp9Lm2', 'gho_XdgGhHosts5Jk1', 'XdgGitCred9Ls3Fh', 'KubeConfigTok3Zx7Cv', 'PgPassFile8Nm4Qr']) expect(pieces(ledger, secret), secret).toEqual([]);
  }, 120_000);
});

describe("the secrets a container is handed as files (Docker's /run/secrets, Kubernetes' service account token)", () => {
  const SECRETS_48 = { db: 'DockerSecret7Hq2Vd9Kx4Mb', kube: 'eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW06c2EifQ.KubeSaSig4Tz8' };
  /** `coo watch --once` as in a container: a /run of its own holding a Docker secret and a service account token. */
  const watchInContainer = (place: HostilePlace, agent: string, isolation: 'auto' | 'none'): { stderr: string } => {
    // Beside them a setting the folder also holds (db_host): no secret, and never learnt as one.
    const setup = 'printf %s "$1" > /run/secrets/db_password; printf %s "$2" > /run/secrets/kubernetes.io/serviceaccount/token; printf %s db-primary-01.internal > /run/secrets/db_host; shift 2; exec "$@"';
    const argv = ['--dev-bind', '/', '/', '--tmpfs', '/run', '--dir', '/run/secrets/kubernetes.io/serviceaccount', '--', '/bin/sh', '-c', setup, 'sh', SECRETS_48.db, SECRETS_48.kube,
      process.execPath, COO, 'watch', '--once', '--json', '--ledger', place.world.gitdir, '--key', place.keyFile, '--repo', place.repo, '--state-dir', place.stateDir, '--ea-command', agent, '--isolation', isolation];
    const result = spawnSync(requireBubblewrap('a container of its own'), argv, { env: { ...process.env, OPENAI_API_KEY: 'sk-hostile-test' }, encoding: 'utf8', timeout: 60_000, killSignal: 'SIGKILL' });
    return { stderr: result.stderr ?? '' };
  };
  const paths = ['/run/secrets/db_password', '/var/run/secrets/kubernetes.io/serviceaccount/token'];

  it('are hidden from an execution agent under bubblewrap', async () => {
    const place = await places('container-bwrap');
    const { messageId } = await dispatchTo(place, 'container-bwrap');
    const action = `{ printf 'seen:'; for f in ${paths.join(' ')}; do printf ' %s' "$(cat "$f" 2>/dev/null | wc -c)"; done; printf '\\n'; } >&2; exit 1`;
    const watch = watchInContainer(place, agentScript(place.world.dir, action), 'auto');
    const [receipt] = await receiptsFor(place, messageId);
    expect(receipt, watch.stderr).toBeDefined();
    expect(ledgerOf(place.world.gitdir)).toContain(`seen:${' 0'.repeat(paths.length)}\n`);
  }, 120_000);

  it('leave no part of them in the ledger when an execution agent run without bubblewrap prints them', async () => {
    const place = await places('container-none');
    const { messageId } = await dispatchTo(place, 'container-none');
    const watch = watchInContainer(place, agentScript(place.world.dir, `for f in ${[...paths, '/run/secrets/db_host'].join(' ')}; do printf 'file %s: %s\\n' "$f" "$(cat "$f")"; done >&2; exit 1`), 'none');
    const [receipt] = await receiptsFor(place, messageId);
    expect(receipt, watch.stderr).toBeDefined();
    const ledger = ledgerOf(place.world.gitdir);
    expect(ledger).toContain('file /run/secrets/db_password: [removed: container secret]');
    expect(ledger).toContain('file /run/secrets/db_host: db-primary-01.internal');
    for (const [name, value] of Object.entries(SECRETS_48)) expect(pieces(ledger, value), name).toEqual([]);
  }, 120_000);
});
