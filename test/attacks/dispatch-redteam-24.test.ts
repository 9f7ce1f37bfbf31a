import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { userInfo } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bwrapArgs, type BwrapLayout } from '../../src/util/bubblewrap.js';
import { attack } from '../helpers/attack-kit.js';
import { requireBubblewrap } from '../helpers/bubblewrap.js';
import { agentScript, dispatchTo, FIX, hostilePlaces, receiptsFor, watchOnce } from '../helpers/hostile-agent.js';
import { outsideTempDir, tempDir } from '../helpers/tmp.js';

/**
 * The dispatch lane against a hostile execution agent, round twenty-four: the sockets any service of the
 * user's leaves in the shared temporary folders (/tmp, /var/tmp, the runner's TMPDIR). The sandbox sees
 * the host's files read-only, and a unix socket answers whoever names it, through a read-only mount and
 * from a sandbox with no network of its own too: another login's ssh agent signs, an Emacs server runs
 * any elisp, VS Code's IPC opens a terminal. Each socket here is a stand-in server that records who
 * called it; each attack is a process in a sandbox as the runner lays it out, or a hostile agent
 * script in place of the executor under `coo watch`.
 */

const dir = tempDir('dispatch-redteam-24');
const uid = process.getuid!();
const user = userInfo().username;
const tag = `${process.pid}-${Math.floor(Math.random() * 1e6)}`;
// A TMPDIR that is neither /tmp nor /var/tmp, as an operator may set one.
const ownTmp = outsideTempDir('e24-tmpdir-');

/** Folders made for the stand-ins, removed after the file's tests (a socket's path has a bound of 108 bytes). */
const made: string[] = [];
function folder(path: string, mode = 0o700): string {
  if (!existsSync(path)) {
    mkdirSync(path, { recursive: true, mode });
    made.push(path);
  }
  return path;
}

interface Service {
  readonly what: string;
  readonly socket: () => string;
}

const services: readonly Service[] = [
  { what: "another login's ssh agent (/tmp/ssh-XXXXXX/agent.PID)", socket: () => join(made[made.push(mkdtempSync('/tmp/ssh-')) - 1]!, `agent.${process.pid}`) },
  { what: 'an ssh ControlMaster whose ControlPath is in /tmp', socket: () => `/tmp/e24-cm-${tag}-${user}@example.invalid:22` },
  { what: 'an Emacs server (/tmp/emacsUID/server)', socket: () => join(folder(`/tmp/emacs${uid}`), `server-e24-${tag}`) },
  { what: 'a VS Code IPC socket (/tmp/vscode-ipc-*.sock)', socket: () => `/tmp/vscode-ipc-e24-${tag}.sock` },
  { what: 'an X server (/tmp/.X11-unix/X*)', socket: () => join(folder('/tmp/.X11-unix', 0o1777), `X${4000 + (process.pid % 1000)}`) },
  { what: 'a Neovim server in /var/tmp', socket: () => join(folder(join('/var/tmp', `nvim.${user}-e24-${tag}`)), '0') },
  { what: "a Jupyter kernel in the runner's TMPDIR (not /tmp)", socket: () => join(folder(join(ownTmp, 'jupyter')), 'kernel-e24') },
];

/** The stand-ins listening, by what they stand in for: their socket and how many calls each had. */
const listening = new Map<string, { readonly socket: string; calls: number }>();
const servers: Server[] = [];

beforeAll(async () => {
  requireBubblewrap('a sandbox test');
  for (const service of services) {
    const seen = { socket: service.socket(), calls: 0 };
    const server = createServer((client) => {
      seen.calls += 1;
      client.end();
    });
    await new Promise<void>((resolve, reject) => server.once('error', reject).listen(seen.socket, resolve));
    servers.push(server);
    listening.set(service.what, seen);
  }
});

afterAll(async () => {
  for (const server of servers) await new Promise<void>((resolve) => server.close(() => resolve()));
  for (const path of made.reverse()) rmSync(path, { recursive: true, force: true });
});

const socketOf = (what: string): string => listening.get(what)!.socket;
const callsOf = (what: string): number => listening.get(what)!.calls;

/** A node one-liner that connects to `socket` and exits 3 when it was answered, 0 when not. */
const connectTo = (socket: string): string => `require('net').connect(${JSON.stringify(socket)}).on('connect', () => process.exit(3)).on('error', () => process.exit(0))`;

/** Runs `argv` to its end; its exit code. */
function exitOf(argv: readonly string[]): Promise<number | null> {
  return new Promise((resolve) => {
    const child = spawn(argv[0]!, argv.slice(1), { stdio: 'ignore' });
    child.on('close', (code) => resolve(code));
  });
}

