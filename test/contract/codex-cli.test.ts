import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generatePrivateKey } from '../../src/crypto/keys.js';
import { CodexExecutor, pinnedCodexCommand, type CodexConfig } from '../../src/dispatch/codex.js';
import { hugeMessage, startScriptedResponsesServer, type ScriptedModelServer, type ScriptTurn } from '../../src/offline/fake-responses-server.js';
import { runAttempt, type AttemptSetup } from '../helpers/dispatch-attempt.js';
import { makeTargetRepo } from '../helpers/dispatch-repo.js';
import { git, tempDir } from '../helpers/tmp.js';

/**
 * The real Codex CLI (the pinned @openai/codex) against a scripted Responses API on loopback,
 * through the adapter, with the COO's own evidence and decision after each run.
 */
const dir = tempDir('coo-contract-codex-');
const repo = join(dir, 'target');
const base = makeTargetRepo(repo);
const origin = join(dir, 'origin.git');
git(['init', '-q', '--bare', origin]);
git(['remote', 'add', 'origin', origin], { cwd: repo });
// Stand-ins for what the EA must never read: the ledger and the COO's key.
const ledger = join(dir, 'ledger.git');
mkdirSync(ledger);
writeFileSync(join(ledger, 'HEAD'), 'LEDGER-CANARY-7f3a\n');
const keyFile = join(dir, 'coo.key');
writeFileSync(join(keyFile), 'KEY-CANARY-91bc\n', { mode: 0o600 });
const setup: AttemptSetup = { dir, repo, base, key: generatePrivateKey('coo.hermes'), hide: [ledger, keyFile] };

let server: ScriptedModelServer;
beforeAll(async () => {
  server = await startScriptedResponsesServer();
});
afterAll(async () => {
  await server.close();
});

function codex(over: Partial<CodexConfig> = {}): CodexExecutor {
  return new CodexExecutor({ command: pinnedCodexCommand(), baseUrl: `${server.url}/v1`, model: 'mock-model', providerKeyEnv: 'MOCK_API_KEY', env: { PATH: process.env['PATH'], MOCK_API_KEY: 'sk-contract' }, isolation: 'bwrap', hide: setup.hide, ...over });
}

const FIX: ScriptTurn = { kind: 'patch', patch: '*** Update File: src/add.js\n@@\n-export const add = (a, b) => a - b;\n+export const add = (a, b) => a + b;' };

