// An OpenSSH server on 127.0.0.1 for the remote benches (Debian's openssh-server), with bench-only keys.
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { userInfo } from 'node:os';
import { join } from 'node:path';

function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

export async function startSshd(dir) {
  mkdirSync(dir, { recursive: true });
  for (const name of ['bench-fixture-host-key', 'bench-fixture-client-key']) {
    execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', 'coo bench fixture, not a secret', '-f', join(dir, name)]);
  }
  // The session's HOME is a bare folder, so the login shell reads no rc file of the user running the bench (see test/helpers/sshd.ts).
  mkdirSync(join(dir, 'home'), { recursive: true });
  // sshd reads the file at each login, so a forced command set later holds for the sessions after it.
  const authorize = (command) =>
    writeFileSync(
      join(dir, 'bench-fixture-authorized_keys'),
      `environment="HOME=${join(dir, 'home')}"${command === null ? '' : `,command="${command}"`} ${readFileSync(join(dir, 'bench-fixture-client-key.pub'), 'utf8')}`,
    );
  authorize(null);
  if (process.getuid?.() === 0) mkdirSync('/run/sshd', { recursive: true, mode: 0o755 });
  const port = await freePort();
  const pidFile = join(dir, 'sshd.pid');
  writeFileSync(
    join(dir, 'sshd.config'),
    [`Port ${port}`, 'ListenAddress 127.0.0.1', `HostKey ${join(dir, 'bench-fixture-host-key')}`, `AuthorizedKeysFile ${join(dir, 'bench-fixture-authorized_keys')}`, `PidFile ${pidFile}`, 'UsePAM no', 'StrictModes no', 'PasswordAuthentication no', 'PermitRootLogin prohibit-password', 'MaxStartups 100', 'PermitUserEnvironment HOME', 'LogLevel ERROR', ''].join('\n'),
  );
  const child = spawn('/usr/sbin/sshd', ['-D', '-e', '-f', join(dir, 'sshd.config')], { stdio: ['ignore', 'ignore', 'inherit'] });
  while (!existsSync(pidFile)) {
    if (child.exitCode !== null) throw new Error('sshd did not start');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  const [type, body] = readFileSync(join(dir, 'bench-fixture-host-key.pub'), 'utf8').split(' ');
  writeFileSync(join(dir, 'known_hosts'), `[127.0.0.1]:${port} ${type} ${body}\n`);
  const env = {
    GIT_SSH_COMMAND: `ssh -F /dev/null -i ${join(dir, 'bench-fixture-client-key')} -o IdentitiesOnly=yes -o IdentityAgent=none -o BatchMode=yes -o StrictHostKeyChecking=yes -o UserKnownHostsFile=${join(dir, 'known_hosts')} -o LogLevel=ERROR`,
  };
  return {
    url: (path) => `ssh://${userInfo().username}@127.0.0.1:${port}${path}`,
    env,
    pid: child.pid,
    /** The client key's sessions run `command` (with SSH_ORIGINAL_COMMAND set) from the next login on; null: what the client asked. */
    forceCommand: authorize,
    close: () => child.kill('SIGTERM'),
  };
}
