import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { verifyLedger } from '../../src/audit/verify.js';
import { allowedSigners } from '../../src/audit/allowed-signers.js';
import { pinnedClaudeCommand } from '../../src/dispatch/claude-code.js';
import { pinnedCodexCommand } from '../../src/dispatch/codex.js';
import { startScriptedMessagesServer } from '../../src/offline/fake-messages-server.js';
import { attemptIdFor } from '../../src/util/ids.js';
import { enqueueDispatch, type DispatchRequest } from '../../src/dispatch/enqueue.js';
import { executorFactory } from '../../src/dispatch/executors.js';
import { startScriptedResponsesServer, type ScriptTurn } from '../../src/offline/fake-responses-server.js';
import { sha256Ref } from '../../src/util/hash.js';
import { makeTargetRepo } from '../helpers/dispatch-repo.js';
import { startFakeGitHub } from '../helpers/fake-github.js';
import { startGitHttpServer } from '../helpers/git-http-server.js';
import { receiptsOf, worlds, type World } from '../helpers/lane.js';
import { git, tempDir } from '../helpers/tmp.js';
import { codeOfAsync } from '../helpers/codes.js';
import { approve } from '../../src/dispatch/approve.js';
import { hostLabel } from '../../src/util/process.js';
import { CooError } from '../../src/errors.js';
import type { RunnerEvent, RunnerRemote } from '../../src/runner/runner.js';

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
  return { repo, base, model, executors, runner, dispatch, close: () => model.close() };
}

