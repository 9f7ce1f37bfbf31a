import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, realpathSync, renameSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createAttemptWorktree, writeSandboxConfig } from '../../src/dispatch/worktree.js';
import { credentialFileSecrets, gitRemoteSecrets } from '../../src/util/credential-files.js';
import { bwrapArgs, requireGitPlacesListed, type BwrapLayout, type Repository } from '../../src/util/bubblewrap.js';
import { CooError } from '../../src/errors.js';
import { requireBubblewrap } from '../helpers/bubblewrap.js';
import { git, outsideTempDir } from '../helpers/tmp.js';

/**
 * What an execution agent's sandbox lets it read of the places around its target repository
 * (util/bubblewrap.ts repositoryLayout, util/credential-files.ts MOVED_LOGINS): a `--repo` that is a
 * submodule or a linked worktree, git's configuration files the environment names, and the runner's
 * own process. Test tokens only, made up here.
 */

const root = outsideTempDir('secrets-redteam-54-');

afterEach(() => {
  vi.unstubAllEnvs();
});

/** A repository with one commit, an untracked .env and a remote whose URL carries `token`. */
function repositoryAt(folder: string, token: string): string {
  mkdirSync(folder, { recursive: true });
  git(['init', '-q', '-b', 'main'], { cwd: folder });
  writeFileSync(join(folder, 'README'), `${folder}\n`);
  git(['add', '-A'], { cwd: folder });
  git(['commit', '-q', '-m', 'base'], { cwd: folder });
  git(['remote', 'add', 'origin', `https://x-access-token:${token}@127.0.0.1/repo.git`], { cwd: folder });
  writeFileSync(join(folder, '.env'), `SECRET=${token}\n`);
  return folder;
}

/** The attempt's worktree of `repo` and what its sandbox is told of the repository, as the dispatch lane makes them (runner-lane.ts). */
async function attemptOn(repo: string, name: string): Promise<{ readonly worktree: string; readonly repository: Repository }> {
  const base = git(['rev-parse', 'HEAD'], { cwd: repo }).trim();
  const worktree = await createAttemptWorktree({ repo, base, branch: `coo/${name}`, path: join(root, `${name}-attempt`) });
  const config = join(root, `${name}-config`);
  const { coreWorktree } = await writeSandboxConfig(worktree.gitdir, config);
  return { worktree: worktree.path, repository: { folder: repo, gitdir: worktree.gitdir, config, ...(coreWorktree === null ? {} : { coreWorktree }) } };
}

/** Runs `check` under bubblewrap laid out as `layout`, with a bare environment. */
function inSandbox(layout: BwrapLayout, check: string): { status: number | null; stdout: string; stderr: string } {
  const argv = [...bwrapArgs(requireBubblewrap('a sandbox test'), layout), '/bin/sh', '-c', check];
  const run = spawnSync(argv[0]!, argv.slice(1), { encoding: 'utf8', env: { PATH: '/usr/local/bin:/usr/bin:/bin', HOME: '/nonexistent', GIT_CONFIG_NOSYSTEM: '1' } });
  return { status: run.status, stdout: run.stdout, stderr: run.stderr };
}

/** A shell line printing how many of `files`' bytes hold `token`: 0 for each the sandbox hides. */
function countsOf(files: readonly string[], token: string): string {
  return `for f in ${files.map((path) => `'${path}'`).join(' ')}; do printf '%s ' "$(cat "$f" 2>/dev/null | grep -c '${token}')"; done; echo; `;
}

