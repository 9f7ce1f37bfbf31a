import { spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { AttemptSpend } from '../../src/dispatch/attempt-spend.js';
import { CodexExecutor } from '../../src/dispatch/codex.js';
import type { ExecutorRun } from '../../src/dispatch/executor.js';
import { bwrapArgs } from '../../src/util/bubblewrap.js';
import { requireBubblewrap } from '../helpers/bubblewrap.js';
import { run as runCommand, tempDir } from '../helpers/tmp.js';

/**
 * The adapter's process handling with a stand-in executor (a shell script as --ea-command): what
 * the real CLIs cannot be made to do on demand, such as a wrapper exiting 0 mid-stream, a child left
 * holding the pipe, or a stream that reports a cost over budget.
 */
const dir = tempDir('coo-dispatch-executor-');
let n = 0;

function script(body: string): string {
  n += 1;
  const path = join(dir, `fake-ea-${n}.sh`);
  writeFileSync(path, `#!/bin/sh\n${body}\n`);
  chmodSync(path, 0o755);
  return path;
}

async function runFake(body: string, options: { timeoutSeconds?: number; isolation?: 'bwrap' | 'none'; maxStreamBytes?: number; maxCostUsd?: number; spend?: AttemptSpend } = {}): Promise<{ run: ExecutorRun; scratch: string; worktree: string }> {
  const worktree = join(dir, `wt-${n + 1}`);
  const scratch = join(dir, `scratch-${n + 1}`);
  mkdirSync(worktree, { recursive: true });
  mkdirSync(scratch, { recursive: true });
  const executor = new CodexExecutor({
    command: [script(body)],
    providerKeyEnv: 'MOCK_API_KEY',
    env: { PATH: process.env['PATH'], MOCK_API_KEY: 'sk-fake', RUNNER_SECRET: 'do-not-leak', SSH_AUTH_SOCK: '/tmp/agent.sock' },
    isolation: options.isolation ?? 'none',
    price: { inputPerMillion: 1_000_000, outputPerMillion: 1_000_000 },
    ...(options.maxStreamBytes === undefined ? {} : { maxStreamBytes: options.maxStreamBytes }),
  });
  const run = await executor.run({ attemptId: 'ea_attempt_X_1', worktree, scratch, prompt: 'task', timeoutSeconds: options.timeoutSeconds ?? 30, ...(options.maxCostUsd === undefined ? {} : { maxCostUsd: options.maxCostUsd }), ...(options.spend === undefined ? {} : { spend: options.spend }) });
  return { run, scratch, worktree };
}

const EVENT = (event: unknown): string => `printf '%s\\n' '${JSON.stringify(event)}'`;

describe('the executor process', () => {
  it('keeps a wrapper exit 0 mid-stream as a truncated stream without a terminal event', async () => {
    const { run } = await runFake(`${EVENT({ type: 'thread.started', thread_id: 't' })}\nprintf '{"type":"turn.comp'\nexit 0`);
    expect(run.exitCode).toBe(0);
    expect(run.facts).toMatchObject({ terminal: null, truncated: true, malformedLines: 1, sessionId: 't' });
    expect(run.stream.toString()).toBe('{"type":"thread.started","thread_id":"t"}\n{"type":"turn.comp');
  });

  it('decodes a character split across two reads of the stream whole', async () => {
    const { run } = await runFake(`printf '{"type":"item.completed","item":{"id":"i","type":"agent_message","text":"caf\\303'\nsleep 0.3\nprintf '\\251"}}\\n'\n${EVENT({ type: 'turn.completed', usage: {} })}`);
    expect(run.facts).toMatchObject({ finalMessage: 'café', malformedLines: 0 });
  });

  it('passes only the allow-listed environment, a fresh HOME and CODEX_HOME, and closes stdin', async () => {
    const { run, scratch } = await runFake(`env > "$TMPDIR/env.txt"\nif read -r line; then echo stdin-open >> "$TMPDIR/env.txt"; fi\n${EVENT({ type: 'turn.completed', usage: {} })}`);
    expect(run.facts.terminal).toBe('completed');
    const env = Object.fromEntries(readFileSync(join(scratch, 'tmp', 'env.txt'), 'utf8').trim().split('\n').map((line) => [line.slice(0, line.indexOf('=')), line.slice(line.indexOf('=') + 1)]));
    expect(env['HOME']).toBe(join(scratch, 'home'));
    expect(env['CODEX_HOME']).toBe(join(scratch, 'codex-home'));
    expect(env['MOCK_API_KEY']).toBe('sk-fake');
    expect(env['RUNNER_SECRET']).toBeUndefined();
    expect(env['SSH_AUTH_SOCK']).toBeUndefined();
    expect(Object.keys(env).sort()).toEqual(['CODEX_HOME', 'COO_RUN_MARK', 'GIT_CONFIG_NOSYSTEM', 'HOME', 'LANG', 'MOCK_API_KEY', 'NO_COLOR', 'OLDPWD', 'PATH', 'PWD', 'SHLVL', 'TMPDIR', '_'].filter((key) => key in env));
    expect(readFileSync(join(scratch, 'tmp', 'env.txt'), 'utf8')).not.toContain('stdin-open');
  });

  it('ends a child the executor left holding its output when the executor exits', async () => {
    const { run } = await runFake(`sh -c 'sleep 987654' &\n${EVENT({ type: 'turn.completed', usage: {} })}\nexit 0`, { timeoutSeconds: 20 });
    expect(run.killedBy).toBeNull();
    expect(run.facts.terminal).toBe('completed');
    expect(runCommand('pgrep', ['-f', 'sleep 987654']).stdout).toBe('');
  });

  it('ends every process of the run at the timeout, inside bubblewrap too', async () => {
    const { run } = await runFake(`sh -c 'sleep 987653' &\nsleep 987653`, { timeoutSeconds: 2, isolation: 'bwrap' });
    expect(run.killedBy).toBe('timeout');
    expect(run.isolated).toBe(true);
    expect(runCommand('pgrep', ['-f', 'sleep 987653']).stdout).toBe('');
  });

  it('stops a run whose stream passes its bound and keeps its whole lines up to the bound, never the line the bound cut', async () => {
    const { run } = await runFake(`while true; do ${EVENT({ type: 'item.completed', item: { id: 'i', type: 'agent_message', text: 'x'.repeat(200) } })}; done`, { maxStreamBytes: 10_000 });
    expect(run).toMatchObject({ killedBy: 'stream_bound', streamOverflow: true });
    expect(run.stream.length).toBeLessThanOrEqual(10_000);
    expect(run.stream.length).toBeGreaterThan(10_000 - 300);
    expect(run.stream.at(-1)).toBe(0x0a);
    // Every line kept is a whole event.
    for (const line of run.stream.toString('utf8').trimEnd().split('\n')) expect(() => JSON.parse(line) as unknown).not.toThrow();
  });

  it('keeps no part of the stderr line its tail cut through: a secret there is dropped whole, not kept in part', async () => {
    const secret = 'sk-split-' + 'q'.repeat(40);
    // One line holding the secret, then enough to push the tail's cut into its middle.
    const { run } = await runFake(`printf '%s' '${secret}' >&2; printf '%3970s\\nlast line\\n' '' >&2`, {});
    expect(run.stderrTail).toBe('last line\n');
    expect(run.stderrTail).not.toContain('q'.repeat(5));
  });

  it('stops a run as soon as its reported usage costs more than the budget', async () => {
    const { run } = await runFake(`${EVENT({ type: 'turn.completed', usage: { input_tokens: 5, output_tokens: 5 } })}\nsleep 987652`, { maxCostUsd: 1, timeoutSeconds: 20 });
    expect(run.killedBy).toBe('cost');
  });

  it("stops a run whose cost passes what its agent's consults left of the budget, and tells the attempt what it cost", async () => {
    const spend = new AttemptSpend(100);
    // A consult the agent asked holds 95 of the 100: the run's 10 is over the 5 left.
    spend.holdConsult('aa_consult_X', 95);
    const { run } = await runFake(`${EVENT({ type: 'turn.completed', usage: { input_tokens: 5, output_tokens: 5 } })}\nsleep 987651`, { maxCostUsd: 100, spend, timeoutSeconds: 20 });
    expect(run.killedBy).toBe('cost');
    expect(spend.executorSpentUsd()).toBe(10);
  });
});

describe('the bubblewrap layout', () => {
  it('hides the siblings of a writable folder that lies inside a hidden one, and keeps the folder writable', () => {
    const bwrap = requireBubblewrap('the bubblewrap layout test');
    const state = join(tempDir('bwrap-layout'), 'state');
    mkdirSync(join(state, 'attempt', 'worktree'), { recursive: true });
    mkdirSync(join(state, 'other'), { recursive: true });
    writeFileSync(join(state, 'other', 'secret.txt'), 'runner state\n');
    const worktree = join(state, 'attempt', 'worktree');
    const args = bwrapArgs(bwrap, { writable: [worktree], hide: [state], chdir: worktree, ownPids: true });
    const result = spawnSync(args[0]!, [...args.slice(1), '/bin/sh', '-c', `echo made > made.txt; cat ${join(state, 'other', 'secret.txt')} 2>/dev/null; ls ${state}`], { encoding: 'utf8' });
    expect(result.stdout).not.toContain('runner state');
    expect(result.stdout.trim().split('\n')).toEqual(['attempt']);
    expect(readFileSync(join(worktree, 'made.txt'), 'utf8')).toBe('made\n');
  });
});
