import { spawn } from 'node:child_process';
import { createServer, type Socket } from 'node:net';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { LIMITS } from '../../src/limits.js';
import { serverScrubber } from '../../src/mcp/results.js';
import { createCooMcpServer, serveStdio } from '../../src/mcp/server.js';
import { GuardedStdioTransport, loadWireSchemas } from '../../src/mcp/stdio.js';
import { COO } from '../helpers/cli.js';
import { worlds } from '../helpers/lane.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * `coo mcp`'s stdio transport, wired to its server as the CLI wires it, against a raw client that
 * cancels what it sends and names requests as no SDK would: what the server holds for the client
 * stays bounded however it loops.
 */
const fresh = worlds(tempDir('mcp-redteam-2-'));

interface Answer {
  readonly id: string | number | null;
  readonly result?: Record<string, unknown>;
  readonly error?: { code: number; message: string };
}

const line = (message: Record<string, unknown>): string => `${JSON.stringify({ jsonrpc: '2.0', ...message })}\n`;
const verify = (id: string | number): string => line({ id, method: 'tools/call', params: { name: 'verify', arguments: {} } });
const cancel = (id: string | number): string => line({ method: 'notifications/cancelled', params: { requestId: id } });
const ping = (id: string | number): string => line({ id, method: 'ping' });

/** A raw client of a real server: lines in, every answer out, and a way to wait for one. */
async function rawSession() {
  const w = await fresh();
  const server = await createCooMcpServer({ ledger: w.ledger, key: w.actors.coo, repo: w.target, auditDir: null, clock: () => new Date(), scrubber: serverScrubber({ key: w.actors.coo, env: {}, places: [] }), version: '0.1.0' });
  const stdin = new PassThrough();
  const stdout = new PassThrough();
  const answers: Answer[] = [];
  let buffered = '';
  stdout.on('data', (chunk: Buffer) => {
    buffered += chunk.toString('utf8');
    const parts = buffered.split('\n');
    buffered = parts.pop()!;
    answers.push(...parts.map((text) => JSON.parse(text) as Answer));
  });
  await serveStdio(server, new GuardedStdioTransport(stdin, stdout, await loadWireSchemas(), 1 << 20));
  /** The first answer after `from` that `match` takes, waiting for it (a bounded number of turns). */
  const answer = async (match: (answer: Answer) => boolean, from = 0): Promise<Answer> => {
    for (let turn = 0; turn < 2000; turn += 1) {
      const found = answers.slice(from).find(match);
      if (found !== undefined) return found;
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    throw new Error(`no such answer among ${JSON.stringify(answers.slice(from).slice(-5))}`);
  };
  /** Sends `text` and waits for the answer under `id`. */
  const ask = async (text: string, id: string | number | null): Promise<Answer> => {
    const from = answers.length;
    stdin.write(text);
    return answer((found) => found.id === id, from);
  };
  await ask(line({ id: 0, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '0' } } }), 0);
  stdin.write(line({ method: 'notifications/initialized' }));
  return { stdin, answers, answer, ask, close: () => server.close() };
}

describe('coo mcp against a client that cancels every call it sends', () => {
  it(`holds a cancelled call until its handler stops: "send verify, cancel it" in a loop runs at most ${LIMITS.mcpRequestsInFlight} handlers, and frees each id once its handler stops`, async () => {
    const session = await rawSession();
    try {
      const limit = LIMITS.mcpRequestsInFlight;
      const ids = Array.from({ length: limit + 8 }, (_, index) => index + 1);
      const from = session.answers.length;
      session.stdin.write(ids.map((id) => verify(id) + cancel(id)).join(''));
      // The calls past the bound are refused while the cancelled ones still run.
      const last = await session.answer((found) => found.id === limit + 8, from);
      expect([last.error?.code, last.error?.message.split(':')[0]]).toEqual([-32600, 'MCP_MESSAGE_INVALID']);
      expect(last.error?.message).toMatch(new RegExp(`${limit} requests are in hand \\(a cancelled one until its work stops\\)`));
      const refused = session.answers.slice(from).filter((found) => found.error !== undefined).map((found) => found.id);
      expect(refused).toEqual(ids.slice(limit));
      // Once their handlers stop (nothing answers them), every id is free again and nothing stays held.
      // The handlers stop one by one, in no set order: each id is asked again until it is free.
      for (const id of ids.slice(0, limit)) {
        let reused: Answer | undefined;
        for (let turn = 0; turn < 1500 && reused?.result === undefined; turn += 1) {
          if (turn > 0) await new Promise((resolve) => setTimeout(resolve, 10));
          reused = await session.ask(ping(id), id);
        }
        expect([id, reused?.result]).toEqual([id, {}]);
      }
      const before = session.answers.length;
      session.stdin.write(ids.slice(0, limit).map(ping).join(''));
      for (const id of ids.slice(0, limit)) expect([id, (await session.answer((found) => found.id === id, before)).result]).toEqual([id, {}]);
      // None of the cancelled calls was answered.
      expect(session.answers.filter((found) => found.result?.['content'] !== undefined)).toEqual([]);
    } finally {
      await session.close();
    }
  });

  it('passes on no cancellation naming a request it does not hold: a request sent after it under that id is answered', async () => {
    const session = await rawSession();
    try {
      // The SDK handles a cancellation after the lines read with it: passed on, it stopped the ping under the same id, which was never answered.
      expect((await session.ask(cancel('x') + ping('x'), 'x')).result).toEqual({});
      expect((await session.ask(cancel(7) + ping(7), 7)).result).toEqual({});
      // A call cancelled and its id sent again at once: the id is still held, and the second request is refused, not lost.
      const from = session.answers.length;
      session.stdin.write(verify('v') + cancel('v') + ping('v'));
      const held = await session.answer((found) => found.id === 'v', from);
      expect(held.error?.message).toMatch(/^MCP_MESSAGE_INVALID: the id v is held by a request the server is not done with/);
    } finally {
      await session.close();
    }
  });
});

