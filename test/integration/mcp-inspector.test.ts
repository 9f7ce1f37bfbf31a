import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeModelServer, type FakeModelServer } from '../../src/offline/fake-model-server.js';
import { coo, cooAsync } from '../helpers/cli.js';
import { inspect, toolCall } from '../helpers/inspector.js';
import { makeTargetRepo } from '../helpers/lane.js';
import { tempDir } from '../helpers/tmp.js';

const dir = tempDir();
const keys = join(dir, 'keys');
const ledger = join(dir, 'ledger.git');
const target = join(dir, 'target');
let server: FakeModelServer;

beforeAll(async () => {
  server = await startFakeModelServer();
  for (const actor of ['ceo', 'coo.hermes']) expect(coo(['keygen', '--actor', actor, '--out', keys]).status).toBe(0);
  expect(coo(['init', '--ledger', ledger, '--ceo-key', join(keys, 'ceo.key'), '--actor', `coo.hermes=${join(keys, 'coo.hermes.pub')}`]).status).toBe(0);
  makeTargetRepo(target);
});
afterAll(async () => {
  await server.close();
});

const env = { XDG_STATE_HOME: join(dir, 'xdg'), OPENAI_API_KEY: 'sk-inspector-test' };
const serverArgs = ['--ledger', ledger, '--key', join(keys, 'coo.hermes.key'), '--repo', target];

/** The parsed stdout of a tools/call; the Inspector prints the whole CallToolResult as JSON. */
async function call(name: string, args: Record<string, unknown>): Promise<{ isError?: boolean; structuredContent?: Record<string, unknown>; content: Array<{ text: string }> }> {
  const result = await inspect(serverArgs, toolCall(name, args), env);
  const parsed = JSON.parse(result.stdout) as { isError?: boolean; structuredContent?: Record<string, unknown>; content: Array<{ text: string }> };
  // The Inspector exits 5 when a tool returns isError, after printing the result.
  expect(result.status, result.stderr).toBe(parsed.isError === true ? 5 : 0);
  return parsed;
}