describe('an agent on a submodule or a linked worktree reads nothing of the repository around it', () => {
  it("hides a submodule's superproject: its work tree (an untracked .env) and its git folder's config (a remote's token); git in the worktree still reads the submodule", async () => {
    const superToken = 'ghp_SuperprojectTok3nQw8Zr5Lm2Xv';
    const superproject = repositoryAt(join(root, 'super'), superToken);
    const library = repositoryAt(join(root, 'library-source'), 'ghp_LibrarySourceTok7Hn4Kp9Wd');
    git(['-c', 'protocol.file.allow=always', 'submodule', 'add', '-q', library, 'lib'], { cwd: superproject });
    git(['commit', '-q', '-m', 'lib'], { cwd: superproject });
    const submodule = join(superproject, 'lib');
    const { worktree, repository } = await attemptOn(submodule, 'submodule');
    expect(repository.gitdir).toBe(join(superproject, '.git', 'modules', 'lib'));
    const run = inSandbox(
      { writable: [worktree], hide: [], chdir: worktree, ownPids: true, repository },
      `${countsOf([join(superproject, '.env'), join(superproject, '.git', 'config')], superToken)} HOME=. git log -1 --format=%s`,
    );
    expect(run.stderr).toBe('');
    expect(run.stdout).toBe('0 0 \nbase\n');
  });

  it('hides the work tree of a superproject whose git folder is kept apart (--separate-git-dir)', async () => {
    const token = 'ghp_SeparateSuperTok8Ln2Df6Wq';
    const superproject = join(root, 'separate-super');
    git(['init', '-q', '-b', 'main', '--separate-git-dir', join(root, 'separate-super-gitdir'), superproject]);
    writeFileSync(join(superproject, 'README'), 'tracked\n');
    git(['add', '-A'], { cwd: superproject });
    git(['commit', '-q', '-m', 'base'], { cwd: superproject });
    writeFileSync(join(superproject, '.env'), `SECRET=${token}\n`);
    const library = repositoryAt(join(root, 'separate-library-source'), 'ghp_SeparateLibraryTok4Rx9Mb');
    git(['-c', 'protocol.file.allow=always', 'submodule', 'add', '-q', library, 'lib'], { cwd: superproject });
    const { worktree, repository } = await attemptOn(join(superproject, 'lib'), 'separate-super');
    expect(repository.gitdir).toBe(join(root, 'separate-super-gitdir', 'modules', 'lib'));
    const run = inSandbox({ writable: [worktree], hide: [], chdir: worktree, ownPids: true, repository }, `${countsOf([join(superproject, '.env')], token)} HOME=. git log -1 --format=%s`);
    expect(run.stderr).toBe('');
    expect(run.stdout).toBe('0 \nbase\n');
  });

  it('hides the repository a nested submodule lies in, and the one above it', async () => {
    const topToken = 'ghp_TopRepositoryTok5Gh2Lq7Vb';
    const top = repositoryAt(join(root, 'top'), topToken);
    const middle = repositoryAt(join(root, 'middle-source'), 'ghp_MiddleSourceTok4Rf8Jn1Cz');
    const leaf = repositoryAt(join(root, 'leaf-source'), 'ghp_LeafSourceTok6Ts3Mw9Pa');
    git(['-c', 'protocol.file.allow=always', 'submodule', 'add', '-q', leaf, 'leaf'], { cwd: middle });
    git(['commit', '-q', '-m', 'leaf'], { cwd: middle });
    git(['-c', 'protocol.file.allow=always', 'submodule', 'add', '-q', middle, 'middle'], { cwd: top });
    git(['-c', 'protocol.file.allow=always', 'submodule', 'update', '-q', '--init', '--recursive'], { cwd: top });
    const nested = join(top, 'middle', 'leaf');
    // The middle repository's own remote, in its module's config, with a token of its own.
    const middleToken = 'ghp_MiddleModuleTok2Yx6Ud4Ke';
    git(['remote', 'set-url', 'origin', `https://x:${middleToken}@127.0.0.1/middle.git`], { cwd: join(top, 'middle') });
    writeFileSync(join(top, 'middle', '.env'), `SECRET=${middleToken}\n`);
    const { worktree, repository } = await attemptOn(nested, 'nested');
    expect(repository.gitdir).toBe(join(top, '.git', 'modules', 'middle', 'modules', 'leaf'));
    const run = inSandbox(
      { writable: [worktree], hide: [], chdir: worktree, ownPids: true, repository },
      `${countsOf([join(top, '.env'), join(top, '.git', 'config')], topToken)}${countsOf([join(top, 'middle', '.env'), join(top, '.git', 'modules', 'middle', 'config')], middleToken)} HOME=. git log -1 --format=%s`,
    );
    expect(run.stderr).toBe('');
    expect(run.stdout).toBe('0 0 \n0 0 \nbase\n');
  });

  it("hides the superproject of a submodule checked out in the superproject's linked worktree: both work trees and the superproject's config", async () => {
    const token = 'ghp_LinkedSuperTok4Qm9Xc2Vh';
    const superproject = repositoryAt(join(root, 'linked-super'), token);
    const library = repositoryAt(join(root, 'linked-super-library'), 'ghp_LinkedLibraryTok8Zd3Pw6Ta');
    git(['-c', 'protocol.file.allow=always', 'submodule', 'add', '-q', library, 'lib'], { cwd: superproject });
    git(['commit', '-q', '-m', 'lib'], { cwd: superproject });
    const linked = join(root, 'linked-super-worktree');
    git(['worktree', 'add', '-q', '-b', 'other', linked], { cwd: superproject });
    git(['-c', 'protocol.file.allow=always', 'submodule', 'update', '-q', '--init'], { cwd: linked });
    writeFileSync(join(linked, '.env'), `SECRET=${token}\n`);
    const { worktree, repository } = await attemptOn(join(linked, 'lib'), 'linked-super');
    expect(repository.gitdir).toBe(join(superproject, '.git', 'worktrees', 'linked-super-worktree', 'modules', 'lib'));
    const run = inSandbox(
      { writable: [worktree], hide: [], chdir: worktree, ownPids: true, repository },
      `${countsOf([join(superproject, '.env'), join(linked, '.env'), join(superproject, '.git', 'config')], token)} HOME=. git log -1 --format=%s`,
    );
    expect(run.stderr).toBe('');
    expect(run.stdout).toBe('0 0 0 \nbase\n');
  });

  it('hides the superproject of a submodule whose .git is a folder in place in its work tree', async () => {
    const token = 'ghp_InPlaceSuperTok6Hn1Rb5Jw';
    const superproject = repositoryAt(join(root, 'in-place-super'), token);
    const library = repositoryAt(join(root, 'in-place-library'), 'ghp_InPlaceLibraryTok3Kc7Vm2Gs');
    git(['clone', '-q', library, join(superproject, 'lib')]);
    git(['-c', 'protocol.file.allow=always', 'submodule', 'add', '-q', library, 'lib'], { cwd: superproject });
    const { worktree, repository } = await attemptOn(join(superproject, 'lib'), 'in-place');
    expect(repository.gitdir).toBe(join(superproject, 'lib', '.git'));
    const run = inSandbox(
      { writable: [worktree], hide: [], chdir: worktree, ownPids: true, repository },
      `${countsOf([join(superproject, '.env'), join(superproject, '.git', 'config')], token)} HOME=. git log -1 --format=%s`,
    );
    expect(run.stderr).toBe('');
    expect(run.stdout).toBe('0 0 \nbase\n');
  });

  it("hides the main work tree and the config of the repository a linked worktree given as --repo is of", async () => {
    const token = 'ghp_MainWorktreeTok8Bv3Nc6Js';
    const main = repositoryAt(join(root, 'main'), token);
    const linked = join(root, 'main-linked');
    git(['worktree', 'add', '-q', '-b', 'linked', linked], { cwd: main });
    const { worktree, repository } = await attemptOn(linked, 'linked');
    const run = inSandbox(
      { writable: [worktree], hide: [], chdir: worktree, ownPids: true, repository },
      `${countsOf([join(main, '.env'), join(main, '.git', 'config')], token)} test -e '${join(linked, 'README')}' && echo seen; HOME=. git log -1 --format=%s`,
    );
    expect(run.stderr).toBe('');
    expect(run.stdout).toBe('0 0 \nbase\n');
  });

  it('hides the top of a work tree whose git folder is kept apart (--separate-git-dir) when --repo names a folder inside it', async () => {
    const token = 'ghp_SeparateTopTok2Jw7Rk4Ub';
    const top = join(root, 'separate');
    mkdirSync(join(top, 'src'), { recursive: true });
    git(['init', '-q', '-b', 'main', '--separate-git-dir', join(root, 'separate-gitdir'), top]);
    writeFileSync(join(top, 'src', 'README'), 'tracked\n');
    git(['add', '-A'], { cwd: top });
    git(['commit', '-q', '-m', 'base'], { cwd: top });
    writeFileSync(join(top, '.env'), `SECRET=${token}\n`);
    const { worktree, repository } = await attemptOn(join(top, 'src'), 'separate');
    const run = inSandbox({ writable: [worktree], hide: [], chdir: worktree, ownPids: true, repository }, `${countsOf([join(top, '.env')], token)} HOME=. git log -1 --format=%s`);
    expect(run.stderr).toBe('');
    expect(run.stdout).toBe('0 \nbase\n');
  });

  it('hides the repository a clone made with --shared borrows its objects from (its work tree and config), and git in the worktree still reads those objects', async () => {
    const token = 'ghp_LendingRepoTok7Xe3Bq9Hs';
    const lender = repositoryAt(join(root, 'lender'), token);
    const borrower = join(root, 'borrower');
    git(['clone', '-q', '--shared', lender, borrower]);
    const { worktree, repository } = await attemptOn(borrower, 'borrower');
    const run = inSandbox(
      { writable: [worktree], hide: [], chdir: worktree, ownPids: true, repository },
      `${countsOf([join(lender, '.env'), join(lender, '.git', 'config')], token)} HOME=. git log -1 --format=%s && HOME=. git cat-file -p HEAD:README`,
    );
    expect(run.stderr).toBe('');
    expect(run.stdout).toBe(`0 0 \nbase\n${lender}\n`);
  });
});

