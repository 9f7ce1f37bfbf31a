import { spawnSync } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { homedir } from 'node:os';
import { basename, dirname, isAbsolute, join, resolve } from 'node:path';
import { readBounded } from './bounded-read.js';
import { realPathOr } from './real-path.js';
import { CooError } from '../errors.js';
import { displayUrl, urlCredentials, urlSecrets } from './display-url.js';
import { gitEnvironment } from './git-env.js';
import { environmentSecrets, isSecretField, isSecretName, looksSecret, MIN_SECRET_CHARS, namesNoSecret, pemSecrets, type Secret } from './scrub.js';

/**
 * Secrets the runner's machine keeps in files rather than in its environment: a provider key a
 * `codex login --with-api-key` wrote, Claude Code's tokens and settings, the Gemini CLI's `.env` and
 * login, Oracle's configuration, the forge token `gh` keeps, the passwords and tokens of
 * `~/.git-credentials`, `~/.netrc` and `~/.npmrc`,
 * the cloud and registry logins of `~/.aws`, `~/.docker`, `~/.kube`, gcloud, `~/.pypirc` and cargo,
 * the database passwords of `~/.pgpass` and `~/.my.cnf`, a Vault token, and the private keys in
 * `~/.ssh`.
 * A child the runner starts may read them where its sandbox does not hide them (and always
 * without one): the runner never handed them, so the scrubber learns them here, once, when the
 * runner starts, and a child that echoes one leaves its marker in the ledger, as it would for a
 * key it was handed. A file that is missing, not a regular file or too large is passed over.
 */

/** A credential file is small; a larger one is not what it should be there. */
const MAX_FILE_BYTES = 256 * 1024;

/**
 * A field whose value is a secret: its name says key, token, secret, password or credential, or is
 * `auth` (docker's `user:password` in base64), or the field rule of the environment's documents reads
 * it as one (isSecretField: a `client_assertion`, a `codeVerifier`).
 */
const SECRET_FIELD = /(key|token|secret|passw(or)?d|credential)|^auth$/i;
const secretField = (name: string): boolean => SECRET_FIELD.test(name) || isSecretField(name);

