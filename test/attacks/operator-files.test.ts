import { execFileSync } from 'node:child_process';
import { mkdirSync, renameSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { checkpointFile } from '../../src/audit/checkpoint.js';
import { LIMITS } from '../../src/limits.js';
import { cooBounded, writeKey } from '../helpers/damage.js';
import { worlds, type World } from '../helpers/lane.js';
import { makeCase } from '../helpers/remote-runners.js';
import { fixtureEnvelope, FIXTURE_TASK } from '../helpers/stock.js';
import { codeOfAsync } from '../helpers/codes.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * Files in folders the operator owns, which coo reads back: the ledger's refs and packed-refs and
 * its ref lock, the head a runner last saw, a runner's journal, the auditor's checkpoint. A careless
 * operator (or a neighbour) leaving a FIFO, a huge file or a link there gets a coded error that says
 * what to do: never a command that waits forever, never one that reads gigabytes.
 */

const dir = tempDir('operator-files-');
const fresh = worlds(join(dir, 'worlds'));
const stateHome = join(dir, 'state-home');

const mkfifo = (path: string): void => void execFileSync('mkfifo', [path]);

/** The three commands that read a ledger's refs: an auditor's, a writer's and a runner's. */
function commands(world: World): Record<'verify' | 'append' | 'watch', string[]> {
  const key = writeKey(world.dir, 'coo', world.actors.coo);
  writeFileSync(join(world.dir, 'envelope.yaml'), fixtureEnvelope('msg_01M8NQFJ01J7CG66HWNDDJ8480', 'operator-files'));
  writeFileSync(join(world.dir, 'prompt.md'), FIXTURE_TASK);
  return {
    verify: ['verify', '--ledger', world.gitdir],
    append: ['append', '--ledger', world.gitdir, '--key', key, join(world.dir, 'envelope.yaml'), join(world.dir, 'prompt.md')],
    watch: ['watch', '--once', '--ledger', world.gitdir, '--key', key, '--repo', world.target, '--state-dir', join(world.dir, 'state'), '--isolation', 'none'],
  };
}

/** Runs a command, killed if it hangs: its exit status and the coded line it printed. */
function outcome(args: string[]): { status: number | null; said: string } {
  const result = cooBounded(args, { env: { XDG_STATE_HOME: stateHome, OPENAI_API_KEY: 'sk-test-key' } });
  return { status: result.status, said: result.stderr.split('\n').find((line) => line.startsWith('coo: ')) ?? result.stderr };
}

describe("the ledger's refs", () => {
  it('a FIFO at refs/heads/main: coo verify, coo append and coo watch --once each stop with GIT_FAILED naming it, none waits', async () => {
    const world = await fresh();
    const run = commands(world);
    rmSync(join(world.gitdir, 'refs', 'heads', 'main'));
    mkfifo(join(world.gitdir, 'refs', 'heads', 'main'));
    for (const args of Object.values(run)) {
      const { status, said } = outcome(args);
      expect({ args: args[0], status, said }).toEqual({ args: args[0], status: 1, said: expect.stringMatching(/^coo: GIT_FAILED: the ledger's ref refs\/heads\/main \S+ is a fifo, not a regular file: git writes refs as small regular files/) });
    }
  });

  it('a packed-refs over its bound: coo verify, coo append and coo watch --once each stop with GIT_FAILED, without reading it', async () => {
    const world = await fresh();
    const run = commands(world);
    const head = execFileSync('git', ['--git-dir', world.gitdir, 'rev-parse', 'main'], { encoding: 'utf8' }).trim();
    rmSync(join(world.gitdir, 'refs', 'heads', 'main'));
    const packed = join(world.gitdir, 'packed-refs');
    writeFileSync(packed, `# pack-refs with: peeled fully-peeled sorted\n${head} refs/heads/main\n`);
    truncateSync(packed, LIMITS.packedRefsBytes + 1);
    for (const args of Object.values(run)) {
      const { status, said } = outcome(args);
      expect({ args: args[0], status, said }).toEqual({ args: args[0], status: 1, said: expect.stringMatching(/^coo: GIT_FAILED: the ledger's packed-refs \S+ is \d+ bytes, over the 16777216-byte bound/) });
    }
  });

  it("a FIFO at the git folder's HEAD or config, which git itself reads first: each command stops with GIT_FAILED before git waits on it", async () => {
    const world = await fresh();
    const run = commands(world);
    for (const name of ['HEAD', 'config']) {
      const path = join(world.gitdir, name);
      renameSync(path, `${path}.kept`);
      mkfifo(path);
      for (const args of Object.values(run)) {
        const { status, said } = outcome(args);
        expect({ name, args: args[0], status, said }).toEqual({ name, args: args[0], status: 1, said: expect.stringMatching(new RegExp(`^coo: GIT_FAILED: the ledger's ${name} \\S+ is a fifo, not a regular file, which git would wait on`)) });
      }
      rmSync(path);
      renameSync(`${path}.kept`, path);
    }
    expect(outcome(run.verify).status).toBe(0);
  });

  it("a FIFO at the commit-graph or in the pack folder, which git reads on a walk or a read of an object: coo verify stops with GIT_FAILED and does not wait", async () => {
    const world = await fresh();
    const run = commands(world);
    for (const name of ['objects/info/commit-graph', 'objects/pack/pack-0000000000000000000000000000000000000000.idx']) {
      const path = join(world.gitdir, name);
      mkdirSync(dirname(path), { recursive: true });
      mkfifo(path);
      const { status, said } = outcome(run.verify);
      expect({ name, status, said }).toEqual({ name, status: 1, said: expect.stringMatching(/^coo: GIT_FAILED: the ledger's \S+ \S+ is a fifo, not a regular file, which git would wait on/) });
      rmSync(path);
    }
    expect(outcome(run.verify).status).toBe(0);
  });

  it('a FIFO at the ref lock: coo append stops with LEDGER_LOCKED saying to remove it, and does not wait', async () => {
    const world = await fresh();
    mkfifo(join(world.gitdir, 'refs', 'heads', 'main.lock'));
    const { status, said } = outcome(commands(world).append);
    expect(status).toBe(1);
    expect(said).toMatch(/^coo: LEDGER_LOCKED: the ledger lock \S+main\.lock is a fifo, not a regular file: no coo or git takes a lock like it: remove it/);
  });
});

describe("a runner's and an auditor's own files", () => {
  it('a FIFO where the runner keeps the head it last saw: coo watch --once stops with RUNNER_CONFIG and does not wait', async () => {
    const world = await fresh();
    const run = commands(world);
    mkdirSync(join(world.dir, 'state'), { recursive: true });
    mkfifo(join(world.dir, 'state', 'ledger-head.json'));
    const { status, said } = outcome(run.watch);
    expect(status).toBe(2);
    expect(said).toMatch(/^coo: RUNNER_CONFIG: the ledger head this runner last saw \S+ledger-head\.json is a fifo, not a regular file: remove it/);
  });

  it('a FIFO at the list of runner folders every sandbox hides: coo watch --once stops with RUNNER_CONFIG before any sandbox, and does not wait', async () => {
    const world = await fresh();
    const xdg = join(world.dir, 'xdg');
    mkdirSync(join(xdg, 'coo-commons'), { recursive: true });
    mkfifo(join(xdg, 'coo-commons', 'private-folders'));
    const result = cooBounded(commands(world).watch, { env: { XDG_STATE_HOME: xdg, OPENAI_API_KEY: 'sk-test-key' } });
    expect(result.status).toBe(2);
    expect(result.stderr).toMatch(/^coo: RUNNER_CONFIG: the list of runner folders every sandbox hides \S+private-folders is a fifo, not a regular file: remove it/m);
  });

  it("a FIFO or a folder at the auditor's checkpoint: coo verify stops with IO_ERROR and does not wait", async () => {
    const world = await fresh();
    const run = commands(world);
    const file = checkpointFile(join(stateHome, 'coo-commons', 'verified'), world.gitdir);
    mkdirSync(join(file, '..'), { recursive: true });
    mkfifo(file);
    expect(outcome(run.verify)).toEqual({ status: 1, said: expect.stringMatching(/^coo: IO_ERROR: the head this auditor last verified \S+ is a fifo, not a regular file: put back the file coo verify wrote there, or remove it/) });
    rmSync(file);
    mkdirSync(file);
    expect(outcome(run.verify)).toEqual({ status: 1, said: expect.stringMatching(/^coo: IO_ERROR: the head this auditor last verified \S+ is a directory/) });
    rmSync(file, { recursive: true });
    expect(outcome(run.verify).status).toBe(0);
  });
});

describe("a runner's journal", () => {
  const closers: Array<() => Promise<void> | void> = [];
  afterAll(async () => {
    for (const close of closers.reverse()) await close();
  });

  it('a FIFO, a huge file or a foreign file in the journal: the pass stops with IO_ERROR naming it, and does not wait', async () => {
    const world = await makeCase(join(dir, 'remote'), closers);
    const machine = await world.machine('runner');
    const journal = join(machine.stateDir, 'journal');
    mkdirSync(journal, { recursive: true });
    const entry = join(journal, 'ea_attempt_01M8NQFJ01J7CG66HWNDDJ8480_1.json');
    mkfifo(entry);
    await expect(machine.runner().runOnce()).rejects.toThrow(/the journaled receipt \S+ is a fifo, not a regular file: the journal holds only receipts this runner kept; move it out/);
    expect(await codeOfAsync(() => machine.runner().runOnce())).toBe('IO_ERROR');
    rmSync(entry);
    writeFileSync(entry, '');
    truncateSync(entry, LIMITS.journalEntryBytes + 1);
    await expect(machine.runner().runOnce()).rejects.toThrow(new RegExp(`the journaled receipt \\S+ is \\d+ bytes, over the ${LIMITS.journalEntryBytes}-byte bound`));
    writeFileSync(entry, '{"not": "a receipt"}');
    await expect(machine.runner().runOnce()).rejects.toThrow(/the journaled receipt \S+ is not an entry this runner wrote/);
    renameSync(entry, join(machine.stateDir, 'moved-aside.json'));
    await machine.runner().runOnce();
  });
});
