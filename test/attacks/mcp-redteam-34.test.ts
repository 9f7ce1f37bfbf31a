import { PassThrough } from 'node:stream';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { describe, expect, it } from 'vitest';
import { worlds } from '../helpers/lane.js';
import { line, rawSession, refusal } from '../helpers/mcp-raw.js';
import { GuardedStdioTransport, loadWireSchemas } from '../../src/mcp/stdio.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * `coo mcp`'s stdio transport against a client that frames its lines as no SDK would. A line of
 * bytes JSON never takes as whitespace (0xA0, a vertical tab, a form feed) was read as Latin-1,
 * trimmed, and skipped as blank: the client's request went unanswered. And a line written a byte at
 * a time, each write read on its own, was held as one buffer object per read: some two hundred bytes
 * of the server's heap per byte sent, so a line under the size bound could grow the server past the
 * machine's memory.
 */
const fresh = worlds(tempDir('mcp-redteam-34-'));

/** The heap and buffers the process holds, measured after a full collection, so that only what is held counts. */
function heldBytes(): number {
  setFlagsFromString('--expose-gc');
  (runInNewContext('gc') as () => void)();
  const usage = process.memoryUsage();
  return usage.heapUsed + usage.arrayBuffers;
}

describe('coo mcp against lines framed as no SDK frames them', () => {
  it('answers a line of bytes JSON does not take as whitespace with a parse error, and still skips a line of spaces, tabs and a carriage return', async () => {
    const w = await fresh();
    const session = await rawSession(w);
    try {
      const from = session.answers.length;
      for (const bytes of [[0xa0], [0x0b], [0x0c], [0x20, 0x09, 0x0d], [0x20, 0xa0, 0x20]]) session.stdin.write(Buffer.from([...bytes, 0x0a]));
      session.stdin.write(line({ id: 9, method: 'ping' }));
      const ping = await session.answer(9, from);
      expect(refusal(ping)).toBe('answered');
      const before = session.answers.slice(from, session.answers.indexOf(ping));
      expect(before.map((answer) => [answer.id, refusal(answer)])).toEqual(Array.from({ length: 4 }, () => [null, '-32700 MCP_MESSAGE_INVALID']));
    } finally {
      await session.close();
    }
  });

  it('holds a line written one byte per write in no more than a few bytes per byte sent, and answers it once its newline comes', async () => {
    const w = await fresh();
    const session = await rawSession(w);
    try {
      const text = line({ id: 7, method: 'ping', params: { _meta: { pad: 'x'.repeat(200_000) } } });
      const bytes = Buffer.from(text.slice(0, -1));
      const from = session.answers.length;
      const start = heldBytes();
      for (let at = 0; at < bytes.length; at += 1) session.stdin.write(bytes.subarray(at, at + 1));
      await new Promise((resolve) => setImmediate(resolve));
      const held = heldBytes() - start;
      // Two hundred bytes per byte sent before; the doubling buffer holds at most two.
      expect(held).toBeLessThan(bytes.length * 8);
      session.stdin.write('\n');
      expect(refusal(await session.answer(7, from))).toBe('answered');
    } finally {
      await session.close();
    }
  });

  it('takes a line of exactly the bound written a byte at a time, and ends the session at one byte more', async () => {
    const text = '{"jsonrpc":"2.0","id":1,"method":"ping"}';
    const outcomes: string[] = [];
    for (const bound of [text.length, text.length - 1]) {
      const stdin = new PassThrough();
      const stdio = new GuardedStdioTransport(stdin, new PassThrough(), await loadWireSchemas(), bound);
      const read: unknown[] = [];
      stdio.onmessage = (message) => void read.push(message);
      await stdio.start();
      for (const byte of Buffer.from(`${text}\n`)) stdin.write(Buffer.from([byte]));
      await new Promise((resolve) => setImmediate(resolve));
      outcomes.push(`${read.length} read, ${stdio.overLimit?.code ?? 'served'}`);
      await stdio.close();
    }
    expect(outcomes).toEqual(['1 read, served', '0 read, MCP_MESSAGE_TOO_LARGE']);
  });
});
