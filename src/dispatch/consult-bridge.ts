import * as fs from 'node:fs';
import { createConnection, createServer, type Socket } from 'node:net';
import { join } from 'node:path';
import { CooError, isCooError } from '../errors.js';
import { LIMITS } from '../limits.js';
import { loneSurrogateEscapeAt, loneSurrogateProblem } from '../mcp/wire.js';
import { jsonShapeProblem } from '../util/json-shape.js';
import { privateSocketFolder } from '../util/private-sockets.js';
import { removeTree } from '../util/remove-tree.js';
import type { Scrubber } from '../util/scrub.js';

/**
 * The pipe between a dispatch attempt's consult tool and the runner. The agent's executor starts
 * the tool's MCP server (`coo consult-relay`) itself, inside the agent's sandbox, where it holds no
 * key and reaches no provider: it forwards each call, as one line of JSON, over a unix socket the
 * runner listens on outside the sandbox, and hands back the runner's one-line answer. The runner
 * signs and pays; the agent's process tree never holds the COO key or the advisory agent's
 * provider key. A socket, not the executor's stdio: the executor owns the MCP server's stdio.
 */

/** The consult tool's MCP server as executors name it: the agent calls `mcp__coo__consult`. */
export const CONSULT_TOOL_SERVER = 'coo';

export type BridgeReply = { readonly ok: true; readonly text: string; readonly result: Record<string, unknown> } | { readonly ok: false; readonly code: string; readonly message: string };

export interface ConsultBridge {
  /** Where the relay connects: in a private folder of its own, short enough for a socket's name. */
  readonly socket: string;
  /** The folder that holds it, which the agent's sandbox sees read-only. */
  readonly dir: string;
  /** Stops taking calls, waits for the one in flight, and removes the socket. */
  close(): Promise<void>;
}

/** Reads one line of at most LIMITS.consultToolBytes from a socket. */
function readLine(socket: Socket): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer): void => {
      const end = chunk.indexOf(0x0a);
      const part = end === -1 ? chunk : chunk.subarray(0, end);
      size += part.length;
      if (size > LIMITS.consultToolBytes) {
        cleanup();
        reject(new CooError('MCP_MESSAGE_TOO_LARGE', `a consult tool message is over ${LIMITS.consultToolBytes} bytes`));
        return;
      }
      chunks.push(part);
      if (end !== -1) {
        cleanup();
        resolve(Buffer.concat(chunks));
      }
    };
    const onEnd = (): void => {
      // An ended or destroyed connection: the call never came whole.
      cleanup();
      reject(new CooError('USAGE', 'the consult tool closed before a whole line'));
    };
    const cleanup = (): void => {
      socket.off('data', onData);
      socket.off('end', onEnd);
      socket.off('error', onEnd);
      socket.off('close', onEnd);
    };
    socket.on('data', onData);
    socket.on('end', onEnd);
    socket.on('error', onEnd);
    socket.on('close', onEnd);
  });
}

/**
 * A call as the socket got it, read as the relay reads the agent's line (mcp/wire.ts): UTF-8, JSON
 * without a key twice, nesting within the bound, and no lone surrogate. An agent reaches the socket
 * without the relay too, and a question that was not UTF-8 or held a lone surrogate was signed and
 * sent with U+FFFD in its place.
 */
function readCall(line: Buffer): unknown {
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(line);
  } catch {
    throw new CooError('USAGE', 'a consult tool call is one line of UTF-8 JSON: the line is not valid UTF-8');
  }
  let request: unknown;
  try {
    request = JSON.parse(text);
  } catch {
    throw new CooError('USAGE', 'a consult tool call is one line of JSON');
  }
  const problem = jsonShapeProblem(text, LIMITS.mcpMessageDepth);
  if (problem !== null) throw new CooError('USAGE', `a consult tool call was refused unread: ${problem}`);
  const lone = loneSurrogateEscapeAt(text);
  if (lone !== null) throw new CooError('USAGE', `a consult tool call was refused unread: ${loneSurrogateProblem(text, lone)}`);
  return request;
}

/**
 * Listens for the attempt's consult calls. Each connection's line is read as it comes, so one that
 * never speaks, or stops mid-line, holds only itself; the calls read whole are answered one at a
 * time, in the order their lines came: an attempt's consults are charged to one budget, one after
 * the other. A peer may end its side once its line is sent and still read the answer (a half-open
 * connection): the answer is written either way. A refusal repeats what the runner's checks, its
 * ledger writes and its remote said, which may name the runner's folders (the ledger, its state),
 * its remote or a secret it holds: it reaches the agent through `scrubber` (the runner's), as the
 * agent's own output reaches the runner's records.
 */
