import { createConnection, type Socket } from 'node:net';
import { describe, expect, it } from 'vitest';
import { callConsultBridge, openConsultBridge, type BridgeReply } from '../../src/dispatch/consult-bridge.js';
import { LIMITS } from '../../src/limits.js';
import { attack } from '../helpers/attack-kit.js';

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
  });
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
