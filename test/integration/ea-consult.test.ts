import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { verifyLedger } from '../../src/audit/verify.js';
import { pinnedCodexCommand } from '../../src/dispatch/codex.js';
import { enqueueDispatch } from '../../src/dispatch/enqueue.js';
import { executorFactory } from '../../src/dispatch/executors.js';
import { startScriptedResponsesServer, type ScriptTurn } from '../../src/offline/fake-responses-server.js';
import { readStrictYaml } from '../../src/schema/strict-yaml.js';
import { privateKeySecrets } from '../../src/util/scrub.js';
import { attemptIdFor } from '../../src/util/ids.js';
import { makeTargetRepo } from '../helpers/dispatch-repo.js';
import { receiptsOf, worlds, type World } from '../helpers/lane.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * EA -> AA end to end: the real Codex CLI, driven by a scripted Responses model, calls its consult
 * tool mid-task; the runner writes the consult on the agent's behalf, runs it through the real
 * Oracle against the loopback AA model, hands the answer back, and receipts both.
 */

const dir = tempDir('ea-consult');
const world = worlds(dir);

/** Distinct values, so that a test can tell whose key it finds where. */
const EA_KEY = 'sk-ea-key-0123456789';
const AA_KEY = 'sk-aa-secret-9876543210';

const FIX: ScriptTurn = { kind: 'patch', patch: '*** Update File: src/add.js\n@@\n-export const add = (a, b) => a - b;\n+export const add = (a, b) => a + b;' };
const ASK: ScriptTurn = { kind: 'mcp', server: 'coo', tool: 'consult', args: { to: 'aa.chatgpt', question: 'Is add() right now?', files: ['src/add.js'] } };
const DONE: ScriptTurn = { kind: 'message', text: 'Fixed add(); test.sh passes.' };

async function setup(w: World, script: readonly ScriptTurn[]) {
  const repo = join(w.dir, 'work');
  const base = makeTargetRepo(repo);
  const model = await startScriptedResponsesServer(script);
  const executors = executorFactory({ command: pinnedCodexCommand(), baseUrl: `${model.url}/v1`, hide: [w.gitdir], env: { ...process.env, OPENAI_API_KEY: EA_KEY } });
  const runner = w.runner({ repo, executors, transport: w.transport({ env: { OPENAI_API_KEY: AA_KEY } }) });
  const dispatch = () =>
    enqueueDispatch({ ledger: w.ledger, key: w.actors.coo, now: new Date(), target: 'ea.codex', repo, task: 'Fix add() so that test.sh passes; ask aa.chatgpt first.', scope: ['src/**'], accept: ['test.sh passes'], verify: ['sh test.sh'], timeoutSeconds: 120, maxRuntimeSeconds: 120, maxCostUsd: 2 });
  return { repo, base, model, runner, dispatch, close: () => model.close() };
}

/** Every process under `pid`, with its command line and environment as Linux shows them. */
function processTree(pid: number): Array<{ pid: number; cmdline: string; environ: string }> {
  const children = new Map<number, number[]>();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      const parent = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      children.set(parent, [...(children.get(parent) ?? []), Number(name)]);
    } catch {
      // gone meanwhile
    }
  }
  const out: Array<{ pid: number; cmdline: string; environ: string }> = [];
  const walk = (at: number): void => {
    try {
      out.push({ pid: at, cmdline: readFileSync(`/proc/${at}/cmdline`, 'utf8'), environ: readFileSync(`/proc/${at}/environ`, 'utf8') });
    } catch {
      // gone meanwhile
    }
    for (const child of children.get(at) ?? []) walk(child);
  };
  walk(pid);
  return out;
}

