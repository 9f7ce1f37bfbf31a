import { PassThrough, Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { LIMITS } from '../../src/limits.js';
import { sendCommand } from '../../src/inbox/ceo-messages.js';
import { serverScrubber } from '../../src/mcp/results.js';
import { createCooMcpServer } from '../../src/mcp/server.js';
import { GuardedStdioTransport, loadWireSchemas } from '../../src/mcp/stdio.js';
import { connectMcp, textOf } from '../helpers/mcp.js';
import { worlds, type World } from '../helpers/lane.js';
import { git, tempDir } from '../helpers/tmp.js';

/**
 * `coo mcp` attacked through what its client asks it to sign: the server holds secrets (the COO key,
 * the provider keys of its environment, a remote's credentials) and every write tool signs what the
 * client sent into the ledger, for good.
 */
const fresh = worlds(tempDir('mcp-redteam-'));
const KEY = 'sk-proj-McpRedTeam0123456789abcdefSECRET';

/** Every object of the ledger (blobs, trees, commits) as text. */
function ledgerText(w: World): string {
  return git(['--git-dir', w.gitdir, 'cat-file', '--batch-all-objects', '--batch']);
}

function serverFor(w: World) {
  return connectMcp(w, [], { scrubber: serverScrubber({ key: w.actors.coo, env: { OPENAI_API_KEY: KEY }, places: [{ name: 'ledger', path: w.gitdir }, { name: 'repo', path: w.target }] }) });
}

describe('a write tool asked to sign a secret the server holds', () => {
  it('refuses a consult, a dispatch and an ack whose free text holds it, as written or with a zero-width character inside, and writes nothing', async () => {
    const w = await fresh();
    const command = (await sendCommand({ ledger: w.ledger, key: w.actors.ceo, now: new Date(), text: 'Ship it.' })).messageId;
    const mcp = await serverFor(w);
    try {
      const before = (await w.ledger.state()).seq;
      const escaped = `${KEY.slice(0, 4)}\u200b${KEY.slice(4)}`;
      const calls: Array<[string, Record<string, unknown>]> = [
        ['consult', { to: 'aa.chatgpt', files: ['src/add.ts'], prompt: `Is this key valid? ${KEY}` }],
        ['consult', { to: 'aa.chatgpt', files: ['src/add.ts'], prompt: `Is this key valid? ${escaped}` }],
        ['dispatch', { to: 'ea.codex', task: `Use ${KEY} to call the API.`, scope: ['src/**'], accept: ['it works'], verify: ['true'] }],
        ['ack', { message_id: command, note: `done with ${KEY}` }],
      ];
      for (const [tool, args] of calls) {
        const result = await mcp.call(tool, args);
        expect([tool, result.isError, textOf(result).split(':')[0]]).toEqual([tool, true, 'USAGE']);
        expect(textOf(result)).not.toContain(KEY);
      }
      expect((await w.ledger.state()).seq).toBe(before);
      expect(ledgerText(w)).not.toContain(KEY.slice(8));
      // The same calls without the secret are written.
      expect((await mcp.call('ack', { message_id: command, note: 'done' })).isError).not.toBe(true);
    } finally {
      await mcp.close();
    }
  });
});

/** A client's end of the server's stdout: nothing is read until `read()` takes what waits. */
class UnreadStdout extends Writable {
  private readonly waiting: Array<() => void> = [];
  constructor() {
    super({ highWaterMark: 4096 });
  }
  override _write(_chunk: Buffer, _encoding: BufferEncoding, done: () => void): void {
    this.waiting.push(done);
  }
  read(): void {
    for (const done of this.waiting.splice(0)) done();
  }
}

const line = (message: Record<string, unknown>): string => `${JSON.stringify({ jsonrpc: '2.0', ...message })}\n`;
const INIT = line({ id: 0, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '0' } } });
const settle = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

