import { execFileSync, spawnSync, type SpawnSyncReturns } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll } from 'vitest';

/** A fresh temporary directory, removed after the file's tests. */
export function tempDir(prefix = 'coo-test-'): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/**
 * A fresh directory outside the shared temporary folders (in the untracked test-artifacts/), removed after the
 * file's tests: every sandbox sees an empty /tmp, /var/tmp and TMPDIR of its own, so what a test means a sandbox
 * to find hidden by another rule, or to see, lives here.
 */
export function outsideTempDir(prefix: string): string {
  mkdirSync(join(process.cwd(), 'test-artifacts'), { recursive: true });
  const dir = mkdtempSync(join(process.cwd(), 'test-artifacts', prefix));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** Stock git with a fixed identity and no user or system config. */
export function git(args: string[], options: { cwd?: string; input?: string; env?: NodeJS.ProcessEnv } = {}): string {
  return execFileSync('git', args, {
    cwd: options.cwd,
    input: options.input,
    encoding: 'utf8',
    env: { ...gitEnv(), ...options.env },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
}

export function gitEnv(): NodeJS.ProcessEnv {
  return {
    ...process.env,
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_CONFIG_GLOBAL: '/dev/null',
    GIT_AUTHOR_NAME: 'Test',
    GIT_AUTHOR_EMAIL: 'test@example.invalid',
    GIT_COMMITTER_NAME: 'Test',
    GIT_COMMITTER_EMAIL: 'test@example.invalid',
  };
}

export function run(command: string, args: string[], options: { cwd?: string; input?: string | Buffer; env?: NodeJS.ProcessEnv } = {}): SpawnSyncReturns<string> {
  return spawnSync(command, args, { cwd: options.cwd, input: options.input, encoding: 'utf8', env: options.env ?? process.env });
}
