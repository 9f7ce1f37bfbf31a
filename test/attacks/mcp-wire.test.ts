import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { formatPrivateKey } from '../../src/crypto/keys.js';
import { sendCommand } from '../../src/inbox/ceo-messages.js';
import { jsonShapeProblem } from '../../src/util/json-shape.js';
import { COO } from '../helpers/cli.js';
import { worlds, type World } from '../helpers/lane.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * `coo mcp` on stdio, attacked by a client that sends what no SDK would: each line it cannot take
 * is answered with a coded JSON-RPC error (never dropped, which left the client waiting for ever),
 * the session goes on, and nothing a refused line asked for is written.
 */

const fresh = worlds(tempDir('mcp-wire-'));

interface Response {
  readonly id: string | number | null;
  readonly result?: { readonly isError?: boolean; readonly structuredContent?: Record<string, unknown> };
  readonly error?: { readonly code: number; readonly message: string };
}

/** The built server on stdio, read one response line at a time. */
class RawSession {
  private readonly lines: string[] = [];
  private waiting: (() => void) | null = null;
  private buffered = '';
  stderr = '';
  readonly exited: Promise<number | null>;

  constructor(readonly child: ChildProcessWithoutNullStreams) {
    child.stdout.on('data', (chunk: Buffer) => {
      this.buffered += chunk.toString('utf8');
      const parts = this.buffered.split('\n');
      this.buffered = parts.pop()!;
      this.lines.push(...parts);
      this.waiting?.();
    });
    child.stderr.on('data', (chunk: Buffer) => (this.stderr += chunk.toString('utf8')));
    this.exited = new Promise((resolve) => child.on('close', resolve));
  }

  send(line: string | Buffer): void {
    this.child.stdin.write(Buffer.concat([Buffer.isBuffer(line) ? line : Buffer.from(line), Buffer.from('\n')]));
  }

  async next(): Promise<Response> {
    while (this.lines.length === 0) {
      if (this.child.exitCode !== null) throw new Error(`the server exited ${this.child.exitCode}: ${this.stderr}`);
      await new Promise<void>((resolve) => (this.waiting = resolve));
    }
    return JSON.parse(this.lines.shift()!) as Response;
  }

  async ask(line: string | Buffer): Promise<Response> {
    this.send(line);
    return this.next();
  }

  async end(): Promise<number | null> {
    this.child.stdin.end();
    return this.exited;
  }
}

let open: RawSession | null = null;
afterEach(async () => {
  await open?.end();
  open = null;
});

function start(args: readonly string[]): RawSession {
  const child = spawn(process.execPath, [COO, ...args], { env: { ...process.env, COO_LEDGER: '', COO_KEY: '' }, stdio: 'pipe' });
  open = new RawSession(child);
  return open;
}

function serve(w: World): RawSession {
  const keyPath = join(w.dir, 'coo.key');
  writeFileSync(keyPath, formatPrivateKey(w.actors.coo), { mode: 0o600 });
  return start(['mcp', '--ledger', w.gitdir, '--key', keyPath, '--repo', w.target]);
}

const rpc = (id: unknown, method: string, params?: unknown): string => JSON.stringify({ jsonrpc: '2.0', id, method, ...(params === undefined ? {} : { params }) });
const call = (id: unknown, name: string, args: unknown): string => rpc(id, 'tools/call', { name, arguments: args });
const INITIALIZE = rpc(0, 'initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '0' } });

async function initialized(w: World): Promise<RawSession> {
  const session = serve(w);
  expect((await session.ask(INITIALIZE)).result).toBeDefined();
  session.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }));
  return session;
}

/** The code a refusal's message starts with, with the JSON-RPC code: `-32600 MCP_MESSAGE_INVALID`. */
function refusal(response: Response): string {
  return response.error === undefined ? `answered: ${JSON.stringify(response.result).slice(0, 200)}` : `${response.error.code} ${response.error.message.split(':')[0]}`;
}

