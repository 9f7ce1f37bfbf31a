import { chmodSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createConnection, createServer, type Socket } from 'node:net';
import { basename, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { callConsultBridge, openConsultBridge, type BridgeReply } from '../../src/dispatch/consult-bridge.js';
import { CodexExecutor } from '../../src/dispatch/codex.js';
import { shareSshConnection } from '../../src/remote/git-remote.js';
import { LIMITS } from '../../src/limits.js';
import { Scrubber } from '../../src/util/scrub.js';
import { attack } from '../helpers/attack-kit.js';
import { requireBubblewrap } from '../helpers/bubblewrap.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * The runner's consult socket, reached by an agent directly rather than through the relay: what
 * no relay sends (idle connections by the hundred, a line past the bound, a line that is no JSON,
 * a call after the attempt) is refused with a code, the handler never sees it, and a call the relay
 * sends afterwards is still answered.
 */

const OK: BridgeReply = { ok: true, text: 'answered', result: {} };

/** A bridge whose handler records what reached it. */
async function recordingBridge(): Promise<{ bridge: Awaited<ReturnType<typeof openConsultBridge>>; seen: unknown[] }> {
  const seen: unknown[] = [];
  const bridge = await openConsultBridge(async (request) => {
    seen.push(request);
    return OK;
  }, new Scrubber());
  return { bridge, seen };
}

function connect(path: string): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = createConnection(path);
    socket.once('connect', () => resolve(socket));
    socket.once('error', reject);
  });
}

/** Sends raw bytes as one connection and returns the code of the reply, or 'accepted'. */
function sendRaw(path: string, bytes: Buffer | string): Promise<string> {
  return new Promise((resolve) => {
    const socket = createConnection(path);
    const chunks: Buffer[] = [];
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('error', () => undefined);
    socket.on('close', () => {
      const text = Buffer.concat(chunks).toString('utf8').trim();
      if (text === '') return resolve('closed');
      const reply = JSON.parse(text) as BridgeReply;
      resolve(reply.ok ? 'accepted' : reply.code);
    });
    socket.on('connect', () => socket.write(bytes));
  });
}

describe("the runner's consult socket, reached without the relay", () => {
  it('closes connections past its bound as they come, so an agent cannot hold the runner\'s descriptors, and answers a call once they are gone', async () => {
    const { bridge, seen } = await recordingBridge();
    const sockets: Socket[] = [];
    let closed = 0;
    try {
      const count = LIMITS.consultToolConnections + 20;
      for (let index = 0; index < count; index += 1) {
        const socket = await connect(bridge.socket);
        socket.on('error', () => undefined);
        socket.once('close', () => (closed += 1));
        sockets.push(socket);
      }
      // Each one past the bound is closed by the runner; the first ones wait for their line.
      await expect.poll(() => closed, { timeout: 10_000 }).toBe(count - LIMITS.consultToolConnections);
      for (const socket of sockets) socket.destroy();
      await expect.poll(() => closed, { timeout: 10_000 }).toBe(count);
      expect(await callConsultBridge(bridge.socket, { to: 'aa.chatgpt' })).toEqual(OK);
      expect(seen).toEqual([{ to: 'aa.chatgpt' }]);
    } finally {
      for (const socket of sockets) socket.destroy();
      await bridge.close();
    }
  });

  attack('a call line past the bound of one consult tool message', 'runner', 'MCP_MESSAGE_TOO_LARGE', async () => {
    const { bridge, seen } = await recordingBridge();
    try {
      const code = await sendRaw(bridge.socket, `{"question":"${'x'.repeat(LIMITS.consultToolBytes + 1)}"}\n`);
      expect(seen).toEqual([]);
      return code;
    } finally {
      await bridge.close();
    }
  });

  attack('a call line that is not JSON', 'runner', 'USAGE', async () => {
    const { bridge, seen } = await recordingBridge();
    try {
      const code = await sendRaw(bridge.socket, '{"to": "aa.chatgpt",\n');
      expect(seen).toEqual([]);
      return code;
    } finally {
      await bridge.close();
    }
  });

  attack('a call after the attempt ended and its socket closed', 'runner', 'INTERNAL', async () => {
    const { bridge, seen } = await recordingBridge();
    await bridge.close();
    const reply = await callConsultBridge(bridge.socket, { to: 'aa.chatgpt' });
    expect(seen).toEqual([]);
    return reply.ok ? 'accepted' : reply.code;
  });
});

/**
 * A line of a hostile agent's script that calls the socket at `socket` and writes to `<name>.txt` in
 * its worktree whether it was answered ('reached') or the code it was refused with.
 */
function reach(name: string, socket: string): string {
  return `${JSON.stringify(process.execPath)} -e 'const s=require("net").createConnection(process.argv[1]);s.on("connect",()=>{s.end(JSON.stringify({to:"aa.chatgpt"})+"\\n");});s.on("data",()=>{});s.on("error",(e)=>{require("fs").writeFileSync(process.argv[2],e.code);});s.on("end",()=>{require("fs").writeFileSync(process.argv[2],"reached");});' ${JSON.stringify(socket)} ${name}.txt`;
}

