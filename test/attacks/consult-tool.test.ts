import { execFileSync } from 'node:child_process';
import { mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AttemptSpend } from '../../src/dispatch/attempt-spend.js';
import { openConsultBridge, type ConsultBridge } from '../../src/dispatch/consult-bridge.js';
import { answerConsultCall } from '../../src/dispatch/consult-tool.js';
import { formatPrivateKey } from '../../src/crypto/keys.js';
import { privateKeySecrets, Scrubber } from '../../src/util/scrub.js';
import { claimPath, messageFolder, receiptPath } from '../../src/ledger/layout.js';
import type { EaDispatchMessage } from '../../src/schema/message.js';
import { toYaml } from '../../src/schema/strict-yaml.js';
import { attemptIdFor } from '../../src/util/ids.js';
import { isoSeconds } from '../../src/util/time.js';
import { attack } from '../helpers/attack-kit.js';
import { COO } from '../helpers/cli.js';
import { makeWorld, type World } from '../helpers/lane.js';
import { dispatchEnvelope, eaReceiptDoc, messageFiles } from '../helpers/ledger.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * The consult tool an execution agent gets, attacked through its real relay (`coo consult-relay`)
 * with the MCP SDK's client over stdio, as the executor talks to it: every call the rules refuse
 * comes back as a coded tool error, writes nothing to the ledger and pays for nothing.
 */

const dir = tempDir('consult-tool');
let w: World;
const worktree = join(dir, 'worktree');

beforeAll(async () => {
  w = await makeWorld(join(dir, 'world'));
  mkdirSync(join(worktree, 'src'), { recursive: true });
  mkdirSync(join(worktree, 'docs'), { recursive: true });
  writeFileSync(join(worktree, 'src', 'add.ts'), 'export const add = (a: number, b: number) => a + b;\n');
  writeFileSync(join(worktree, 'docs', 'notes.md'), '# notes\n');
  // A link inside the scope to a file outside it: the snapshot never follows it.
  symlinkSync(join(worktree, 'docs', 'notes.md'), join(worktree, 'src', 'notes.md'));
});
afterAll(async () => w.close());

/** A dispatch to ea.codex in the ledger with its attempt 1 claimed, unless said otherwise. */
async function openDispatch(overrides: Record<string, unknown> = {}): Promise<EaDispatchMessage> {
  const message = dispatchEnvelope(overrides, new Date()) as EaDispatchMessage;
  await w.ledger.append({ files: messageFiles(message), key: w.actors.coo, summary: 'dispatch', now: new Date() });
  const claim = { schema_version: 'claim.v0', message_id: message.message_id, attempt_id: attemptIdFor(message.message_id, 1, 'ea'), attempt_number: 1, runner_id: 'run-test', transport_session_id: 'test', claimed_at: isoSeconds(new Date()) };
  await w.ledger.append({ files: [{ path: claimPath(messageFolder(message.message_id, message.created_at), 1), bytes: Buffer.from(toYaml(claim)) }], key: w.actors.coo, summary: 'claim', now: new Date() });
  return message;
}

/**
 * One call of the tool through the relay, for an attempt of `dispatch`: the code of the tool error,
 * or 'accepted'. Whatever it answers, the ledger did not move and the advisory agent was not called.
 */
async function callTool(dispatch: EaDispatchMessage, args: Record<string, unknown>, spend?: AttemptSpend, secrets = SECRETS): Promise<string> {
  const ran: string[] = [];
  const bridge: ConsultBridge = await openConsultBridge((request) =>
    answerConsultCall({ ctx: { ledger: w.ledger, key: w.actors.coo, clock: () => new Date(), write: (write) => write(w.ledger) }, consults: { run: async (id) => void ran.push(id) }, dispatch, attempt: 1, attemptId: attemptIdFor(dispatch.message_id, 1, 'ea'), worktree, secrets, ...(spend === undefined ? {} : { spend }) }, request),
    secrets,
  );
  const client = new Client({ name: 'attacker', version: '0.0.0' });
  await client.connect(new StdioClientTransport({ command: process.execPath, args: [COO, 'consult-relay', '--socket', bridge.socket], stderr: 'ignore' }));
  try {
    const head = w.ledger.head();
    const result = (await client.callTool({ name: 'consult', arguments: args })) as CallToolResult;
    const text = result.content[0]?.type === 'text' ? result.content[0].text : '';
    if (result.isError !== true) return 'accepted';
    expect(w.ledger.head()).toBe(head);
    expect(ran).toEqual([]);
    expect(w.server.requests).toEqual([]);
    return /^([A-Z_]+):/.exec(text)?.[1] ?? text;
  } finally {
    await client.close();
    await bridge.close();
  }
}

