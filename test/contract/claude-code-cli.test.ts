import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generatePrivateKey } from '../../src/crypto/keys.js';
import { ClaudeCodeExecutor, pinnedClaudeCommand, type ClaudeCodeConfig } from '../../src/dispatch/claude-code.js';
import { startScriptedMessagesServer, type ScriptedMessagesServer } from '../../src/offline/fake-messages-server.js';
import { runAttempt, type AttemptSetup } from '../helpers/dispatch-attempt.js';
import { makeTargetRepo } from '../helpers/dispatch-repo.js';
import { git, tempDir } from '../helpers/tmp.js';

/**
 * The real Claude Code CLI (the pinned @anthropic-ai/claude-code) against a scripted Anthropic
 * Messages API on loopback, through the adapter, with the COO's own evidence and decision.
 */
const dir = tempDir('coo-contract-claude-');
const repo = join(dir, 'target');
const base = makeTargetRepo(repo);
const origin = join(dir, 'origin.git');
git(['init', '-q', '--bare', origin]);
git(['remote', 'add', 'origin', origin], { cwd: repo });
const ledger = join(dir, 'ledger.git');
mkdirSync(ledger);
writeFileSync(join(ledger, 'HEAD'), 'LEDGER-CANARY-7f3a\n');
const keyFile = join(dir, 'coo.key');
writeFileSync(keyFile, 'KEY-CANARY-91bc\n', { mode: 0o600 });
const setup: AttemptSetup = { dir, repo, base, key: generatePrivateKey('coo.hermes'), hide: [ledger, keyFile] };

let server: ScriptedMessagesServer;
beforeAll(async () => {
  server = await startScriptedMessagesServer();
});
afterAll(async () => {
  await server.close();
});

function claude(over: Partial<ClaudeCodeConfig> = {}): ClaudeCodeExecutor {
  return new ClaudeCodeExecutor({ command: pinnedClaudeCommand(), baseUrl: server.url, env: { PATH: process.env['PATH'], ANTHROPIC_API_KEY: 'sk-ant-contract' }, isolation: 'bwrap', hide: setup.hide, ...over });
}

const rowsOf = (decision: Awaited<ReturnType<typeof runAttempt>>['decision']): string[] => (decision.kind === 'receipt' ? decision.blockers.map((blocker) => blocker.row) : []);