describe("what a target repository's objects/info/alternates names", () => {
  it('exempts nothing from hiding: lines naming /tmp and ~/.ssh leave /tmp emptied and ~/.ssh hidden, and only a git folder\'s objects are bound back', async () => {
    const token = 'ghp_AlternatesEscapeTok3Vn8Kq2Wd';
    const home = join(root, 'alternates-home');
    mkdirSync(join(home, '.ssh'), { recursive: true });
    writeFileSync(join(home, '.ssh', 'id_ed25519'), `test key, not a secret: ${token}\n`);
    const lender = repositoryAt(join(root, 'alternates-lender'), 'ghp_AlternatesLenderTok5Rb1Xm');
    const borrower = join(root, 'alternates-borrower');
    git(['clone', '-q', '--shared', lender, borrower]);
    const alternates = join(borrower, '.git', 'objects', 'info', 'alternates');
    writeFileSync(alternates, `${readFileSync(alternates, 'utf8')}/tmp\n${join(home, '.ssh')}\n`);
    vi.stubEnv('HOME', home);
    const { worktree, repository } = await attemptOn(borrower, 'alternates');
    const layout: BwrapLayout = { writable: [worktree], hide: [], chdir: worktree, ownPids: true, repository };
    const argv = bwrapArgs('bwrap', layout);
    const pairs = argv.slice(0, -1).map((arg, at) => `${arg} ${argv[at + 1]}`);
    expect(pairs).toContain(`--tmpfs ${realpathSync('/tmp')}`);
    expect(pairs).not.toContain(`--ro-bind ${realpathSync('/tmp')}`);
    expect(pairs).toContain(`--tmpfs ${join(home, '.ssh')}`);
    expect(pairs.filter((pair) => pair.startsWith('--ro-bind') && pair.endsWith(join(home, '.ssh')))).toEqual([]);
    const run = inSandbox(layout, `${countsOf([join(home, '.ssh', 'id_ed25519')], token)} HOME=. git cat-file -p HEAD:README`);
    expect(run.stdout).toBe(`0 \n${lender}\n`);
  });
});

