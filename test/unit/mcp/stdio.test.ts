import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { GuardedStdioTransport, loadWireSchemas } from '../../../src/mcp/stdio.js';

/** The transport's line reading, fed in chunks the way a pipe splits them. */
async function feed(chunks: Array<string | Buffer>, maxLineBytes = 1024): Promise<{ messages: JSONRPCMessage[]; written: string[]; errors: string[]; closed: boolean; isClosed: () => boolean; transport: GuardedStdioTransport }> {
  const stdin = new PassThrough();
  const stdout = new PassThrough();
  const written: string[] = [];
  stdout.on('data', (chunk: Buffer) => written.push(...chunk.toString('utf8').split('\n').filter((line) => line !== '')));
  const transport = new GuardedStdioTransport(stdin, stdout, await loadWireSchemas(), maxLineBytes);
  const messages: JSONRPCMessage[] = [];
  const errors: string[] = [];
  let closed = false;
  transport.onmessage = (message) => messages.push(message);
  transport.onerror = (error) => errors.push(error.message);
  transport.onclose = () => (closed = true);
  await transport.start();
  for (const chunk of chunks) stdin.write(chunk);
  await new Promise((resolve) => setImmediate(resolve));
  return { messages, written, errors, closed, isClosed: () => closed, transport };
}

const ping = (id: number): string => JSON.stringify({ jsonrpc: '2.0', id, method: 'ping' });

describe('GuardedStdioTransport', () => {
  it('reads a line split across chunks, several lines in one chunk, CRLF endings and blank lines', async () => {
    const line = ping(1);
    const utf8 = Buffer.from(`${JSON.stringify({ jsonrpc: '2.0', method: 'notifications/message', params: { note: 'é€😀' } })}\n`);
    const { messages, written } = await feed([line.slice(0, 5), line.slice(5), '\r\n\n', `${ping(2)}\n${ping(3)}\n`, utf8.subarray(0, utf8.length - 4), utf8.subarray(utf8.length - 4)]);
    expect(messages.map((message) => ('id' in message ? message.id : 'params' in message ? (message.params as { note: string }).note : null))).toEqual([1, 2, 3, 'é€😀']);
    expect(written).toEqual([]);
  });

  it('ends the session on a line over the limit, whole or in parts, and reads nothing after it', async () => {
    const over = await feed([`${ping(1)}\n`, 'x'.repeat(600), 'x'.repeat(600), `\n${ping(2)}\n`]);
    expect(over.messages.map((message) => ('id' in message ? message.id : null))).toEqual([1]);
    expect(over.errors).toEqual([expect.stringMatching(/over the 1024-byte limit/)]);
    // The request read before it is answered first (coo mcp exited in the middle of its write): then the session closes.
    expect(over.closed).toBe(false);
    await over.transport.send({ jsonrpc: '2.0', id: 1, result: {} });
    await new Promise((resolve) => setImmediate(resolve));
    expect(over.written).toEqual(['{"jsonrpc":"2.0","id":1,"result":{}}']);
    expect(over.isClosed()).toBe(true);
    const none = await feed(['x'.repeat(1200)]);
    expect(none.closed).toBe(true);
    // Lines under the limit in one chunk over it are read: the limit is per line (30 requests, within those a session may leave unanswered).
    const many = await feed([Array.from({ length: 30 }, (_, index) => `${ping(index)}\n`).join('')]);
    expect(many.messages).toHaveLength(30);
    expect(many.closed).toBe(false);
  });

  it('reads nothing more once a line over the limit, kept while the client left its answers unread, is taken', async () => {
    const stdin = new PassThrough();
    // Nobody reads stdout yet: one answer fills it, so the next lines are kept and stdin paused until it drains.
    const stdout = new PassThrough({ highWaterMark: 16 });
    const transport = new GuardedStdioTransport(stdin, stdout, await loadWireSchemas(), 1024);
    const messages: JSONRPCMessage[] = [];
    transport.onmessage = (message) => messages.push(message);
    transport.onerror = () => undefined;
    await transport.start();
    const sent = transport.send({ jsonrpc: '2.0', id: 1, result: {} });
    expect(stdout.writableNeedDrain).toBe(true);
    stdin.write(`${ping(2)}\n${'x'.repeat(1200)}\n${ping(3)}\n`);
    await new Promise((resolve) => setImmediate(resolve));
    expect(messages).toEqual([]);
    expect(stdin.isPaused()).toBe(true);
    stdout.resume();
    await sent;
    await new Promise((resolve) => setImmediate(resolve));
    // The kept ping is read, the line over the limit ends the session, and stdin stays paused: resumed with no reader, what came after was read and thrown away.
    expect(messages.map((message) => ('id' in message ? message.id : null))).toEqual([2]);
    expect(transport.overLimit?.code).toBe('MCP_MESSAGE_TOO_LARGE');
    expect(stdin.isPaused()).toBe(true);
  });

  it('refuses a line that is JSON but no object (null, a number, a string, a boolean), coded, and reads on', async () => {
    const { messages, written } = await feed(['null\n', '5\n', '"x"\n', 'true\n', `${ping(7)}\n`]);
    expect(written.map((line) => JSON.parse(line) as unknown)).toEqual(Array.from({ length: 4 }, () => ({ jsonrpc: '2.0', id: null, error: expect.objectContaining({ code: -32600 }) })));
    expect(messages.map((message) => ('id' in message ? message.id : null))).toEqual([7]);
  });
});
