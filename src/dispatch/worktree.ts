import { execFile } from 'node:child_process';
import * as fs from 'node:fs';
import { join, resolve } from 'node:path';
import { isBranchName } from '../authority/rules/intents/dispatch.js';
import { CooError } from '../errors.js';
import { CatFileReader } from '../ledger/object-store.js';
import { LIMITS } from '../limits.js';
import { gitEnvironment, isolatedGitEnvironment } from '../util/git-env.js';
import { gitLinkTarget } from '../util/git-link.js';
import { readBounded } from '../util/bounded-read.js';
import { removeTree } from '../util/remove-tree.js';
import { materialize } from './checkout.js';
import { ATTEMPT_FOLDER_REMEDY } from './process.js';
import { writeOwnFile } from '../util/own-write.js';
import { listTree } from '../lane/commit-files.js';
import type { TreeFile } from './git-tree.js';

/**
 * One attempt's worktree: a `git worktree` of the target repository at the pinned base commit, on
 * a branch of its own, its files written from the base's objects byte for byte (checkout.ts). The
 * EA writes only the work tree; every git command the COO runs afterwards names the git folders
 * itself (never the `.git` file the EA could have replaced), runs with hooks and fsmonitor off, and
 * never takes the EA's work tree as its own: what the EA left is read by the runner (work-walk.ts).
 */

export interface AttemptWorktree {
  /** The target repository's common git folder (objects, refs). */
  readonly gitdir: string;
  /** This worktree's own git folder (HEAD, index), inside the common one. */
  readonly worktreeGitdir: string;
  readonly path: string;
  readonly branch: string;
  readonly base: string;
  /** The bytes of the work tree's `.git` link as created: a changed link is tampering. */
  readonly gitLink: string;
}

export interface GitOptions {
  readonly env?: NodeJS.ProcessEnv;
  /** Start git with none of this process's GIT_* variables (util/git-env.ts isolatedGitEnvironment). */
  readonly isolated?: boolean;
  readonly input?: Buffer | string;
  readonly cwd?: string;
}

const SAFE = ['-c', 'core.hooksPath=/dev/null', '-c', 'core.fsmonitor=false', '-c', 'core.untrackedCache=false'];

/** git with hooks and fsmonitor off, no system config, no replaced objects, output as bytes. */
export function safeGit(args: readonly string[], options: GitOptions = {}): Promise<Buffer> {
  return new Promise((resolvePromise, reject) => {
    const child = execFile(
      'git',
      [...SAFE, ...args],
      { cwd: options.cwd, env: (options.isolated === true ? isolatedGitEnvironment : gitEnvironment)({ GIT_CONFIG_NOSYSTEM: '1', GIT_TERMINAL_PROMPT: '0', ...options.env }), encoding: 'buffer', maxBuffer: 64 * 1024 * 1024 },
      (error, stdout, stderr) => {
        if (error !== null) {
          // git's own line, not a hint before it (GIT_GRAFT_FILE=/dev/null has every git say one: util/git-env.ts).
          const message = Buffer.from(stderr).toString('utf8').trim().split('\n').find((line) => !line.startsWith('hint:')) ?? error.message;
          reject(new CooError('GIT_FAILED', `git ${args.slice(0, 3).join(' ')}: ${message.slice(0, LIMITS.pathChars)}`, { cause: error }));
          return;
        }
        resolvePromise(Buffer.from(stdout));
      },
    );
    if (options.input !== undefined) child.stdin?.end(options.input);
  });
}

export { listTree };

/**
 * The keys of a repository's configuration git in a sandboxed worktree reads the repository by: its
 * format and extensions (`objectformat=sha256`), and how its files are read and checked out. None of
 * its remotes (whose URLs carry tokens), headers (`http.extraHeader`), credential helpers, proxies,
 * includes or programs: what a sandbox reads there it may write out in any cipher.
 */
const SANDBOX_CONFIG = /^(?:core\.(?:repositoryformatversion|bare|filemode|ignorecase|precomposeunicode|symlinks|autocrlf|eol|safecrlf|logallrefupdates|protecthfs|protectntfs)|extensions\.[a-z0-9]+)$/;

/**
 * Writes at `path` the configuration of the repository at `gitdir` a sandbox around an attempt is
 * given in place of its own (util/bubblewrap.ts Repository): the keys of SANDBOX_CONFIG alone, from
 * its own file (not what that includes). Returns the work tree its `core.worktree` names, if any
 * (absolute; a relative one is from the git folder), which the sandbox hides as well.
 */
export async function writeSandboxConfig(gitdir: string, path: string): Promise<{ readonly coreWorktree: string | null }> {
  const listed = (await safeGit([`--git-dir=${gitdir}`, 'config', '--file', join(gitdir, 'config'), '--list', '--null'])).toString('utf8');
  const sections = new Map<string, string[]>();
  let coreWorktree: string | null = null;
  for (const entry of listed.split('\0')) {
    const newline = entry.indexOf('\n');
    const key = newline < 0 ? entry : entry.slice(0, newline);
    if (key === 'core.worktree' && newline >= 0) coreWorktree = resolve(gitdir, entry.slice(newline + 1));
    if (!SANDBOX_CONFIG.test(key)) continue;
    const value = newline < 0 ? 'true' : entry.slice(newline + 1);
    // A value git would have to escape is none these keys take.
    if ([...value].some((char) => char < ' ' || char === '\x7f')) continue;
    const [section, name] = [key.slice(0, key.indexOf('.')), key.slice(key.indexOf('.') + 1)];
    sections.set(section, [...(sections.get(section) ?? []), `\t${name} = "${value.replace(/[\\"]/g, '\\$&')}"`]);
  }
  const text = [...sections].map(([section, lines]) => `[${section}]\n${lines.join('\n')}\n`).join('');
  writeOwnFile(path, text, { mode: 0o444, what: "the target repository's configuration for the sandbox", remedy: ATTEMPT_FOLDER_REMEDY, code: 'IO_ERROR' });
  return { coreWorktree };
}

