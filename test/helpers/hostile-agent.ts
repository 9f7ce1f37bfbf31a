import { spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, expect } from 'vitest';
import { formatPrivateKey } from '../../src/crypto/keys.js';
import { approve } from '../../src/dispatch/approve.js';
import { enqueueDispatch, type DispatchRequest } from '../../src/dispatch/enqueue.js';
import { executorFactory } from '../../src/dispatch/executors.js';
import { eaReceipt } from '../../src/schema/receipt.js';
import { COO } from './cli.js';
import { makeTargetRepo } from './dispatch-repo.js';
import { makeWorld, receiptsOf, type World } from './lane.js';
import { git } from './tmp.js';

/**
 * An execution agent as a hostile one would be: a small script in place of `codex`, run by
 * `coo watch --ea-command` as an operator runs it, that does one thing in its worktree and prints
 * a valid `codex exec --json` stream. What the runner makes of it is what the tests judge.
 */

export interface HostilePlace {
  readonly world: World;
  readonly repo: string;
  readonly base: string;
  readonly keyFile: string;
  readonly stateDir: string;
}

/** A ledger, a target repository (with `files` added to its base commit) and the COO key in a file. */
export async function hostilePlace(dir: string, files: Record<string, string> = {}): Promise<HostilePlace> {
  const world = await makeWorld(dir);
  const repo = join(world.dir, 'work');
  makeTargetRepo(repo);
  for (const [path, content] of Object.entries(files)) {
    mkdirSync(join(repo, path, '..'), { recursive: true });
    writeFileSync(join(repo, path), content);
  }
  if (Object.keys(files).length > 0) {
    git(['add', '-A'], { cwd: repo });
    git(['commit', '-q', '-m', 'base files'], { cwd: repo });
  }
  const base = git(['rev-parse', 'HEAD'], { cwd: repo }).trim();
  const keyDir = join(world.dir, 'keys');
  mkdirSync(keyDir, { mode: 0o700 });
  const keyFile = join(keyDir, 'coo.key');
  writeFileSync(keyFile, formatPrivateKey(world.actors.coo), { mode: 0o600 });
  return { world, repo, base, keyFile, stateDir: join(world.dir, 'state') };
}

/** Places for one describe block, each in a folder of its own under `dir`, closed after the block. */
export function hostilePlaces(dir: string, prefix: string): (name: string, files?: Record<string, string>) => Promise<HostilePlace> {
  const made: HostilePlace[] = [];
  afterAll(async () => {
    for (const place of made) await place.world.close();
  });
  return async (name, files = {}) => {
    const place = await hostilePlace(join(dir, `${prefix}-${name}`), files);
    made.push(place);
    return place;
  };
}

const event = (value: unknown): string => `printf '%s\\n' '${JSON.stringify(value)}'`;

/** The stream a finished Codex turn prints: a thread, a final message, usage. */
export const CODEX_DONE = [
  event({ type: 'thread.started', thread_id: 'thread-hostile' }),
  event({ type: 'turn.started' }),
  event({ type: 'item.completed', item: { id: 'i1', type: 'agent_message', text: 'Done.' } }),
  event({ type: 'turn.completed', usage: { input_tokens: 100, cached_input_tokens: 0, output_tokens: 10 } }),
].join('\n');

let scripts = 0;

/** An executable that runs `action` in its working directory (the worktree), then prints `stream`. */
export function agentScript(dir: string, action: string, stream = CODEX_DONE): string {
  scripts += 1;
  const path = join(dir, `hostile-agent-${scripts}.sh`);
  writeFileSync(path, `#!/bin/sh\n${action}\n${stream}\n`);
  chmodSync(path, 0o755);
  return path;
}

export function dispatchTo(place: HostilePlace, key: string, overrides: Partial<DispatchRequest> = {}) {
  return enqueueDispatch({ ledger: place.world.ledger, key: place.world.actors.coo, now: new Date(), target: 'ea.codex', repo: place.repo, task: 'Fix add() so that test.sh passes.', scope: ['src/**'], accept: ['test.sh passes'], verify: ['sh test.sh'], timeoutSeconds: 60, maxRuntimeSeconds: 60, idempotencyKey: key, ...overrides });
}