describe("coo mcp against a client whose request ids are hundreds of kilobytes", () => {
  it(`refuses an id over ${LIMITS.mcpIdChars} characters with a coded error under no id, holds nothing for it, and serves an id at the bound`, async () => {
    const session = await rawSession();
    try {
      const long = 'i'.repeat(LIMITS.mcpIdChars + 1);
      const refused = await session.ask(verify(long), null);
      expect([refused.error?.code, refused.error?.message.split(':')[0]]).toEqual([-32600, 'MCP_MESSAGE_INVALID']);
      expect(refused.error?.message).toMatch(new RegExp(`is ${LIMITS.mcpIdChars + 1} characters long, over the ${LIMITS.mcpIdChars} an id may have: give each request a short id`));
      expect(JSON.stringify(refused).length).toBeLessThan(LIMITS.mcpIdChars);
      const megabyte = 'm'.repeat(512 * 1024);
      expect((await session.ask(ping(megabyte), null)).error?.code).toBe(-32600);
      const atBound = 'b'.repeat(LIMITS.mcpIdChars);
      expect((await session.ask(ping(atBound), atBound)).result).toEqual({});
    } finally {
      await session.close();
    }
  });
});

describe("the consult relay an execution agent's agent talks to, against an agent that cancels every consult it sends", () => {
  it(`holds a cancelled consult until the runner's answer ends it: at most ${LIMITS.mcpRequestsInFlight} are held, one reaches the runner, and each id is free once its call ended`, async () => {
    const folder = tempDir('mcp-redteam-2-relay-');
    const socket = join(folder, 'runner.sock');
    // The runner's socket takes every call and answers none until released.
    const held: Socket[] = [];
    const runner = createServer((connection) => void held.push(connection));
    await new Promise<void>((resolve) => runner.listen(socket, resolve));
    const child = spawn(process.execPath, [COO, 'consult-relay', '--socket', socket], { env: { ...process.env, COO_LEDGER: '', COO_KEY: '' }, stdio: 'pipe' });
    const answers: Answer[] = [];
    let buffered = '';
    child.stdout.on('data', (chunk: Buffer) => {
      buffered += chunk.toString('utf8');
      const parts = buffered.split('\n');
      buffered = parts.pop()!;
      answers.push(...parts.map((text) => JSON.parse(text) as Answer));
    });
    const answer = async (id: string | number, from: number): Promise<Answer> => {
      for (let turn = 0; turn < 2000; turn += 1) {
        const found = answers.slice(from).find((candidate) => candidate.id === id);
        if (found !== undefined) return found;
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
      throw new Error(`no answer under ${id}`);
    };
    try {
      child.stdin.write(line({ id: 0, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '0' } } }));
      await answer(0, 0);
      child.stdin.write(line({ method: 'notifications/initialized' }));
      const limit = LIMITS.mcpRequestsInFlight;
      const consult = (id: number): string => line({ id, method: 'tools/call', params: { name: 'consult', arguments: { to: 'aa.chatgpt', question: 'q', files: ['a'] } } });
      // The first call reaches the runner, and is cancelled there; every one after it is cancelled as it waits its turn.
      child.stdin.write(consult(1));
      for (let turn = 0; turn < 2000 && held.length < 1; turn += 1) await new Promise((resolve) => setTimeout(resolve, 5));
      let from = answers.length;
      child.stdin.write(cancel(1) + Array.from({ length: limit }, (_, index) => consult(index + 2) + cancel(index + 2)).join(''));
      expect((await answer(limit + 1, from)).error?.message).toMatch(new RegExp(`^MCP_MESSAGE_INVALID: ${limit} requests are in hand`));
      // The relay sends one call at a time, and none cancelled while it waits its turn: one reaches the runner.
      expect(held).toHaveLength(1);
      // The runner ends that call: it stops, unanswered, the calls cancelled behind it stop unsent, and each id is free.
      for (const connection of held.splice(0)) connection.destroy();
      let reused: Answer | undefined;
      for (let turn = 0; turn < 1500 && reused?.result === undefined; turn += 1) {
        if (turn > 0) await new Promise((resolve) => setTimeout(resolve, 10));
        from = answers.length;
        child.stdin.write(ping(1));
        reused = await answer(1, from);
      }
      expect(reused?.result).toEqual({});
      from = answers.length;
      child.stdin.write(ping(limit));
      expect((await answer(limit, from)).result).toEqual({});
      expect(held).toEqual([]);
      expect(answers.filter((found) => found.result?.['content'] !== undefined)).toEqual([]);
    } finally {
      child.stdin.end();
      await new Promise((resolve) => child.once('close', resolve));
      for (const connection of held) connection.destroy();
      await new Promise<void>((resolve) => runner.close(() => resolve()));
    }
  });
});