/**
 * Whether the `.git` at the top of a worktree or checkout is no longer the link git made (`gitLink`):
 * changed, replaced by a folder, a link or anything else, or removed. Read without following it.
 */
export function gitLinkChanged(root: string, gitLink: string): boolean {
  const link = readBounded(resolve(root, '.git'), { maxBytes: 4096 });
  return link.kind !== 'file' || link.bytes.toString('utf8') !== gitLink;
}

export interface CheckoutOptions {
  /** The target repository's common git folder. */
  readonly gitdir: string;
  /** A full commit id. */
  readonly commit: string;
  /** Where the worktree goes; must not exist. */
  readonly path: string;
  /** A new branch at the commit; detached when absent. */
  readonly branch?: string;
}

export interface Checkout {
  readonly path: string;
  readonly worktreeGitdir: string;
  readonly gitLink: string;
  /** The commit's files, as written. */
  readonly files: readonly TreeFile[];
}

/**
 * A new worktree of the target at `commit`: git makes the worktree (its `.git` link, HEAD and an
 * index of the commit) without checking anything out, and the files are written from the objects.
 */
export async function checkoutCommit(options: CheckoutOptions): Promise<Checkout> {
  const path = resolve(options.path);
  const where = options.branch === undefined ? ['--detach'] : ['-b', options.branch];
  try {
    await safeGit([`--git-dir=${options.gitdir}`, 'worktree', 'add', '--quiet', '--no-checkout', ...where, path, options.commit]);
  } catch (error) {
    if (error instanceof CooError && /already exists/.test(error.message)) throw new CooError('USAGE', `branch ${options.branch ?? ''} already exists: an attempt gets a branch of its own`);
    throw error;
  }
  const gitLink = fs.readFileSync(resolve(path, '.git'), 'utf8');
  const worktreeGitdir = gitLinkTarget(gitLink, path);
  if (worktreeGitdir === null) throw new CooError('GIT_FAILED', `git worktree add left no gitdir link in ${path}`);
  // The index of the commit (for `git status` and `git diff` in the worktree; never evidence) and the commit's files, at once.
  const [files] = await Promise.all([listTree(options.gitdir, options.commit), safeGit([`--git-dir=${worktreeGitdir}`, 'read-tree', options.commit])]);
  const reader = new CatFileReader(options.gitdir);
  try {
    await materialize(reader, files, path);
  } finally {
    reader.close();
  }
  return { path, worktreeGitdir, gitLink, files };
}

export interface CreateWorktreeOptions {
  /** The target repository (its work tree or its git folder). */
  readonly repo: string;
  /** The pinned base: a full commit id. */
  readonly base: string;
  readonly branch: string;
  /** Where the worktree goes; must not exist. */
  readonly path: string;
}

/** The target repository's common git folder, and `base` (a full commit id) as git resolves it. */
async function resolveBase(repo: string, base: string): Promise<{ readonly gitdir: string; readonly commit: string | undefined }> {
  const [common, commit] = (await safeGit(['rev-parse', '--git-common-dir', `${base}^{commit}`], { cwd: repo })).toString('utf8').trim().split('\n');
  if (common === undefined) throw new CooError('USAGE', `${repo} is not a git repository`);
  return { gitdir: resolve(repo, common), commit };
}

/** A fresh worktree at the base commit on a new branch; an existing branch or path is refused. */
export async function createAttemptWorktree(options: CreateWorktreeOptions): Promise<AttemptWorktree> {
  if (!isBranchName(options.branch)) {
    throw new CooError('USAGE', `${JSON.stringify(options.branch)} is not a branch name the lane uses`);
  }
  if (!/^[0-9a-f]{40}$/.test(options.base)) throw new CooError('USAGE', 'the base must be a full commit id');
  if (fs.existsSync(options.path)) throw new CooError('USAGE', `${options.path} already exists: an attempt gets a fresh worktree`);
  const { gitdir, commit } = await resolveBase(options.repo, options.base);
  if (commit !== options.base) throw new CooError('USAGE', `${options.base} is not a commit in ${options.repo}`);
  // `worktree add -b` refuses a branch that exists.
  const checkout = await checkoutCommit({ gitdir, commit: options.base, path: options.path, branch: options.branch });
  return { gitdir, worktreeGitdir: checkout.worktreeGitdir, path: checkout.path, branch: options.branch, base: options.base, gitLink: checkout.gitLink };
}

/**
 * Removes a worktree the agent (or code it wrote) had: the folder first, by the runner's own hostile-safe
 * removal, then git's record of it. `git worktree remove` is not used: it reads the folder's `.git`,
 * which may be a FIFO. The branch and its commits stay.
 */
export async function removeWorktree(gitdir: string, path: string): Promise<void> {
  removeTree(path);
  await safeGit([`--git-dir=${gitdir}`, 'worktree', 'prune']).catch(() => undefined);
}

/** Removes the attempt's worktree; the branch and its commits stay. */
export async function removeAttemptWorktree(worktree: AttemptWorktree): Promise<void> {
  await removeWorktree(worktree.gitdir, worktree.path);
}