describe('a linked worktree added to the target repository while an attempt runs', () => {
  it("is not named to the agent: git's records of the repository's worktrees show its own alone, and git in its worktree still works", async () => {
    const token = 'ghp_LateWorktreeTok5Cq1Zs7Np';
    const repo = repositoryAt(join(root, 'late'), 'ghp_LateRepoTok8Hd4Wr2Fm');
    const { worktree, repository } = await attemptOn(repo, 'late');
    // The sandbox is planned (its mounts fixed) before the operator adds a worktree of their own, with an .env.
    const argv = [...bwrapArgs(requireBubblewrap('a sandbox test'), { writable: [worktree], hide: [], chdir: worktree, ownPids: true, repository }), '/bin/sh', '-c', `cat '${join(repository.gitdir, 'worktrees')}'/*/gitdir 2>/dev/null | grep -c late-operator; ls '${join(repository.gitdir, 'worktrees')}' | wc -l; HOME=. git log -1 --format=%s; HOME=. git worktree list --porcelain | grep -c late-operator`];
    const operator = join(root, 'late-operator');
    git(['worktree', 'add', '-q', '-b', 'operator', operator], { cwd: repo });
    writeFileSync(join(operator, '.env'), `SECRET=${token}\n`);
    const run = spawnSync(argv[0]!, argv.slice(1), { encoding: 'utf8', env: { PATH: '/usr/local/bin:/usr/bin:/bin', HOME: '/nonexistent', GIT_CONFIG_NOSYSTEM: '1' } });
    expect(run.stderr).toBe('');
    expect(run.stdout).toBe('0\n1\nbase\n0\n');
  });
});

describe("git's configuration the runner's environment names", () => {
  it('hides the file GIT_CONFIG_SYSTEM names, as it does the one GIT_CONFIG_GLOBAL names', () => {
    const token = 'ghp_SystemConfigTok9Wq2Fd5Hy';
    const folder = join(root, 'system-config');
    mkdirSync(folder, { recursive: true });
    const system = join(folder, 'gitconfig');
    const global = join(folder, 'global-gitconfig');
    writeFileSync(system, `[http]\n\textraHeader = AUTHORIZATION: bearer ${token}\n`);
    writeFileSync(global, `[http]\n\textraHeader = AUTHORIZATION: bearer ${token}\n`);
    const worktree = join(folder, 'worktree');
    mkdirSync(worktree);
    vi.stubEnv('GIT_CONFIG_SYSTEM', system);
    vi.stubEnv('GIT_CONFIG_GLOBAL', global);
    const run = inSandbox({ writable: [worktree], hide: [], chdir: worktree, ownPids: true }, countsOf([system, global], token));
    expect(run.stderr).toBe('');
    expect(run.stdout).toBe('0 0 \n');
    // Under GIT_CONFIG_NOSYSTEM too, where git lists nothing of it: a git run without that variable reads it.
    vi.stubEnv('GIT_CONFIG_NOSYSTEM', '1');
    expect(inSandbox({ writable: [worktree], hide: [], chdir: worktree, ownPids: true }, countsOf([system], token)).stdout).toBe('0 \n');
  });

  it("hides the files git's configuration includes: the user's, GIT_CONFIG_COUNT's and the target repository's own includes", async () => {
    const token = 'ghp_IncludedConfigTok6Vr2Mx9Lb';
    const folder = join(root, 'included-config');
    mkdirSync(folder, { recursive: true });
    const included = ['global-included', 'conditional-included', 'count-included', 'repository-included'].map((name) => join(folder, name));
    for (const file of included) writeFileSync(file, `[http]\n\textraHeader = AUTHORIZATION: bearer ${token}\n`);
    const global = join(folder, 'global');
    writeFileSync(global, `[include]\n\tpath = global-included\n[includeIf "gitdir:${root}/"]\n\tpath = ${included[1]}\n`);
    const repo = repositoryAt(join(folder, 'repo'), 'ghp_IncludingRepoTok3Ws8Gd1Qn');
    git(['config', 'include.path', included[3]!], { cwd: repo });
    vi.stubEnv('GIT_CONFIG_GLOBAL', global);
    vi.stubEnv('GIT_CONFIG_COUNT', '1');
    vi.stubEnv('GIT_CONFIG_KEY_0', 'include.path');
    vi.stubEnv('GIT_CONFIG_VALUE_0', included[2]!);
    const { worktree, repository } = await attemptOn(repo, 'including');
    const run = inSandbox({ writable: [worktree], hide: [], chdir: worktree, ownPids: true, repository }, `${countsOf(included, token)} HOME=. git log -1 --format=%s`);
    expect(run.stderr).toBe('');
    expect(run.stdout).toBe('0 0 0 0 \nbase\n');
  });

  it('hides the file an includeIf names while its condition does not hold, around an attempt and around a sandbox of no repository', async () => {
    const token = 'ghp_InactiveIncludeTok7Wd3Rq8Mz';
    const folder = join(root, 'inactive-include');
    mkdirSync(folder, { recursive: true });
    const target = join(folder, 'personal-gitconfig');
    writeFileSync(target, `[http]\n\textraHeader = AUTHORIZATION: bearer ${token}\n`);
    const global = join(folder, 'global');
    writeFileSync(global, `[includeIf "gitdir:${join(folder, 'personal')}/"]\n\tpath = personal-gitconfig\n`);
    vi.stubEnv('GIT_CONFIG_GLOBAL', global);
    const repo = repositoryAt(join(folder, 'work'), 'ghp_InactiveWorkRepoTok2Hs6Vb');
    const { worktree, repository } = await attemptOn(repo, 'inactive-include');
    const attempt = inSandbox({ writable: [worktree], hide: [], chdir: worktree, ownPids: true, repository }, `${countsOf([target], token)} HOME=. git log -1 --format=%s`);
    expect(attempt.stdout).toBe('0 \nbase\n');
    const scratch = join(folder, 'scratch');
    mkdirSync(scratch);
    const noRepository = inSandbox({ writable: [scratch], hide: [], chdir: scratch, ownPids: true }, countsOf([target], token));
    expect(noRepository.stdout).toBe('0 \n');
  });

  it("has the scrubber learn the tokens of GIT_CONFIG_GLOBAL's, GIT_CONFIG_SYSTEM's and GIT_CONFIG_COUNT's settings and of what they include, for an agent run without bubblewrap", () => {
    const folder = join(root, 'scrubbed-config');
    const repo = repositoryAt(join(folder, 'repo'), 'ghp_ScrubbedRepoTok1Lx5Qe8Dn');
    const [globalToken, systemToken, countToken, includedToken] = ['ghp_GlobalUrlTok4Fs9Wm2Rc', 'ghp_SystemHeaderTok7Pb3Kv6Zt', 'ghs_CountHeaderTok2Nj8Hx5Ya', 'ghp_IncludedUrlTok9Ak3Tg6Ve'];
    writeFileSync(join(folder, 'global'), `[url "https://x:${globalToken}@127.0.0.1/"]\n\tinsteadOf = https://127.0.0.1/\n[include]\n\tpath = included\n`);
    writeFileSync(join(folder, 'included'), `[remote "mirror"]\n\turl = https://x:${includedToken}@127.0.0.1/mirror.git\n`);
    writeFileSync(join(folder, 'system'), `[http]\n\textraHeader = AUTHORIZATION: bearer ${systemToken}\n`);
    vi.stubEnv('GIT_CONFIG_GLOBAL', join(folder, 'global'));
    vi.stubEnv('GIT_CONFIG_SYSTEM', join(folder, 'system'));
    vi.stubEnv('GIT_CONFIG_COUNT', '1');
    vi.stubEnv('GIT_CONFIG_KEY_0', 'http.https://127.0.0.1/.extraheader');
    vi.stubEnv('GIT_CONFIG_VALUE_0', `AUTHORIZATION: basic ${Buffer.from(`x-access-token:${countToken}`).toString('base64')}`);
    const learnt = new Set(gitRemoteSecrets([repo], { helpers: false }).map((secret) => secret.value));
    expect([globalToken, systemToken, countToken, includedToken].filter((token) => !learnt.has(token))).toEqual([]);
  });
});

