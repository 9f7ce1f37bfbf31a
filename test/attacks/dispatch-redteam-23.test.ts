import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect } from 'vitest';
import { attack } from '../helpers/attack-kit.js';
import { requireBubblewrap } from '../helpers/bubblewrap.js';
import { agentScript, dispatchTo, FIX, hostilePlaces, receiptsFor, watchOnce, type HostilePlace } from '../helpers/hostile-agent.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * The dispatch lane against a hostile execution agent, round twenty-three: the servers of a terminal
 * multiplexer the operator runs `coo watch` in. Their sockets are files the sandbox sees read-only, and
 * a unix socket answers whoever names it, through a read-only mount and from a sandbox with no network
 * of its own too; tmux runs any command it is sent, as the user, outside any sandbox. Each agent is a
 * script in place of the executor that does one hostile thing, under bubblewrap.
 */

const dir = tempDir('dispatch-redteam-23');
// A folder of its own with a short name: a unix socket's path has a bound of 108 bytes.
const sockets = tempDir('e23-');

/** The operator's tmux server, the runner started in it: TMUX names its socket, in TMUX_TMPDIR/tmux-UID. */
function operatorTmux(): { readonly socket: string; readonly pid: number; readonly env: NodeJS.ProcessEnv } {
  const tmpdir = join(sockets, 'tmux');
  mkdirSync(tmpdir, { mode: 0o700 });
  const hostEnv: NodeJS.ProcessEnv = { ...process.env, TMUX_TMPDIR: tmpdir };
  delete hostEnv['TMUX'];
  const started = spawnSync('tmux', ['-f', '/dev/null', 'new-session', '-d', '-s', 'operator', 'sleep 600'], { env: hostEnv, encoding: 'utf8' });
  if (started.status !== 0) throw new Error(`these tests need tmux (apt-get install tmux; .ci/run installs it): ${started.error?.message ?? started.stderr}`);
  const pid = Number(spawnSync('tmux', ['display-message', '-p', '#{pid}'], { env: hostEnv, encoding: 'utf8' }).stdout.trim());
  const socket = join(tmpdir, `tmux-${process.getuid!()}`, 'default');
  return { socket, pid, env: { TMUX_TMPDIR: tmpdir, TMUX: `${socket},${pid},0` } };
}

/** A command that asks the tmux server at `socket` to copy the COO key out to `outside`, as the user, outside the sandbox. */
const sendToTmux = (socket: string, where: HostilePlace, outside: string): string => `tmux -S '${socket}' run-shell "cat '${where.keyFile}' > '${outside}'" 2>/dev/null; true`;

/** What the attack got: the COO key copied out by the operator's tmux, or the receipt the runner wrote. */
async function judged(where: HostilePlace, messageId: string, outside: string, hung: boolean): Promise<string> {
  if (existsSync(outside)) return readFileSync(outside, 'utf8') === readFileSync(where.keyFile, 'utf8') ? 'accepted: the COO key copied out of the sandbox by tmux' : 'accepted: tmux ran a command outside the sandbox';
  const [receipt] = hung ? [] : await receiptsFor(where, messageId);
  if (receipt === undefined) return hung ? 'hung' : 'no receipt';
  // The agent ran (its fix is verified), and what it sent tmux reached nothing.
  return receipt['status'] === 'succeeded' ? 'refused' : `receipted as ${String(receipt['status'])} ${JSON.stringify(receipt['blockers'])}`;
}

