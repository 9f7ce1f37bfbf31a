import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import { homedir, tmpdir, userInfo } from 'node:os';
import { basename, dirname, isAbsolute, join, relative, resolve } from 'node:path';
import { CooError } from '../errors.js';
import { readBounded } from './bounded-read.js';
import { CONTAINER_SECRET_FOLDERS, credentialHelperPlaces, environmentCredentialPlaces, environmentSecretFiles, gitConfigFiles } from './credential-files.js';
import { findExecutable } from './executable.js';
import { privateSocketsDir } from './private-sockets.js';
import { realPathOr as real } from './real-path.js';
import { gitLinkTarget } from './git-link.js';
import { borrowedObjectFolders, registeredPrivateFolders, stateRoot } from './runner-folders.js';

/**
 * Bubblewrap around a transport, an executor or a verification command: every path read-only, the
 * paths it may write bound writable, the shared temporary folders emptied, and hidden: the ledger,
 * the key folder, every runner's folders, the credentials of the home folder and those the
 * environment names, the session's sockets and, around an attempt, its target repository's work
 * trees (its git folder bound back read-only, its configuration without credentials). The files of
 * the command itself stay visible where a hidden folder holds them.
 */

/**
 * Where credentials usually live in a home folder: hidden under bubblewrap, as are the files the
 * environment names as holding a secret (environmentSecretFiles), the places it moves a tool's
 * logins to (environmentCredentialPlaces) and a container's secret folders (CONTAINER_SECRET_FOLDERS). The scrubber learns the secrets of
 * those it can read (util/credential-files.ts), for a child run without bubblewrap.
 */
export const CREDENTIALS = [
  '.ssh', '.oracle', '.codex', '.claude', '.claude.json', '.gitconfig', '.git-credentials', '.config/git', '.config/gh', '.netrc', '.npmrc', '.aws', '.gnupg', '.docker',
  '.kube', '.config/gcloud', '.azure', '.pypirc', '.cargo/credentials', '.cargo/credentials.toml', '.pgpass', '.my.cnf', '.vault-token', '.Xauthority', '.gemini', '.env',
];

let bwrapPath: string | null | undefined;

/**
 * How a lane's processes are confined: `bwrap` (bubblewrap, required: the default) or `none` (a
 * clean folder and environment only, which the operator must choose in so many words). `auto` is
 * an older name of `bwrap`: it never falls back to no sandbox.
 */
export type Isolation = 'auto' | 'bwrap' | 'none';

export const ISOLATIONS: readonly Isolation[] = ['bwrap', 'none', 'auto'];

/** How long bubblewrap may take to start a probe. */
const PROBE_MS = 10_000;

/**
 * The isolation a lane runs with. Fails closed: without bubblewrap no lane runs, unless `none`
 * was asked for (the receipts then say `sandbox_unenforced`).
 */
export function resolveIsolation(wanted: Isolation): 'bwrap' | 'none' {
  if (wanted === 'none') return 'none';
  if (findBwrap() === null) {
    throw new CooError('SANDBOX_UNAVAILABLE', 'bubblewrap is not installed, and no lane runs without a sandbox: install it (apt-get install bubblewrap), or choose --isolation none to run with a clean folder and environment only');
  }
  return 'bwrap';
}

/**
 * Starts `executable`'s check inside a sandbox as a lane's would (everything read-only, fresh /dev
 * and /proc): where bubblewrap cannot create its namespaces, or cannot see the executable, no
 * attempt could run, so this is found before anything is claimed.
 */
export function probeBubblewrap(executable: string, label: string): void {
  const probe = spawnSync(findBwrap() ?? 'bwrap', ['--ro-bind', '/', '/', '--dev', '/dev', '--proc', '/proc', '--', '/bin/sh', '-c', 'test -x "$1"', 'sh', executable], { encoding: 'utf8', timeout: PROBE_MS, stdio: ['ignore', 'ignore', 'pipe'] });
  if (probe.status === 0) return;
  const said = (probe.error?.message ?? probe.stderr.trim().split('\n', 1)[0]) || `exit ${probe.status ?? probe.signal}`;
  throw new CooError('SANDBOX_UNAVAILABLE', `bubblewrap cannot start ${executable} for ${label} (${said}): fix bubblewrap, or choose --isolation none to run without it`);
}

