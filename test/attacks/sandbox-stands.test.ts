import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it, vi } from 'vitest';
import { flakyBwrap } from '../helpers/flaky-bwrap.js';
import { FAKE_ORACLE, blockersOf, receiptsOf, worlds } from '../helpers/lane.js';
import { outsideTempDir, tempDir } from '../helpers/tmp.js';
import type * as ProcessModule from '../../src/dispatch/process.js';
import type * as CodexModule from '../../src/dispatch/codex-events.js';
import type * as ExecutorModule from '../../src/dispatch/executor.js';
import type * as OracleModule from '../../src/consult/oracle.js';
import type * as FoldersModule from '../../src/util/runner-folders.js';
import type * as EvidenceModule from '../../src/dispatch/evidence.js';
import { agentScript, dispatchTo, hostilePlaces, receiptsFor, watchOnce } from '../helpers/hostile-agent.js';

/**
 * Every sandbox hides the folders each runner on the machine listed. A neighbour runner that deletes
 * its folder between that listing and bubblewrap's mount fails the sandbox's start ("Can't mkdir ...:
 * Read-only file system"): nothing ran. Such a start is set up again, with the folders listed again;
 * only a sandbox that never stands fails the attempt, at no cost, saying so. A start that stood is
 * never begun again: the executor or Oracle runs at most once.
 */

const dir = tempDir('sandbox-stands-');
const flaky = flakyBwrap(dir);
const fresh = worlds(join(dir, 'worlds'));
// The bubblewrap on PATH is looked up once per module: these modules are loaded again after PATH names the flaky one.
let modules: {
  readonly process: typeof ProcessModule;
  readonly codex: typeof CodexModule;
  readonly executor: typeof ExecutorModule;
  readonly oracle: typeof OracleModule;
  readonly folders: typeof FoldersModule;
  readonly evidence: typeof EvidenceModule;
};

beforeAll(async () => {
  process.env['PATH'] = `${flaky.bin}:${process.env['PATH'] ?? ''}`;
  vi.resetModules();
  modules = {
    process: await import('../../src/dispatch/process.js'),
    codex: await import('../../src/dispatch/codex-events.js'),
    executor: await import('../../src/dispatch/executor.js'),
    oracle: await import('../../src/consult/oracle.js'),
    folders: await import('../../src/util/runner-folders.js'),
    evidence: await import('../../src/dispatch/evidence.js'),
  };
});

// Outside the shared temporary folders, which every sandbox empties as a whole.
const neighbours = outsideTempDir('sandbox-stands-');
let count = 0;
/** A neighbour runner's folder, listed for every sandbox to hide. */
function neighbourFolder(): string {
  count += 1;
  const folder = join(neighbours, `neighbour-${count}`, 'state');
  mkdirSync(folder, { recursive: true });
  modules.folders.registerPrivateFolders([folder]);
  return folder;
}