describe("another attempt's consult socket, reached from inside an agent's sandbox", () => {
  /**
   * Two attempts at once (two runners sharing the queue): agent B looks for A's socket beside its
   * own and calls it. Answered, the call would be a consult of A's dispatch, about A's worktree,
   * charged to A's budget and listed in A's receipt. The sandbox shows B its own socket only.
   */
  it("shows an agent its own attempt's socket and no other's", async () => {
    requireBubblewrap("the consult socket's sandbox test");
    const a = await recordingBridge();
    const b = await recordingBridge();
    const root = tempDir('consult-socket-sandbox');
    const worktree = join(root, 'worktree');
    const scratch = join(root, 'scratch');
    mkdirSync(worktree, { recursive: true });
    mkdirSync(scratch, { recursive: true });
    // The hostile agent: a call to each socket it can name, and what it sees beside its own.
    const script = join(root, 'agent.sh');
    writeFileSync(script, `#!/bin/sh\n${reach('own', b.bridge.socket)}\n${reach('other', a.bridge.socket)}\nls ${JSON.stringify(join(a.bridge.dir, '..'))} > listed.txt 2>&1\n`);
    chmodSync(script, 0o755);
    try {
      const executor = new CodexExecutor({ command: [script], providerKeyEnv: 'MOCK_API_KEY', env: { PATH: process.env['PATH'], MOCK_API_KEY: 'sk-fake' }, isolation: 'bwrap' });
      await executor.run({ attemptId: 'ea_attempt_B_1', worktree, scratch, prompt: 'task', timeoutSeconds: 30, consultTool: { server: 'coo', command: ['/bin/true'], socketDir: b.bridge.dir, timeoutSeconds: 30 } });
      expect(readFileSync(join(worktree, 'own.txt'), 'utf8')).toBe('reached');
      expect(readFileSync(join(worktree, 'other.txt'), 'utf8')).toBe('ENOENT');
      expect(readFileSync(join(worktree, 'listed.txt'), 'utf8')).not.toContain(basename(a.bridge.dir));
      expect(a.seen).toEqual([]);
      expect(b.seen).toEqual([{ to: 'aa.chatgpt' }]);
    } finally {
      await a.bridge.close();
      await b.bridge.close();
    }
  });

  it("hides the ssh connection the runner shares with a remote ledger, which answers without its key", async () => {
    requireBubblewrap("the consult socket's sandbox test");
    const shared = shareSshConnection(tempDir('ssh-shared'), 'ssh://ledger.example/ledger.git');
    const folder = /ControlPath=(.*)\/m'/.exec(shared?.env['GIT_SSH_COMMAND'] ?? '')?.[1];
    expect(folder).toBeDefined();
    writeFileSync(join(folder!, 'master'), 'a socket of the runner\n');
    const root = tempDir('ssh-sandbox');
    const worktree = join(root, 'worktree');
    const scratch = join(root, 'scratch');
    mkdirSync(worktree, { recursive: true });
    mkdirSync(scratch, { recursive: true });
    const script = join(root, 'agent.sh');
    writeFileSync(script, `#!/bin/sh\nls ${JSON.stringify(folder)} > listed.txt 2>&1; cat ${JSON.stringify(join(folder!, 'master'))} >> listed.txt 2>&1\n`);
    chmodSync(script, 0o755);
    try {
      await new CodexExecutor({ command: [script], providerKeyEnv: 'MOCK_API_KEY', env: { PATH: process.env['PATH'], MOCK_API_KEY: 'sk-fake' }, isolation: 'bwrap' }).run({ attemptId: 'ea_attempt_B_1', worktree, scratch, prompt: 'task', timeoutSeconds: 30 });
      const listed = readFileSync(join(worktree, 'listed.txt'), 'utf8');
      expect(listed).toMatch(/No such file or directory/);
      expect(listed).not.toContain('a socket of the runner');
    } finally {
      shared?.close();
    }
  });

  it("hides the ssh agent the runner was started with, whose keys sign for whoever asks", async () => {
    requireBubblewrap("the consult socket's sandbox test");
    const root = tempDir('ssh-agent-sandbox');
    const agentSocket = join(root, 'ssh-agent', 'agent.1');
    mkdirSync(join(root, 'ssh-agent'), { mode: 0o700 });
    const asked: string[] = [];
    const server = createServer((client) => {
      asked.push('signed');
      client.end();
    });
    await new Promise<void>((resolve) => server.listen(agentSocket, resolve));
    const worktree = join(root, 'worktree');
    const scratch = join(root, 'scratch');
    mkdirSync(worktree, { recursive: true });
    mkdirSync(scratch, { recursive: true });
    const script = join(root, 'agent.sh');
    writeFileSync(script, `#!/bin/sh\n${reach('agent', agentSocket)}\n`);
    chmodSync(script, 0o755);
    const before = process.env['SSH_AUTH_SOCK'];
    process.env['SSH_AUTH_SOCK'] = agentSocket;
    try {
      await new CodexExecutor({ command: [script], providerKeyEnv: 'MOCK_API_KEY', env: { PATH: process.env['PATH'], MOCK_API_KEY: 'sk-fake' }, isolation: 'bwrap' }).run({ attemptId: 'ea_attempt_B_1', worktree, scratch, prompt: 'task', timeoutSeconds: 30 });
      expect(readFileSync(join(worktree, 'agent.txt'), 'utf8')).not.toBe('reached');
      expect(asked).toEqual([]);
    } finally {
      if (before === undefined) delete process.env['SSH_AUTH_SOCK'];
      else process.env['SSH_AUTH_SOCK'] = before;
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});