/** The bubblewrap executable on PATH, or null when it is not installed. Looked up once, without a shell (PATH may hold none). */
export function findBwrap(): string | null {
  if (bwrapPath !== undefined) return bwrapPath;
  bwrapPath = findExecutable('bwrap', process.env['PATH'] ?? '');
  return bwrapPath;
}

export interface BwrapLayout {
  /** Bound read-write, in this order. */
  readonly writable: readonly string[];
  /** Bound read-only over whatever is above them (a worktree's own git folder). */
  readonly readOnly?: readonly string[];
  /** Hidden entirely: an empty tmpfs over a folder, /dev/null over a file. */
  readonly hide: readonly string[];
  /** Paths that must stay visible even when a hidden folder holds them (the command's own files). */
  readonly keep?: readonly string[];
  /** Files bound read-only over others, last (a hosts file over /etc/hosts). */
  readonly overlays?: ReadonlyArray<{ readonly source: string; readonly target: string }>;
  readonly chdir: string;
  /**
   * Its own PID namespace, ended with its parent: killing bubblewrap ends every process inside,
   * even one that left the process group.
   */
  readonly ownPids?: boolean;
  /**
   * Folders of the process's own, each bound writable at `target` in place of what the host has there
   * (which the process would otherwise see read-only, and could not take a lock file in). `target` is
   * made on the host, empty, as the mount point, when it is not there.
   */
  readonly privateDirs?: ReadonlyArray<{ readonly source: string; readonly target: string }>;
  /** A network namespace of its own: loopback only, nothing on the host or beyond is reachable (the host's 127.0.0.1 included). */
  readonly noNetwork?: boolean;
  /** The target repository an attempt's worktree is of (repositoryLayout): its folders hidden, its git folder bound back read-only. */
  readonly repository?: Repository;
}

/** The target repository of a dispatch: the folder `--repo` names and the common git folder of its worktrees. */
export interface Repository {
  readonly folder: string;
  readonly gitdir: string;
  /** The file read in place of the git folder's `config`: the keys git needs alone, no remote's credentials (dispatch/worktree.ts writeSandboxConfig). */
  readonly config: string;
  /** The work tree the git folder's `core.worktree` names, when it names one: hidden too. */
  readonly coreWorktree?: string;
}

/**
 * What a sandbox around an attempt sees of its target repository: none of its work tree (what the
 * operator keeps there and git does not, a `.env`, a local key, a build's secrets, is no part of the
 * task, and the worktree's `.git` file names where it is), and its git folder alone, read-only, which
 * git in the worktree reads. The folder `--repo` names is hidden, and the work tree its git folder is
 * of (`dirname` of a `.git` folder) when that is another: `--repo` naming a subfolder or a linked
 * worktree. A bare repository is its git folder, which stays. Its configuration is read from
 * `config`, which holds none of its remotes' credentials. Git's records of its linked worktrees
 * (`<gitdir>/worktrees`) are hidden but for those of the sandbox's own (`writable`) worktrees, bound back
 * read-only: a worktree the operator or a neighbour adds while the sandbox runs is recorded there, after
 * its mounts were fixed, and its record would name to the agent where its work tree is.
 */
