import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { formatPrivateKey } from '../../src/crypto/keys.js';
import { COO } from '../helpers/cli.js';
import { worlds } from '../helpers/lane.js';
import { connectMcp, textOf } from '../helpers/mcp.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * `coo mcp` at its edges: an operator who pipes its log (stderr) to something that goes away
 * leaves a server that goes on serving its client, and never dies of an unhandled EPIPE; a call
 * the SDK refuses before any tool runs is coded as every other tool error is.
 */

const fresh = worlds(tempDir('mcp-edges-'));

const rpc = (id: number, method: string, params?: unknown): string => JSON.stringify({ jsonrpc: '2.0', id, method, ...(params === undefined ? {} : { params }) });
const INITIALIZE = rpc(0, 'initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '0' } });

describe('coo mcp whose stderr is closed', () => {
  it('serves on and exits 0 when every line of its log meets EPIPE', async () => {
    const w = await fresh();
    const keyPath = join(w.dir, 'coo.key');
    writeFileSync(keyPath, formatPrivateKey(w.actors.coo), { mode: 0o600 });
    const child = spawn(process.execPath, [COO, 'mcp', '--ledger', w.gitdir, '--key', keyPath, '--repo', w.target], { env: { ...process.env, COO_LEDGER: '', COO_KEY: '' }, stdio: 'pipe' });
    // The operator's log reader is gone before the server writes its first line.
    child.stderr.destroy();
    const lines: string[] = [];
    let buffered = '';
    let waiting: (() => void) | null = null;
    child.stdout.on('data', (chunk: Buffer) => {
      buffered += chunk.toString('utf8');
      const parts = buffered.split('\n');
      buffered = parts.pop()!;
      lines.push(...parts);
      waiting?.();
    });
    const exited = new Promise<number | null>((resolve) => child.on('close', resolve));
    child.on('exit', () => waiting?.());
    const next = async (): Promise<{ id: number | null; result?: { structuredContent?: unknown }; error?: { message: string } }> => {
      while (lines.length === 0) {
        if (child.exitCode !== null || child.signalCode !== null) throw new Error(`the server exited ${child.exitCode} (signal ${child.signalCode})`);
        await new Promise<void>((resolve) => (waiting = resolve));
      }
      return JSON.parse(lines.shift()!) as { id: number | null };
    };
    const ask = async (line: string) => {
      child.stdin.write(`${line}\n`);
      return next();
    };
    expect((await ask(INITIALIZE)).result).toBeDefined();
    child.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' })}\n`);
    // Each refusal and each failed call is logged to the closed stderr.
    for (let i = 0; i < 3; i += 1) expect((await ask('not json')).error?.message).toMatch(/^MCP_MESSAGE_INVALID/);
    expect((await ask(rpc(1, 'tools/call', { name: 'show', arguments: { message_id: 'msg_00000000000000000000000000' } }))).id).toBe(1);
    expect((await ask(rpc(2, 'tools/call', { name: 'inbox', arguments: {} }))).result?.structuredContent).toEqual({ items: [] });
    child.stdin.end();
    expect(await exited).toBe(0);
  }, 60_000);
});

describe('a call the SDK refuses before any tool runs', () => {
  it('an unknown tool name and arguments the schema refuses come back coded, with the next step', async () => {
    const w = await fresh();
    const mcp = await connectMcp(w);
    try {
      for (const name of ['approve', 'kill_switch', '__proto__', 'constructor']) {
        const result = await mcp.call(name, {});
        expect([name, result.isError]).toEqual([name, true]);
        const [head, next] = textOf(result).split('\n');
        expect(head).toBe(`USAGE: Tool ${name} not found`);
        expect(next).toMatch(/^Call one of this server's tools \(tools\/list lists them\): consult, cross_check, .*, ack\.$/);
      }
      const bad = await mcp.call('show', { message_id: '../../etc/passwd' });
      expect(textOf(bad)).toMatch(/^USAGE: Input validation error: .*message ids look like msg_[\s\S]*\nFix the arguments as the message says and call again\.$/);
    } finally {
      await mcp.close();
    }
  }, 60_000);
});