export async function openConsultBridge(handle: (request: unknown) => Promise<BridgeReply>, scrubber: Scrubber): Promise<ConsultBridge> {
  const dir = privateSocketFolder('consult-');
  const socket = join(dir, 's');
  /** The calls read whole, each answered after the one before. */
  let queue: Promise<void> = Promise.resolve();
  /** Every connection open; those whose call has not been read yet are `waiting` too. */
  const open = new Set<Socket>();
  const waiting = new Set<Socket>();
  let closing = false;
  const refusal = (error: unknown): BridgeReply => (isCooError(error) ? { ok: false, code: error.code, message: scrubber.text(error.message) } : { ok: false, code: 'INTERNAL', message: 'the runner failed to answer the call (its log says why)' });
  const answer = (client: Socket, reply: BridgeReply): void => {
    if (!client.destroyed) client.end(`${JSON.stringify(reply)}\n`);
  };
  const server = createServer({ allowHalfOpen: true }, (client) => {
    client.on('error', () => undefined);
    if (closing) {
      client.destroy();
      return;
    }
    open.add(client);
    waiting.add(client);
    client.once('close', () => {
      open.delete(client);
      waiting.delete(client);
    });
    readLine(client).then(
      (line) => {
        waiting.delete(client);
        // A line read whole as the bridge closes goes with its connection: close() waits only for the calls queued before it.
        if (closing) return;
        let request: unknown;
        try {
          request = readCall(line);
        } catch (error) {
          answer(client, refusal(error));
          return;
        }
        // Its answer is written in its turn too, so close() finds every answer read before it written.
        queue = queue.then(() => handle(request)).then(
          (reply) => answer(client, reply),
          (error: unknown) => answer(client, refusal(error)),
        );
      },
      (error: unknown) => answer(client, refusal(error)),
    );
  });
  // The socket is the agent's to reach: connections past the bound are closed as they come, so it
  // cannot hold the runner's descriptors, which the ledger and every other lane need too.
  server.maxConnections = LIMITS.consultToolConnections;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(socket, () => resolve());
  });
  fs.chmodSync(socket, 0o600);
  return {
    socket,
    dir,
    async close() {
      closing = true;
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const client of waiting) client.destroy();
      await queue;
      // Every call read is answered; a peer still holding its connection open after its answer
      // (a process of the agent's left behind) holds the attempt no longer.
      for (const client of open) client.destroy();
      await closed;
      removeTree(dir);
    },
  };
}

/**
 * The relay's side: each call sent once the one before it is answered, so the relay holds one
 * connection at a time, however many calls its agent makes at once. The runner answers one at a
 * time anyway, and holds at most LIMITS.consultToolConnections open: an agent's parallel calls
 * past it, each sent on a connection of its own, were closed unread and came back as an INTERNAL
 * "cannot be reached". A call cancelled (`signal`) while it waits its turn is never sent.
 */
export function consultBridgeCaller(socket: string): (request: Record<string, unknown>, signal?: AbortSignal) => Promise<BridgeReply> {
  let turn: Promise<unknown> = Promise.resolve();
  return (request, signal) => {
    const reply = turn.then((): Promise<BridgeReply> | BridgeReply =>
      signal?.aborted === true ? { ok: false, code: 'USAGE', message: 'the call was cancelled before it was sent: nothing was asked or paid' } : callConsultBridge(socket, request),
    );
    turn = reply;
    return reply;
  };
}

/** One call, one answer, on a connection of its own. */
export function callConsultBridge(socket: string, request: Record<string, unknown>): Promise<BridgeReply> {
  return new Promise((resolve) => {
    const client = createConnection(socket);
    const fail = (message: string): void => resolve({ ok: false, code: 'INTERNAL', message });
    client.on('error', (error) => fail(`the runner's consult tool cannot be reached: ${error.message}`));
    client.on('connect', () => client.write(`${JSON.stringify(request)}\n`));
    readLine(client).then(
      (line) => {
        client.destroy();
        try {
          resolve(JSON.parse(line.toString('utf8')) as BridgeReply);
        } catch {
          fail('the runner answered with something that is not JSON');
        }
      },
      (error: unknown) => fail(error instanceof Error ? error.message : String(error)),
    );
  });
}