function repositoryLayout(repository: Repository | undefined, writable: readonly string[]): { readonly hide: string[]; readonly readOnly: string[]; readonly readBack: string[]; readonly lent: string[]; readonly overlays: Array<{ readonly source: string; readonly target: string }> } {
  if (repository === undefined) return { hide: [], readOnly: [], readBack: [], lent: [], overlays: [] };
  const gitdir = real(repository.gitdir);
  const workTrees = [repository.folder, ...workTreeTop(repository.folder, gitdir), ...(basename(gitdir) === '.git' ? [dirname(gitdir)] : []), ...(repository.coreWorktree === undefined ? [] : [repository.coreWorktree])];
  // Its linked worktrees' work trees (this attempt's own is bound writable, which no hiding covers) and what else of
  // the git folder holds configuration with credentials: its submodules' git folders, each worktree's config.worktree.
  const linked = entriesOf(join(gitdir, 'worktrees'));
  const linkedWorkTrees = linked.flatMap((name) => {
    const named = readSmall(join(gitdir, 'worktrees', name, 'gitdir'));
    return named === null || !isAbsolute(named) ? [] : [dirname(named)];
  });
  const configs = [join(gitdir, 'modules'), join(gitdir, 'config.worktree'), ...linked.map((name) => join(gitdir, 'worktrees', name, 'config.worktree'))];
  const records = join(gitdir, 'worktrees');
  // A writable worktree's own record, where its `.git` file leads: one folder of `<gitdir>/worktrees`, nothing else.
  const own = writable.flatMap((path) => {
    const named = gitLinkTarget(readSmall(join(real(path), '.git')) ?? '', real(path));
    if (named === null) return [];
    const record = real(named);
    return dirname(record) === records && isFolder(record) ? [record] : [];
  });
  const lent = lentObjects(gitdir);
  return { hide: [...workTrees, ...superprojectsOf(gitdir, repository.folder), ...linkedWorkTrees, ...configs, records, ...lent.hide], readOnly: [repository.gitdir], readBack: [...new Set(own)], lent: lent.objects, overlays: [{ source: repository.config, target: join(gitdir, 'config') }] };
}

/**
 * The repositories whose objects `gitdir` borrows (`objects/info/alternates`: a clone made with `--shared` or
 * `--reference`, and what those borrow in turn, five deep as git reads them): each one's git folder hidden
 * whole (its config, with its remotes' tokens) and the work tree of each that is a `.git` folder (an
 * untracked `.env`), which the alternates file names to the agent; the object folders alone bound back
 * read-only, which git in the worktree reads, after everything is hidden and never exempting what they lie in
 * from it. Only an alternate that is a git folder's `objects` counts: any other folder the file names (`/tmp`,
 * `~/.ssh`, which a lender of another user may write there) is neither bound nor followed. None inside `gitdir`
 * itself.
 */
function lentObjects(gitdir: string): { readonly hide: string[]; readonly objects: string[] } {
  const objects = borrowedObjectFolders(join(gitdir, 'objects'), (folder) => !holds(gitdir, folder) && basename(folder) === 'objects' && isGitFolder(dirname(folder))).map(({ folder }) => folder);
  const hide = objects.flatMap((folder) => {
    const owner = dirname(folder);
    return [owner, ...(basename(owner) === '.git' ? [dirname(owner)] : [])];
  });
  return { hide, objects };
}

/**
 * The top of the work tree of `gitdir` that `folder` is in: the nearest folder from it up holding a `.git`
 * that is `gitdir` or leads to it (the file a linked worktree, a submodule or a repository made with
 * `--separate-git-dir` has), none when no folder up is (a bare repository). `--repo` naming a subfolder of a
 * work tree whose git folder is elsewhere, or a submodule of a superproject whose git folder is, leaves
 * that top (an untracked `.env` there) named by nothing else.
 */
function workTreeTop(folder: string, gitdir: string): string[] {
  for (let at = real(folder); ; at = dirname(at)) {
    const dotGit = join(at, '.git');
    if (fs.existsSync(dotGit) || isSymbolicLink(dotGit)) {
      const target = real(gitLinkTarget(readSmall(dotGit) ?? '', at) ?? dotGit);
      if (target === gitdir || dirname(target) === join(gitdir, 'worktrees')) return [at];
    }
    if (dirname(at) === at) return [];
  }
}

/** Whether `path` is a link (one that leads nowhere too). */
function isSymbolicLink(path: string): boolean {
  try {
    return fs.lstatSync(path).isSymbolicLink();
  } catch {
    return false;
  }
}

