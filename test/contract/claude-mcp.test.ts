import { spawn } from 'node:child_process';
import { chmodSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeModelServer, type FakeModelServer } from '../../src/offline/fake-model-server.js';
import { Ledger } from '../../src/ledger/ledger.js';
import { claudeMcpJson } from '../helpers/agent-config.js';
import { COO, coo, json } from '../helpers/cli.js';
import { makeTargetRepo } from '../helpers/lane.js';
import { startMessagesModel, type MessagesReply, type MessagesTurn } from '../helpers/messages-model.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * The real Claude Code as the COO agent, driven by a scripted loopback model, with `coo mcp --run` as
 * its MCP server from the `.mcp.json` the README shows. The runner consults the advisory agent
 * through the real Oracle against the loopback AA model.
 */
const CLAUDE = join(import.meta.dirname, '..', '..', 'node_modules', '.bin', 'claude');
const dir = tempDir();
const keys = join(dir, 'keys');
const target = join(dir, 'target');
const bin = join(dir, 'bin');
const ledger = join(dir, 'ledger.git');
let aa: FakeModelServer;

const ASK = { to: 'aa.chatgpt', files: ['src/add.ts'], prompt: 'Is add() correct for NaN?', max_runtime_seconds: 120, wait_seconds: 60 };
const MESSAGE_ID = /msg_[0-9A-HJKMNP-TV-Z]{26}/;
const TERMINAL = /terminal\\?"\s*:\s*true/;

beforeAll(async () => {
  aa = await startFakeModelServer();
  for (const actor of ['ceo', 'coo.hermes']) expect(coo(['keygen', '--actor', actor, '--out', keys]).status).toBe(0);
  expect(coo(['init', '--ledger', ledger, '--ceo-key', join(keys, 'ceo.key'), '--actor', `coo.hermes=${join(keys, 'coo.hermes.pub')}`]).status).toBe(0);
  makeTargetRepo(target);
  mkdirSync(bin, { recursive: true });
  writeFileSync(join(bin, 'coo'), `#!/bin/sh\nexec ${JSON.stringify(process.execPath)} ${JSON.stringify(COO)} "$@"\n`);
  chmodSync(join(bin, 'coo'), 0o755);
});
afterAll(async () => {
  await aa.close();
});

/** consult (waiting up to a minute), wait until final, cite, then a final text. */
function consultThenCite(turn: MessagesTurn): MessagesReply {
  const last = turn.calls[turn.calls.length - 1];
  if (last === undefined) return { tool: 'mcp__coo__consult', input: ASK };
  const output = last.output ?? '';
  const id = turn.calls.map((call) => MESSAGE_ID.exec(call.output ?? '')?.[0]).find((found) => found !== undefined);
  if (last.name === 'mcp__coo__cite') return { text: `cited: ${output.slice(0, 200)}` };
  if (id === undefined || turn.calls.length > 30) return { text: 'gave up' };
  if (TERMINAL.test(output)) return { tool: 'mcp__coo__cite', input: { message_id: id } };
  return { tool: 'mcp__coo__wait', input: { message_id: id, timeout_seconds: 60 } };
}

describe('Claude Code as the COO agent, with coo mcp --run as its MCP server', () => {
  it('consults through the server, receives the receipt, cites it; the ledger verifies clean with one paid call', async () => {
    const model = await startMessagesModel('mcp__coo__consult', consultThenCite);
    const config = join(dir, 'work', '.mcp.json');
    mkdirSync(join(dir, 'work'), { recursive: true });
    writeFileSync(
      config,
      claudeMcpJson({
        repo: target,
        ledger,
        key: join(keys, 'coo.hermes.key'),
        openaiApiKey: 'sk-loopback-test',
        extraArgs: ['--oracle-base-url', `${aa.url}/v1`, '--state-dir', join(dir, 'runner')],
        extraEnv: { XDG_STATE_HOME: join(dir, 'xdg') },
      }),
    );
    const tools = ['consult', 'wait', 'sessions', 'show', 'cite', 'verify'].map((tool) => `mcp__coo__${tool}`).join(' ');
    try {
      const result = await new Promise<{ status: number | null; stdout: string; stderr: string }>((resolve) => {
        const child = spawn(CLAUDE, ['-p', 'Ask the advisory agent whether add() handles NaN, then cite its answer.', '--mcp-config', config, '--strict-mcp-config', '--allowedTools', tools, '--output-format', 'stream-json', '--verbose'], {
          cwd: join(dir, 'work'),
          env: {
            ...process.env,
            PATH: `${bin}:${process.env['PATH'] ?? ''}`,
            CLAUDE_CONFIG_DIR: join(dir, 'claude-config'),
            ANTHROPIC_BASE_URL: model.url,
            ANTHROPIC_API_KEY: 'dummy',
            CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
            DISABLE_TELEMETRY: '1',
            DISABLE_AUTOUPDATER: '1',
            // Claude Code defers MCP tools behind its tool search by default; the scripted model calls them directly.
            ENABLE_TOOL_SEARCH: 'false',
            MCP_TOOL_TIMEOUT: '120000',
          },
          stdio: ['ignore', 'pipe', 'pipe'],
        });
        let stdout = '';
        let stderr = '';
        child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
        child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
        child.on('close', (status) => resolve({ status, stdout, stderr }));
      });
      expect(result.status, result.stderr.slice(-2000)).toBe(0);
      const events = result.stdout
        .split('\n')
        .filter((line) => line.startsWith('{'))
        .map((line) => JSON.parse(line) as { type: string; subtype?: string; mcp_servers?: Array<{ name: string; status: string }> });
      expect(events.find((event) => event.type === 'system')?.mcp_servers).toEqual([expect.objectContaining({ name: 'coo', status: 'connected' })]);
      expect(events[events.length - 1]).toMatchObject({ type: 'result', subtype: 'success' });
      const called = model.requests[model.requests.length - 1]!.calls;
      expect(called[0]!.name).toBe('mcp__coo__consult');
      expect(called[called.length - 1]!.name).toBe('mcp__coo__cite');
      expect(called[called.length - 1]!.output).toContain('advisory');
      const handle = Ledger.open(ledger, { checkpoints: false });
      try {
        const state = await handle.state();
        expect(state.messages.size).toBe(1);
        expect([...state.messages.values()][0]!.attempts.map((attempt) => attempt.receipt?.status)).toEqual(['succeeded']);
      } finally {
        handle.close();
      }
      expect(aa.requests).toHaveLength(1);
      expect(json(coo(['verify', '--ledger', ledger, '--no-checkpoint', '--json']))).toMatchObject({ ok: true, findings: [] });
    } finally {
      await model.close();
    }
  }, 600_000);
});
