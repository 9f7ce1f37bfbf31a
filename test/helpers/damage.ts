import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'vitest';
import { sandboxFor } from '../../src/consult/sandbox.js';
import { formatPrivateKey, type PrivateKey } from '../../src/crypto/keys.js';
import { COO } from './cli.js';
import { blockersOf, FAKE_ORACLE, receiptsOf, type World } from './lane.js';
import { stockCommit } from './stock.js';
import { git, tempDir } from './tmp.js';

/** How long a command may take before a test calls it hung: far beyond any verb's work on these small ledgers. */
export const HUNG_MS = 90_000;

const STATE_HOME = tempDir('coo-state-');

export interface BoundedResult {
  /** null when the command had to be killed: it did not end by itself within HUNG_MS. */
  readonly status: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** The single `coo: CODE: message` line a refused start prints, with exit 2 and nothing on standard output. */
export function refusal(result: BoundedResult): string {
  expect({ status: result.status, stdout: result.stdout }).toEqual({ status: 2, stdout: '' });
  const lines = result.stderr.trimEnd().split('\n');
  expect(lines).toHaveLength(1);
  return lines[0]!;
}

/** Runs the built CLI, killed after HUNG_MS: a command that does not end is a failed assertion, not a stuck test. */
export function cooBounded(args: readonly string[], options: { cwd?: string; env?: NodeJS.ProcessEnv } = {}): BoundedResult {
  const result = spawnSync(process.execPath, [COO, ...args], {
    cwd: options.cwd,
    env: { ...process.env, COO_LEDGER: '', COO_KEY: '', XDG_STATE_HOME: STATE_HOME, ...options.env },
    encoding: 'utf8',
    timeout: HUNG_MS,
    killSignal: 'SIGKILL',
  });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

/** A long-running CLI process and how it ended: status null when it had to be killed after HUNG_MS. */
export function startBounded(args: readonly string[], env: NodeJS.ProcessEnv = {}, cwd?: string): { child: ChildProcess; ended: Promise<BoundedResult>; stderr: () => string } {
  const child = spawn(process.execPath, [COO, ...args], { cwd, env: { ...process.env, COO_LEDGER: '', COO_KEY: '', XDG_STATE_HOME: STATE_HOME, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
  const ended = new Promise<BoundedResult>((resolve) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), HUNG_MS);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ status: code, stdout, stderr });
    });
  });
  return { child, ended, stderr: () => stderr };
}