/**
 * What a submodule's git folder lies in, hidden whole: a submodule's git folder is kept in its
 * superproject's (`<super>/.git/modules/<name>`, a nested one's `<super>/.git/modules/<a>/modules/<b>`, one of
 * a superproject's linked worktree `<super>/.git/worktrees/<w>/modules/<name>`), whose config holds the
 * superproject's remotes' credentials and whose work tree (`dirname` of a `.git` folder) what the operator keeps
 * there and git does not (a `.env`). Each git folder above `gitdir` that a `modules` folder leads down from, with
 * its work tree (superprojectOf); and, for a submodule whose `.git` is a folder in place (`gitdir` is
 * `<super>/<path>/.git`), each work tree above it whose `.gitmodules` names it as a submodule's path, with its git
 * folder. The submodule's git folder is bound back read-only on top.
 */
function superprojectsOf(gitdir: string, folder: string): string[] {
  const found: string[] = [];
  for (let child = dirname(gitdir), parent = dirname(child); parent !== child; child = parent, parent = dirname(parent)) {
    if (basename(child) !== 'modules' || !isGitFolder(parent)) continue;
    found.push(...superprojectOf(parent, folder));
  }
  if (basename(gitdir) !== '.git') return found;
  for (let inner = dirname(gitdir), at = dirname(inner); ; at = dirname(at)) {
    const dotGit = join(at, '.git');
    if (fs.existsSync(dotGit) && namesSubmodule(at, inner)) {
      found.push(at, ...superprojectOf(real(gitLinkTarget(readSmall(dotGit) ?? '', at) ?? dotGit), folder));
      inner = at;
    }
    if (dirname(at) === at) return found;
  }
}

/**
 * A superproject's git folder and its work tree: `dirname` of a `.git` folder, else the folder above `folder`
 * whose `.git` file leads to it (a linked worktree, a superproject made with `--separate-git-dir`); for a linked
 * worktree's git folder (`<common>/worktrees/<w>`, its `commondir` naming `<common>`), the common git folder
 * and, when that is a `.git` folder, the main work tree too.
 */
function superprojectOf(gitFolder: string, folder: string): string[] {
  const named = readSmall(join(gitFolder, 'commondir'));
  const common = named === null ? [] : [real(resolve(gitFolder, named))];
  return [gitFolder, ...(basename(gitFolder) === '.git' ? [dirname(gitFolder)] : workTreeTop(folder, gitFolder)), ...common.flatMap((path) => [path, ...(basename(path) === '.git' ? [dirname(path)] : [])])];
}

/** Whether the `.gitmodules` at the top of the work tree `top` names `inner` as a submodule's path. */
function namesSubmodule(top: string, inner: string): boolean {
  const text = readBounded(join(top, '.gitmodules'), { maxBytes: 256 * 1024 });
  if (text.kind !== 'file') return false;
  const path = relative(top, inner);
  return text.bytes.toString('utf8').split('\n').some((line) => /^\s*path\s*=\s*"?(.*?)"?\s*$/.exec(line)?.[1] === path);
}

/** Whether `path` is a git folder: its `HEAD` file and its `objects` folder, or a linked worktree's `commondir` file, are there. */
function isGitFolder(path: string): boolean {
  try {
    return fs.statSync(join(path, 'HEAD')).isFile() && (isFolder(join(path, 'objects')) || fs.statSync(join(path, 'commondir')).isFile());
  } catch {
    return false;
  }
}

/**
 * Where git's credential helpers are told to keep what they hold (credentialHelperPlaces), as a sandbox hides
 * it: the folder it is in when only this user may enter that folder (git makes a cache socket's so, and refuses
 * one others may) and it holds nothing the sandbox needs (`needed`: the home folder, the bound paths, the
 * command's files, the repository), else the file alone. A file hidden alone is hidden as the file it was when
 * the sandbox started: the store rewrites its file by renaming a new one over it, and the cache daemon makes
 * its socket anew, and either leaves the mount behind.
 */