describe('an execution agent consults an advisory agent while it works', () => {
  it('runs the consult the real Codex asks mid-task as a child of its dispatch, pays once for each, hands the answer back quoted, and verifies clean', async () => {
    const w = await world();
    const s = await setup(w, [ASK, FIX, DONE]);
    try {
      const { messageId, envelope } = await s.dispatch();
      // While the agent works, look at its whole process tree: the relay is in it, and neither the COO key nor the AA's key.
      const pidFile = join(w.dir, 'state', 'dispatch', attemptIdFor(messageId, 1, 'ea'), 'executor.pid');
      const seen: Array<{ pid: number; cmdline: string; environ: string }> = [];
      let running = true;
      const probe = (async () => {
        while (running) {
          if (existsSync(pidFile)) {
            const pid = Number(/\d+/.exec(readFileSync(pidFile, 'utf8'))?.[0]);
            for (const item of processTree(pid)) if (!seen.some((other) => other.pid === item.pid)) seen.push(item);
          }
          await new Promise((resolve) => setTimeout(resolve, 50));
        }
      })();
      const summary = await s.runner.runOnce().finally(() => {
        running = false;
      });
      await probe;
      // The runner's pass ran one message, the dispatch; the consult ran inside it: two receipts written, the consult's and the dispatch's.
      expect(summary.receipts).toBe(2);

      const state = await w.ledger.state();
      const dispatchRecord = state.messages.get(messageId)!;
      expect(dispatchRecord.consults).toHaveLength(1);
      const consultId = dispatchRecord.consults![0]!.id;
      const consult = state.messages.get(consultId)!;
      // A child of the dispatch: its parent, its correlation, one hop further; the agent asked, the COO signed.
      expect(consult).toMatchObject({ intent: 'aa_consult', source: 'ea.codex', target: 'aa.chatgpt', chain: [messageId], correlation: envelope.correlation_id, askedIn: 1 });
      const [consultReceipt] = await receiptsOf(w, consultId);
      expect(consultReceipt).toMatchObject({ status: 'succeeded', target_actor: 'aa.chatgpt' });
      expect(consultReceipt!['actual_cost_usd']).toBeGreaterThan(0);
      // One paid AA call.
      expect(w.server.requests).toHaveLength(1);
      const [receipt] = await receiptsOf(w, messageId);
      expect(receipt).toMatchObject({ status: 'succeeded', consults: [{ message_id: consultId, receipt: consult.attempts[0]!.receipt!.path }] });
      // The answer reached the agent, quoted as untrusted data, in the call's result.
      const toolResult = s.model.calls.flatMap((call) => call.toolOutputs).find((output) => output.includes(consultId));
      expect(toolResult).toMatch(/UNTRUSTED DATA/);
      expect(toolResult).toMatch(/<<<UNTRUSTED [0-9a-f]{24}/);
      // Its cost is charged to the dispatch's correlation with the agent's own.
      expect(state.spendByCorrelation.get(envelope.correlation_id)).toBeCloseTo((receipt!['actual_cost_usd'] as number) + (consultReceipt!['actual_cost_usd'] as number), 9);

      // The agent's process tree held the relay, and neither the COO key nor the advisory agent's key.
      expect(seen.some((item) => item.cmdline.includes('consult-relay'))).toBe(true);
      const secrets = [AA_KEY, ...privateKeySecrets(w.actors.coo).map((secret) => secret.value)];
      for (const item of seen) for (const secret of secrets) expect(`${item.cmdline}\n${item.environ}`.includes(secret), `process ${item.pid} ${item.cmdline.replace(/\0/g, ' ')}`).toBe(false);
      expect(seen.some((item) => item.environ.includes(EA_KEY))).toBe(true);

      const report = await verifyLedger(w.gitdir, { full: true, now: new Date() });
      expect(report.findings.filter((finding) => finding.code !== 'HEARTBEAT_EXPIRED')).toEqual([]);
      // The snapshot the AA saw is the worktree's file as it stood when the agent asked (before the fix).
      const manifest = readStrictYaml((await w.ledger.readFile(`${consultReceipt!['output_ref']}`.replace(/artifacts\/.*$/, 'context-manifest.yaml')))!, 'manifest') as { snapshot_of: string };
      expect(manifest.snapshot_of).toBe(attemptIdFor(messageId, 1, 'ea'));
    } finally {
      await s.close();
    }
  });

  it("refuses a consult whose question carries the provider key the agent's executor holds: nothing is written, sent or paid, and the key is nowhere in the ledger", async () => {
    const w = await world();
    const leak: ScriptTurn = { kind: 'mcp', server: 'coo', tool: 'consult', args: { to: 'aa.chatgpt', question: `My key is ${EA_KEY}; is it valid?`, files: ['src/add.js'] } };
    const s = await setup(w, [leak, FIX, DONE]);
    try {
      const { messageId } = await s.dispatch();
      await s.runner.runOnce();
      const state = await w.ledger.state();
      expect(state.messages.get(messageId)!.consults ?? []).toEqual([]);
      expect(w.server.requests).toEqual([]);
      const toolResult = s.model.calls.flatMap((call) => call.toolOutputs).join('\n');
      expect(toolResult).toContain('CONTEXT_INVALID');
      expect(toolResult).not.toContain(EA_KEY);
      const history = spawnSync('git', ['--git-dir', w.gitdir, 'log', '-p', '--all', '--format=%B'], { encoding: 'utf8', maxBuffer: 256 * 1024 * 1024 });
      expect(history.status).toBe(0);
      expect(history.stdout).not.toContain(EA_KEY);
    } finally {
      await s.close();
    }
  });
});