describe("the table of moved logins (util/credential-files.ts MOVED_LOGINS)", () => {
  it("hides the logins AWS_CONFIG_FILE, NETRC, CARGO_HOME, AZURE_CONFIG_DIR and GNUPGHOME move (and those *_FILE variables name, AWS_SHARED_CREDENTIALS_FILE, REGISTRY_AUTH_FILE), and the scrubber learns those it can read", () => {
    const token = 'wJalrXUtnFEMI5K7MDENGbPxRfiCYzq9Tk';
    const folder = join(root, 'moved-logins');
    const places: Record<string, { readonly variable: string; readonly file: string; readonly text: string }> = {
      aws: { variable: 'AWS_SHARED_CREDENTIALS_FILE', file: join(folder, 'aws-credentials'), text: `[default]\naws_secret_access_key = ${token}1\n` },
      awsConfig: { variable: 'AWS_CONFIG_FILE', file: join(folder, 'aws-config'), text: `[profile ci]\naws_secret_access_key = ${token}2\n` },
      netrc: { variable: 'NETRC', file: join(folder, 'netrc'), text: `machine 127.0.0.1 login x password ${token}3\n` },
      cargo: { variable: 'CARGO_HOME', file: join(folder, 'cargo', 'credentials.toml'), text: `[registry]\ntoken = "${token}4"\n` },
      registry: { variable: 'REGISTRY_AUTH_FILE', file: join(folder, 'auth.json'), text: JSON.stringify({ auths: { '127.0.0.1': { auth: Buffer.from(`x:${token}5`).toString('base64') } } }) },
      azure: { variable: 'AZURE_CONFIG_DIR', file: join(folder, 'azure', 'msal_token_cache.json'), text: `{"AccessToken": {"x": {"secret": "${token}6"}}}` },
      gnupg: { variable: 'GNUPGHOME', file: join(folder, 'gnupg', 'private-keys-v1.d', 'key.key'), text: `${token}7\n` },
    };
    for (const { variable, file, text } of Object.values(places)) {
      mkdirSync(dirname(file), { recursive: true });
      writeFileSync(file, text);
      vi.stubEnv(variable, ['CARGO_HOME', 'AZURE_CONFIG_DIR'].includes(variable) ? dirname(file) : variable === 'GNUPGHOME' ? join(folder, 'gnupg') : file);
    }
    const worktree = join(folder, 'worktree');
    mkdirSync(worktree);
    const files = Object.values(places).map(({ file }) => file);
    const run = inSandbox({ writable: [worktree], hide: [], chdir: worktree, ownPids: true }, countsOf(files, token));
    expect(run.stderr).toBe('');
    expect(run.stdout).toBe(`${files.map(() => '0 ').join('')}\n`);
    const learnt = new Set(credentialFileSecrets(process.env, join(folder, 'no-home')).map((secret) => secret.value));
    expect([1, 2, 3, 4, 5].map((n) => `${token}${n}`).filter((secret) => !learnt.has(secret))).toEqual([]);
  });
});

