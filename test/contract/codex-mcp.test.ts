import { spawn } from 'node:child_process';
import { chmodSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeModelServer, type FakeModelServer } from '../../src/offline/fake-model-server.js';
import { Ledger } from '../../src/ledger/ledger.js';
import { codexConfigToml } from '../helpers/agent-config.js';
import { COO, coo, json } from '../helpers/cli.js';
import { startGate, type Gate } from '../helpers/gate.js';
import { makeTargetRepo } from '../helpers/lane.js';
import { finalMessage, mcpCall, startScriptedModel, type ResponseItem, type Turn } from '../helpers/responses-model.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * The real Codex CLI as the COO agent, driven by a scripted loopback model, with `coo mcp --run` as
 * its MCP server configured as the README shows. The runner inside that server consults the advisory
 * agent through the real Oracle against the loopback AA model.
 */
const CODEX = join(import.meta.dirname, '..', '..', 'node_modules', '.bin', 'codex');
const dir = tempDir();
const keys = join(dir, 'keys');
const target = join(dir, 'target');
const bin = join(dir, 'bin');
let aa: FakeModelServer;
let n = 0;

const ASK = { to: 'aa.chatgpt', files: ['src/add.ts'], prompt: 'Is add() correct for NaN?', max_runtime_seconds: 120 };
const MESSAGE_ID = /msg_[0-9A-HJKMNP-TV-Z]{26}/;
const TERMINAL = /terminal\\?"\s*:\s*true/;

beforeAll(async () => {
  aa = await startFakeModelServer();
  for (const actor of ['ceo', 'coo.hermes']) expect(coo(['keygen', '--actor', actor, '--out', keys]).status).toBe(0);
  makeTargetRepo(target);
  // `coo` on the agent's PATH, as an installed package puts it there.
  mkdirSync(bin, { recursive: true });
  writeFileSync(join(bin, 'coo'), `#!/bin/sh\nexec ${JSON.stringify(process.execPath)} ${JSON.stringify(COO)} "$@"\n`);
  chmodSync(join(bin, 'coo'), 0o755);
});
afterAll(async () => {
  await aa.close();
});

interface Run {
  readonly ledger: string;
  readonly status: number | null;
  readonly events: Array<Record<string, unknown>>;
  readonly stderr: string;
}

