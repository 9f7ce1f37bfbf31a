import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { userInfo } from 'node:os';
import { join } from 'node:path';
import { freePort } from './ports.js';

/** Debian's OpenSSH server (.ci/run installs openssh-server). */
export const SSHD = '/usr/sbin/sshd';

export interface SshServer {
  readonly port: number;
  /** An ssh:// URL for a path on this machine, as the current user. */
  url(path: string): string;
  /** What a client process needs to reach this server with stock git: its own key, this host's key pinned, no agent, no prompt. */
  readonly env: NodeJS.ProcessEnv;
  /** Stops the server (the sessions it serves end with their commands). */
  close(): Promise<void>;
}

function keygen(file: string, comment: string): void {
  execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', comment, '-f', file], { stdio: 'ignore' });
}

/** Resolves once sshd has written its pid file (after it bound its port), or rejects with what it said when it exits first. */
function ready(child: ChildProcess, pidFile: string, log: () => string): Promise<void> {
  return new Promise((resolve, reject) => {
    const onExit = (code: number | null): void => {
      clearInterval(timer);
      reject(new Error(`sshd exited with ${code}: ${log().trim()}`));
    };
    const timer = setInterval(() => {
      if (!existsSync(pidFile)) return;
      clearInterval(timer);
      child.off('exit', onExit);
      resolve();
    }, 20);
    child.once('exit', onExit);
  });
}

/**
 * Starts an OpenSSH server on 127.0.0.1 on a free port, as the current user, for one test file.
 * Every key here is a test fixture made for this run in `dir` (the file names say so): a host key,
 * a client key, the authorized_keys that admits it and the known_hosts that pins the host key.
 * Clients run stock git over ssh:// with the environment `env` gives.
 */
export async function startSshd(dir: string): Promise<SshServer> {
  mkdirSync(dir, { recursive: true });
  const hostKey = join(dir, 'test-fixture-ssh-host-key');
  const clientKey = join(dir, 'test-fixture-ssh-client-key');
  const authorized = join(dir, 'test-fixture-authorized_keys');
  keygen(hostKey, 'coo test fixture: sshd host key, not a secret');
  keygen(clientKey, 'coo test fixture: git client key, not a secret');
  // sshd runs every command through the user's login shell, and bash started by sshd reads ~/.bashrc
  // (Debian builds it so): a developer's rc file (a version manager's init, say) would then run on
  // every fetch and push, which costs the tests and benches most of their CPU. The session's HOME is
  // an empty folder instead, as on a git server's own account.
  const home = join(dir, 'session-home');
  mkdirSync(home, { recursive: true });
  writeFileSync(authorized, `environment="HOME=${home}" ${readFileSync(`${clientKey}.pub`, 'utf8')}`);
  // sshd run by root needs its privilege separation directory (the Debian service makes it at start).
  if (process.getuid?.() === 0) mkdirSync('/run/sshd', { recursive: true, mode: 0o755 });
  for (let attempt = 1; ; attempt += 1) {
    const port = await freePort();
    const pidFile = join(dir, `sshd-${port}.pid`);
    const config = join(dir, `sshd-${port}.config`);
    writeFileSync(
      config,
      [
        `Port ${port}`,
        'ListenAddress 127.0.0.1',
        `HostKey ${hostKey}`,
        `AuthorizedKeysFile ${authorized}`,
        'PermitUserEnvironment HOME',
        `PidFile ${pidFile}`,
        'UsePAM no',
        'StrictModes no',
        'PasswordAuthentication no',
        'KbdInteractiveAuthentication no',
        'PermitRootLogin prohibit-password',
        'AllowAgentForwarding no',
        'AllowTcpForwarding no',
        'X11Forwarding no',
        'PrintMotd no',
        'LogLevel ERROR',
        '',
      ].join('\n'),
    );
    let log = '';
    const child = spawn(SSHD, ['-D', '-e', '-f', config], { stdio: ['ignore', 'ignore', 'pipe'] });
    child.stderr!.on('data', (chunk: Buffer) => (log += chunk.toString('utf8')));
    try {
      await ready(child, pidFile, () => log);
    } catch (error) {
      // Another process took the port between the probe and sshd's bind: take another one.
      if (attempt < 5 && /Bind to port|Address already in use/i.test(log)) continue;
      throw error;
    }
    const knownHosts = join(dir, `test-fixture-known_hosts-${port}`);
    const [type, body] = readFileSync(`${hostKey}.pub`, 'utf8').split(' ');
    writeFileSync(knownHosts, `[127.0.0.1]:${port} ${type} ${body}\n`);
    const exited = new Promise<void>((resolve) => (child.exitCode !== null ? resolve() : child.once('exit', () => resolve())));
    const user = userInfo().username;
    return {
      port,
      url: (path) => `ssh://${user}@127.0.0.1:${port}${path}`,
      env: {
        GIT_SSH_COMMAND: [
          'ssh -F /dev/null',
          `-i ${clientKey}`,
          '-o IdentitiesOnly=yes -o IdentityAgent=none -o BatchMode=yes',
          `-o StrictHostKeyChecking=yes -o UserKnownHostsFile=${knownHosts} -o GlobalKnownHostsFile=/dev/null`,
          '-o ConnectTimeout=10 -o LogLevel=ERROR',
        ].join(' '),
        SSH_AUTH_SOCK: '',
      },
      close: async () => {
        if (child.exitCode === null) child.kill('SIGTERM');
        await exited;
      },
    };
  }
}
