import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join, resolve } from 'node:path';
import { CooError } from '../errors.js';
import { LIMITS } from '../limits.js';
import { runGit } from '../util/exec.js';

/** Where a fetch leaves the remote's main: apart from the local one, which moves only after verification. */
export const ORIGIN_REF = 'refs/remotes/origin/main';

/** A fetch or push that has not finished in this long is given up (a remote that accepts the connection and then hangs). */
const REMOTE_TIMEOUT_MS = 120_000;

/** What a git command against the remote said; it never throws for git's own failure. */
export interface RemoteGitResult {
  readonly ok: boolean;
  readonly stdout: string;
  readonly stderr: string;
}

/**
 * Runs stock git against the clone's origin: never a shell, never a prompt (a transport that wants
 * a password fails instead of waiting for a terminal), bounded in time.
 */
export function runRemoteGit(gitdir: string, args: readonly string[], env: NodeJS.ProcessEnv = {}): Promise<RemoteGitResult> {
  return new Promise((done) => {
    const child = spawn('git', ['--git-dir', gitdir, ...args], {
      env: { ...process.env, GIT_TERMINAL_PROMPT: '0', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
      timeout: REMOTE_TIMEOUT_MS,
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => {
      if (stdout.length < 65_536) stdout += chunk.toString('utf8');
    });
    child.stderr.on('data', (chunk: Buffer) => {
      if (stderr.length < 65_536) stderr += chunk.toString('utf8');
    });
    child.on('error', (error) => done({ ok: false, stdout, stderr: `cannot run git: ${error.message}` }));
    child.on('close', (code, signal) => done({ ok: code === 0, stdout, stderr: signal === null ? stderr : `${stderr}git was stopped (${signal}) after ${REMOTE_TIMEOUT_MS / 1000} s` }));
  });
}

/** git's last words on a failure, one line, for a message. */
export function gitSaid(result: RemoteGitResult): string {
  const lines = result.stderr.split('\n').map((line) => line.trim()).filter((line) => line !== '');
  const fatal = lines.find((line) => line.startsWith('fatal:')) ?? lines[lines.length - 1] ?? 'no output';
  return fatal.slice(0, LIMITS.pathChars);
}

/** A URL as git records it: a local path made absolute, no trailing slash. */
function normalized(url: string): string {
  const trimmed = url.replace(/\/+$/, '');
  return /^[a-z][a-z0-9+.-]*:\/\//i.test(trimmed) || /^[^/]+@[^/]+:/.test(trimmed) ? trimmed : resolve(trimmed);
}

/**
 * Checks that `url` is the clone's origin (what `coo clone` recorded): a write goes to the remote
 * this clone verified, never to another one named by mistake.
 */
export async function checkOrigin(gitdir: string, url: string): Promise<void> {
  const origin = (await runGit(['--git-dir', gitdir, 'config', '--get', 'remote.origin.url']).catch(() => Buffer.from(''))).toString('utf8').trim();
  if (origin === '') {
    throw new CooError('USAGE', `${gitdir} has no origin: --remote works through a clone of the remote (coo clone ${url} DIR)`);
  }
  if (normalized(origin) !== normalized(url)) {
    throw new CooError('USAGE', `--remote ${url} is not the origin of ${gitdir} (${origin}); give that URL, or clone ${url} with coo clone`);
  }
}

/** One ssh connection that a long-lived client's git commands share (OpenSSH's connection multiplexing). */
export interface SharedSshConnection {
  /** The environment that makes git's ssh use the shared connection. */
  readonly env: NodeJS.ProcessEnv;
  /** Ends the shared connection and removes its socket's folder. */
  close(): void;
}

/** An ssh:// URL or git's scp-like `[user@]host:path`. */
function isSshUrl(url: string): boolean {
  return /^(ssh|git\+ssh|ssh\+git):\/\//i.test(url) || (!/^[a-z][a-z0-9+.-]*:\/\//i.test(url) && /^[^/:]+:/.test(url));
}

/**
 * Shares one ssh connection among the git commands a long-lived client (a runner polling its
 * remote every few seconds) runs against an ssh remote: each ls-remote, fetch and push then opens a
 * channel on it instead of a new login (key exchange, authentication and a new session process on
 * the server each time). Only for OpenSSH as git would run it (GIT_SSH_COMMAND, else core.sshCommand,
 * else ssh; not GIT_SSH), and not for other transports: then null, and git connects as usual. The
 * socket lives in a private folder of this process; the connection ends at `close`, or by itself
 * after 30 s without use if the process dies first.
 */
export function shareSshConnection(gitdir: string, url: string): SharedSshConnection | null {
  if (!isSshUrl(url) || (process.env['GIT_SSH'] ?? '') !== '') return null;
  const configured = spawnSync('git', ['--git-dir', gitdir, 'config', '--get', 'core.sshCommand'], { encoding: 'utf8' }).stdout?.trim() ?? '';
  const command = process.env['GIT_SSH_COMMAND'] || configured || 'ssh';
  if (basename(command.trim().split(/\s+/)[0] ?? '') !== 'ssh') return null;
  const dir = mkdtempSync(join(tmpdir(), 'coo-ssh-'));
  if (dir.includes("'")) {
    rmSync(dir, { recursive: true, force: true });
    return null;
  }
  return {
    env: { GIT_SSH_COMMAND: `${command} -o ControlMaster=auto -o 'ControlPath=${join(dir, '%C')}' -o ControlPersist=30` },
    close: () => {
      for (const name of readdirSync(dir)) spawnSync('ssh', ['-o', `ControlPath=${join(dir, name)}`, '-O', 'exit', 'shared'], { stdio: 'ignore', timeout: 5_000 });
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