export interface WatchRun {
  readonly status: number | null;
  readonly signal: NodeJS.Signals | null;
  /** The runner did not end within its time: it hung. */
  readonly hung: boolean;
  readonly stdout: string;
  readonly stderr: string;
}

/** `coo watch --once` with `agent` as the execution agent; killed if it runs past `timeoutMs`. */
export function watchOnce(place: HostilePlace, agent: string, options: { timeoutMs?: number; env?: NodeJS.ProcessEnv; isolation?: 'auto' | 'none' } = {}): WatchRun {
  const result = spawnSync(
    process.execPath,
    [COO, 'watch', '--once', '--json', '--ledger', place.world.gitdir, '--key', place.keyFile, '--repo', place.repo, '--state-dir', place.stateDir, '--ea-command', agent, '--isolation', options.isolation ?? 'auto'],
    { env: { ...process.env, OPENAI_API_KEY: 'sk-hostile-test', ...options.env }, encoding: 'utf8', timeout: options.timeoutMs ?? 60_000, killSignal: 'SIGKILL', maxBuffer: 64 * 1024 * 1024 },
  );
  const timedOut = (result.error as NodeJS.ErrnoException | undefined)?.code === 'ETIMEDOUT';
  return { status: result.status, signal: result.signal, hung: timedOut, stdout: result.stdout ?? '', stderr: result.stderr ?? '' };
}

/** The receipts of a message, attempt by attempt. */
export function receiptsFor(place: HostilePlace, messageId: string): Promise<Array<Record<string, unknown>>> {
  return receiptsOf(place.world, messageId);
}

/** The blockers' codes of a receipt. */
export function codesOf(receipt: Record<string, unknown> | undefined): string[] {
  return ((receipt?.['blockers'] ?? []) as Array<{ code: string }>).map((blocker) => blocker.code);
}

/** The work an agent does in the stand-in tests: the fix test.sh checks. */
export const FIX = "printf 'export const add = (a, b) => a + b;\\n' > src/add.js";

/**
 * One approved Claude Code dispatch in a fresh world, run in process by a stand-in that does FIX and
 * prints `stream`, with a budget of `budget` USD; its receipt (checked against ea_receipt.v0).
 */
export async function claudeStandInReceipt(fresh: () => Promise<World>, stream: string, budget = 5, timeoutSeconds = 60): Promise<Record<string, unknown>> {
  const w = await fresh();
  const repo = join(w.dir, 'work');
  makeTargetRepo(repo);
  const request = { ledger: w.ledger, key: w.actors.coo, repo, target: 'ea.claude_code', task: 'Fix add() so that test.sh passes.', scope: ['src/**'], accept: ['test.sh passes'], verify: ['sh test.sh'], timeoutSeconds, maxRuntimeSeconds: 60, maxCostUsd: budget } as const;
  let hash = '';
  try {
    await enqueueDispatch({ ...request, now: new Date() });
  } catch (error) {
    hash = /request (sha256:[0-9a-f]{64})/.exec((error as Error).message)![1]!;
  }
  const { approval } = await approve({ ledger: w.ledger, key: w.actors.ceo, now: new Date(), reason: 'the stand-in may run', requestHash: hash });
  const { messageId } = await enqueueDispatch({ ...request, now: new Date(), approvalId: approval.approval_id });
  const executors = executorFactory({ command: [agentScript(w.dir, FIX, stream)], hide: [w.gitdir], env: { PATH: process.env['PATH'], ANTHROPIC_API_KEY: 'sk-ant-test' } });
  await w.runner({ repo, executors }).runOnce();
  const [receipt] = await receiptsOf(w, messageId);
  expect(receipt).toBeDefined();
  expect(eaReceipt.safeParse(receipt).success).toBe(true);
  return receipt!;
}