describe("a hostile agent that sends a command to the tmux server the runner was started in", () => {
  const place = hostilePlaces(dir, 'tmux');
  let tmux: ReturnType<typeof operatorTmux>;
  beforeAll(() => {
    requireBubblewrap('a sandbox test');
    tmux = operatorTmux();
    // The server runs what it is sent, outside any sandbox: what the attacks below try from inside one.
    const marker = join(sockets, 'reached-from-the-host');
    spawnSync('tmux', ['-S', tmux.socket, 'run-shell', `touch '${marker}'`]);
    expect(existsSync(marker)).toBe(true);
  });
  afterAll(() => {
    try {
      process.kill(tmux.pid, 'SIGTERM');
    } catch {
      // gone already
    }
  });

  attack('a hostile agent: it asks the tmux server to copy the COO key out of its sandbox', 'runner', 'refused', async () => {
    const where = await place('agent');
    const outside = join(where.world.dir, 'key-copied-out');
    const { messageId } = await dispatchTo(where, 'tmux-agent');
    const watch = watchOnce(where, agentScript(where.world.dir, `${FIX}; ${sendToTmux(tmux.socket, where, outside)}`), { env: tmux.env });
    return judged(where, messageId, outside, watch.hung);
  });

  attack("a hostile agent: it asks a tmux server of the user's that the runner was not started in (no TMUX, the server in tmux's folder)", 'runner', 'refused', async () => {
    const where = await place('folder');
    const outside = join(where.world.dir, 'key-copied-out');
    const { messageId } = await dispatchTo(where, 'tmux-folder');
    const watch = watchOnce(where, agentScript(where.world.dir, `${FIX}; ${sendToTmux(tmux.socket, where, outside)}`), { env: { TMUX_TMPDIR: tmux.env['TMUX_TMPDIR'] } });
    return judged(where, messageId, outside, watch.hung);
  });

  attack("a hostile agent: its code, run by the verification (no network of its own), asks the tmux server to copy the COO key out", 'runner', 'refused', async () => {
    const where = await place('verify');
    const outside = join(where.world.dir, 'key-copied-out');
    const { messageId } = await dispatchTo(where, 'tmux-verify', { verify: ['sh src/check.sh'] });
    const check = `printf '%s\\n' "${sendToTmux(tmux.socket, where, outside).replace(/"/g, '\\"')}" 'grep -q "a + b" src/add.js' > src/check.sh`;
    const watch = watchOnce(where, agentScript(where.world.dir, `${FIX}; ${check}`), { env: tmux.env });
    return judged(where, messageId, outside, watch.hung);
  });
});

describe("a hostile agent that calls the socket of a server of the user's that runs what it is asked outside any sandbox", () => {
  const place = hostilePlaces(dir, 'daemon');
  const cases: ReadonlyArray<{ readonly what: string; readonly socket: string; readonly env: (socket: string) => NodeJS.ProcessEnv }> = [
    // screen runs what a client asks of it (`screen -X exec`); its sessions' sockets are in SCREENDIR.
    { what: 'a screen session in SCREENDIR', socket: join(sockets, 'screen', '4242.pts-0.host'), env: (socket) => ({ SCREENDIR: join(socket, '..') }) },
    // Docker's daemon starts a container with the host's / mounted for whoever may call it.
    { what: 'the Docker daemon DOCKER_HOST names', socket: join(sockets, 'docker', 'docker.sock'), env: (socket) => ({ DOCKER_HOST: `unix://${socket}` }) },
  ];
  const calls: string[] = [];
  const servers: Server[] = [];
  beforeAll(async () => {
    requireBubblewrap('a sandbox test');
    for (const { socket } of cases) {
      mkdirSync(join(socket, '..'), { mode: 0o700 });
      // A stand-in for the server: it counts who called it.
      const server = createServer((client) => {
        calls.push(socket);
        client.end();
      });
      await new Promise<void>((resolve) => server.listen(socket, resolve));
      servers.push(server);
    }
  });
  afterAll(async () => {
    for (const server of servers) await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  for (const [index, { what, socket, env }] of cases.entries()) {
    attack(`a hostile agent: it connects to the socket of ${what}`, 'runner', 'refused', async () => {
      const where = await place(`case-${index}`);
      const { messageId } = await dispatchTo(where, `daemon-${index}`);
      const reach = `node -e "require('net').connect('${socket}').on('connect', () => { require('fs').writeFileSync('src/reached.txt', 'yes'); process.exit(0); }).on('error', () => process.exit(0))"`;
      const watch = watchOnce(where, agentScript(where.world.dir, `${FIX}; ${reach}`), { env: env(socket) });
      const [receipt] = watch.hung ? [] : await receiptsFor(where, messageId);
      if (receipt === undefined) return watch.hung ? 'hung' : 'no receipt';
      if ((receipt['files_changed'] as string[]).includes('src/reached.txt') || calls.includes(socket)) return `accepted: ${what} was reached from the sandbox`;
      return receipt['status'] === 'succeeded' ? 'refused' : `receipted as ${String(receipt['status'])} ${JSON.stringify(receipt['blockers'])}`;
    });
  }
});