function helperPlaces(gitArgs: readonly string[], needed: readonly string[]): string[] {
  const uid = process.getuid?.();
  return credentialHelperPlaces(gitArgs, { failClosed: true }).map(({ path }) => {
    const folder = dirname(real(path));
    let stats: fs.Stats;
    try {
      stats = fs.statSync(folder);
    } catch {
      return path;
    }
    const onlyMine = stats.isDirectory() && stats.uid === uid && (stats.mode & 0o077) === 0;
    return onlyMine && folder !== '/' && !needed.some((kept) => holds(folder, kept)) ? folder : path;
  });
}

/**
 * Looks up, once before an attempt's agent runs (a dispatch's, on its repository) or before a consult is claimed (no
 * repository), what of git's configuration its sandboxes hide (gitConfigFiles, credentialHelperPlaces), which every
 * sandbox looks up again as it is planned: a lookup git fails is a coded RUNNER_CONFIG error here, before anything ran.
 */
export function requireGitPlacesListed(repository?: Repository): void {
  gitConfigFiles(repository?.gitdir);
  credentialHelperPlaces(repository === undefined ? [] : [`--git-dir=${repository.gitdir}`], { failClosed: true });
}

/** The names in a folder, none when it cannot be read. */
function entriesOf(folder: string): string[] {
  try {
    return fs.readdirSync(folder);
  } catch {
    return [];
  }
}

/** A small file's first line (a worktree's `gitdir`), or null when it cannot be read or is not small. */
function readSmall(path: string): string | null {
  try {
    const stats = fs.lstatSync(path);
    if (!stats.isFile() || stats.size > 4096) return null;
    return fs.readFileSync(path, 'utf8').split('\n', 1)[0]!.trim();
  } catch {
    return null;
  }
}

/**
 * The sockets of the user's session a sandbox could otherwise reach, since it sees the host's files
 * and a unix socket answers whoever can name it (through a read-only mount, and from a sandbox with
 * no network of its own too): the ssh agent the runner was started with (its keys sign for whoever
 * asks, though its variable is never handed on), the session's runtime folder (gpg-agent, the
 * session bus, which starts commands outside any sandbox), the servers of the terminal
 * multiplexers the runner may run in (tmux, screen), each of which runs any command it is sent as
 * the user, outside any sandbox: the one named by `TMUX`, and each folder of the user's servers;
 * and Docker's daemon (`DOCKER_HOST`, `/run/docker.sock`), which starts a container of the host's
 * whole file system for whoever may call it; the system bus and podman's root socket; git's credential cache
 * daemon, which hands out the tokens it holds. What any service
 * leaves in the shared temporary folders is hidden as a class (sharedTempFolders).
 */
function sessionSockets(): string[] {
  const uid = process.getuid?.();
  const absolute = (path: string | undefined): string[] => (path !== undefined && isAbsolute(path) ? [path] : []);
  const tmuxFolder = absolute(process.env['TMUX_TMPDIR'])[0] ?? '/tmp';
  let user: string | null = null;
  try {
    user = userInfo().username;
  } catch {
    // no name for this uid: screen names its folder by the name
  }
  return [
    ...absolute(process.env['SSH_AUTH_SOCK']),
    ...(uid === undefined ? [] : [`/run/user/${uid}`, join(tmuxFolder, `tmux-${uid}`)]),
    ...absolute(process.env['TMUX']?.split(',')[0]),
    ...absolute(process.env['SCREENDIR']),
    ...(user === null ? [] : [`/run/screen/S-${user}`, `/tmp/screens/S-${user}`]),
    join(homedir(), '.screen'),
    ...absolute(/^unix:\/\/(.+)$/.exec(process.env['DOCKER_HOST'] ?? '')?.[1]),
    '/run/docker.sock',
    // The system bus (whose systemd starts any command for root) and podman's root socket.
    '/run/dbus',
    '/run/podman',
    // git's credential cache daemon (`credential.helper cache`), which answers `git credential-cache get` with the
    // passwords and tokens it holds to whoever connects: its folder in the home folder, else in the cache folder.
    ...credentialCacheFolders(absolute(process.env['XDG_CACHE_HOME'])[0] ?? join(homedir(), '.cache')),
  ];
}