describe('the Codex CLI as an execution agent', () => {
  it('makes a real edit and runs a command; the evidence verifies and the attempt succeeds', async () => {
    server.setScript([FIX, { kind: 'shell', cmd: 'sh test.sh && echo tested' }, { kind: 'message', text: 'Fixed add().' }]);
    const { run, evidence, decision, wt } = await runAttempt(setup, codex());
    expect(run).toMatchObject({ executor: 'codex', exitCode: 0, killedBy: null, streamOverflow: false, isolated: true });
    expect(run.facts).toMatchObject({ terminal: 'completed', finalMessage: 'Fixed add().', malformedLines: 0, truncated: false });
    expect(run.facts.fileChanges).toEqual([{ path: join(wt.path, 'src', 'add.js'), kind: 'update' }]);
    expect(run.facts.commands).toEqual([{ command: expect.stringContaining('sh test.sh'), exitCode: 0 }]);
    expect(run.facts.usage?.inputTokens).toBeGreaterThan(0);
    expect(run.stream.toString()).toContain('"turn.completed"');
    expect(evidence.changes.map((change) => change.path)).toEqual(['src/add.js']);
    expect(decision).toMatchObject({ kind: 'receipt', status: 'succeeded', filesChanged: ['src/add.js'], innerExitCodes: [0, 0] });
    expect(git(['rev-parse', wt.branch], { cwd: repo }).trim()).toBe(decision.kind === 'receipt' ? decision.headSha : '');
  });

  it('records a failing command with its exit code and fails the attempt', async () => {
    server.setScript([{ kind: 'shell', cmd: 'echo broken; exit 3' }, { kind: 'message', text: 'All done, everything passes.' }]);
    const { run, decision } = await runAttempt(setup, codex());
    expect(run.facts.commands).toEqual([{ command: expect.stringContaining('exit 3'), exitCode: 3 }]);
    expect(decision).toMatchObject({ kind: 'receipt', status: 'failed', innerExitCodes: [3, 1] });
    if (decision.kind === 'receipt') expect(decision.blockers.map((blocker) => blocker.row)).toEqual(['verification_failed']);
  });

  it('fails a provider error as a turn that did not complete', async () => {
    server.setScript([{ kind: 'error', status: 500, code: 'server_error', message: 'boom' }]);
    const { run, decision } = await runAttempt(setup, codex());
    expect(run.facts.terminal).toBe('failed');
    expect(decision).toMatchObject({ kind: 'receipt', status: 'failed' });
    if (decision.kind === 'receipt') expect(decision.blockers.map((blocker) => blocker.row)).toContain('no_completed_turn');
  });

  it('fails a stream dropped before response.completed', async () => {
    server.setScript([{ kind: 'drop', text: 'half an answer' }]);
    const { run, decision } = await runAttempt(setup, codex());
    expect(run.facts.terminal).toBe('failed');
    expect(run.exitCode).not.toBe(0);
    expect(decision).toMatchObject({ kind: 'receipt', status: 'failed' });
  });

  it('kills a hanging model at our timer and times the attempt out', async () => {
    server.setScript([{ kind: 'hang' }]);
    const { run, decision } = await runAttempt(setup, codex(), { timeoutSeconds: 4 });
    expect(run.killedBy).toBe('timeout');
    expect(decision).toMatchObject({ kind: 'receipt', status: 'timed_out' });
    if (decision.kind === 'receipt') expect(decision.blockers[0]).toMatchObject({ code: 'budget_runtime_breach' });
  });

  it('stops a huge event stream at its bound and keeps it as a fact', async () => {
    server.setScript([hugeMessage(3 * 1024 * 1024)]);
    const { run, decision } = await runAttempt(setup, codex({ maxStreamBytes: 256 * 1024 }));
    expect(run).toMatchObject({ killedBy: 'stream_bound', streamOverflow: true });
    // Kept up to the bound, without the line the bound cut: what is kept is whole events.
    expect(run.stream.length).toBeLessThanOrEqual(256 * 1024);
    if (run.stream.length > 0) expect(run.stream.at(-1)).toBe(0x0a);
    expect(decision).toMatchObject({ kind: 'receipt' });
    if (decision.kind === 'receipt') {
      expect(decision.status).not.toBe('succeeded');
      expect(decision.blockers.map((blocker) => blocker.row)).toContain('stream_overflow');
    }
  });

  it('keeps an agent inside its worktree: no writes outside, no ledger or key, no push, no commit of its own', async () => {
    const outside = join(dir, 'escaped.txt');
    const tmpEscape = `/tmp/coo-escape-${process.pid}.txt`;
    server.setScript([
      { kind: 'shell', cmd: `echo x > ${outside}; echo y > ${tmpEscape}; echo z > ../escaped-too.txt; echo w > "$HOME/../../escaped-home.txt"` },
      { kind: 'shell', cmd: `cat ${join(ledger, 'HEAD')}; cat ${keyFile}; ls -a ${ledger}` },
      { kind: 'shell', cmd: 'git push origin HEAD:refs/heads/pwned; git commit -qam sneaky; echo done' },
      { kind: 'shell', cmd: 'echo hacked > .github/ci.yml' },
      { kind: 'message', text: 'Done.' },
    ]);
    const { run, decision, wt } = await runAttempt(setup, codex());
    expect(existsSync(outside)).toBe(false);
    expect(existsSync(tmpEscape)).toBe(false);
    expect(existsSync(join(dir, 'escaped-too.txt'))).toBe(false);
    expect(existsSync(join(dir, 'escaped-home.txt'))).toBe(false);
    const seen = server.calls.flatMap((call) => call.toolOutputs).join('\n') + run.stream.toString();
    expect(seen).not.toContain('LEDGER-CANARY');
    expect(seen).not.toContain('KEY-CANARY');
    expect(git(['for-each-ref', '--format=%(refname)'], { cwd: origin })).toBe('');
    // The agent's own commit did not land; the branch holds only the runner's signed commit.
    expect(git(['log', '--format=%H', `${base}..${wt.branch}`], { cwd: repo }).trim().split('\n')).toHaveLength(1);
    // What it could write (the worktree) is caught by the evidence: .github is out of scope.
    expect(decision).toMatchObject({ kind: 'receipt', status: 'failed' });
    if (decision.kind === 'receipt') expect(decision.blockers.map((blocker) => blocker.code)).toContain('scope_violation');
    expect(readFileSync(join(ledger, 'HEAD'), 'utf8')).toBe('LEDGER-CANARY-7f3a\n');
  });

  it('keeps the provider key from the agent\'s commands: not in their environment, not in what they write', async () => {
    server.setScript([{ kind: 'shell', cmd: 'env; echo "key=$MOCK_API_KEY"; printenv > src/env.txt; echo "ran-$((40 + 2))"' }, { kind: 'message', text: 'Done.' }]);
    const { run, wt } = await runAttempt(setup, codex());
    const seen = server.calls.flatMap((call) => call.toolOutputs).join('\n') + run.stream.toString();
    expect(seen).toContain('ran-42');
    expect(seen).not.toContain('sk-contract');
    expect(readFileSync(join(wt.path, 'src', 'env.txt'), 'utf8')).not.toContain('sk-contract');
  });

  it('reports a missing or non-executable command as a configuration error before anything runs', () => {
    const calls = server.calls.length;
    expect(() => codex({ command: [join(dir, 'no-such-codex')] }).check()).toThrow(expect.objectContaining({ code: 'EXECUTOR_CONFIG' }));
    const notExecutable = join(dir, 'codex-not-executable');
    writeFileSync(notExecutable, '#!/bin/sh\n');
    chmodSync(notExecutable, 0o644);
    expect(() => codex({ command: [notExecutable] }).check()).toThrow(expect.objectContaining({ code: 'EXECUTOR_CONFIG' }));
    expect(() => codex({ command: ['codex-not-on-path'] }).check()).toThrow(expect.objectContaining({ code: 'EXECUTOR_CONFIG' }));
    expect(() => codex({ env: { PATH: process.env['PATH'] } }).check()).toThrow(expect.objectContaining({ code: 'EXECUTOR_CONFIG' }));
    expect(server.calls.length).toBe(calls);
  });
});