/** A forge for pull requests: the target's base pushed to a bare repository behind git http-backend with `token`, and a fake GitHub API. */
async function forgeOf(w: World, s: { readonly repo: string; readonly base: string }, token: string) {
  const served = join(w.dir, 'served');
  mkdirSync(served);
  const forge = join(served, 'work.git');
  git(['init', '-q', '--bare', '-b', 'main', forge]);
  git(['push', '-q', forge, `${s.base}:refs/heads/main`], { cwd: s.repo });
  const github = await startFakeGitHub({ headExists: () => true });
  const http = await startGitHttpServer({ projectRoot: served, token });
  return { forge, github, http };
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
      // Stock git reads the work's commit as signed by the COO, with the ledger's allowed signers.
      const signers = join(w.dir, 'allowed_signers');
      writeFileSync(signers, allowedSigners(await w.ledger.state()));
      expect(git(['-c', `gpg.ssh.allowedSignersFile=${signers}`, 'log', '-1', '--format=%G?', envelope.dispatch.branch_name], { cwd: s.repo }).trim()).toBe('G');
      // The base branch is untouched; the work lives on the attempt's branch alone.
      expect(git(['rev-parse', 'main'], { cwd: s.repo }).trim()).toBe(s.base);
      const report = await verifyLedger(w.gitdir, { full: true, now: new Date() });
      expect(report.findings.filter((finding) => finding.code !== 'HEARTBEAT_EXPIRED')).toEqual([]);
    } finally {
      await s.close();
    }
  });

  it('fails an attempt whose verification fails, whatever Codex says', async () => {
    const w = await world();
    const s = await setup(w, [{ kind: 'message', text: 'All done, tests pass.' }]);
    try {
      const { messageId } = await s.dispatch();
      await s.runner.runOnce();
      const [receipt] = await receiptsOf(w, messageId);
      expect(receipt).toMatchObject({ status: 'failed', files_changed: [], head_sha: s.base, branch: null, next_attempt_at: null });
      expect((receipt!['blockers'] as Array<{ code: string }>).map((blocker) => blocker.code)).toEqual(['tests_failed']);
      expect(receipt!['inner_exit_codes']).toEqual([1]);
    } finally {
      await s.close();
    }
  });

  it('fails an attempt that changed a file outside its scope, and leaves the base branch as it was', async () => {
    const w = await world();
    const s = await setup(w, [FIX, { kind: 'patch', patch: '*** Update File: .github/ci.yml\n@@\n-on: push\n+on: [push, pull_request]' }, DONE]);
    try {
      const { messageId } = await s.dispatch();
      await s.runner.runOnce();
      const [receipt] = await receiptsOf(w, messageId);
      expect(receipt!['status']).toBe('failed');
      expect((receipt!['blockers'] as Array<{ code: string }>).map((blocker) => blocker.code)).toContain('scope_violation');
      expect(receipt!['files_changed']).toEqual(['.github/ci.yml', 'src/add.js']);
      expect(git(['rev-parse', 'main'], { cwd: s.repo }).trim()).toBe(s.base);
    } finally {
      await s.close();
    }
  });

  it('leaves a dispatch queued, unclaimed, when the executor is missing, and says so', async () => {
    const w = await world();
    const s = await setup(w, [FIX, DONE]);
    try {
      const runner = w.runner({ repo: s.repo, executors: executorFactory({ command: [join(w.dir, 'no-such-codex')], hide: [w.gitdir], env: { ...process.env, OPENAI_API_KEY: 'sk-test-key' } }) });
      const { messageId } = await s.dispatch();
      const summary = await runner.runOnce();
      expect(summary.receipts).toBe(0);
      expect(w.events).toContainEqual(expect.objectContaining({ type: 'error', messageId, code: 'EXECUTOR_CONFIG' }));
      // Said once, not on every pass of the watcher.
      await runner.runOnce();
      expect(w.events.filter((event) => event.type === 'error' && event.code === 'EXECUTOR_CONFIG')).toHaveLength(1);
      expect((await w.ledger.state()).messages.get(messageId)!.attempts).toEqual([]);
      expect(s.model.calls).toEqual([]);
    } finally {
      await s.close();
    }
  });

  it('leaves an --open-pr dispatch queued, unclaimed, on a runner with no forge token, and runs it on one with a token', async () => {
    const w = await world();
    const TOKEN = 'ghs_RunnerOnlyToken0123456789SECRET';
    const s = await setup(w, [FIX, DONE]);
    const { github, http } = await forgeOf(w, s, TOKEN);
    try {
      const plain = await s.dispatch();
      const { messageId } = await s.dispatch({ openPr: 'acme/work' });
      // s.runner has no pullRequests: the dispatch without open_pr runs, the one with it is held.
      const summary = await s.runner.runOnce();
      expect(summary.receipts).toBe(1);
      expect((await receiptsOf(w, plain.messageId)).map((receipt) => receipt['status'])).toEqual(['succeeded']);
      const held = w.events.filter((event) => event.type === 'error' && event.messageId === messageId);
      expect(held).toEqual([expect.objectContaining({ code: 'EXECUTOR_CONFIG', message: expect.stringContaining('no forge token') })]);
      // Said once, not on every pass of the watcher; nothing claimed, no executor started, nothing paid.
      const calls = s.model.calls.length;
      await s.runner.runOnce();
      expect(w.events.filter((event) => event.type === 'error' && event.messageId === messageId)).toHaveLength(1);
      expect((await w.ledger.state()).messages.get(messageId)!.attempts).toEqual([]);
      expect(w.events.filter((event) => event.type === 'executor_started').map((event) => event.messageId)).toEqual([plain.messageId]);
      expect(s.model.calls).toHaveLength(calls);
      // The same message runs on a runner that holds a token, and opens its pull request.
      s.model.setScript([FIX, DONE]);
      const runner = w.runner({ repo: s.repo, executors: s.executors, pullRequests: { token: TOKEN, base: 'main', pushUrl: `${http.url}/work.git`, apiBaseUrl: github.url } });
      expect((await runner.runOnce()).receipts).toBe(1);
      expect((await receiptsOf(w, messageId)).map((receipt) => receipt['status'])).toEqual(['succeeded']);
      expect(github.pulls).toHaveLength(1);
    } finally {
      await github.close();
      await http.close();
      await s.close();
    }
  });

  it('keeps the provider key from the commands Codex runs (not in their environment, not in /proc), and lets Codex\'s own sandbox take its lock in a folder of the attempt\'s', async () => {
    const w = await world();
    const KEY = 'sk-test-ProviderKeyOnlyCodexHolds0123';
    const probe = `echo SHELL-RAN; env; echo "key=$OPENAI_API_KEY"; for f in /proc/[0-9]*/environ; do tr "\\0" "\\n" < "$f" 2>/dev/null; done; true`;
    const s = await setup(w, [{ kind: 'shell', cmd: probe }, FIX, DONE]);
    try {
      const executors = executorFactory({ command: pinnedCodexCommand(), baseUrl: `${s.model.url}/v1`, hide: [w.gitdir], env: { ...process.env, OPENAI_API_KEY: KEY } });
      const { messageId } = await s.dispatch();
      await w.runner({ repo: s.repo, executors }).runOnce();
      // What the command printed went back to the model as its tool output: it ran (Codex's sandbox took its
      // lock in /tmp, which it could not have in the host's read-only /tmp), and saw no key.
      const outputs = s.model.calls.flatMap((call) => call.toolOutputs).join('\n');
      expect(outputs).toContain('SHELL-RAN');
      expect(outputs).toContain('key=\n');
      expect(outputs).not.toContain(KEY);
      expect(outputs).not.toContain('OPENAI_API_KEY=');
      // Codex itself had the key: its model calls were answered.
      expect((await receiptsOf(w, messageId)).map((receipt) => receipt['status'])).toEqual(['succeeded']);
    } finally {
      await s.close();
    }
  });

  it('blocks a dispatch while the kill switch is on, before anything runs', async () => {
    const w = await world();
    const s = await setup(w, [FIX, DONE]);
    try {
      const { messageId } = await s.dispatch();
      const { appendKillSwitch } = await import('../../src/ledger/trust-update.js');
      await appendKillSwitch(w.ledger, 'on', 'stop all work', 'ceo', w.actors.ceo, new Date());
      await s.runner.runOnce();
      const [receipt] = await receiptsOf(w, messageId);
      expect(receipt).toMatchObject({ status: 'blocked', blockers: [{ code: 'kill_switch' }] });
      expect(s.model.calls).toEqual([]);
    } finally {
      await s.close();
    }
  });

  it('retries a failed dispatch only with the CEO\'s approval, on a branch of its own', async () => {
    const w = await world();
    const s = await setup(w, [{ kind: 'message', text: 'nothing to do' }, FIX, DONE]);
    try {
      const { messageId, envelope } = await s.dispatch();
      await s.runner.runOnce();
      expect((await receiptsOf(w, messageId))[0]!['status']).toBe('failed');
      // Nothing more runs on the COO's word.
      expect((await s.runner.runOnce()).receipts).toBe(0);
      expect(await codeOfAsync(() => approve({ ledger: w.ledger, key: w.actors.coo, now: new Date(), reason: 'again', messageId }))).toBe('TRUST_AUTHORITY');
      const approved = await approve({ ledger: w.ledger, key: w.actors.ceo, now: new Date(), reason: 'try once more', messageId });
      expect(approved.approval).toMatchObject({ approves: 'retry', message_id: messageId, attempt_number: 2, approved_by: 'ceo' });
      await s.runner.runOnce();
      const receipts = await receiptsOf(w, messageId);
      expect(receipts.map((receipt) => receipt['status'])).toEqual(['failed', 'succeeded']);
      expect(receipts[1]!['branch']).toBe(`${envelope.dispatch.branch_name}-attempt-2`);
      // The approval is for one attempt: a third needs another.
      expect(await codeOfAsync(() => approve({ ledger: w.ledger, key: w.actors.ceo, now: new Date(), reason: 'a third', messageId }))).toBe('ATTEMPT_INVALID');
    } finally {
      await s.close();
    }
  });

  it('refuses a dispatch the policy gives to the CEO until the CEO approves its exact request, once', async () => {
    const w = await world();
    const s = await setup(w, []);
    try {
      const request = { target: 'ea.claude_code', idempotencyKey: 'claude-work' } as const;
      const refused = await codeOfAsync(() => s.dispatch(request));
      expect(refused).toBe('APPROVAL_REQUIRED');
      let hash = '';
      try {
        await s.dispatch(request);
      } catch (error) {
        hash = /request (sha256:[0-9a-f]{64})/.exec((error as Error).message)![1]!;
      }
      const other = await approve({ ledger: w.ledger, key: w.actors.ceo, now: new Date(), reason: 'another request', requestHash: sha256Ref('something else') });
      expect(await codeOfAsync(() => s.dispatch({ ...request, approvalId: other.approval.approval_id }))).toBe('APPROVAL_INVALID');
      expect(await codeOfAsync(() => approve({ ledger: w.ledger, key: w.actors.coo, now: new Date(), reason: 'self-approved', requestHash: hash }))).toBe('TRUST_AUTHORITY');
      const approval = await approve({ ledger: w.ledger, key: w.actors.ceo, now: new Date(), reason: 'Claude Code may do this', requestHash: hash });
      const { envelope } = await s.dispatch({ ...request, approvalId: approval.approval.approval_id });
      expect(envelope.approval_id).toBe(approval.approval.approval_id);
      // Used once: the same approval does not carry a second dispatch.
      expect(await codeOfAsync(() => s.dispatch({ ...request, idempotencyKey: 'claude-work-2', approvalId: approval.approval.approval_id }))).toBe('APPROVAL_INVALID');
    } finally {
      await s.close();
    }
  });

  it('records an attempt whose runner died as interrupted, and does not run it again on its own', async () => {
    const w = await world();
    const s = await setup(w, [FIX, DONE]);
    try {
      const { messageId } = await s.dispatch();
      // A runner of this host whose process is gone claimed attempt 1 and died before running it.
      const dead = w.runner({ repo: s.repo });
      const record = (await w.ledger.state()).messages.get(messageId)!;
      expect((await (dead as unknown as { claimTogether(attempts: unknown[], now: Date): Promise<ReadonlySet<string>> }).claimTogether([{ record, attempt: 1 }], new Date())).has(messageId)).toBe(true);
      mkdirSync(join(w.gitdir, 'coo', 'runners'), { recursive: true });
      writeFileSync(join(w.gitdir, 'coo', 'runners', `${dead.runnerId}.json`), JSON.stringify({ host: hostLabel(), pid: 999_999, started: null }));
      await s.runner.runOnce();
      const [receipt] = await receiptsOf(w, messageId);
      expect(receipt).toMatchObject({ status: 'failed', blockers: [{ code: 'interrupted' }], next_attempt_at: null });
      expect((await s.runner.runOnce()).receipts).toBe(0);
      expect(s.model.calls).toEqual([]);
    } finally {
      await s.close();
    }
  });

  it('opens one pull request for a succeeded --open-pr dispatch with the runner\'s token, which the agent never sees', async () => {
    const w = await world();
    const TOKEN = 'ghs_RunnerOnlyToken0123456789SECRET';
    const s = await setup(w, [{ kind: 'shell', cmd: 'env > seen-env.txt; true' }, FIX, DONE]);
    const { forge: remote, github, http } = await forgeOf(w, s, TOKEN);
    try {
      const executors = executorFactory({ command: pinnedCodexCommand(), baseUrl: `${s.model.url}/v1`, hide: [w.gitdir], env: { ...process.env, OPENAI_API_KEY: 'sk-test-key', GITHUB_TOKEN: TOKEN } });
      const runner = w.runner({ repo: s.repo, executors, pullRequests: { token: TOKEN, base: 'main', pushUrl: `${http.url}/work.git`, apiBaseUrl: github.url } });
      const { messageId, envelope } = await s.dispatch({ openPr: 'acme/work', scope: ['src/**', 'seen-env.txt'] });
      await runner.runOnce();
      const [receipt] = await receiptsOf(w, messageId);
      expect(receipt!['status']).toBe('succeeded');
      expect(w.events).toContainEqual(expect.objectContaining({ type: 'pull_request', messageId, created: true }));
      expect(github.pulls).toHaveLength(1);
      expect(github.pulls[0]!.head.ref).toBe(envelope.dispatch.branch_name);
      expect(git(['--git-dir', remote, 'rev-parse', envelope.dispatch.branch_name]).trim()).toBe(receipt!['head_sha']);
      // What the agent's shell saw: no token, no key, no ledger.
      const seen = git(['show', `${receipt!['head_sha'] as string}:seen-env.txt`], { cwd: s.repo });
      expect(seen).not.toContain(TOKEN);
      expect(seen).not.toContain('GITHUB_TOKEN');
    } finally {
      await github.close();
      await http.close();
      await s.close();
    }
  });

  it('opens the pull request of a succeeded dispatch whose receipt waited in the journal, once the remote takes it', async () => {
    const w = await world();
    const TOKEN = 'ghs_RunnerOnlyToken0123456789SECRET';
    const s = await setup(w, [FIX, DONE]);
    const { forge, github, http } = await forgeOf(w, s, TOKEN);
    // The runner works through a remote that goes away just when the receipt is published.
    let away = false;
    const remote: RunnerRemote = {
      url: 'ssh://ledger.invalid/ledger.git',
      sync: async () => {
        if (away) throw new CooError('REMOTE_UNREACHABLE', 'cannot fetch from ssh://ledger.invalid/ledger.git');
        return { head: w.ledger.head()!, arrived: 0 };
      },
      append: async (options) => {
        if (options.summary.startsWith('receipt ') && !away && github.pulls.length === 0 && journaled === 0) {
          away = true;
          throw new CooError('REMOTE_UNREACHABLE', 'cannot reach ssh://ledger.invalid/ledger.git to publish');
        }
        const result = await w.ledger.append(options);
        return { result, commit: w.ledger.head(), report: { url: 'ssh://ledger.invalid/ledger.git', tries: 1, conflicts: 0 } };
      },
    };
    let journaled = 0;
    try {
      const executors = executorFactory({ command: pinnedCodexCommand(), baseUrl: `${s.model.url}/v1`, hide: [w.gitdir], env: { ...process.env, OPENAI_API_KEY: 'sk-test-key' } });
      const onEvent = (event: RunnerEvent): void => {
        w.events.push(event);
        if (event.type === 'journaled') journaled += 1;
      };
      const runner = w.runner({ repo: s.repo, executors, remote, onEvent, pullRequests: { token: TOKEN, base: 'main', pushUrl: `${http.url}/work.git`, apiBaseUrl: github.url } });
      const { messageId, envelope } = await s.dispatch({ openPr: 'acme/work' });
      await runner.runOnce();
      expect(journaled).toBe(1);
      expect(await receiptsOf(w, messageId)).toEqual([]);
      expect(github.pulls).toHaveLength(0);

      away = false;
      await runner.runOnce();

      const [receipt] = await receiptsOf(w, messageId);
      expect(receipt!['status']).toBe('succeeded');
      expect(github.pulls).toHaveLength(1);
      expect(github.pulls[0]!.head.ref).toBe(envelope.dispatch.branch_name);
      expect(git(['--git-dir', forge, 'rev-parse', envelope.dispatch.branch_name]).trim()).toBe(receipt!['head_sha']);
      expect(w.events).toContainEqual(expect.objectContaining({ type: 'pull_request', messageId, created: true }));
    } finally {
      await github.close();
      await http.close();
      await s.close();
    }
  });

  it('runs Claude Code the same way once the CEO approved the request, and records its own cost', async () => {
    const w = await world();
    const s = await setup(w, []);
    const model = await startScriptedMessagesServer();
    try {
      let hash = '';
      try {
        await s.dispatch({ target: 'ea.claude_code' });
      } catch (error) {
        hash = /request (sha256:[0-9a-f]{64})/.exec((error as Error).message)![1]!;
      }
      const { approval } = await approve({ ledger: w.ledger, key: w.actors.ceo, now: new Date(), reason: 'Claude Code may fix add()', requestHash: hash });
      const { messageId, envelope } = await s.dispatch({ target: 'ea.claude_code', approvalId: approval.approval_id });
      const worktree = join(w.dir, 'state', 'dispatch', attemptIdFor(messageId, 1, 'ea'), 'worktree');
      model.setScript([
        { kind: 'tool', name: 'Write', input: { file_path: join(worktree, 'src', 'add.js'), content: 'export const add = (a, b) => a + b;\n' } },
        { kind: 'message', text: 'Fixed add().' },
      ]);
      const executors = executorFactory({ command: pinnedClaudeCommand(), baseUrl: model.url, hide: [w.gitdir], env: { PATH: process.env['PATH'], ANTHROPIC_API_KEY: 'sk-ant-test' } });
      await w.runner({ repo: s.repo, executors }).runOnce();
      const [receipt] = await receiptsOf(w, messageId);
      expect(receipt).toMatchObject({ status: 'succeeded', executor: 'claude_code', files_changed: ['src/add.js'], branch: envelope.dispatch.branch_name });
      expect(receipt!['actual_cost_usd']).toBeGreaterThan(0);
    } finally {
      await model.close();
      await s.close();
    }
  });
});