/**
 * The folders git's credential cache daemon keeps its socket in by default: `~/.git-credential-cache` when it is
 * there, else `<cache>/git/credential`, which is made here (0700, as git makes it) when neither is, so that a
 * daemon the operator starts while the sandbox runs puts its socket in a folder already hidden: no mount can be
 * made over a path that is not there when the sandbox starts, and the read-only host allows none to be made.
 * Where it cannot be made (a read-only home), or is not made because the folder it would be made in is another
 * user's (a runner started by root with a user's HOME or XDG_CACHE_HOME would leave a folder of root's there, and
 * that user's own daemon could then make none), a daemon started later is in reach.
 */
function credentialCacheFolders(cache: string): string[] {
  const home = join(homedir(), '.git-credential-cache');
  const xdg = join(cache, 'git', 'credential');
  if (!fs.existsSync(home) && !fs.existsSync(xdg) && ownsNearest(xdg)) {
    try {
      fs.mkdirSync(xdg, { recursive: true, mode: 0o700 });
    } catch {
      // not made: said above
    }
  }
  return [home, xdg];
}

/** Whether the nearest folder of `path` that is there (itself or a parent) is this process's user's own. */
function ownsNearest(path: string): boolean {
  for (let at = path; ; at = dirname(at)) {
    try {
      return fs.statSync(at).uid === process.getuid?.();
    } catch {
      if (dirname(at) === at) return false;
    }
  }
}

/**
 * The shared temporary folders (/tmp, /var/tmp and the runner's TMPDIR): every sandbox gets an empty one of
 * its own over each, and only the paths it is given there (its worktree, its command's files) are bound
 * again on top. Any user's service may leave a unix socket there that runs, signs or opens what it is sent
 * (another login's ssh agent, an ssh ControlMaster, gpg-agent, an Emacs or Neovim server, VS Code's IPC,
 * Jupyter, a session bus, X11, podman), and the sandbox could name it through the read-only host: the
 * folders are hidden as a class, not socket by socket. Never one that holds the home folder or is `/`.
 */
function sharedTempFolders(): string[] {
  return [...new Set(['/tmp', '/var/tmp', tmpdir()].map(real))].filter((path) => !neverHidden(path));
}

/**
 * The files of the commands a sandbox runs, which stay visible in it (BwrapLayout.keep): every part of
 * each command that names a file (absolute, or from the runner's folder), so `node <pkg>/bin/codex.js`
 * keeps the script as well as node. Never the command's other arguments (a prompt, a worktree).
 */
export function commandFiles(commands: ReadonlyArray<readonly string[]>): string[] {
  return [...new Set(commands.flat().filter((part) => part !== '').map((part) => resolve(part)))].filter((part) => {
    try {
      return fs.statSync(part).isFile();
    } catch {
      return false;
    }
  });
}

/**
 * What is bound back, read-only, of a hidden folder for a file of the command inside it: the folder of
 * node packages it lies in (a package's dependencies lie beside it), else the nearest folder below the
 * hidden one holding a package.json, else the file's own folder; the file alone when that is the hidden
 * folder itself. Null when the hidden entry is the file.
 */
function keptWithin(hidden: string, file: string): string | null {
  if (hidden === file) return null;
  const parts = file.slice(hidden.length + 1).split('/');
  const modules = parts.indexOf('node_modules');
  if (modules !== -1 && modules < parts.length - 1) return join(hidden, ...parts.slice(0, modules + 1));
  for (let folder = dirname(file); folder !== hidden && holds(hidden, folder); folder = dirname(folder)) {
    if (fs.existsSync(join(folder, 'package.json'))) return folder;
  }
  return dirname(file) === hidden ? file : dirname(file);
}

/** Whether `folder` is `path` or holds it (both resolved). */
function holds(folder: string, path: string): boolean {
  return path === folder || path.startsWith(`${folder}/`);
}

/**
 * Whether no sandbox hides `path` (named by where it really is): the root, the home folder, or a
 * folder that holds it, which every sandbox needs. A runner's folder such as this is in every
 * sandbox's sight, its own runner's and every other's on the machine (runner/startup.ts refuses it).
 */