describe('coo mcp answers every line it cannot take with a coded JSON-RPC error, and serves on', () => {
  it('refuses a request before initialize and a second initialize, and serves the session that initializes once', async () => {
    const w = await fresh();
    const session = serve(w);
    const early = await session.ask(call(1, 'inbox', {}));
    expect([early.id, refusal(early)]).toEqual([1, '-32600 MCP_MESSAGE_INVALID']);
    expect(early.error?.message).toMatch(/initialize the session first/);
    // A method that carries terminal escape sequences reaches the operator's log as code points, never as escapes.
    const escaping = await session.ask(rpc(5, '\u001b]0;owned\u0007\u001b[2J', {}));
    expect(refusal(escaping)).toBe('-32600 MCP_MESSAGE_INVALID');
    const long = await session.ask(rpc(6, 'x'.repeat(1_000_000), {}));
    expect(long.error?.message.length).toBeLessThan(200);
    expect((await session.ask(rpc(2, 'ping'))).result).toEqual({});
    expect((await session.ask(INITIALIZE)).result).toBeDefined();
    expect((await session.ask(call(3, 'inbox', {}))).result?.structuredContent).toEqual({ items: [] });
    expect(session.stderr).toContain('\\u001b]0;owned\\u0007\\u001b[2J before initialize');
    expect([...session.stderr].some((char) => char !== "\n" && char.charCodeAt(0) < 0x20)).toBe(false);
    const twice = await session.ask(INITIALIZE.replace('"id":0', '"id":4'));
    expect([twice.id, refusal(twice)]).toEqual([4, '-32600 MCP_MESSAGE_INVALID']);
    expect(twice.error?.message).toMatch(/initialized already/);
    expect(await session.end()).toBe(0);
  }, 60_000);

  it('answers malformed lines, batches, wrong params, duplicated keys, deep nesting and invalid UTF-8, and writes none of them', async () => {
    const w = await fresh();
    const command = (await sendCommand({ ledger: w.ledger, key: w.actors.ceo, now: new Date(), text: 'Ship it.' })).messageId;
    const session = await initialized(w);
    const ack = (id: number, rest: string): string => `{"jsonrpc":"2.0","id":${id},"method":"tools/call","params":{"name":"ack","arguments":{${rest}}}}`;
    const cases: ReadonlyArray<readonly [string, string | Buffer, number | null, string]> = [
      ['not JSON', 'this is not json', null, '-32700 MCP_MESSAGE_INVALID'],
      ['invalid UTF-8 in an ack note', Buffer.concat([Buffer.from(ack(10, `"message_id":"${command}","note":"`)), Buffer.from([0xff, 0xfe, 0xc3]), Buffer.from('"}}}')]), null, '-32700 MCP_MESSAGE_INVALID'],
      ['a batch', `[${call(11, 'inbox', {})},${call(12, 'ack', { message_id: command })}]`, null, '-32600 MCP_MESSAGE_INVALID'],
      ['a key twice: the forged id last', ack(13, `"message_id":"msg_00000000000000000000000000","message_id":"${command}"`), 13, '-32600 MCP_MESSAGE_INVALID'],
      ['a key twice, once escaped', ack(14, `"message_id":"${command}","message\\u005fid":"${command}"`), 14, '-32600 MCP_MESSAGE_INVALID'],
      ['the tool name twice', `{"jsonrpc":"2.0","id":15,"method":"tools/call","params":{"name":"inbox","name":"ack","arguments":{"message_id":"${command}"}}}`, 15, '-32600 MCP_MESSAGE_INVALID'],
      ['arguments nested past the bound', `{"jsonrpc":"2.0","id":16,"method":"tools/call","params":{"name":"ack","arguments":{"message_id":"${command}","note":${'['.repeat(100_000)}${']'.repeat(100_000)}}}}`, 16, '-32600 MCP_MESSAGE_INVALID'],
      ['arguments as an array', call(17, 'ack', [command]), 17, '-32602 MCP_MESSAGE_INVALID'],
      ['arguments as null', call(18, 'ack', null), 18, '-32602 MCP_MESSAGE_INVALID'],
      ['a tool name that is an array', rpc(19, 'tools/call', { name: ['ack'], arguments: { message_id: command } }), 19, '-32602 MCP_MESSAGE_INVALID'],
      ['params as null', rpc(20, 'tools/call', null), 20, '-32600 MCP_MESSAGE_INVALID'],
      ['jsonrpc 1.0', JSON.stringify({ jsonrpc: '1.0', id: 21, method: 'tools/list' }), 21, '-32600 MCP_MESSAGE_INVALID'],
      ['an id that is an object', JSON.stringify({ jsonrpc: '2.0', id: { a: 1 }, method: 'tools/list' }), null, '-32600 MCP_MESSAGE_INVALID'],
    ];
    for (const [name, line, id, expected] of cases) {
      const response = await session.ask(line);
      expect([name, response.id, refusal(response)]).toEqual([name, id, expected]);
    }
    // Still serving, and the command none of those lines could acknowledge is still in the inbox.
    const inbox = await session.ask(call(30, 'inbox', {}));
    expect((inbox.result?.structuredContent?.['items'] as Array<{ message_id: string }>).map((item) => item.message_id)).toEqual([command]);
    expect(session.stderr).toMatch(/^coo mcp: MCP_MESSAGE_INVALID: the line is not valid UTF-8/m);
    expect(await session.end()).toBe(0);
  }, 60_000);

  it('refuses a resource read of a path-like or unknown message as the client\'s mistake, with the code first', async () => {
    const w = await fresh();
    const session = await initialized(w);
    const read = (id: number, uri: string) => session.ask(rpc(id, 'resources/read', { uri }));
    const cases: ReadonlyArray<readonly [string, string]> = [
      ['coo://messages/..%2F..%2Fetc%2Fpasswd/envelope', '-32602 USAGE'],
      ['coo://messages/msg_00000000000000000000000000/..%2Fprompt.md', '-32602 USAGE'],
      ['coo://messages/__proto__/envelope', '-32602 USAGE'],
      ['coo://messages/msg_00000000000000000000000000/envelope', '-32602 MESSAGE_UNKNOWN'],
    ];
    let id = 40;
    for (const [uri, expected] of cases) expect([uri, refusal(await read((id += 1), uri))]).toEqual([uri, expected]);
    expect(await session.end()).toBe(0);
  }, 60_000);

  it('refuses a request under the id of one the server is not done with, answers the next id, and frees a cancelled id once its handler stops', async () => {
    const w = await fresh();
    const session = await initialized(w);
    const consult = await session.ask(call(1, 'consult', { to: 'aa.chatgpt', files: ['src/add.ts'], prompt: 'Is add() correct for NaN?' }));
    const messageId = consult.result?.structuredContent?.['message_id'];
    expect(messageId).toMatch(/^msg_/);
    // No runner: the wait holds id 7 until it is cancelled.
    session.send(call(7, 'wait', { message_id: messageId, timeout_seconds: 600 }));
    const reused = await session.ask(call(7, 'inbox', {}));
    expect([reused.id, refusal(reused)]).toEqual([7, '-32600 MCP_MESSAGE_INVALID']);
    expect(reused.error?.message).toMatch(/held by a request the server is not done with/);
    const other = await session.ask(call(8, 'inbox', {}));
    expect([other.id, other.result?.structuredContent]).toEqual([8, { items: [] }]);
    // A cancelled request is never answered; its id is held until its handler stops (a wait stops when cancelled), then free.
    session.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 7 } }));
    let again = await session.ask(call(7, 'inbox', {}));
    for (let turn = 0; turn < 100 && again.error !== undefined; turn += 1) {
      expect(again.error.message).toMatch(/held by a request the server is not done with/);
      await new Promise((resolve) => setTimeout(resolve, 20));
      again = await session.ask(call(7, 'inbox', {}));
    }
    expect([again.id, again.result?.structuredContent]).toEqual([7, { items: [] }]);
    expect(await session.end()).toBe(0);
  }, 60_000);
});