const ASK = { to: 'aa.chatgpt', question: 'Is add() right?', files: ['src/add.ts'] };

/** A provider key as the executor was handed it: Claude Code's agent reads its own environment. */
const PROVIDER_KEY = 'sk-ant-test-0123456789abcdefghij';
let SECRETS: Scrubber;
beforeAll(() => {
  SECRETS = new Scrubber([{ name: 'ANTHROPIC_API_KEY', value: PROVIDER_KEY }, ...privateKeySecrets(w.actors.coo)]);
  writeFileSync(join(worktree, 'src', 'env.ts'), `export const key = '${PROVIDER_KEY}';\n`);
  writeFileSync(join(worktree, 'src', 'backup.txt'), formatPrivateKey(w.actors.coo));
});

describe('the consult tool of a dispatch attempt', () => {
  attack("a consult about a file outside the dispatch's scope", 'runner', 'SCOPE_VIOLATION', async () => callTool(await openDispatch(), { ...ASK, files: ['docs/notes.md'] }));

  attack("a consult about a link inside the scope that leads out of it", 'runner', 'CONTEXT_INVALID', async () => callTool(await openDispatch(), { ...ASK, files: ['src/notes.md'] }));

  attack('a consult that asks for more than the dispatch has left', 'runner', 'BUDGET_EXCEEDED', async () =>
    callTool(await openDispatch({ budget: { max_cost_usd: 0.5, max_runtime_seconds: 600, correlation_budget_remaining_usd: null } }), { ...ASK, max_cost_usd: 0.75 }),
  );

  attack("a consult that asks for what the dispatch has left while its own executor has already spent most of it", 'runner', 'BUDGET_EXCEEDED', async () => {
    const spend = new AttemptSpend(0.5);
    spend.reportExecutor(0.45);
    return callTool(await openDispatch({ budget: { max_cost_usd: 0.5, max_runtime_seconds: 600, correlation_budget_remaining_usd: null } }), { ...ASK, max_cost_usd: 0.2 }, spend);
  });

  it("gives a consult by default only what the dispatch's executor left of its budget, and holds it against the executor", async () => {
    const spend = new AttemptSpend(0.5);
    spend.reportExecutor(0.45);
    const dispatch = await openDispatch({ budget: { max_cost_usd: 0.5, max_runtime_seconds: 600, correlation_budget_remaining_usd: null } });
    expect(await callTool(dispatch, { ...ASK, question: 'Is add() right for NaN?' }, spend)).toBe('accepted');
    const state = await w.ledger.state();
    const asked = state.messages.get(dispatch.message_id)!.consults!;
    expect(asked).toHaveLength(1);
    expect(state.messages.get(asked[0]!.id)!.maxCostUsd).toBeCloseTo(0.05, 9);
    expect(spend.executorCeilingUsd()).toBeCloseTo(0.45, 9);
  });

  attack('a consult whose question carries the provider key the executor was handed', 'runner', 'CONTEXT_INVALID', async () => callTool(await openDispatch(), { ...ASK, question: `Is this key still valid? ${PROVIDER_KEY}` }));

  attack('a consult that snapshots a file of the worktree holding the provider key', 'runner', 'CONTEXT_INVALID', async () => callTool(await openDispatch(), { ...ASK, files: ['src/add.ts', 'src/env.ts'] }));

  attack("a consult that snapshots a file holding the COO's private key", 'runner', 'CONTEXT_INVALID', async () => callTool(await openDispatch(), { ...ASK, files: ['src/backup.txt'] }));

  attack('a consult that names a file whose name is the provider key the executor was handed', 'runner', 'CONTEXT_INVALID', async () => {
    // The path is signed into the envelope and the manifest and sent with the files, as the question is.
    writeFileSync(join(worktree, 'src', `${PROVIDER_KEY}.ts`), 'export {};\n');
    return callTool(await openDispatch(), { ...ASK, files: ['src/add.ts', `src/${PROVIDER_KEY}.ts`] });
  });

  attack('a consult that names a file whose name is the provider key in base64', 'runner', 'CONTEXT_INVALID', async () => {
    const encoded = Buffer.from(PROVIDER_KEY).toString('base64url');
    writeFileSync(join(worktree, 'src', `${encoded}.ts`), 'export {};\n');
    return callTool(await openDispatch(), { ...ASK, files: [`src/${encoded}.ts`] });
  });

  attack('a consult the agent addresses to itself', 'runner', 'SCHEMA_INVALID', async () => callTool(await openDispatch(), { ...ASK, to: 'ea.codex' }));

  attack('a consult addressed to the CEO', 'runner', 'POLICY_EDGE_NOT_ALLOWED', async () => callTool(await openDispatch(), { ...ASK, to: 'ceo' }));

  attack('a consult addressed to an advisory agent the registry does not know', 'runner', 'ACTOR_UNKNOWN', async () => callTool(await openDispatch(), { ...ASK, to: 'aa.nobody' }));

  for (const [what, path] of [
    ['a path that climbs out of the worktree', '../../etc/passwd'],
    ['a path that climbs out of the scope and back', 'src/../docs/notes.md'],
    ['an absolute path', '/etc/passwd'],
    ['a path with a NUL byte', 'src/add.ts\u0000.md'],
    ['a path with a backslash', 'src\\..\\docs\\notes.md'],
  ] as const) {
    attack(`a consult about ${what}`, 'runner', 'CONTEXT_INVALID', async () => callTool(await openDispatch(), { ...ASK, files: [path] }));
  }

  attack('a consult about a folder of the worktree', 'runner', 'CONTEXT_INVALID', async () => callTool(await openDispatch(), { ...ASK, files: ['src'] }));

  attack('a consult about a FIFO in the scope, which the runner never blocks on', 'runner', 'CONTEXT_INVALID', async () => {
    execFileSync('mkfifo', [join(worktree, 'src', 'pipe.ts')]);
    return callTool(await openDispatch(), { ...ASK, files: ['src/pipe.ts'] });
  });

  attack('a consult past the hop limit of its chain', 'runner', 'POLICY_LIMIT', async () => callTool(await openDispatch({ max_hops: 1 }), ASK));

  attack('a consult addressed to an execution agent', 'runner', 'POLICY_EDGE_NOT_ALLOWED', async () => callTool(await openDispatch(), { ...ASK, to: 'ea.claude_code' }));

  attack('a consult addressed to the COO', 'runner', 'POLICY_INTENT_NOT_ALLOWED', async () => callTool(await openDispatch(), { ...ASK, to: 'coo.hermes' }));

  attack('a consult asked after its attempt ended', 'runner', 'ATTEMPT_INVALID', async () => {
    const dispatch = await openDispatch();
    const receipt = { path: receiptPath(messageFolder(dispatch.message_id, dispatch.created_at), 1), bytes: Buffer.from(toYaml(eaReceiptDoc(dispatch.message_id, 1))) };
    await w.ledger.append({ files: [receipt], key: w.actors.coo, summary: 'receipt', now: new Date() });
    return callTool(dispatch, ASK);
  });

  attack('a call with arguments the tool does not take (a key, a ledger path)', 'runner', 'USAGE', async () => callTool(await openDispatch(), { ...ASK, key: '/root/.ssh/id_ed25519' }));
});
