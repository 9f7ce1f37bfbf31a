import { spawn, spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { tempDir } from './tmp.js';

export const COO = join(import.meta.dirname, '..', '..', 'dist', 'cli', 'main.js');

/** Checkpoints the CLI keeps (last verified heads, runner sandboxes) go here, never into the real home. */
const STATE_HOME = tempDir('coo-state-');

export interface CliResult {
  readonly status: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs the built `coo` CLI (npm test builds it first). */
export function coo(args: readonly string[], options: { cwd?: string; env?: NodeJS.ProcessEnv; input?: string } = {}): CliResult {
  const result = spawnSync(process.execPath, [COO, ...args], {
    cwd: options.cwd,
    env: { ...process.env, COO_LEDGER: '', COO_KEY: '', XDG_STATE_HOME: STATE_HOME, ...options.env },
    input: options.input,
    encoding: 'utf8',
  });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

export function json<T = Record<string, unknown>>(result: CliResult): T {
  return JSON.parse(result.stdout) as T;
}

/** Runs the CLI without blocking this process: needed when the CLI talks to a server living in the test process. */
export function cooAsync(args: readonly string[], options: { cwd?: string; env?: NodeJS.ProcessEnv } = {}): Promise<CliResult> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [COO, ...args], { cwd: options.cwd, env: { ...process.env, COO_LEDGER: '', COO_KEY: '', XDG_STATE_HOME: STATE_HOME, ...options.env } });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    child.on('close', (status) => resolve({ status, stdout, stderr }));
  });
}
