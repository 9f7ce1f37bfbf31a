import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import { formatPrivateKey } from '../../src/crypto/keys.js';
import { LIMITS } from '../../src/limits.js';
import { TOOL_SUMMARIES } from '../../src/mcp/server.js';
import { COO, coo } from '../helpers/cli.js';
import { worlds, type World } from '../helpers/lane.js';
import { textOf } from '../helpers/mcp.js';
import { tempDir } from '../helpers/tmp.js';

/** `coo mcp` as an agent starts it: the built CLI on stdio. */
const fresh = worlds(tempDir('coo-mcp-cli-'));

function keyFile(w: World): string {
  const path = join(w.dir, 'coo.key');
  writeFileSync(path, formatPrivateKey(w.actors.coo), { mode: 0o600 });
  return path;
}

describe('coo mcp on stdio', () => {
  it('lists its tools in --help', () => {
    const help = coo(['mcp', '--help']);
    expect(help.status).toBe(0);
    for (const [name, summary] of TOOL_SUMMARIES) expect(help.stdout.split('\n')).toContainEqual(expect.stringMatching(new RegExp(`^  ${name} +${summary.slice(0, 20).replace(/[()]/g, '.')}`)));
    expect(help.stdout).toMatch(/--ea-command <path>/);
  });

  it('ends a session whose client sends a line over the transport limit with a coded error and a non-zero exit, never a silent 0', async () => {
    const w = await fresh();
    const child = spawn(process.execPath, [COO, 'mcp', '--ledger', w.gitdir, '--key', keyFile(w), '--repo', w.target], { env: { ...process.env, COO_LEDGER: '', COO_KEY: '' }, stdio: ['pipe', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    const exited = new Promise<number | null>((resolve) => child.on('close', resolve));
    child.stdin.on('error', () => undefined);
    child.stdin.write(`${'x'.repeat(LIMITS.mcpMessageBytes + 1024)}\n`);
    child.stdin.end();
    expect(await exited).toBe(3);
    expect(stderr).toMatch(/^coo: MCP_MESSAGE_TOO_LARGE: a message from the client was over the \d+-byte limit/m);
  }, 60_000);

  it('--run takes the execution-agent flags coo watch takes, and a dispatch its executor cannot start reaches the agent as a coded tool error', async () => {
    const w = await fresh();
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [COO, 'mcp', '--run', '--ledger', w.gitdir, '--key', keyFile(w), '--repo', w.target, '--state-dir', join(w.dir, 'state'), '--oracle-base-url', `${w.server.url}/v1`, '--ea-command', join(w.dir, 'no-such-codex'), '--ea-base-url', `${w.server.url}/v1`],
      env: { PATH: process.env['PATH'] ?? '', HOME: w.dir, OPENAI_API_KEY: 'sk-test-key', XDG_STATE_HOME: join(w.dir, 'xdg') },
      stderr: 'pipe',
    });
    let stderr = '';
    transport.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    const client = new Client({ name: 'coo-test', version: '0.0.0' });
    await client.connect(transport);
    try {
      const dispatched = (await client.callTool({ name: 'dispatch', arguments: { to: 'ea.codex', task: 'Make add() reject NaN.', scope: ['src/**'], accept: ['add(NaN, 1) throws'], verify: ['true'], wait_seconds: 20 } })) as CallToolResult;
      expect(dispatched.isError, stderr).toBe(true);
      expect(textOf(dispatched)).toMatch(/^EXECUTOR_CONFIG: msg_\w+ is queued, but the runner cannot start it: .*no-such-codex/);
    } finally {
      await client.close();
    }
    expect(stderr).not.toMatch(/unknown option/);
  }, 120_000);
});