export function neverHidden(path: string): boolean {
  const folder = real(path);
  return folder === '/' || holds(folder, real(homedir()));
}

/** The bwrap argv prefix for `layout`; the command follows it. */
export function bwrapArgs(bwrap: string, layout: BwrapLayout): string[] {
  // Every path is named by where it really is (`real`): a mount follows links, so a /tmp that links to /private/tmp,
  // a TMPDIR or a worktree that links into /tmp would otherwise find its target gone under an emptied folder.
  // A folder that holds the command's own files or a bound path is hidden and what is needed of it mounted again
  // on top (binds come after the tmpfs), so its siblings stay hidden.
  const keep = (layout.keep ?? []).map(real);
  const repository = repositoryLayout(layout.repository, layout.writable);
  const readOnly = layout.readOnly ?? [];
  const gitdirs = repository.readOnly.map(real);
  const bound = [...layout.writable, ...readOnly].map(real).concat(gitdirs);
  // The runner's sockets: only the one folder of them this sandbox is given is bound back on top.
  // Every runner's folders on this machine, not only this one's (util/runner-folders.ts); never a folder that
  // holds the home folder or one of this process's own folders, which a careless key path would otherwise hide.
  const home = real(homedir());
  const own = [home, ...(layout.privateDirs ?? []).map((dir) => dir.target)].map(real);
  const others = [stateRoot(), ...registeredPrivateFolders()].map(real).filter((path) => !own.some((kept) => holds(path, kept)));
  // The shared temporary folders are emptied first (never one a bound path holds), and what the sandbox is given
  // there is bound again on top: the folder of each of the command's own files read-only (a wrapper script runs
  // what lies beside it), or the file alone when its folder is a shared one, the bound paths as bound; what else
  // is hidden in them needs a mount of its own only inside such a folder.
  const temp = sharedTempFolders().filter((folder) => isFolder(folder) && !bound.some((path) => holds(path, folder)));
  const inTemp = (path: string): boolean => temp.some((folder) => holds(folder, path));
  const keptInTemp = [...new Set(keep.filter((path) => inTemp(path) && fs.existsSync(path)).map((path) => (temp.includes(dirname(path)) ? path : dirname(path))))];
  // Each looked at once: a folder a neighbour removes meanwhile is simply not hidden (it is not there to hide).
  const hidden = [...new Set([...layout.hide, ...repository.hide, ...CREDENTIALS.map((name) => join(homedir(), name)), ...environmentSecretFiles(process.env).map((file) => file.path), ...environmentCredentialPlaces(process.env), ...gitConfigFiles(layout.repository?.gitdir), ...helperPlaces(layout.repository === undefined ? [] : [`--git-dir=${layout.repository.gitdir}`], [home, ...bound, ...keep, ...(layout.repository === undefined ? [] : [real(layout.repository.folder)])]), ...CONTAINER_SECRET_FOLDERS, ...sessionSockets(), privateSocketsDir()].map(real).concat(others))]
    // Never the root, the home folder or one holding it, whatever link named it (a key linked to a file in $HOME names its folder).
    .filter((path) => !neverHidden(path) && !bound.includes(path) && !keep.some((kept) => kept === path) && (!inTemp(path) || keptInTemp.some((kept) => holds(kept, path))))
    .flatMap((path) => {
      let stats: fs.Stats;
      try {
        stats = fs.statSync(path);
      } catch {
        return [];
      }
      return [{ path, folder: stats.isDirectory() }];
    });
  // A hidden folder that holds one of the command's own files (outside the shared temporary folders) stays hidden,
  // and what the file needs of it is bound back on top (keptWithin): an agent installed inside the repository
  // (node_modules, a script of its tools) runs, and the repository's .env beside it stays hidden.
  const keptBack = [...new Set(hidden.flatMap(({ path, folder }) => (folder ? keep.filter((kept) => !inTemp(kept) && holds(path, kept)).map((kept) => keptWithin(path, kept)) : [])).filter((path): path is string => path !== null))];
  // What lies in a hidden folder, with nothing bound back between them, is hidden with it: a mount of its own there would
  // make its name in the emptied folder (the key file `coo.key`, hidden by name too, in the vault its link leads to).
  const boundBack = [...gitdirs, ...repository.lent, ...repository.readBack, ...keptBack, ...keptInTemp, ...bound];
  const covered = ({ path }: { path: string }): boolean =>
    hidden.some((other) => other.folder && other.path !== path && holds(other.path, path) && !boundBack.some((back) => holds(other.path, back) && holds(back, path)));
  const shown = hidden.filter((entry) => !covered(entry));
  const inKeptBack = (path: string): boolean => keptBack.some((kept) => path !== kept && holds(kept, path));
  const inGitdir = (path: string): boolean => gitdirs.some((gitdir) => path !== gitdir && holds(gitdir, path));
  const inReadBack = (path: string): boolean => repository.readBack.some((record) => path !== record && holds(record, path));
  const hide = ({ path, folder }: { path: string; folder: boolean }): string[] => (folder ? ['--tmpfs', path] : ['--ro-bind', '/dev/null', path]);
  return [
    bwrap,
    '--ro-bind', '/', '/',
    '--dev', '/dev',
    ...(layout.ownPids === true ? ['--unshare-pid', '--die-with-parent'] : []),
    ...(layout.noNetwork === true ? ['--unshare-net'] : []),
    '--proc', '/proc',
    ...temp.flatMap((folder) => ['--tmpfs', folder]),
    ...(layout.privateDirs ?? []).flatMap(({ source, target }) => {
      fs.mkdirSync(target, { recursive: true, mode: 0o700 });
      return ['--bind', resolve(source), target];
    }),
    ...keptInTemp.flatMap((path) => ['--ro-bind', path, path]),
    // The repository's git folder, read-only, over its hidden work tree and before the writable paths and what is
    // hidden inside it: a state folder inside the git folder (its worktrees, their scratch) stays writable.
    ...shown.filter(({ path }) => !inGitdir(path)).flatMap(hide),
    ...gitdirs.flatMap((path) => ['--ro-bind', path, path]),
    ...shown.filter(({ path }) => inGitdir(path) && !inReadBack(path)).flatMap(hide),
    // The object folders the target borrows from, read-only, over what hides them (their repository, a shared
    // temporary folder), and what else is hidden inside them again: they exempt nothing from being hidden.
    ...repository.lent.flatMap((path) => ['--ro-bind', path, path]),
    ...shown.filter(({ path }) => repository.lent.some((folder) => path !== folder && holds(folder, path))).flatMap(hide),
    // The records of the sandbox's own worktrees again, over the hidden `<gitdir>/worktrees`, and what is hidden in them.
    ...repository.readBack.flatMap((path) => ['--ro-bind', path, path]),
    ...shown.filter(({ path }) => inReadBack(path)).flatMap(hide),
    ...keptBack.flatMap((path) => ['--ro-bind', path, path]),
    ...shown.filter(({ path }) => inKeptBack(path)).flatMap(hide),
    // The command's own files themselves again, on top: a folder hidden over them (the key's folder, where an operator
    // keeps a wrapper script too) hides what lies beside them, never the command.
    ...keep.filter((path) => inTemp(path) && fs.existsSync(path)).flatMap((path) => ['--ro-bind', path, path]),
    ...layout.writable.flatMap((path) => ['--bind', real(path), real(path)]),
    ...readOnly.flatMap((path) => ['--ro-bind', real(path), real(path)]),
    ...[...(layout.overlays ?? []), ...repository.overlays].flatMap((overlay) => ['--ro-bind', resolve(overlay.source), overlay.target]),
    '--chdir', resolve(layout.chdir),
    '--',
  ];
}

/** Whether `path` is a folder (not one that is gone). */
function isFolder(path: string): boolean {
  try {
    return fs.statSync(path).isDirectory();
  } catch {
    return false;
  }
}

/** Kills a process group (detached children lead their own), or the process alone if the group is gone. */
export function killGroup(pid: number): void {
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
}

