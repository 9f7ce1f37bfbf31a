import { execFile } from 'node:child_process';
import * as fs from 'node:fs';
import { resolve } from 'node:path';
import { isBranchName } from '../authority/dispatch-rules.js';
import { CooError } from '../errors.js';
import { LIMITS } from '../limits.js';

/**
 * One attempt's worktree: a `git worktree` of the target repository at the pinned base commit, on
 * a branch of its own. The EA writes only the work tree; every git command the COO runs afterwards
 * names the git folders itself (never the `.git` file the EA could have replaced) and turns off
 * hooks and fsmonitor, so nothing the EA wrote runs in the COO's process.
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
  readonly input?: Buffer | string;
  readonly cwd?: string;
}

const SAFE = ['-c', 'core.hooksPath=/dev/null', '-c', 'core.fsmonitor=false', '-c', 'core.untrackedCache=false'];

/** git with hooks and fsmonitor off, no system config, output as bytes. */
export function safeGit(args: readonly string[], options: GitOptions = {}): Promise<Buffer> {
  return new Promise((resolvePromise, reject) => {
    const child = execFile(
      'git',
      [...SAFE, ...args],
      { cwd: options.cwd, env: { ...process.env, GIT_CONFIG_NOSYSTEM: '1', GIT_TERMINAL_PROMPT: '0', ...options.env }, encoding: 'buffer', maxBuffer: 64 * 1024 * 1024 },
      (error, stdout, stderr) => {
        if (error !== null) {
          const message = Buffer.from(stderr).toString('utf8').trim().split('\n')[0] ?? error.message;
          reject(new CooError('GIT_FAILED', `git ${args.slice(0, 3).join(' ')}: ${message.slice(0, LIMITS.pathChars)}`, { cause: error }));
          return;
        }
        resolvePromise(Buffer.from(stdout));
      },
    );
    if (options.input !== undefined) child.stdin?.end(options.input);
  });
}

/** git in the attempt's worktree, with both git folders named explicitly. */
export function worktreeGit(worktree: AttemptWorktree, args: readonly string[], options: GitOptions = {}): Promise<Buffer> {
  return safeGit([`--git-dir=${worktree.worktreeGitdir}`, `--work-tree=${worktree.path}`, ...args], { ...options, cwd: worktree.path });
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

/** A fresh worktree at the base commit on a new branch; an existing branch or path is refused. */
export async function createAttemptWorktree(options: CreateWorktreeOptions): Promise<AttemptWorktree> {
  if (!isBranchName(options.branch)) {
    throw new CooError('USAGE', `${JSON.stringify(options.branch)} is not a branch name the lane uses`);
  }
  if (!/^[0-9a-f]{40}$/.test(options.base)) throw new CooError('USAGE', 'the base must be a full commit id');
  if (fs.existsSync(options.path)) throw new CooError('USAGE', `${options.path} already exists: an attempt gets a fresh worktree`);
  // One rev-parse for the common git folder and the base; `worktree add -b` refuses a branch that exists.
  const [common, commit] = (await safeGit(['rev-parse', '--git-common-dir', `${options.base}^{commit}`], { cwd: options.repo })).toString('utf8').trim().split('\n');
  if (commit !== options.base || common === undefined) throw new CooError('USAGE', `${options.base} is not a commit in ${options.repo}`);
  const gitdir = resolve(options.repo, common);
  const path = resolve(options.path);
  try {
    await safeGit([`--git-dir=${gitdir}`, 'worktree', 'add', '--quiet', '-b', options.branch, path, options.base]);
  } catch (error) {
    if (error instanceof CooError && /already exists/.test(error.message)) throw new CooError('USAGE', `branch ${options.branch} already exists: an attempt gets a branch of its own`);
    throw error;
  }
  const gitLink = fs.readFileSync(resolve(path, '.git'), 'utf8');
  const match = /^gitdir: (.+)\n?$/.exec(gitLink);
  if (match === null) throw new CooError('GIT_FAILED', `git worktree add left no gitdir link in ${path}`);
  const worktreeGitdir = resolve(path, match[1]!);
  return { gitdir, worktreeGitdir, path, branch: options.branch, base: options.base, gitLink };
}

/** Removes the work tree and its git folder; the branch and its commits stay. */
export async function removeAttemptWorktree(worktree: AttemptWorktree): Promise<void> {
  await safeGit([`--git-dir=${worktree.gitdir}`, 'worktree', 'remove', '--force', '--force', worktree.path]).catch(() => undefined);
  fs.rmSync(worktree.path, { recursive: true, force: true });
  await safeGit([`--git-dir=${worktree.gitdir}`, 'worktree', 'prune']).catch(() => undefined);
}