/** One `codex exec` with the coo MCP server and a model that follows `script`. */
async function runCodex(script: (turn: Turn) => ResponseItem | Promise<ResponseItem>, options: { toolTimeoutSeconds?: number; aaUrl?: string } = {}): Promise<Run> {
  n += 1;
  const ledger = join(dir, `ledger${n}.git`);
  expect(coo(['init', '--ledger', ledger, '--ceo-key', join(keys, 'ceo.key'), '--actor', `coo.hermes=${join(keys, 'coo.hermes.pub')}`]).status).toBe(0);
  const model = await startScriptedModel('coo', script);
  const home = join(dir, `codex-home${n}`);
  const work = join(dir, `work${n}`);
  mkdirSync(home, { recursive: true });
  mkdirSync(work, { recursive: true });
  const provider = [
    'model = "mock-model"',
    'model_provider = "mock"',
    'approval_policy = "never"',
    '',
    '[model_providers.mock]',
    'name = "Mock"',
    `base_url = ${JSON.stringify(model.url)}`,
    'env_key = "MOCK_API_KEY"',
    'wire_api = "responses"',
    'request_max_retries = 0',
    'stream_max_retries = 0',
    '',
    '[analytics]',
    'enabled = false',
    '',
    '[features]',
    'plugins = false',
    'remote_plugin = false',
    '',
  ].join('\n');
  const server = codexConfigToml({
    repo: target,
    ledger,
    key: join(keys, 'coo.hermes.key'),
    openaiApiKey: 'sk-loopback-test',
    extraArgs: ['--oracle-base-url', `${options.aaUrl ?? aa.url}/v1`, '--state-dir', join(dir, `runner${n}`)],
    extraEnv: { XDG_STATE_HOME: join(dir, 'xdg') },
    ...(options.toolTimeoutSeconds === undefined ? {} : { toolTimeoutSeconds: options.toolTimeoutSeconds }),
  });
  writeFileSync(join(home, 'config.toml'), `${provider}\n${server}`);
  try {
    const result = await new Promise<{ status: number | null; stdout: string; stderr: string }>((resolve) => {
      const child = spawn(CODEX, ['exec', '--skip-git-repo-check', '--sandbox', 'read-only', '--cd', work, '--json', 'Ask the advisory agent whether add() handles NaN, then cite its answer.'], {
        env: { ...process.env, CODEX_HOME: home, MOCK_API_KEY: 'dummy', PATH: `${bin}:${process.env['PATH'] ?? ''}` },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
      child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
      child.on('close', (status) => resolve({ status, stdout, stderr }));
    });
    const events = result.stdout
      .split('\n')
      .filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    return { ledger, status: result.status, events, stderr: result.stderr };
  } finally {
    await model.close();
  }
}

/** The MCP tool calls Codex reports, in order: tool name and status. */
function toolCalls(run: Run): Array<{ tool: string; status: string; result: string }> {
  return run.events
    .filter((event) => event['type'] === 'item.completed' && (event['item'] as Record<string, unknown>)['type'] === 'mcp_tool_call')
    .map((event) => {
      const item = event['item'] as Record<string, unknown>;
      return { tool: String(item['tool']), status: String(item['status']), result: JSON.stringify(item['result'] ?? item['error'] ?? null) };
    });
}

/**
 * consult (waiting `firstWait` seconds), then wait until the receipt is final, then cite. A consult
 * call that comes back without a message (a timeout) runs `onConsultFailed` and is made again, as an
 * agent retries, waiting `waitSeconds` from then on.
 */
function consultThenCite(firstWait: number, waitSeconds: number, onConsultFailed: () => void = () => undefined): (turn: Turn) => ResponseItem {
  return (turn) => {
    const last = turn.calls[turn.calls.length - 1];
    const mcp = turn.calls.filter((call) => call.namespace === 'mcp__coo');
    if (mcp.length === 0 || last === undefined) return mcpCall('coo', 'consult', { ...ASK, wait_seconds: firstWait });
    const output = last.output ?? '';
    const id = MESSAGE_ID.exec(output)?.[0] ?? mcp.map((call) => MESSAGE_ID.exec(call.output ?? '')?.[0]).find((found) => found !== undefined);
    if (last.name === 'cite') return finalMessage(`cited: ${output.slice(0, 200)}`);
    if (last.name === 'consult' && MESSAGE_ID.exec(output) === null) {
      onConsultFailed();
      return mcpCall('coo', 'consult', { ...ASK, wait_seconds: waitSeconds });
    }
    if (TERMINAL.test(output) && id !== undefined) return mcpCall('coo', 'cite', { message_id: id });
    if (id === undefined || mcp.length > 40) return finalMessage('gave up');
    return mcpCall('coo', 'wait', { message_id: id, timeout_seconds: waitSeconds });
  };
}

async function ledgerFacts(gitdir: string): Promise<{ messages: number; receipts: string[] }> {
  const ledger = Ledger.open(gitdir, { checkpoints: false });
  try {
    const state = await ledger.state();
    return { messages: state.messages.size, receipts: [...state.messages.values()].flatMap((record) => record.attempts.flatMap((attempt) => (attempt.receipt === null ? [] : [attempt.receipt.status]))) };
  } finally {
    ledger.close();
  }
}

describe('Codex as the COO agent, with coo mcp --run as its MCP server', () => {
  it('consults through the server, receives the receipt, cites it; the ledger verifies clean with one paid call', async () => {
    const before = aa.requests.length;
    const run = await runCodex(consultThenCite(60, 60));
    expect(run.status, run.stderr.slice(-2000)).toBe(0);
    const calls = toolCalls(run);
    expect(calls.map((call) => call.tool)).toContain('consult');
    expect(calls[calls.length - 1]).toMatchObject({ tool: 'cite', status: 'completed' });
    expect(calls[calls.length - 1]!.result).toContain('advisory');
    expect(calls.every((call) => call.status === 'completed')).toBe(true);
    expect(await ledgerFacts(run.ledger)).toEqual({ messages: 1, receipts: ['succeeded'] });
    expect(aa.requests.length - before).toBe(1);
    const verified = coo(['verify', '--ledger', run.ledger, '--no-checkpoint', '--json']);
    expect(json(verified)).toMatchObject({ ok: true, findings: [] });
  }, 600_000);

  it('a tool call that times out mid-consult and is retried makes one message and one paid call', async () => {
    const before = aa.requests.length;
    const gate: Gate = await startGate(aa.url);
    let timeouts = 0;
    try {
      const run = await runCodex(
        // The first call waits longer than Codex lets a tool call run, while the AA model is held.
        consultThenCite(60, 3, () => {
          timeouts += 1;
          gate.open();
        }),
        { toolTimeoutSeconds: 6, aaUrl: gate.url },
      );
      expect(run.status, run.stderr.slice(-2000)).toBe(0);
      const calls = toolCalls(run);
      expect(timeouts).toBe(1);
      expect(calls[0]).toMatchObject({ tool: 'consult', status: 'failed' });
      expect(calls.filter((call) => call.tool === 'consult')).toHaveLength(2);
      expect(calls[calls.length - 1]).toMatchObject({ tool: 'cite', status: 'completed' });
      expect(await ledgerFacts(run.ledger)).toEqual({ messages: 1, receipts: ['succeeded'] });
      expect(gate.arrived()).toBe(1);
      expect(aa.requests.length - before).toBe(1);
      expect(json(coo(['verify', '--ledger', run.ledger, '--no-checkpoint', '--json']))).toMatchObject({ ok: true, findings: [] });
    } finally {
      await gate.close();
    }
  }, 600_000);
});