/** The layouts the runner builds: the executor's, the verification's (no network of its own), the Oracle's. */
function layouts(base: string): ReadonlyArray<{ readonly name: string; readonly layout: BwrapLayout; readonly kept: string }> {
  const make = (path: string): string => folder(path);
  const script = (path: string): string => {
    writeFileSync(path, '#!/bin/sh\n');
    return path;
  };
  const executor = make(join(base, 'executor'));
  const verify = make(join(base, 'verify'));
  const oracle = make(join(base, 'oracle'));
  return [
    { name: 'the executor', layout: { writable: [make(join(executor, 'worktree')), make(join(executor, 'scratch'))], hide: [], keep: [script(join(executor, 'agent.sh'))], chdir: join(executor, 'worktree'), ownPids: true }, kept: join(executor, 'agent.sh') },
    { name: 'the verification', layout: { writable: [make(join(verify, 'checkout')), make(join(verify, 'home'))], hide: [], chdir: join(verify, 'checkout'), ownPids: true, noNetwork: true }, kept: join(verify, 'home') },
    { name: 'the Oracle', layout: { writable: [make(join(oracle, 'root'))], readOnly: [make(join(oracle, 'root', 'work'))], hide: [], keep: [script(join(oracle, 'oracle.sh'))], chdir: join(oracle, 'root', 'work') }, kept: join(oracle, 'oracle.sh') },
  ];
}

describe("a process in each sandbox the runner builds calls a service's socket in a shared temporary folder", () => {
  for (const service of services) {
    attack(`a hostile process: it connects to ${service.what}, from the executor's, the verification's and the Oracle's sandbox`, 'runner', 'refused', async () => {
      const bwrap = requireBubblewrap('a sandbox test');
      const previous = process.env['TMPDIR'];
      process.env['TMPDIR'] = ownTmp;
      try {
        const reached: string[] = [];
        for (const { name, layout } of layouts(join(dir, `direct-${services.indexOf(service)}`))) {
          const before = callsOf(service.what);
          const code = await exitOf([...bwrapArgs(bwrap, layout), process.execPath, '-e', connectTo(socketOf(service.what))]);
          if (code !== 0 || callsOf(service.what) !== before) reached.push(`${name} (exit ${String(code)})`);
        }
        return reached.length === 0 ? 'refused' : `accepted: reached from ${reached.join(', ')}`;
      } finally {
        if (previous === undefined) delete process.env['TMPDIR'];
        else process.env['TMPDIR'] = previous;
      }
    });
  }

  it('each sandbox still sees what it is given under /tmp (its folders, its command), may write a /tmp of its own, and sees none of their neighbours', async () => {
    const bwrap = requireBubblewrap('a sandbox test');
    const base = join(dir, 'given');
    const written = `/tmp/e24-node-temp-${tag}`;
    for (const { layout, kept } of layouts(base)) {
      const neighbour = join(base, 'neighbour');
      writeFileSync(neighbour, 'not yours');
      const check = [
        ...[...layout.writable].map((path) => `test -d '${path}' && touch '${path}/written'`),
        ...(layout.readOnly ?? []).map((path) => `test -d '${path}'`),
        `test -e '${kept}'`,
        `! test -e '${neighbour}'`,
        `echo temp > '${written}' && test -s '${written}'`,
        `echo temp > '/var/tmp/e24-node-temp-${tag}'`,
      ].join(' && ');
      expect(await exitOf([...bwrapArgs(bwrap, layout), '/bin/sh', '-c', check])).toBe(0);
      for (const path of layout.writable) expect(existsSync(join(path, 'written'))).toBe(true);
      // What the sandbox wrote in its /tmp stayed in it.
      expect(existsSync(written)).toBe(false);
    }
  });
});

describe("a hostile agent under `coo watch` calls a service's socket in a shared temporary folder", () => {
  const place = hostilePlaces(dir, 'watch');
  const cases: ReadonlyArray<{ readonly service: string; readonly verify: boolean }> = [
    { service: services[0]!.what, verify: false },
    { service: services[2]!.what, verify: true },
    { service: services[6]!.what, verify: false },
  ];
  for (const [index, { service, verify }] of cases.entries()) {
    attack(`a hostile agent: ${verify ? 'its code, run by the verification,' : 'it'} connects to ${service}`, verify ? 'verify' : 'runner', 'refused', async () => {
      const where = await place(`case-${index}`);
      const socket = socketOf(service);
      const before = callsOf(service);
      const { messageId } = await dispatchTo(where, `e24-${index}`, verify ? { verify: ['sh src/check.sh'] } : {});
      const reach = `node -e "require('net').connect('${socket}').on('connect', () => { require('fs').writeFileSync('src/reached.txt', 'yes'); process.exit(0); }).on('error', () => process.exit(0))"`;
      const action = verify ? `${FIX}; printf '%s\\n' '${reach.replace(/'/g, "'\\''")}' 'grep -q "a + b" src/add.js' > src/check.sh` : `${FIX}; ${reach}`;
      const watch = watchOnce(where, agentScript(where.world.dir, action), { env: { TMPDIR: ownTmp } });
      const [receipt] = watch.hung ? [] : await receiptsFor(where, messageId);
      if (receipt === undefined) return watch.hung ? 'hung' : `no receipt: ${watch.stderr.slice(-400)}`;
      if ((receipt['files_changed'] as string[]).includes('src/reached.txt') || callsOf(service) !== before) return `accepted: ${service} was reached from the sandbox`;
      return receipt['status'] === 'succeeded' ? 'refused' : `receipted as ${String(receipt['status'])} ${JSON.stringify(receipt['blockers'])}`;
    });
  }
});