describe('coo mcp under the MCP Inspector, a separate client process', () => {
  let messageId = '';

  it('lists the eleven tools, each with its input and output schema', async () => {
    const result = await inspect(serverArgs, ['--method', 'tools/list'], env);
    expect(result.status, result.stderr).toBe(0);
    const { tools } = JSON.parse(result.stdout) as { tools: Array<{ name: string; inputSchema: { properties?: Record<string, { description?: string }> }; outputSchema?: unknown }> };
    expect(tools.map((tool) => tool.name).sort()).toEqual(['ack', 'adopt', 'cite', 'consult', 'cross_check', 'dispatch', 'inbox', 'sessions', 'show', 'verify', 'wait']);
    expect(tools.every((tool) => tool.outputSchema !== undefined)).toBe(true);
    // The bundled CLI's zod and the SDK's share descriptions: the agent reads what each argument means.
    expect(tools.find((tool) => tool.name === 'consult')!.inputSchema.properties!['wait_seconds']!.description).toMatch(/wait up to/);
    // Logs go to stderr only; stdout carried the protocol, which parsed.
    expect(result.stderr).toContain('coo mcp: serving');
  }, 120_000);

  it('consult queues a consult that a separate coo watch answers; wait, sessions, show, cite and verify read it', async () => {
    const queued = await call('consult', { to: 'aa.chatgpt', files: ['src/add.ts'], prompt: 'Is add() correct for NaN?', max_runtime_seconds: 60 });
    expect(queued.structuredContent).toMatchObject({ state: 'queued', existing: false });
    messageId = queued.structuredContent!['message_id'] as string;
    const watched = await cooAsync(['watch', '--once', '--repo', target, '--state-dir', join(dir, 'state'), '--oracle-base-url', `${server.url}/v1`], { env: { ...env, COO_LEDGER: ledger, COO_KEY: join(keys, 'coo.hermes.key') } });
    expect(watched.status, watched.stderr).toBe(0);
    expect((await call('wait', { message_id: messageId, timeout_seconds: 5 })).structuredContent).toMatchObject({ state: 'succeeded', terminal: true, receipt: { status: 'succeeded' } });
    const sessions = (await call('sessions', { limit: 10 })).structuredContent as { sessions: Array<{ message_id: string }> };
    expect(sessions.sessions.map((session) => session.message_id)).toEqual([messageId]);
    expect((await call('show', { message_id: messageId })).structuredContent).toMatchObject({ lane_state: 'succeeded', answer: { advisory: true, untrusted: true } });
    expect((await call('cite', { message_id: messageId })).structuredContent).toMatchObject({ verified: true, advisory: true });
    expect((await call('verify', {})).structuredContent).toMatchObject({ ok: true, findings: [] });
    expect(server.requests).toHaveLength(1);
  }, 300_000);

  it("a CEO command sent with coo command is read from the inbox and acknowledged through the Inspector, and leaves the inbox", async () => {
    const sent = coo(['command', '--ledger', ledger, '--ceo-key', join(keys, 'ceo.key'), '--text', 'Find out whether add() handles NaN.', '--budget', '1']);
    expect(sent.status, sent.stderr).toBe(0);
    const commandId = sent.stdout.trim();
    const inbox = (await call('inbox', {})).structuredContent as { items: Array<Record<string, unknown>> };
    expect(inbox.items.filter((item) => item['kind'] === 'command')).toEqual([expect.objectContaining({ message_id: commandId, from: 'ceo', ceo_text: 'Find out whether add() handles NaN.\n', budget_usd: 1 })]);
    const acked = (await call('ack', { message_id: commandId, note: 'Consulting aa.chatgpt under it.' })).structuredContent!;
    expect(acked).toMatchObject({ acknowledges: commandId, existing: false });
    const after = (await call('inbox', {})).structuredContent as { items: Array<{ message_id: string }> };
    expect(after.items.map((item) => item.message_id)).not.toContain(commandId);
    const shown = JSON.parse(coo(['show', acked['message_id'] as string, '--ledger', ledger, '--json']).stdout) as { envelope: Record<string, unknown> };
    expect(shown.envelope).toMatchObject({ intent: 'ack', source_actor: 'coo.hermes', target_actor: 'ceo', about_message_id: commandId, submitted_via: 'mcp' });
    expect((await call('verify', {})).structuredContent).toMatchObject({ ok: true, findings: [] });
  }, 300_000);

  it('refuses bad arguments and unknown messages as tool errors, with the code and what to do', async () => {
    const bad = await call('consult', { to: 'aa.chatgpt', files: ['src/add.ts'], prompt: 'x', repo: '/etc' });
    expect(bad.isError).toBe(true);
    expect(bad.content[0]!.text).toMatch(/Unrecognized key: "repo"/);
    const unknown = await call('show', { message_id: 'msg_01KZZZZZZZZZZZZZZZZZZZZZZZ' });
    expect(unknown.isError).toBe(true);
    expect(unknown.content[0]!.text).toMatch(/^MESSAGE_UNKNOWN: /);
    expect(JSON.stringify(unknown)).not.toContain(dir);
  }, 120_000);

  it('coo mcp refuses a missing --repo, a browser engine and a path that is not a ledger before it serves, with one coded line on stderr', () => {
    const cases: Array<[string[], number, RegExp]> = [
      [['mcp', '--ledger', ledger, '--key', join(keys, 'coo.hermes.key')], 2, /^coo: USAGE: --repo is required/],
      [['mcp', '--ledger', ledger, '--key', join(keys, 'coo.hermes.key'), '--repo', target, '--run', '--engine', 'browser'], 2, /^coo: ORACLE_CONFIG: --engine browser is not allowed/],
      [['mcp', '--ledger', target, '--key', join(keys, 'coo.hermes.key'), '--repo', target], 2, /^coo: LEDGER_NOT_FOUND: /],
      [['mcp', '--ledger', ledger, '--key', join(dir, 'no-such.key'), '--repo', target], 2, /^coo: USAGE: cannot read key file/],
    ];
    for (const [args, status, stderr] of cases) {
      const result = coo(args, { env });
      expect(result.status, args.join(' ')).toBe(status);
      expect(result.stderr).toMatch(stderr);
      expect(result.stdout).toBe('');
    }
    expect(coo(['mcp', '--help']).stdout).toContain('Usage: coo mcp');
  });
});
