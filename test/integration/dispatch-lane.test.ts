import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { verifyLedger } from '../../src/audit/verify.js';
import { pinnedCodexCommand } from '../../src/dispatch/codex.js';
import { enqueueDispatch, type DispatchRequest } from '../../src/dispatch/enqueue.js';
import { executorFactory } from '../../src/dispatch/executors.js';
import { startScriptedResponsesServer, type ScriptTurn } from '../../src/dispatch/fake-responses-server.js';
import { sha256Ref } from '../../src/util/hash.js';
import { makeTargetRepo } from '../helpers/dispatch-repo.js';
import { receiptsOf, worlds, type World } from '../helpers/lane.js';
import { git, tempDir } from '../helpers/tmp.js';

/**
 * The dispatch lane end to end: `coo dispatch`'s writer, the runner, the real Codex CLI (the pinned
 * @openai/codex) against a scripted Responses API on loopback, the COO's own evidence and receipt.
 */

const dir = tempDir('dispatch-lane');
const world = worlds(dir);

const FIX: ScriptTurn = { kind: 'patch', patch: '*** Update File: src/add.js\n@@\n-export const add = (a, b) => a - b;\n+export const add = (a, b) => a + b;' };
const DONE: ScriptTurn = { kind: 'message', text: 'Fixed add(); test.sh passes.' };

async function setup(w: World, script: readonly ScriptTurn[]) {
  const repo = join(w.dir, 'work');
  const base = makeTargetRepo(repo);
  const model = await startScriptedResponsesServer(script);
  const executors = executorFactory({ command: pinnedCodexCommand(), baseUrl: `${model.url}/v1`, hide: [w.gitdir], env: { ...process.env, OPENAI_API_KEY: 'sk-test-key' } });
  const runner = w.runner({ repo, executors });
  const dispatch = (overrides: Partial<DispatchRequest> = {}) =>
    enqueueDispatch({ ledger: w.ledger, key: w.actors.coo, now: new Date(), target: 'ea.codex', repo, task: 'Fix add() so that test.sh passes.', scope: ['src/**'], accept: ['test.sh passes'], verify: ['sh test.sh'], timeoutSeconds: 120, maxRuntimeSeconds: 120, ...overrides });
  return { repo, base, model, runner, dispatch, close: () => model.close() };
}

describe('the dispatch lane', () => {
  it('runs Codex in a worktree of its own, verifies and commits the work itself, and receipts it with the evidence', async () => {
    const w = await world();
    const s = await setup(w, [FIX, DONE]);
    try {
      const { messageId, envelope } = await s.dispatch();
      expect(envelope.dispatch.base_ref).toBe(s.base);
      const summary = await s.runner.runOnce();
      expect(summary.receipts).toBe(1);
      const [receipt] = await receiptsOf(w, messageId);
      expect(receipt).toMatchObject({ schema_version: 'ea_receipt.v0', status: 'succeeded', blockers: [], files_changed: ['src/add.js'], tests_run: ['sh test.sh'], branch: envelope.dispatch.branch_name, base_sha: s.base, executor: 'codex' });
      const head = receipt!['head_sha'] as string;
      expect(git(['rev-parse', envelope.dispatch.branch_name], { cwd: s.repo }).trim()).toBe(head);
      const content = git(['show', `${head}:src/add.js`], { cwd: s.repo });
      expect(receipt!['file_hashes']).toEqual([{ path: 'src/add.js', sha256: sha256Ref(Buffer.from(content)) }]);
      expect((receipt!['inner_exit_codes'] as number[]).every((code) => code === 0)).toBe(true);
      expect((receipt!['attachments'] as Array<{ path: string }>).map((item) => item.path.split('/').pop())).toEqual(expect.arrayContaining(['codex-events.jsonl', 'verify-01.log']));
      // The base branch is untouched; the work lives on the attempt's branch alone.
      expect(git(['rev-parse', 'main'], { cwd: s.repo }).trim()).toBe(s.base);
      const report = await verifyLedger(w.gitdir, { full: true, now: new Date() });
      expect(report.findings.filter((finding) => finding.code !== 'HEARTBEAT_EXPIRED')).toEqual([]);
    } finally {
      await s.close();
    }
  });
});