/** Waits, checking every 100 ms, until `ready` holds; fails after HUNG_MS. */
export async function until(what: string, ready: () => boolean): Promise<void> {
  const deadline = Date.now() + HUNG_MS;
  while (!ready()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

export function writeKey(dir: string, name: string, key: PrivateKey): string {
  const file = join(dir, `${name}.key`);
  writeFileSync(file, formatPrivateKey(key), { mode: 0o600 });
  return file;
}

/** `coo watch` arguments for a world: the fake Oracle in http mode against the world's loopback model. */
export function watchArgs(world: World, keyFile: string, stateDir: string, oracle = httpOracle(world.dir)): string[] {
  return ['watch', '--ledger', world.gitdir, '--key', keyFile, '--repo', world.target, '--state-dir', stateDir, '--oracle-command', oracle, '--oracle-base-url', `${world.server.url}/v1`];
}

/** Writes `dir/oracle-http.sh`, the fake Oracle in http mode (a model call to --base-url, as Oracle's own route makes it). */
export function httpOracle(dir: string): string {
  const wrapper = join(dir, 'oracle-http.sh');
  writeFileSync(wrapper, `#!/bin/sh\nexec "${process.execPath}" "${FAKE_ORACLE}" --fake-mode http "$@"\n`, { mode: 0o755 });
  return wrapper;
}

export function headOf(gitdir: string): string {
  return git(['--git-dir', gitdir, 'rev-parse', 'main']).trim();
}

export function seqOf(gitdir: string): number {
  return Number(/Ledger-Seq: (\d+)/.exec(git(['--git-dir', gitdir, 'log', '-1', '--format=%B', 'main']))![1]);
}

/**
 * Commits `files` with stock git, signed by `keyFile` (a real key of the ledger), and moves main to
 * it behind the pre-receive hook's back, as someone with write access to the folder could.
 */
export function bypassCommit(gitdir: string, work: string, files: Record<string, string>, keyFile: string): string {
  git(['clone', '-q', gitdir, work]);
  stockCommit(work, files, { key: keyFile, seq: seqOf(gitdir) + 1 });
  git(['--git-dir', gitdir, 'fetch', '-q', work, 'main:refs/heads/main']);
  return headOf(gitdir);
}

/**
 * Adds unsigned commits on main with git fast-import (no hook runs): `before` commits adding a
 * file each, then one whose tree holds a symbolic link at messages/x.yaml, then `after` more.
 * Returns the symbolic link's commit and the last one.
 */
export function addMalformedTree(gitdir: string, before: number, after: number): { malformed: string; last: string } {
  const lines: string[] = [];
  let seq = seqOf(gitdir);
  const commit = (mark: number, change: string[]): void => {
    seq += 1;
    const message = `by hand\n\nLedger-Seq: ${seq}\n`;
    lines.push('commit refs/heads/main', `mark :${mark}`, `committer T <t@example.invalid> ${1_700_000_000 + mark} +0000`, `data ${Buffer.byteLength(message)}`, message);
    lines.push(mark === 1 ? `from ${headOf(gitdir)}` : `from :${mark - 1}`, ...change, '');
  };
  const plain = (mark: number): string[] => [`M 100644 inline f${mark}.txt`, 'data 2', 'x'];
  let mark = 0;
  for (let i = 0; i < before; i += 1) commit((mark += 1), plain(mark));
  commit((mark += 1), ['M 120000 inline messages/x.yaml', 'data 11', '/etc/passwd']);
  const malformedMark = mark;
  for (let i = 0; i < after; i += 1) commit((mark += 1), plain(mark));
  git(['--git-dir', gitdir, 'fast-import', '--quiet', `--export-marks=${join(gitdir, 'marks')}`], { input: `${lines.join('\n')}\n` });
  const marks = new Map(
    readFileSync(join(gitdir, 'marks'), 'utf8')
      .split('\n')
      .filter((line) => line !== '')
      .map((line) => line.split(' ') as [string, string]),
  );
  return { malformed: marks.get(`:${malformedMark}`)!, last: headOf(gitdir) };
}

/** Processes whose command line names `path` (a runner's state folder: Oracle, an executor and their children). */
export function processesUnder(path: string): string[] {
  return spawnSync('ps', ['-eo', 'pid=,args='], { encoding: 'utf8' })
    .stdout.split('\n')
    .filter((line) => line.includes(path) && !line.includes(' ps -eo'));
}

/** The fake Oracles still running for a world: a killed runner's orphans. */
export function orphans(world: World): number[] {
  return processesUnder(world.dir)
    .filter((line) => line.includes(FAKE_ORACLE))
    .map((line) => Number(line.trim().split(' ')[0]));
}

/** Ends the group a process leads, or the process alone when it leads none (one in a sandbox's own session). */
export function endGroup(pid: number): void {
  for (const target of [-pid, pid]) {
    try {
      process.kill(target, 'SIGKILL');
      return;
    } catch {
      // no such group: the process alone, or it is already gone
    }
  }
}

/**
 * A consult whose runner (`coo watch --once`) was SIGKILLed once the question reached the model, its
 * Oracle left running on the call: the runner's arguments, the attempt's claim, its sandbox and its
 * Oracle's pid.
 */
export async function killedMidCall(world: World, env: NodeJS.ProcessEnv) {
  const { messageId, envelope } = await world.consult();
  const state = join(world.dir, 'watch-state');
  const args = [...watchArgs(world, writeKey(world.dir, 'coo', world.actors.coo), state), '--once'];
  const runner = startBounded(args, env);
  await until('the model called', () => world.server.requests.length === 1);
  runner.child.kill('SIGKILL');
  expect((await runner.ended).status).not.toBe(0);
  const attempt = (await world.ledger.state()).messages.get(messageId)!.attempts[0]!;
  const sandbox = sandboxFor(state, attempt.attemptId);
  return { messageId, envelope, args, claim: attempt.claim!, sandbox, oracle: Number(readFileSync(sandbox.pidPath, 'utf8').split(' ')[0]) };
}

/** The runner started again after `killedMidCall`: the interrupted attempt's receipt, its retry succeeded on the model's second call. */
export async function recoveredAfterKill<R>(world: World, died: { readonly messageId: string; readonly args: readonly string[] }, env: NodeJS.ProcessEnv): Promise<R> {
  const restarted = await startBounded(died.args, env).ended;
  expect(restarted.status, restarted.stderr).toBe(0);
  const [interrupted, retried] = (await receiptsOf(world, died.messageId)) as Array<Record<string, unknown>>;
  expect(blockersOf(interrupted!)).toEqual(['interrupted']);
  expect(retried!['status']).toBe('succeeded');
  expect(world.server.requests).toHaveLength(2);
  return interrupted as R;
}