describe('Claude Code as an execution agent', () => {
  it('makes a real edit and runs a command; the evidence verifies and the attempt succeeds', async () => {
    const worktreeFile = (wt: string) => join(wt, 'src', 'add.js');
    // Claude Code's Write takes an absolute path: the script is set once the worktree exists.
    const prepare = (wt: string) =>
      server.setScript([
        { kind: 'tool', name: 'Write', input: { file_path: worktreeFile(wt), content: 'export const add = (a, b) => a + b;\n' } },
        { kind: 'tool', name: 'Bash', input: { command: 'sh test.sh && echo tested', description: 'run the test' } },
        { kind: 'message', text: 'Fixed add().' },
      ]);
    const { run, evidence, decision, wt } = await runAttempt(setup, claude(), { prepare });
    expect(run).toMatchObject({ executor: 'claude_code', exitCode: 0, killedBy: null, isolated: true });
    expect(run.facts).toMatchObject({ terminal: 'completed', finalMessage: 'Fixed add().', malformedLines: 0, truncated: false, implausibleUsage: false });
    expect(run.facts.commands).toEqual([{ command: 'sh test.sh && echo tested', exitCode: 0 }]);
    expect(run.facts.fileChanges.map((change) => change.path)).toEqual([worktreeFile(wt.path)]);
    expect(run.facts.usage?.costUsd).toBeGreaterThan(0);
    expect(readFileSync(worktreeFile(wt.path), 'utf8')).toContain('a + b');
    expect(evidence.changes.map((change) => change.path)).toEqual(['src/add.js']);
    expect(decision).toMatchObject({ kind: 'receipt', status: 'succeeded', filesChanged: ['src/add.js'] });
  });

  it('records a failing command with its exit code and fails the attempt', async () => {
    server.setScript([{ kind: 'tool', name: 'Bash', input: { command: 'echo broken; exit 3', description: 'x' } }, { kind: 'message', text: 'All done.' }]);
    const { run, decision } = await runAttempt(setup, claude());
    expect(run.facts.commands).toEqual([{ command: 'echo broken; exit 3', exitCode: 3 }]);
    expect(decision).toMatchObject({ kind: 'receipt', status: 'failed', innerExitCodes: [3, 1] });
  });

  it('reports a tool outside the allowed list as a permission denial from the structured list', async () => {
    server.setScript([{ kind: 'tool', name: 'Bash', input: { command: 'curl -s http://127.0.0.1:9/', description: 'x' } }, { kind: 'message', text: 'Could not run it.' }]);
    const { run, decision } = await runAttempt(setup, claude({ tools: ['Read', 'Edit', 'Write'] }));
    expect(run.facts.denials).toEqual([{ code: 'tool_denied', tool: 'Bash' }]);
    expect(rowsOf(decision)).toContain('permission_denied');
  });

  it('fails a refused request as a turn that did not complete', async () => {
    server.setScript([{ kind: 'error', status: 400, code: 'invalid_request_error', message: 'prompt is too long' }]);
    const { run, decision } = await runAttempt(setup, claude(), { timeoutSeconds: 20 });
    expect(run.facts.terminal).not.toBe('completed');
    expect(decision).toMatchObject({ kind: 'receipt' });
    expect(decision.kind === 'receipt' && decision.status).not.toBe('succeeded');
  });

  it('kills a hanging model at our timer and times the attempt out', async () => {
    server.setScript([{ kind: 'hang' }]);
    const { run, decision } = await runAttempt(setup, claude(), { timeoutSeconds: 5 });
    expect(run.killedBy).toBe('timeout');
    expect(decision).toMatchObject({ kind: 'receipt', status: 'timed_out' });
  });

  it('stops a huge event stream at its bound', async () => {
    server.setScript([{ kind: 'message', text: 'y'.repeat(3 * 1024 * 1024) }]);
    const { run, decision } = await runAttempt(setup, claude({ maxStreamBytes: 256 * 1024 }));
    expect(run).toMatchObject({ killedBy: 'stream_bound', streamOverflow: true });
    expect(rowsOf(decision)).toContain('stream_overflow');
  });

  it('keeps an agent inside its worktree: no writes outside, no ledger or key, no push', async () => {
    const outside = join(dir, 'escaped.txt');
    const tmpEscape = `/tmp/coo-escape-claude-${process.pid}.txt`;
    server.setScript([
      { kind: 'tool', name: 'Bash', input: { command: `echo x > ${outside}; echo y > ${tmpEscape}; echo z > ../escaped-too.txt`, description: 'x' } },
      { kind: 'tool', name: 'Write', input: { file_path: join(dir, 'escaped-write.txt'), content: 'x\n' } },
      { kind: 'tool', name: 'Bash', input: { command: `cat ${join(ledger, 'HEAD')}; cat ${keyFile}`, description: 'x' } },
      { kind: 'tool', name: 'Read', input: { file_path: keyFile } },
      { kind: 'tool', name: 'Bash', input: { command: 'git push origin HEAD:refs/heads/pwned; git commit -qam sneaky; echo done', description: 'x' } },
      { kind: 'tool', name: 'Bash', input: { command: 'echo hacked > .github/ci.yml', description: 'x' } },
      { kind: 'message', text: 'Done.' },
    ]);
    const { run, decision, wt } = await runAttempt(setup, claude());
    for (const path of [outside, tmpEscape, join(dir, 'escaped-too.txt'), join(dir, 'escaped-write.txt')]) expect(existsSync(path), path).toBe(false);
    const seen = server.calls.flatMap((call) => call.toolResults).join('\n') + run.stream.toString();
    expect(seen).not.toContain('LEDGER-CANARY');
    expect(seen).not.toContain('KEY-CANARY');
    expect(git(['for-each-ref', '--format=%(refname)'], { cwd: origin })).toBe('');
    expect(git(['log', '--format=%H', `${base}..${wt.branch}`], { cwd: repo }).trim().split('\n')).toHaveLength(1);
    expect(decision).toMatchObject({ kind: 'receipt', status: 'failed' });
    expect(decision.kind === 'receipt' && decision.blockers.map((blocker) => blocker.code)).toContain('scope_violation');
  });

  it('reports a missing command or key as a configuration error before anything runs', () => {
    expect(() => claude({ command: [join(dir, 'no-such-claude')] }).check()).toThrow(expect.objectContaining({ code: 'EXECUTOR_CONFIG' }));
    expect(() => claude({ env: { PATH: process.env['PATH'] } }).check()).toThrow(expect.objectContaining({ code: 'EXECUTOR_CONFIG' }));
    expect(() => new ClaudeCodeExecutor({ tools: ['Bash --dangerously'] })).toThrow(expect.objectContaining({ code: 'EXECUTOR_CONFIG' }));
  });
});