describe('coo mcp ends the session when the client closes its end of stdout', () => {
  it('with one coded line on stderr and exit 0, never an unhandled EPIPE and a stack trace', async () => {
    const w = await fresh();
    const session = await initialized(w);
    const closed = new Promise((resolve) => session.child.stdout.once('close', resolve));
    session.child.stdout.destroy();
    await closed;
    // Each refusal is a write to the closed pipe.
    for (let i = 0; i < 3; i += 1) session.send('not json');
    expect(await session.end()).toBe(0);
    expect(session.stderr).toMatch(/^coo mcp: IO_ERROR: the client's end of stdout is closed \(EPIPE\): the session ends$/m);
    expect(session.stderr).not.toMatch(/node:events|Unhandled|\n {4}at /);
  }, 60_000);
});

describe("the consult relay an execution agent's agent talks to reads its lines the same way", () => {
  it('answers a malformed line, a batch and a key twice with coded errors, and forwards none of them to the runner', async () => {
    const dir = tempDir('mcp-wire-relay-');
    const socket = join(dir, 'runner.sock');
    let connections = 0;
    const runner = createServer((connection) => {
      connections += 1;
      connection.destroy();
    });
    await new Promise<void>((resolve) => runner.listen(socket, resolve));
    try {
      const relay = start(['consult-relay', '--socket', socket]);
      expect((await relay.ask(INITIALIZE)).result).toBeDefined();
      const consult = (id: number, rest: string): string => `{"jsonrpc":"2.0","id":${id},"method":"tools/call","params":{"name":"consult","arguments":{${rest}}}}`;
      expect(refusal(await relay.ask('{"jsonrpc":"2.0","id":1,'))).toBe('-32700 MCP_MESSAGE_INVALID');
      expect(refusal(await relay.ask(`[${consult(2, '"to":"aa.chatgpt"')}]`))).toBe('-32600 MCP_MESSAGE_INVALID');
      expect(refusal(await relay.ask(consult(3, '"to":"aa.chatgpt","to":"ea.codex","question":"q","files":["a"]')))).toBe('-32600 MCP_MESSAGE_INVALID');
      expect(refusal(await relay.ask(rpc(4, 'tools/call', { name: 'consult', arguments: ['aa.chatgpt'] })))).toBe('-32602 MCP_MESSAGE_INVALID');
      expect(connections).toBe(0);
      expect(await relay.end()).toBe(0);
    } finally {
      await new Promise<void>((resolve) => runner.close(() => resolve()));
    }
  }, 60_000);
});

describe('jsonShapeProblem', () => {
  it('finds a key twice however it is escaped, in any object at any depth, and nesting past the bound', () => {
    expect(jsonShapeProblem('{"a":{"b":[{"c":1,"c":2}]}}', 64)).toMatch(/"c" appears twice/);
    expect(jsonShapeProblem('{"a":1,"\\u0061":2}', 64)).toMatch(/"a" appears twice/);
    expect(jsonShapeProblem('{"a":"\\"a\\"","b":{"a":1}}', 64)).toBeNull();
    expect(jsonShapeProblem('[{"a":1},{"a":1}]', 64)).toBeNull();
    expect(jsonShapeProblem('{"a":["a","a"],"b":"a"}', 64)).toBeNull();
    expect(jsonShapeProblem(`${'['.repeat(64)}${']'.repeat(64)}`, 64)).toBeNull();
    expect(jsonShapeProblem(`${'['.repeat(65)}${']'.repeat(65)}`, 64)).toMatch(/deeper than 64/);
  });
});