/** `name: value`, `name = value`, `"name": "value"`, `name value` (netrc) in any configuration text. */
const FIELD_LINE = /["']?([A-Za-z0-9_.-]+)["']?\s*(?:[:=]|\s)\s*["']?([^\s"',}]+)/g;

export interface CredentialFile {
  /** Where it is, under the home folder unless absolute. */
  readonly path: string;
  /** What it is called in a marker. */
  readonly name: string;
  /**
   * How its secrets are written: `fields` in a configuration (JSON, YAML, ini, netrc), `urls` one per
   * line, `pgpass` the last field of each `host:port:database:user:password` line, `whole` the file is
   * the token, `dotenv` variables (`NAME=value`) the tool sets in its own environment, `settings` a
   * JSON document whose `env` object holds such variables, `named` a file a variable names
   * (namedFileSecrets).
   */
  readonly kind: 'fields' | 'urls' | 'pgpass' | 'whole' | 'dotenv' | 'settings' | 'named';
}

function filesOf(env: NodeJS.ProcessEnv, home: string): CredentialFile[] {
  const codexHome = env['CODEX_HOME'] !== undefined && env['CODEX_HOME'] !== '' ? env['CODEX_HOME'] : join(home, '.codex');
  const claudeHome = env['CLAUDE_CONFIG_DIR'] !== undefined && env['CLAUDE_CONFIG_DIR'] !== '' ? env['CLAUDE_CONFIG_DIR'] : join(home, '.claude');
  return [
    { path: join(codexHome, 'auth.json'), name: 'codex auth.json', kind: 'fields' },
    { path: join(claudeHome, '.credentials.json'), name: 'claude .credentials.json', kind: 'fields' },
    // Claude Code sets the variables of its settings' `env` for itself (`ANTHROPIC_AUTH_TOKEN`, a gateway's key).
    { path: join(claudeHome, 'settings.json'), name: 'claude settings.json', kind: 'settings' },
    // Codex and the Gemini CLI load these into their environment at start: a provider key kept there is never in the runner's.
    { path: join(codexHome, '.env'), name: 'codex .env', kind: 'dotenv' },
    { path: join(home, '.gemini', '.env'), name: 'gemini .env', kind: 'dotenv' },
    { path: join(home, '.gemini', 'oauth_creds.json'), name: 'gemini oauth_creds.json', kind: 'fields' },
    // The Gemini CLI, like many tools, falls back to the home folder's own `.env`.
    { path: join(home, '.env'), name: 'home .env', kind: 'dotenv' },
    { path: join(home, '.claude.json'), name: '.claude.json', kind: 'fields' },
    { path: join(home, '.oracle', 'config.json'), name: 'oracle config.json', kind: 'fields' },
    { path: join(home, '.config', 'gh', 'hosts.yml'), name: 'gh hosts.yml', kind: 'fields' },
    { path: join(home, '.netrc'), name: '.netrc', kind: 'fields' },
    { path: join(home, '.npmrc'), name: '.npmrc', kind: 'fields' },
    { path: join(home, '.git-credentials'), name: '.git-credentials', kind: 'urls' },
    { path: join(home, '.aws', 'credentials'), name: 'aws credentials', kind: 'fields' },
    { path: join(home, '.docker', 'config.json'), name: 'docker config.json', kind: 'fields' },
    { path: join(home, '.kube', 'config'), name: 'kube config', kind: 'fields' },
    { path: join(home, '.config', 'gcloud', 'application_default_credentials.json'), name: 'gcloud credentials', kind: 'fields' },
    { path: join(home, '.pypirc'), name: '.pypirc', kind: 'fields' },
    { path: join(home, '.cargo', 'credentials.toml'), name: 'cargo credentials', kind: 'fields' },
    { path: join(home, '.cargo', 'credentials'), name: 'cargo credentials', kind: 'fields' },
    { path: join(home, '.my.cnf'), name: '.my.cnf', kind: 'fields' },
    { path: join(home, '.pgpass'), name: '.pgpass', kind: 'pgpass' },
    { path: join(home, '.vault-token'), name: '.vault-token', kind: 'whole' },
    ...movedLoginFiles(env, home),
    ...environmentSecretFiles(env),
    ...containerSecretFiles(),
  ];
}

/**
 * Where a container is handed its secrets as files, whatever its environment says: Docker's and
 * Compose's secrets (`/run/secrets/NAME`) and Kubernetes' service account, whose token calls the
 * cluster's API (mounted in every pod unless turned off). A sandbox hides them (util/bubblewrap.ts).
 */
export const CONTAINER_SECRET_FOLDERS = ['/run/secrets', '/var/run/secrets'];

/** How many files of a container's secret folder are looked at. */
const MAX_CONTAINER_SECRETS = 256;

/**
 * Whether a container secret's file is named as a secret (`db_password`, `api-key.txt`, `tls.key`),
 * as a field is (isSecretField, its extension aside), or by a key's extension. A folder of secrets
 * holds settings too (`db_host`, `db_user`): learnt as secrets, their values (a host's name) would be
 * cut out of every text and refused in every command that names them.
 */
function namesContainerSecret(name: string): boolean {
  return /\.(?:key|pem|p12|pfx|jwt|token)$/i.test(name) || isSecretField(name.replace(/\.[A-Za-z0-9]{1,5}$/, ''));
}

/** The files of CONTAINER_SECRET_FOLDERS the scrubber reads: each one named as a secret, as a variable's named file is, and the service account's token. */
function containerSecretFiles(): CredentialFile[] {
  const files: CredentialFile[] = [];
  for (const folder of CONTAINER_SECRET_FOLDERS) {
    files.push({ path: join(folder, 'kubernetes.io', 'serviceaccount', 'token'), name: 'kubernetes service account token', kind: 'whole' });
    try {
      for (const name of readdirSync(folder).slice(0, MAX_CONTAINER_SECRETS)) if (namesContainerSecret(name)) files.push({ path: join(folder, name), name: 'container secret', kind: 'named' });
    } catch {
      // no such folder: not in a container that is handed secrets
    }
  }
  return files;
}

/** A device or descriptor (`/dev/fd/3`, `/proc/self/fd/3`): no file to hide or read, and bubblewrap cannot bind over it. */
const DEVICE = /^\/(?:dev|proc|sys)(?:\/|$)/;

/**
 * The variables that move a tool's logins away from the home folder's places: each names a folder or a
 * file (`list`: a `:`-parted list of files), which a sandbox hides (environmentCredentialPlaces), and
 * `read` the login file there that the scrubber reads (movedLoginFiles); `xdg`, the tool's folder under
 * `XDG_CONFIG_HOME` when that is set; `within`, the files of the named folder that are the places, when the
 * folder holds the tool itself too (CARGO_HOME's bin/ and registry/, which a Rust image keeps in
 * /usr/local/cargo): those files alone are hidden and read, never the folder. Codex's and Claude Code's folders are read by credentialFiles.
 * One table for both, so what is hidden and what is read cannot drift apart.
 */
const MOVED_LOGINS: ReadonlyArray<{ readonly variable: string | null; readonly list?: true; readonly xdg?: string; readonly within?: readonly string[]; readonly read?: (place: string) => CredentialFile }> = [
  { variable: 'CODEX_HOME' },
  { variable: 'CLAUDE_CONFIG_DIR' },
  { variable: 'GH_CONFIG_DIR', xdg: 'gh', read: (folder) => ({ path: join(folder, 'hosts.yml'), name: 'gh hosts.yml', kind: 'fields' }) },
  { variable: 'CLOUDSDK_CONFIG', xdg: 'gcloud', read: (folder) => ({ path: join(folder, 'application_default_credentials.json'), name: 'gcloud credentials', kind: 'fields' }) },
  { variable: 'DOCKER_CONFIG', read: (folder) => ({ path: join(folder, 'config.json'), name: 'docker config.json', kind: 'fields' }) },
  { variable: 'KUBECONFIG', list: true, read: (path) => ({ path, name: 'kube config', kind: 'fields' }) },
  { variable: 'PGPASSFILE', read: (path) => ({ path, name: '.pgpass', kind: 'pgpass' }) },
  { variable: 'NPM_CONFIG_USERCONFIG', read: (path) => ({ path, name: '.npmrc', kind: 'fields' }) },
  { variable: 'npm_config_userconfig', read: (path) => ({ path, name: '.npmrc', kind: 'fields' }) },
  { variable: 'AWS_CONFIG_FILE', read: (path) => ({ path, name: 'aws config', kind: 'fields' }) },
  { variable: 'AZURE_CONFIG_DIR' },
  { variable: 'NETRC', read: (path) => ({ path, name: '.netrc', kind: 'fields' }) },
  { variable: 'CARGO_HOME', within: ['credentials', 'credentials.toml'], read: (path) => ({ path, name: 'cargo credentials', kind: 'fields' }) },
  { variable: 'GNUPGHOME' },
  // git's credential store in the XDG folder, where `git credential-store` writes when ~/.git-credentials is not there.
  { variable: null, xdg: 'git', read: (folder) => ({ path: join(folder, 'credentials'), name: 'git credentials', kind: 'urls' }) },
];

/** Each place MOVED_LOGINS names in `env` (absolute, no device), with the entry that names it. */
function movedLogins(env: NodeJS.ProcessEnv): Array<{ readonly place: string; readonly login: (typeof MOVED_LOGINS)[number] }> {
  const xdg = env['XDG_CONFIG_HOME'];
  return MOVED_LOGINS.flatMap((login) => {
    const value = login.variable === null ? undefined : env[login.variable];
    const given = value === undefined ? [] : login.list === true ? value.split(':') : [value];
    const places = [...given, ...(login.xdg === undefined || xdg === undefined ? [] : [join(xdg, login.xdg)])].filter((place) => isAbsolute(place) && !DEVICE.test(place));
    return places.flatMap((place) => login.within?.map((file) => join(place, file)) ?? [place]).map((place) => ({ place, login }));
  });
}

/**
 * The login files of the tools whose folders the environment moves away from the home folder's
 * (environmentCredentialPlaces, which a sandbox hides): what an agent run without bubblewrap reads
 * there, the scrubber knows. Absolute paths only.
 */
function movedLoginFiles(env: NodeJS.ProcessEnv, home: string): CredentialFile[] {
  const files = movedLogins(env).flatMap(({ place, login }) => (login.read === undefined ? [] : [login.read(place)]));
  // With no XDG_CONFIG_HOME, git's credential store is in the home folder's `.config`.
  if (env['XDG_CONFIG_HOME'] === undefined || !isAbsolute(env['XDG_CONFIG_HOME'])) files.push({ path: join(home, '.config', 'git', 'credentials'), name: 'git credentials', kind: 'urls' });
  return files;
}

/**
 * The files the environment names as holding a secret: a `*_FILE` variable beside a secret's name
 * (`POSTGRES_PASSWORD_FILE`, `OPENAI_API_KEY_FILE`: how docker's secrets and many images hand one
 * over), and Google's service account key (`GOOGLE_APPLICATION_CREDENTIALS`); an absolute path
 * only. Such a file lies outside the home folder (`/run/secrets/…`), where a sandbox that hides
 * only the home folder's credentials leaves it in view: bubblewrap hides these too.
 */
export function environmentSecretFiles(env: NodeJS.ProcessEnv): CredentialFile[] {
  const files: CredentialFile[] = [];
  for (const [name, value] of Object.entries(env)) {
    if (value === undefined || !isAbsolute(value) || DEVICE.test(value)) continue;
    if (name === 'GOOGLE_APPLICATION_CREDENTIALS' || (/_FILE$/i.test(name) && isSecretName(name.slice(0, -'_FILE'.length)))) files.push({ path: value, name, kind: 'named' });
  }
  return files;
}

/**
 * The places the environment moves a tool's logins to, away from the home folder's ones a sandbox hides
 * (util/bubblewrap.ts CREDENTIALS): Codex's and Claude Code's folders (whose logins the scrubber reads,
 * credentialFiles), the GitHub CLI's, gcloud's and Docker's folders, each file of a kubeconfig list,
 * libpq's password file, npm's user configuration, AWS's config file, Azure's and GnuPG's folders, cargo's credentials files,
 * a netrc file, and the git, gh and gcloud folders of `XDG_CONFIG_HOME`. git's own configuration files
 * (GIT_CONFIG_GLOBAL's, GIT_CONFIG_SYSTEM's and what they include) are gitConfigFiles'. Absolute paths only, never `/`, a device, or one that holds
 * the home folder (a variable pointed there would hide it whole).
 */
export function environmentCredentialPlaces(env: NodeJS.ProcessEnv, home = homedir()): string[] {
  const root = resolve(home);
  return [...new Set(movedLogins(env).map(({ place }) => resolve(place)))].filter((path) => path !== '/' && root !== path && !root.startsWith(`${path}/`));
}

/**
 * Where git's own credential helpers are told to keep what they hold, by any configuration git reads where
 * `gitArgs` point it (`--git-dir=…`, `-C …`; none: no repository): the file of `store --file PATH` (`store`
 * true: its lines are URLs with their credentials) and the socket of `cache --socket PATH`, whose daemon
 * hands its tokens to whoever connects, for every URL (`credential.helper`, `credential.<url>.helper`). A
 * sandbox hides them (util/bubblewrap.ts) and the scrubber reads a store's (gitRemoteSecrets); their
 * default places are among the home folder's credentials and a sandbox's sockets. A helper is read as git
 * runs it (`store`, `!git credential-store …`, `/usr/lib/git-core/git-credential-store …`), a path as the
 * shell git runs it with would (`~/`, `$HOME/`, `${HOME}/` are the home folder); a relative one is passed
 * over. A lookup git fails (a configuration it refuses, no answer in time, too long a list) gives none, or
 * with `failClosed` (a sandbox's) a coded RUNNER_CONFIG error.
 */
export function credentialHelperPlaces(gitArgs: readonly string[], { home = homedir(), failClosed = false }: { readonly home?: string; readonly failClosed?: boolean } = {}): Array<{ readonly path: string; readonly store: boolean }> {
  const listed = spawnSync('git', [...gitArgs, 'config', '--null', '--get-regexp', String.raw`^credential\..*helper$`], { cwd: '/', encoding: 'utf8', env: gitEnvironment(), timeout: 10_000, maxBuffer: 1024 * 1024 });
  // Exit 1: no helper is configured.
  if (listed.status === 1 && listed.error === undefined) return [];
  if (listed.status !== 0 || listed.error !== undefined || typeof listed.stdout !== 'string') {
    if (failClosed) throw gitConfigUnread("the places git's credential helpers keep credentials in", listed);
    return [];
  }
  const places: Array<{ readonly path: string; readonly store: boolean }> = [];
  for (const entry of listed.stdout.split('\0')) {
    const words = (entry.slice(entry.indexOf('\n') + 1).match(/"[^"]*"|'[^']*'|\S+/g) ?? []).map((word) => word.replace(/^(["'])(.*)\1$/, '$2'));
    // As git runs a helper: `!` a shell command (`!git credential-store --file X`), an absolute path a program
    // (`/usr/lib/git-core/git-credential-store`), else `git credential-<name>`.
    if (words[0]?.startsWith('!') === true) words[0] = words[0].slice(1);
    if (words[0] === '') words.shift();
    if (words[0] !== undefined && basename(words[0]) === 'git' && /^credential-(store|cache)$/.test(words[1] ?? '')) words.shift();
    const named = words[0] === undefined ? undefined : isAbsolute(words[0]) || words[0].startsWith('credential-') || words[0].startsWith('git-credential-') ? /^(?:git-)?credential-(store|cache)$/.exec(basename(words[0]))?.[1] : words[0];
    if (named !== 'store' && named !== 'cache') continue;
    const option = named === 'store' ? '--file' : '--socket';
    words.forEach((word, at) => {
      const value = word === option ? words[at + 1] : word.startsWith(`${option}=`) ? word.slice(option.length + 1) : undefined;
      if (value === undefined) return;
      // The shell git runs the helper with reads `~/`, `$HOME/` and `${HOME}/` as the home folder.
      const homeRelative = /^(?:~|\$HOME|\$\{HOME\})\/(.*)$/.exec(value);
      const path = homeRelative === null ? value : join(home, homeRelative[1]!);
      if (isAbsolute(path) && !DEVICE.test(path)) places.push({ path: resolve(path), store: named === 'store' });
    });
  }
  return places;
}

/** The coded error for a git configuration lookup a sandbox needs that failed: no sandbox starts without knowing what to hide. */
function gitConfigUnread(what: string, listed: ReturnType<typeof spawnSync>): CooError {
  const code = (listed.error as NodeJS.ErrnoException | undefined)?.code;
  const why = code === 'ETIMEDOUT' ? 'no answer within 10 s' : code === 'ENOBUFS' ? 'more than it may print' : code ?? (listed.signal === null ? `git exited ${listed.status ?? '?'}: ${String(listed.stderr ?? '').trim().split('\n', 1)[0]}` : `git ended by ${listed.signal}`);
  return new CooError('RUNNER_CONFIG', `cannot list ${what} (${why}), which a sandbox must hide: nothing was started; fix git's configuration and start again`);
}

/**
 * The files git reads a repository's configuration from (git-config(1), FILES), as `listing` shows them (the
 * output of `git config --list --show-origin --includes -z` for `gitdir`, or for no repository): the system's
 * (GIT_CONFIG_SYSTEM's, also under GIT_CONFIG_NOSYSTEM; else /etc/gitconfig unless GIT_CONFIG_NOSYSTEM), the user's (GIT_CONFIG_GLOBAL, else both places, also before
 * they exist), the repository's own `config` and `config.worktree`, every file that held a setting, and every file
 * an `include.path` or `includeIf.*.path` names whatever its condition (a `gitdir:~/personal/` include is read
 * once the repository is there, and another repository's is not this one's), also one that is empty or not made
 * yet. One rule for a sandbox, which hides them (gitConfigFiles), and a remote ledger's watch on its origin
 * (remote/git-remote.ts), which stamps them.
 */
export function configFilesListed(listing: string, gitdir: string | undefined, env: NodeJS.ProcessEnv = process.env): string[] {
  const home = env['HOME'] ?? '';
  const files = gitdir === undefined ? [] : [join(gitdir, 'config'), join(gitdir, 'config.worktree')];
  // GIT_CONFIG_SYSTEM's file even under GIT_CONFIG_NOSYSTEM: a git run without that variable reads it.
  if (env['GIT_CONFIG_SYSTEM'] !== undefined) files.push(env['GIT_CONFIG_SYSTEM']);
  else if (env['GIT_CONFIG_NOSYSTEM'] === undefined) files.push('/etc/gitconfig');
  if (env['GIT_CONFIG_GLOBAL'] !== undefined) files.push(env['GIT_CONFIG_GLOBAL']);
  else files.push(join(env['XDG_CONFIG_HOME'] ?? join(home, '.config'), 'git', 'config'), join(home, '.gitconfig'));
  // Entries of `--show-origin -z`: the origin, then the name, a line end and the value.
  const listed = listing.split('\0');
  for (let i = 0; i + 1 < listed.length; i += 2) {
    // A setting of a file, or of the command line or environment (GIT_CONFIG_COUNT), whose includes git reads too.
    const file = listed[i]!.startsWith('file:') ? resolve(listed[i]!.slice('file:'.length)) : null;
    if (file !== null) files.push(file);
    const entry = listed[i + 1]!;
    const cut = entry.indexOf('\n');
    if (cut < 0 || !/^include(if\..*)?\.path$/i.test(entry.slice(0, cut))) continue;
    const named = entry.slice(cut + 1);
    // As git reads an included path: `~/` from HOME, a relative one from the folder of the file that names it.
    files.push(named.startsWith('~/') ? join(home, named.slice(2)) : resolve(file === null ? process.cwd() : dirname(file), named));
  }
  return [...new Set(files.map((file) => resolve(file)))];
}

/**
 * The files git's configuration is read from besides the repository's own `config`, which a sandbox hides
 * (util/bubblewrap.ts), as configFilesListed has them for `gitdir` or for no repository: the system's, the
 * user's, and every file an `include.path` or `includeIf` of theirs, `GIT_CONFIG_COUNT`'s or the repository's
 * names (`~/.gitconfig` including `~/.gitconfig-work`, whose `http.extraHeader` holds a token), active or not;
 * the scrubber learns the secrets of those git reads through git (gitRemoteSecrets). The repository's own
 * `config` is not listed (a sandbox reads a copy without credentials in its place). When git cannot say (a
 * configuration it refuses, no answer in time, too long a list) a coded RUNNER_CONFIG error: no sandbox starts.
 */
export function gitConfigFiles(gitdir?: string): string[] {
  const listed = spawnSync('git', [...(gitdir === undefined ? [] : [`--git-dir=${gitdir}`]), 'config', '--list', '--show-origin', '--includes', '--null'], { cwd: '/', encoding: 'utf8', env: gitEnvironment(), timeout: 10_000, maxBuffer: 4 * 1024 * 1024 });
  if (listed.status !== 0 || listed.error !== undefined) throw gitConfigUnread("the files git's configuration is read from", listed);
  const own = gitdir === undefined ? null : realPathOr(resolve(gitdir, 'config'));
  // A folder is no configuration git reads (an include naming one is an error): never hidden in its name.
  return configFilesListed(listed.stdout, gitdir).filter((path) => !DEVICE.test(path) && realPathOr(path) !== own && !isFolder(path));
}

/** Whether `path` is a folder. */
function isFolder(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}

/** A private key file's armor: OpenSSH's, PEM's (`RSA`, `EC`), PKCS#8's (`ENCRYPTED`). A PuTTY `.ppk` has none and is not read. */
const PRIVATE_KEY_ARMOR = /^-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----$/m;

/** How many files of `~/.ssh` are looked at: a folder of keys is small. */
const MAX_SSH_FILES = 256;

/**
 * The private keys in `~/.ssh` (any file there with a private key's armor, whatever it is named):
 * the base64 body whole, and each of its lines but the first, as `cat` or `sed 1d` would print them.
 * The first line is the key's header and the start of its public half, the same for many keys (every
 * unencrypted ed25519 key of OpenSSH): as a secret it would be cut out of every text that shows one.
 */
function sshKeySecrets(home: string): string[] {
  const folder = join(home, '.ssh');
  let names: string[];
  try {
    names = readdirSync(folder).slice(0, MAX_SSH_FILES);
  } catch {
    return [];
  }
  const values: string[] = [];
  for (const name of names) {
    const read = readBounded(join(folder, name), { maxBytes: MAX_FILE_BYTES, follow: true });
    if (read.kind !== 'file') continue;
    const text = read.bytes.toString('utf8');
    if (!PRIVATE_KEY_ARMOR.test(text)) continue;
    const lines = text.split(/\r?\n/).filter((line) => line !== '' && !line.startsWith('-----') && !/^[A-Za-z-]+: /.test(line));
    values.push(lines.join(''), ...lines.slice(1));
  }
  return values;
}

/**
 * The password of each `host:port:database:user:password` line, as libpq reads it (`\:` and `\\`
 * escaped) and as the file writes it; comment lines left out.
 */
function pgpassSecrets(text: string): string[] {
  const out: string[] = [];
  for (const line of text.split(/\r?\n/)) {
    if (line.startsWith('#')) continue;
    let field = 0;
    let value = '';
    for (let at = 0; at < line.length && field < 4; at += 1) {
      if (line[at] === '\\') {
        at += 1;
      } else if (line[at] === ':') {
        field += 1;
        if (field === 4) value = line.slice(at + 1);
      }
    }
    if (field === 4) out.push(value, value.replace(/\\(.)/g, '$1'));
  }
  return out;
}

/** The string values of secret fields in a JSON document, at any depth: a value whose own field names it a secret. */
function jsonSecrets(value: unknown, field: string, out: string[]): void {
  if (typeof value === 'string') {
    if (secretField(field)) out.push(...(namesNoSecret(field, value) ? urlCredentials(value.trim()) : [value, ...basicAuthPassword(field, value)]));
  } else if (Array.isArray(value)) {
    for (const item of value) jsonSecrets(item, field, out);
  } else if (value !== null && typeof value === 'object') {
    for (const [key, item] of Object.entries(value)) jsonSecrets(item, key, out);
  }
}

/** The password of docker's `auth` field, base64 of `user:password`: a child that decodes it prints the password alone. */
function basicAuthPassword(field: string, value: string): string[] {
  if (field.toLowerCase() !== 'auth' || !/^[A-Za-z0-9+/]+={0,2}$/.test(value)) return [];
  const basic = decodedBasic(value);
  return basic === null ? [] : [basic.password];
}

/** What a basic credential's base64 holds, `user:password` and its password, when it decodes to printable text with a colon. */
function decodedBasic(token: string): { readonly whole: string; readonly password: string } | null {
  const decoded = Buffer.from(token, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  return colon < 0 || /[^\x20-\x7e]/.test(decoded) ? null : { whole: decoded, password: decoded.slice(colon + 1) };
}

/** The secret values `text` holds: as JSON when it parses, else line by line as a configuration file. */
function fieldSecrets(text: string): string[] {
  const out: string[] = [];
  try {
    jsonSecrets(JSON.parse(text), '', out);
    return out;
  } catch {
    // Not JSON: YAML, netrc, an ini file.
  }
  for (const line of text.split('\n')) {
    for (const match of line.matchAll(FIELD_LINE)) if (secretField(match[1]!)) out.push(...(namesNoSecret(match[1]!, match[2]!) ? urlCredentials(match[2]!.trim()) : [match[2]!]));
  }
  return out;
}

/**
 * The secrets of a `.env` file as a dotenv loader reads it (`NAME=value`, `export NAME=value`, the
 * value quoted or not, a comment after an unquoted one), by the rule of the environment's own
 * secrets (environmentSecrets): a key under a secret's name, a URL's credentials, a connection
 * string's password.
 */
function dotenvSecrets(text: string): Found[] {
  return environmentSecrets(dotenvVariables(text));
}

/** A value a credential file holds, `guessed` as the rule that found it says (Secret.guessed): a name=value is guessed alike wherever it is read. */
type Found = { readonly value: string; readonly guessed?: boolean };

/** The variables a dotenv loader sets from `text`, each value without its quotes. */
function dotenvVariables(text: string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const line of text.split(/\r?\n/)) {
    const entry = /^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_.-]*)\s*=\s*(.*)$/.exec(line);
    if (entry === null) continue;
    const raw = entry[2]!.trim();
    const quoted = /^(["'`])(.*)\1$/.exec(raw);
    env[entry[1]!] = quoted === null ? raw.replace(/\s+#.*$/, '') : quoted[2]!;
  }
  return env;
}

/**
 * The secrets of the variables a settings document's `env` object sets (Claude Code's
 * `settings.json`), by the environment's rule; its other fields name programs and rules, not secrets.
 */
function settingsSecrets(text: string): Found[] {
  let env: unknown;
  try {
    env = (JSON.parse(text) as { env?: unknown } | null)?.env;
  } catch {
    return [];
  }
  if (env === null || typeof env !== 'object' || Array.isArray(env)) return [];
  const variables = Object.fromEntries(Object.entries(env).filter((entry): entry is [string, string] => typeof entry[1] === 'string'));
  return environmentSecrets(variables);
}

/** A file a variable names: the token when it is one line (a docker secret), else a configuration's secret fields (JSON, ini). */
function namedFileSecrets(text: string): string[] {
  const token = text.trim();
  return token.includes('\n') || token.startsWith('{') ? fieldSecrets(text) : [token];
}

/** The secrets in the credential files of the home folder (and of CODEX_HOME and CLAUDE_CONFIG_DIR when set). */
export function credentialFileSecrets(env: NodeJS.ProcessEnv = process.env, home: string = homedir()): Secret[] {
  const secrets: Secret[] = [];
  for (const file of filesOf(env, home)) {
    const read = readBounded(file.path, { maxBytes: MAX_FILE_BYTES, follow: true });
    if (read.kind !== 'file') continue;
    const text = read.bytes.toString('utf8');
    const found: Found[] =
      file.kind === 'urls' ? urlSecrets(text.split('\n').map((line) => line.trim()), file.name, 0)
      : file.kind === 'dotenv' ? dotenvSecrets(text)
      : file.kind === 'settings' ? settingsSecrets(text)
      : (file.kind === 'pgpass' ? pgpassSecrets(text) : file.kind === 'whole' ? [text.trim()] : file.kind === 'named' ? namedFileSecrets(text) : fieldSecrets(text)).map((value) => ({ value }));
    // A private key found by its armor anywhere in the file, as its reader may hold it: a `.env` value quoted over several lines, a YAML block.
    const given = new Set([...found.filter((each) => each.guessed !== true).flatMap((each) => pemSecrets(each.value) ?? [each.value]), ...(pemSecrets(text) ?? [])]);
    const guessed = new Set(found.filter((each) => each.guessed === true).flatMap((each) => pemSecrets(each.value) ?? [each.value]));
    for (const value of given) if (looksSecret(value)) secrets.push({ name: file.name, value });
    for (const value of guessed) if (!given.has(value) && looksSecret(value)) secrets.push({ name: file.name, value, guessed: true });
  }
  for (const value of new Set(sshKeySecrets(home))) if (value.length >= MIN_SECRET_CHARS) secrets.push({ name: 'ssh private key', value });
  return secrets;
}

/** A setting a tool keeps a password or token in, by its name's end; git reads URL_CONFIG as a POSIX regular expression: plain groups only. */
const SECRET_SETTING = String.raw`\.[a-z0-9-]*(pass|passwd|password|token|secret)`;

/**
 * The URLs in git's configuration: remotes' fetch and push URLs, the bases `url.<base>.insteadOf`
 * rewrites to, and the proxies git goes through; and the settings a tool keeps a password or token
 * in (`sendemail.smtpPass`, `github.token`, `hub.oauthToken`), git lower-casing their names.
 */
const URL_CONFIG = String.raw`^(remote\..*\.(url|pushurl|proxy)|url\..*\.(insteadof|pushinsteadof)|http\.(.*\.)?(extraheader|proxy)|.*${SECRET_SETTING})$`;
const SECRET_CONFIG = new RegExp(`${SECRET_SETTING}$`);

/**
 * The credential in a header git is told to send (`http.<url>.extraHeader`, as actions/checkout
 * writes `AUTHORIZATION: basic <base64 of x-access-token:TOKEN>`, or `PRIVATE-TOKEN: TOKEN`): the
 * header's value, the token after an auth scheme (`basic`, `bearer`, `token`), and a basic
 * credential's password decoded.
 */
function headerCredentials(header: string): string[] {
  const colon = header.indexOf(':');
  if (colon < 0) return [];
  const value = header.slice(colon + 1).trim();
  const scheme = /^(basic|bearer|token)\s+(\S+)$/i.exec(value);
  if (scheme === null) return [value];
  const token = scheme[2]!;
  if (scheme[1]!.toLowerCase() !== 'basic') return [value, token];
  const basic = decodedBasic(token);
  return [value, token, ...(basic === null ? [] : [basic.whole, basic.password])];
}

/**
 * The credentials in the URLs git's configuration gives a repository (its own, and the user's and
 * the system's): a token in a remote's user info (`https://x-access-token:TOKEN@host/…`) or query
 * that `git remote -v` in an attempt's worktree prints for anyone who asks, in a header it is
 * told to send (`http.extraHeader`, headerCredentials) and in the URL of a proxy it goes through
 * (`http.proxy`, `http.<url>.proxy`, `remote.<name>.proxy`), and a password or token a tool keeps in
 * a setting of its own (`sendemail.smtpPass`, `github.token`), which `git config -l` prints; and, with `helpers`
 * (a runner, once at start), what git's credential helpers give for each http(s) remote
 * (credentialHelperSecrets). A folder that is no git repository gives none.
 */
export function gitRemoteSecrets(folders: readonly string[], { helpers = true }: { readonly helpers?: boolean } = {}): Secret[] {
  const secrets: Secret[] = [];
  const asked: CredentialQuery[] = [];
  for (const folder of folders) {
    const listed = spawnSync('git', ['-C', folder, 'config', '--null', '--get-regexp', URL_CONFIG], { encoding: 'utf8', env: gitEnvironment(), timeout: 10_000, maxBuffer: 1024 * 1024 });
    if (listed.status !== 0 || typeof listed.stdout !== 'string') continue;
    for (const entry of listed.stdout.split('\0')) {
      const newline = entry.indexOf('\n');
      if (newline < 0) continue;
      const name = entry.slice(0, newline);
      // `core.askPass` names the program git asks for a password, not one: as a secret its path would be cut out of every text.
      if (name === 'core.askpass') continue;
      if (SECRET_CONFIG.test(name)) {
        const value = entry.slice(newline + 1).trim();
        if (looksSecret(value)) secrets.push({ name: 'git config secret', value });
        continue;
      }
      if (name.endsWith('.extraheader')) {
        for (const value of headerCredentials(entry.slice(newline + 1))) if (value.length >= MIN_SECRET_CHARS) secrets.push({ name: 'git http header', value });
        continue;
      }
      if (name.endsWith('.proxy')) {
        // A proxy may be written without its scheme (`user:PASSWORD@proxy:3128`), which git reads as http.
        const proxy = entry.slice(newline + 1).trim();
        secrets.push(...urlSecrets([/^[a-z][a-z0-9+.-]*:\/\//i.test(proxy) ? proxy : `http://${proxy}`], 'git proxy credentials', MIN_SECRET_CHARS));
        continue;
      }
      // A remote's URL is its value; a rewrite's base stands in its name (`url.<base>.insteadof`).
      const url = name.startsWith('url.') ? name.slice(4, name.lastIndexOf('.')) : entry.slice(newline + 1);
      secrets.push(...urlSecrets([url], 'git remote credentials', MIN_SECRET_CHARS));
      if (helpers && !name.startsWith('url.')) asked.push({ url, gitArgs: ['-C', folder], askpass: false });
    }
  }
  // What a `store` helper keeps in a file of its own, for every host, not only the remotes' (which git's helpers are asked for below).
  for (const folder of folders) {
    for (const place of credentialHelperPlaces(['-C', folder])) {
      const read = place.store ? readBounded(place.path, { maxBytes: MAX_FILE_BYTES, follow: true }) : null;
      if (read?.kind !== 'file') continue;
      secrets.push(...urlSecrets(read.bytes.toString('utf8').split('\n').map((line) => line.trim()), 'git credential store', MIN_SECRET_CHARS));
    }
  }
  return [...secrets, ...credentialHelperSecrets(asked)];
}

/** Where git is asked for a URL's credentials, and whether GIT_ASKPASS (or SSH_ASKPASS) may be run for them. */
export interface CredentialQuery {
  readonly url: string;
  /** Where git runs: `--git-dir DIR` or `-C DIR`, so the repository's own credential helpers count. */
  readonly gitArgs: readonly string[];
  /**
   * Only for a remote the runner itself fetches from and pushes to: its git runs GIT_ASKPASS at its
   * first fetch anyway. For any other URL a prompt program is not run (it may ask a person).
   */
  readonly askpass: boolean;
}

/** How long git and a credential helper (or GIT_ASKPASS) may take to answer for one URL. */
export const CREDENTIAL_FILL_MS = 10_000;

/** The fields of `git credential fill`'s answer that are secrets (a user name only when it looks like a token). */
const CREDENTIAL_FIELD = /^(password|oauth_refresh_token|authtype_credential|credential)$/;

/**
 * The secrets git's credential helpers (the user's, the system's, the repository's own) and, where
 * asked, GIT_ASKPASS hand git for each http(s) URL: `git credential fill`, once, when the runner
 * starts, with no terminal to prompt on. A token only they know reaches a child that runs the same
 * helper, or git's messages, as one the runner handed it would; the scrubber learns it here. A URL
 * no helper has credentials for gives none (git says it cannot prompt). A helper or prompt program
 * that does not answer in time, or kills git, fails the start closed (RUNNER_CONFIG): the runner
 * would not know what it hands out.
 */
export function credentialHelperSecrets(queries: readonly CredentialQuery[], timeoutMs = CREDENTIAL_FILL_MS): Secret[] {
  const secrets: Secret[] = [];
  const seen = new Set<string>();
  for (const query of queries) {
    if (!/^https?:\/\//i.test(query.url) || seen.has(JSON.stringify(query))) continue;
    seen.add(JSON.stringify(query));
    const noPrompt = query.askpass ? {} : { GIT_ASKPASS: '' };
    const filled = spawnSync('git', [...query.gitArgs, 'credential', 'fill'], {
      input: `url=${query.url}\n\n`,
      encoding: 'utf8',
      env: gitEnvironment({ GIT_TERMINAL_PROMPT: '0', SSH_ASKPASS_REQUIRE: 'never', GCM_INTERACTIVE: 'never', ...noPrompt }),
      timeout: timeoutMs,
      killSignal: 'SIGKILL',
      maxBuffer: 64 * 1024,
    });
    const why = filled.error !== undefined ? (filled.error as NodeJS.ErrnoException).code ?? filled.error.message : filled.signal !== null ? `git ended by ${filled.signal}` : null;
    if (why !== null) {
      throw new CooError(
        'RUNNER_CONFIG',
        `cannot learn the credentials git's helpers${query.askpass ? ' and GIT_ASKPASS' : ''} give for ${displayUrl(query.url)} (${why === 'ETIMEDOUT' ? `no answer within ${timeoutMs / 1000} s` : why}): the runner must know every secret git may hand out before it starts work, so nothing was claimed; fix the credential helper or prompt program, or remove it for this URL`,
      );
    }
    if (filled.status !== 0) continue;
    for (const line of filled.stdout.split('\n')) {
      const equals = line.indexOf('=');
      if (equals < 0) continue;
      const field = line.slice(0, equals);
      const value = line.slice(equals + 1);
      if (value.length >= MIN_SECRET_CHARS && (CREDENTIAL_FIELD.test(field) || (field === 'username' && looksSecret(value)))) secrets.push({ name: 'git credential helper', value });
    }
  }
  return secrets;
}