describe('CARGO_HOME, which holds cargo itself as well as its logins', () => {
  it('stays in sight with its tools runnable, its two credentials files alone hidden, and the scrubber learns both', () => {
    const token = 'cio8CargoRegistryTok5Wm2Qx7Lz';
    const cargo = join(root, 'cargo-home');
    mkdirSync(join(cargo, 'bin'), { recursive: true });
    writeFileSync(join(cargo, 'bin', 'cargo-tool'), '#!/bin/sh\necho tool ran\n', { mode: 0o755 });
    writeFileSync(join(cargo, 'credentials.toml'), `[registry]\ntoken = "${token}1"\n`);
    writeFileSync(join(cargo, 'credentials'), `[registry]\ntoken = "${token}2"\n`);
    const worktree = join(root, 'cargo-worktree');
    mkdirSync(worktree, { recursive: true });
    vi.stubEnv('CARGO_HOME', cargo);
    const run = inSandbox({ writable: [worktree], hide: [], chdir: worktree, ownPids: true }, `${countsOf([join(cargo, 'credentials.toml'), join(cargo, 'credentials')], token)} '${join(cargo, 'bin', 'cargo-tool')}'`);
    expect(run.stderr).toBe('');
    expect(run.stdout).toBe('0 0 \ntool ran\n');
    const learnt = new Set(credentialFileSecrets(process.env, join(root, 'cargo-no-home')).map((secret) => secret.value));
    expect([`${token}1`, `${token}2`].filter((secret) => !learnt.has(secret))).toEqual([]);
  });
});

describe("git's credential cache", () => {
  it("is out of an agent's reach: the cache daemon's socket, which hands its tokens to whoever asks, is hidden", () => {
    const token = 'ghp_CachedCredentialTok4Mz8Rv2Qd';
    const home = join(root, 'cache-home');
    mkdirSync(home, { recursive: true });
    const worktree = join(root, 'cache-worktree');
    mkdirSync(worktree, { recursive: true });
    const env = { PATH: '/usr/local/bin:/usr/bin:/bin', HOME: home, GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: '/dev/null' };
    // The operator's git cached a token for a host (git credential-cache starts its daemon, which ends after 60 s idle).
    git(['credential-cache', '--timeout', '60', 'store'], { env, input: `protocol=https\nhost=127.0.0.1\nusername=x\npassword=${token}\n\n` });
    try {
      vi.stubEnv('HOME', home);
      vi.stubEnv('XDG_CACHE_HOME', undefined);
      const argv = [...bwrapArgs(requireBubblewrap('a sandbox test'), { writable: [worktree], hide: [], chdir: worktree, ownPids: true }), '/bin/sh', '-c', "printf 'protocol=https\\nhost=127.0.0.1\\n\\n' | git credential-cache get | grep -c password"];
      const run = spawnSync(argv[0]!, argv.slice(1), { encoding: 'utf8', env });
      expect(run.stdout).toBe('0\n');
      // The same question outside the sandbox is answered: the daemon was there to ask.
      expect(git(['credential-cache', 'get'], { env, input: 'protocol=https\nhost=127.0.0.1\n\n' })).toContain(token);
    } finally {
      spawnSync('git', ['credential-cache', 'exit'], { env, encoding: 'utf8' });
    }
  });
});

describe("git's credential helpers told where to keep credentials", () => {
  it("hides the file of 'store --file' and the socket of 'cache --socket', and the scrubber learns what the store holds for any host", async () => {
    const [storeToken, cacheToken] = ['ghp_StoredElsewhereTok3Qn8Vd5Lc', 'ghp_CachedElsewhereTok6Hs2Pw9Ky'];
    const folder = join(root, 'helper-places');
    const socketFolder = join(folder, 'cache');
    mkdirSync(socketFolder, { recursive: true, mode: 0o700 });
    const store = join(folder, 'stored-credentials');
    const socket = join(socketFolder, 'socket');
    writeFileSync(store, `https://x:${storeToken}@forge.invalid\n`);
    const global = join(folder, 'global');
    writeFileSync(global, `[credential]\n\thelper = store --file=${store}\n[credential "https://127.0.0.1"]\n\thelper = "cache --socket ${socket}"\n`);
    const env = { PATH: '/usr/local/bin:/usr/bin:/bin', HOME: folder, GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: '/dev/null' };
    git(['credential-cache', '--socket', socket, '--timeout', '60', 'store'], { env, input: `protocol=https\nhost=127.0.0.1\nusername=x\npassword=${cacheToken}\n\n` });
    try {
      const repo = repositoryAt(join(folder, 'repo'), 'ghp_HelperRepoTok1Zb7Mf4Wt');
      vi.stubEnv('GIT_CONFIG_GLOBAL', global);
      const { worktree, repository } = await attemptOn(repo, 'helpers');
      const run = inSandbox(
        { writable: [worktree], hide: [], chdir: worktree, ownPids: true, repository },
        `${countsOf([store], storeToken)} printf 'protocol=https\\nhost=127.0.0.1\\n\\n' | git credential-cache --socket '${socket}' get | grep -c password`,
      );
      expect(run.stdout).toBe('0 \n0\n');
      // Outside the sandbox the daemon answers: it was there to ask.
      expect(git(['credential-cache', '--socket', socket, 'get'], { env, input: 'protocol=https\nhost=127.0.0.1\n\n' })).toContain(cacheToken);
      const learnt = new Set(gitRemoteSecrets([repo], { helpers: false }).map((secret) => secret.value));
      expect(learnt.has(storeToken)).toBe(true);
    } finally {
      spawnSync('git', ['credential-cache', '--socket', socket, 'exit'], { env, encoding: 'utf8' });
    }
  });
});