describe("an executor's sandbox and a neighbour's folder gone at the mount", () => {
  const price = { inputPerMillion: 3, outputPerMillion: 15 };

  /** An executor that notes each time it runs, in a file of the work folder, and exits `code`. */
  function plan(code: number) {
    count += 1;
    const work = join(dir, `work-${count}`);
    mkdirSync(work, { recursive: true });
    const script = join(dir, `executor-${count}.sh`);
    writeFileSync(script, `#!/bin/sh\necho ran >> '${join(work, 'ran')}'\nexit ${code}\n`, { mode: 0o755 });
    const runs = (): number => (existsSync(join(work, 'ran')) ? readFileSync(join(work, 'ran'), 'utf8').split('\n').filter(Boolean).length : 0);
    return { runs, plan: { executor: 'codex' as const, attemptId: 'ea_attempt_X_1', argv: [script], cwd: work, env: {}, isolation: 'bwrap' as const, writable: [work], readOnly: [], hide: [], timeoutSeconds: 10, state: modules.codex.codexStreamState() } };
  }

  it('a sandbox whose hidden folder vanished before its mount is set up again without it, and the executor runs once', async () => {
    const { runs, plan: p } = plan(0);
    flaky.vanishAtMount(neighbourFolder());
    const before = flaky.calls();
    const run = await modules.process.runExecutorProcess(p);
    expect(flaky.calls() - before).toBe(2);
    expect(run.started).toBe(true);
    expect(run.exitCode).toBe(0);
    expect(runs()).toBe(1);
  });

  it('a sandbox that stood is never set up again, though the executor failed at once', async () => {
    const { runs, plan: p } = plan(1);
    const before = flaky.calls();
    const run = await modules.process.runExecutorProcess(p);
    expect(flaky.calls() - before).toBe(1);
    expect(run.started).toBe(true);
    expect(runs()).toBe(1);
  });

  it('a sandbox that never stands fails the run after its tries: nothing ran, nothing is charged, and it says the sandbox could not be set up', async () => {
    const { runs, plan: p } = plan(0);
    flaky.failEvery(true);
    const before = flaky.calls();
    try {
      const run = await modules.process.runExecutorProcess(p);
      expect(flaky.calls() - before).toBe(3);
      expect(run.started).toBe(false);
      expect(run.stderrTail).toMatch(/^the sandbox could not be set up \(3 tries\), so nothing ran: bwrap: Can't mkdir/);
      expect(modules.executor.accountRun(run, price, 4)).toEqual({ usage: null, costUsd: 0, warning: null });
      expect(runs()).toBe(0);
    } finally {
      flaky.failEvery(false);
    }
  });
});

describe("a consult's sandbox and a neighbour's folder gone at the mount", () => {
  const oracle = (world: { gitdir: string }) =>
    new modules.oracle.OracleCli({ command: [process.execPath, FAKE_ORACLE, '--fake-mode', 'ok'], env: { OPENAI_API_KEY: 'sk-test-key' }, hide: [world.gitdir] });

  it('a consult whose sandbox lost a hidden folder before its mount is answered on its first attempt', async () => {
    const world = await fresh();
    const { messageId } = await world.consult({ idempotencyKey: 'vanished-neighbour' });
    flaky.vanishAtMount(neighbourFolder());
    const before = flaky.calls();
    await world.runner({ transport: oracle(world) }).runOnce();
    const receipts = await receiptsOf(world, messageId);
    expect(receipts.map((receipt) => receipt['status'])).toEqual(['succeeded']);
    expect(flaky.calls() - before).toBe(2);
  });

  it('a consult whose sandbox never stands fails aa_unavailable:transport at no cost, saying the sandbox could not be set up', async () => {
    const world = await fresh({ policy: (policy) => ({ ...policy, retries: { ...policy.retries, transient_max_attempts: 1 } }) });
    const { messageId } = await world.consult({ idempotencyKey: 'never-stands' });
    flaky.failEvery(true);
    const before = flaky.calls();
    try {
      await world.runner({ transport: oracle(world) }).runOnce();
    } finally {
      flaky.failEvery(false);
    }
    const [receipt, ...more] = await receiptsOf(world, messageId);
    expect(more).toEqual([]);
    expect(flaky.calls() - before).toBe(3);
    expect(blockersOf(receipt!)).toEqual(['aa_unavailable:transport']);
    expect(JSON.stringify(receipt)).toContain('the sandbox could not be set up (3 tries), so nothing ran');
    expect(receipt!['actual_cost_usd']).toBe(0);
  });
});

describe("Oracle's output files", () => {
  it('replaced by FIFOs in its sandbox are not waited on: the attempt fails with its receipt', async () => {
    const world = await fresh({ policy: (policy) => ({ ...policy, retries: { ...policy.retries, transient_max_attempts: 1 } }) });
    const { messageId } = await world.consult({ idempotencyKey: 'fifo-output' });
    await world.runner({ transport: new modules.oracle.OracleCli({ command: [process.execPath, FAKE_ORACLE, '--fake-mode', 'fifo-output'], env: { OPENAI_API_KEY: 'sk-test-key' }, hide: [world.gitdir] }) }).runOnce();
    const receipts = await receiptsOf(world, messageId);
    expect(receipts.map((receipt) => receipt['status'])).toEqual(['failed']);
    expect(receipts[0]!['actual_cost_usd']).toBe(0);
  });
});

describe("a verification command's sandbox and a neighbour's folder gone at the mount", () => {
  /** A checkout where the command notes each time it runs. */
  function checkout(): { cwd: string; home: string; runs: () => number } {
    count += 1;
    const cwd = join(dir, `checkout-${count}`);
    const home = join(dir, `verify-home-${count}`);
    mkdirSync(cwd, { recursive: true });
    mkdirSync(home, { recursive: true });
    return { cwd, home, runs: () => (existsSync(join(cwd, 'ran')) ? readFileSync(join(cwd, 'ran'), 'utf8').split('\n').filter(Boolean).length : 0) };
  }

  it('is set up again without the vanished folder and runs once', async () => {
    const { cwd, home, runs } = checkout();
    flaky.vanishAtMount(neighbourFolder());
    const before = flaky.calls();
    const result = await modules.evidence.runVerification(cwd, 'echo ran >> ran; echo verified', { timeoutSeconds: 10, isolation: 'bwrap', home, hide: [] });
    expect(flaky.calls() - before).toBe(2);
    expect(result.exitCode).toBe(0);
    expect(result.output.toString('utf8')).toBe('verified\n');
    expect(runs()).toBe(1);
  });

  it('that never stands fails, ran nothing, and says the sandbox could not be set up', async () => {
    const { cwd, home, runs } = checkout();
    flaky.failEvery(true);
    try {
      const result = await modules.evidence.runVerification(cwd, 'echo ran >> ran', { timeoutSeconds: 10, isolation: 'bwrap', home, hide: [] });
      expect(result.exitCode).not.toBe(0);
      expect(result.output.toString('utf8')).toMatch(/^the sandbox could not be set up \(3 tries\), so nothing ran: bwrap: /);
      expect(runs()).toBe(0);
    } finally {
      flaky.failEvery(false);
    }
  });
});

describe('a dispatch through coo watch --once and a neighbour folder gone at the mount', () => {
  const place = hostilePlaces(join(dir, 'dispatch'), 'stands');
  const FIX = "printf 'export const add = (a, b) => a + b;\\n' > src/add.js";
  const env = (): NodeJS.ProcessEnv => ({ PATH: `${flaky.bin}:${process.env['PATH'] ?? ''}` });

  it("succeeds when the folder vanished at its executor's and at its verification's mount", async () => {
    const where = await place('vanished');
    const { messageId } = await dispatchTo(where, 'vanished');
    const agent = agentScript(where.world.dir, FIX);
    const atExecutor = neighbourFolder();
    flaky.vanishAtMount(atExecutor);
    expect(watchOnce(where, agent, { env: env() }).hung).toBe(false);
    // The race happened: the neighbour's folder was gone at the mount.
    expect(existsSync(atExecutor)).toBe(false);
    const atVerification = neighbourFolder();
    flaky.vanishAtMount(atVerification, '--unshare-net');
    const [first] = await receiptsFor(where, messageId);
    expect(first).toMatchObject({ status: 'succeeded' });
    const second = await dispatchTo(where, 'vanished-at-verification');
    expect(watchOnce(where, agent, { env: env() }).hung).toBe(false);
    expect(existsSync(atVerification)).toBe(false);
    expect((await receiptsFor(where, second.messageId))[0]).toMatchObject({ status: 'succeeded' });
  });

  it('fails at no cost, saying the sandbox could not be set up, when it never stands', async () => {
    const where = await place('never');
    const { messageId } = await dispatchTo(where, 'never');
    flaky.failEvery(true);
    try {
      expect(watchOnce(where, agentScript(where.world.dir, FIX), { env: env() }).hung).toBe(false);
    } finally {
      flaky.failEvery(false);
    }
    const [receipt] = await receiptsFor(where, messageId);
    expect(receipt).toMatchObject({ status: expect.not.stringMatching(/^succeeded$/), actual_cost_usd: 0 });
    expect((receipt!['blockers'] as Array<{ detail: string }>).map((blocker) => blocker.detail)).toContainEqual(expect.stringMatching(/^the sandbox could not be set up \(3 tries\), so nothing ran: bwrap: /));
  });
});