describe('the stdio transport against a client that sends what no SDK would', () => {
  it('reads no further line while the client does not read its answers, and reads on once it does', async () => {
    const stdin = new PassThrough();
    const stdout = new UnreadStdout();
    const transport = new GuardedStdioTransport(stdin, stdout, await loadWireSchemas(), 1 << 20);
    const seen: unknown[] = [];
    // Each request answered with a large result, as `sessions` or `show` may be.
    transport.onmessage = (message) => {
      seen.push(message);
      if ('id' in message && 'method' in message) void transport.send({ jsonrpc: '2.0', id: message.id, result: { text: 'x'.repeat(10_000) } });
    };
    await transport.start();
    stdin.write(INIT + Array.from({ length: 200 }, (_, index) => line({ id: index + 1, method: 'ping' })).join(''));
    await settle();
    // The first answer fills what the client left unread: the 200 lines after it wait, unread, rather than grow the server's memory by 2 MB.
    expect(seen).toHaveLength(1);
    expect(stdout.writableLength).toBeLessThan(20_000);
    stdout.read();
    await settle();
    expect(seen).toHaveLength(2);
    for (let i = 0; i < 300 && seen.length < 201; i += 1) {
      stdout.read();
      await settle();
    }
    expect(seen).toHaveLength(201);
    await transport.close();
  });

  it(`refuses a request past ${LIMITS.mcpRequestsInFlight} in hand, answers it with a coded error, and takes the next once one is answered or, cancelled, settled`, async () => {
    const stdin = new PassThrough();
    const written: string[] = [];
    const stdout = new Writable({
      write(chunk: Buffer, _encoding, done) {
        written.push(...chunk.toString('utf8').split('\n').filter((text) => text !== ''));
        done();
      },
    });
    const transport = new GuardedStdioTransport(stdin, stdout, await loadWireSchemas(), 1 << 20);
    const requests: Array<string | number> = [];
    transport.onmessage = (message) => {
      if (!('id' in message && 'method' in message)) return;
      if (message.method === 'initialize') void transport.send({ jsonrpc: '2.0', id: message.id, result: {} });
      else requests.push(message.id);
    };
    await transport.start();
    const limit = LIMITS.mcpRequestsInFlight;
    stdin.write(INIT + Array.from({ length: limit + 1 }, (_, index) => line({ id: index + 1, method: 'ping' })).join(''));
    await settle();
    expect(requests).toHaveLength(limit);
    const refused = JSON.parse(written.at(-1)!) as { id: number; error: { code: number; message: string } };
    expect([refused.id, refused.error.code, refused.error.message.split(':')[0]]).toEqual([limit + 1, -32600, 'MCP_MESSAGE_INVALID']);
    expect(refused.error.message).toMatch(/wait for an answer/);
    // One answered: room for one more.
    await transport.send({ jsonrpc: '2.0', id: 1, result: {} });
    stdin.write(line({ id: 'a', method: 'ping' }) + line({ id: 'b', method: 'ping' }));
    await settle();
    expect(requests.slice(limit)).toEqual(['a']);
    // One cancelled: no room until its handler settles (the server says so, unanswered); a cancellation for an id never sent makes none.
    stdin.write(line({ method: 'notifications/cancelled', params: { requestId: 2 } }) + line({ method: 'notifications/cancelled', params: { requestId: 'never-sent' } }) + line({ id: 'c', method: 'ping' }));
    await settle();
    expect(requests.slice(limit)).toEqual(['a']);
    transport.settled(2);
    transport.settled('never-sent');
    stdin.write(line({ id: 'd', method: 'ping' }) + line({ id: 'e', method: 'ping' }));
    await settle();
    expect(requests.slice(limit)).toEqual(['a', 'd']);
    await transport.close();
  });
});

describe("coo mcp's answers to methods and resources the SDK refuses on its own", () => {
  it('start with a code and say what to do: a method it does not serve, a resource of another scheme', async () => {
    const w = await fresh();
    const server = await createCooMcpServer({ ledger: w.ledger, key: w.actors.coo, repo: w.target, auditDir: null, clock: () => new Date(), scrubber: serverScrubber({ key: w.actors.coo, env: {}, places: [] }), version: '0.1.0' });
    const stdin = new PassThrough();
    const stdout = new PassThrough();
    const answers: Array<{ id: unknown; error?: { code: number; message: string } }> = [];
    let buffered = '';
    stdout.on('data', (chunk: Buffer) => {
      buffered += chunk.toString('utf8');
      const parts = buffered.split('\n');
      buffered = parts.pop()!;
      answers.push(...parts.map((text) => JSON.parse(text) as { id: unknown; error?: { code: number; message: string } }));
    });
    await server.connect(new GuardedStdioTransport(stdin, stdout, await loadWireSchemas(), 1 << 20));
    try {
      stdin.write(INIT);
      stdin.write(line({ method: 'notifications/initialized' }));
      stdin.write(line({ id: 1, method: 'logging/setLevel', params: { level: 'debug' } }));
      stdin.write(line({ id: 2, method: 'completion/complete', params: { ref: { type: 'ref/resource', uri: 'coo://messages/{id}/envelope' }, argument: { name: 'id', value: '' } } }));
      stdin.write(line({ id: 3, method: 'resources/read', params: { uri: 'file:///etc/passwd' } }));
      for (let i = 0; i < 100 && answers.length < 4; i += 1) await new Promise((resolve) => setTimeout(resolve, 10));
      const errors = answers.filter((answer) => answer.error !== undefined).map((answer) => [answer.id, answer.error!.code, answer.error!.message.split(':')[0]]);
      expect(errors).toEqual([
        [1, -32601, 'USAGE'],
        [2, -32601, 'USAGE'],
        [3, -32602, 'USAGE'],
      ]);
      expect(answers.find((answer) => answer.id === 1)?.error?.message).toMatch(/logging\/setLevel is not served here: tools\/list lists the tools/);
      expect(answers.find((answer) => answer.id === 3)?.error?.message).toMatch(/^USAGE: Resource file:\/\/\/etc\/passwd not found: .*coo:\/\/messages/);
    } finally {
      await server.close();
    }
  });
});