describe("git's credential helpers written as git runs them", () => {
  it("hides the store of '!git credential-store --file', of an absolute helper path and of a '$HOME/' path, and the scrubber reads them", () => {
    const token = 'ghp_HelperFormsTok7Ns2Xq5Lb';
    const folder = join(root, 'helper-forms');
    const home = join(folder, 'home');
    mkdirSync(home, { recursive: true });
    const stores = ['bang-store', 'absolute-store', 'home-store'].map((name, at) => ({ path: join(at === 2 ? home : folder, name), token: `${token}${at}` }));
    for (const { path, token: value } of stores) writeFileSync(path, `https://x:${value}@forge.invalid\n`);
    const global = join(folder, 'global');
    writeFileSync(global, `[credential]\n\thelper = "!git credential-store --file ${stores[0]!.path}"\n\thelper = /usr/lib/git-core/git-credential-store --file=${stores[1]!.path}\n\thelper = "store --file $HOME/home-store"\n`);
    vi.stubEnv('GIT_CONFIG_GLOBAL', global);
    vi.stubEnv('HOME', home);
    const worktree = join(folder, 'worktree');
    mkdirSync(worktree);
    const run = inSandbox({ writable: [worktree], hide: [], chdir: worktree, ownPids: true }, stores.map(({ path, token: value }) => countsOf([path], value)).join(''));
    expect(run.stdout).toBe('0 \n0 \n0 \n');
    const repo = repositoryAt(join(folder, 'repo'), 'ghp_HelperFormsRepoTok4Dw8Jc');
    const learnt = new Set(gitRemoteSecrets([repo], { helpers: false }).map((secret) => secret.value));
    expect(stores.map(({ token: value }) => value).filter((value) => !learnt.has(value))).toEqual([]);
  });

  it('starts no sandbox when git cannot list them: a configuration git refuses is a coded RUNNER_CONFIG error, never a sandbox with them in sight', async () => {
    const folder = join(root, 'unlisted-helpers');
    mkdirSync(folder, { recursive: true });
    const store = join(folder, 'store');
    writeFileSync(store, 'https://x:ghp_UnlistedStoreTok3Fb9Wd1Km@forge.invalid\n');
    const global = join(folder, 'global');
    writeFileSync(global, `[credential]\n\thelper = store --file=${store}\n`);
    vi.stubEnv('GIT_CONFIG_GLOBAL', global);
    const repo = repositoryAt(join(folder, 'repo'), 'ghp_UnlistedRepoTok6Pn2Ve8Hs');
    const { worktree, repository } = await attemptOn(repo, 'unlisted');
    // The repository's configuration broken after the attempt's copy of it was written: git refuses to read any.
    writeFileSync(join(repository.gitdir, 'config'), '[core\n\tbroken\n');
    let thrown: unknown = null;
    try {
      bwrapArgs('bwrap', { writable: [worktree], hide: [], chdir: worktree, ownPids: true, repository });
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(CooError);
    expect((thrown as CooError).code).toBe('RUNNER_CONFIG');
    expect(() => requireGitPlacesListed(repository)).toThrow(/cannot list .*which a sandbox must hide: nothing was started/);
  });
});

describe("what git's credential helpers rewrite or make anew on the host while a sandbox runs", () => {
  it("stays hidden: a store file renamed over, a cache socket made after the start in a 'cache --socket' folder and in the default cache folder", async () => {
    const [storeToken, cacheToken, defaultToken] = ['ghp_RenamedStoreTok5Lx8Wq3Bn', 'ghp_LateCacheSocketTok2Hm7Tc4Vz', 'ghp_LateDefaultCacheTok9Rs1Kd6Fy'];
    const folder = join(root, 'rewritten-helpers');
    const home = join(folder, 'home');
    const storeFolder = join(folder, 'store');
    const socketFolder = join(folder, 'socket');
    for (const made of [home, storeFolder, socketFolder]) mkdirSync(made, { recursive: true, mode: 0o700 });
    const store = join(storeFolder, 'credentials');
    const socket = join(socketFolder, 'socket');
    writeFileSync(store, 'https://x:ghp_OldStoredTok4Jp6Rn1Qa@forge.invalid\n');
    const global = join(folder, 'global');
    writeFileSync(global, `[credential]\n\thelper = store --file=${store}\n[credential "https://127.0.0.1"]\n\thelper = "cache --socket ${socket}"\n`);
    const worktree = join(folder, 'worktree');
    mkdirSync(worktree);
    vi.stubEnv('GIT_CONFIG_GLOBAL', global);
    vi.stubEnv('HOME', home);
    vi.stubEnv('XDG_CACHE_HOME', undefined);
    const env = { PATH: '/usr/local/bin:/usr/bin:/bin', HOME: home, GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: '/dev/null' };
    const ask = (socketArgs: string): string => `printf 'protocol=https\\nhost=127.0.0.1\\n\\n' | git credential-cache ${socketArgs} get | grep -c password;`;
    // The sandbox starts, says so, and waits for the host's rewrites before it looks.
    const argv = [...bwrapArgs(requireBubblewrap('a sandbox test'), { writable: [worktree], hide: [], chdir: worktree, ownPids: true }), '/bin/sh', '-c', `touch ready; while [ ! -e go ]; do sleep 0.01; done; ${countsOf([store], storeToken)} ${ask(`--socket '${socket}'`)} ${ask('')}`];
    const child = spawn(argv[0]!, argv.slice(1), { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
    const ended = new Promise<void>((done) => child.on('close', () => done()));
    try {
      while (!existsSync(join(worktree, 'ready')) && child.exitCode === null) await new Promise((next) => setTimeout(next, 10));
      // git credential-store rewrites its file by renaming a new one over it; each cache daemon makes its socket when it starts.
      writeFileSync(`${store}.lock`, `https://x:${storeToken}@forge.invalid\n`);
      renameSync(`${store}.lock`, store);
      git(['credential-cache', '--socket', socket, '--timeout', '60', 'store'], { env, input: `protocol=https\nhost=127.0.0.1\nusername=x\npassword=${cacheToken}\n\n` });
      git(['credential-cache', '--timeout', '60', 'store'], { env, input: `protocol=https\nhost=127.0.0.1\nusername=x\npassword=${defaultToken}\n\n` });
      writeFileSync(join(worktree, 'go'), '');
      await ended;
      expect(stdout).toBe('0 \n0\n0\n');
      // Outside the sandbox both daemons answer: they were there to ask.
      expect(git(['credential-cache', '--socket', socket, 'get'], { env, input: 'protocol=https\nhost=127.0.0.1\n\n' })).toContain(cacheToken);
      expect(git(['credential-cache', 'get'], { env, input: 'protocol=https\nhost=127.0.0.1\n\n' })).toContain(defaultToken);
    } finally {
      child.kill('SIGKILL');
      spawnSync('git', ['credential-cache', '--socket', socket, 'exit'], { env, encoding: 'utf8' });
      spawnSync('git', ['credential-cache', 'exit'], { env, encoding: 'utf8' });
    }
  });
});

describe("the runner's own process", () => {
  it("is out of an agent's sight: no process's environment or command line it can read holds what the runner's does", () => {
    const marker = 'ghp_RunnerEnvironTok3Kd7Xs1Vm';
    const worktree = join(root, 'pid-worktree');
    mkdirSync(worktree, { recursive: true });
    // The secret to look for, in a file: on the sandbox's own command lines it would be found there.
    writeFileSync(join(worktree, 'pattern'), `${marker}\n`);
    const key = join(worktree, '..', 'pid-coo.key');
    writeFileSync(key, 'test key, not a secret\n');
    const argv = [...bwrapArgs(requireBubblewrap('a sandbox test'), { writable: [worktree], hide: [], chdir: worktree, ownPids: true }), '/bin/sh', '-c', `cat /proc/[0-9]*/environ /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' '\\n' | grep -c -F -f pattern; ls -l /proc/[0-9]*/fd/ 2>/dev/null | grep -c pid-coo.key`];
    // A parent as the runner is: node, the secret in its environment and on its command line, its key open, which
    // starts the sandbox with a bare environment, as a lane does.
    const parent = `const fs = require('node:fs'); fs.openSync(${JSON.stringify(key)}, 'r'); const argv = JSON.parse(process.argv[1]); const run = require('node:child_process').spawnSync(argv[0], argv.slice(1), { encoding: 'utf8', env: { PATH: '/usr/local/bin:/usr/bin:/bin' } }); process.stdout.write(run.stdout); process.stderr.write(run.stderr);`;
    const run = spawnSync(process.execPath, ['-e', parent, JSON.stringify(argv), marker], { encoding: 'utf8', env: { PATH: '/usr/local/bin:/usr/bin:/bin', RUNNER_SECRET: marker } });
    expect(run.stderr).toBe('');
    // Neither the secret nor the open key is in sight.
    expect(run.stdout).toBe('0\n0\n');
  });
});

describe("the credential cache's folder a sandbox makes so it can hide it", () => {
  const asRoot = process.getuid?.() === 0;
  it.runIf(asRoot)("is never made in a home or cache folder that is another user's (a runner started by root with a user's HOME or XDG_CACHE_HOME)", () => {
    const home = join(root, 'another-users-home');
    mkdirSync(home, { recursive: true });
    spawnSync('chown', ['65534:65534', home]);
    vi.stubEnv('HOME', home);
    vi.stubEnv('XDG_CACHE_HOME', '');
    bwrapArgs('bwrap', { writable: [join(root, 'another-users-work')], hide: [], chdir: '/' });
    expect(existsSync(join(home, '.cache')), "nothing of root's made in the user's home").toBe(false);
    const cache = join(root, 'another-users-cache');
    mkdirSync(cache, { recursive: true });
    spawnSync('chown', ['65534:65534', cache]);
    vi.stubEnv('HOME', join(root, 'roots-own-home'));
    vi.stubEnv('XDG_CACHE_HOME', cache);
    mkdirSync(join(root, 'roots-own-home'), { recursive: true });
    bwrapArgs('bwrap', { writable: [join(root, 'another-users-work')], hide: [], chdir: '/' });
    expect(existsSync(join(cache, 'git')), "nothing of root's made in the user's XDG_CACHE_HOME").toBe(false);
    vi.stubEnv('XDG_CACHE_HOME', '');
    const own = join(root, 'own-home');
    mkdirSync(own, { recursive: true });
    vi.stubEnv('HOME', own);
    bwrapArgs('bwrap', { writable: [join(root, 'own-work')], hide: [], chdir: '/' });
    expect(existsSync(join(own, '.cache', 'git', 'credential')), 'made in its own home, to be hidden').toBe(true);
  });
});
