import { execFileSync } from 'node:child_process';
import { closeSync, existsSync, lstatSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import type * as NodeFs from 'node:fs';
import { createRequire, syncBuiltinESMExports } from 'node:module';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { attemptIdOf } from '../../src/authority/runnable.js';
import { codexStreamState } from '../../src/dispatch/codex-events.js';
import { runExecutorProcess } from '../../src/dispatch/process.js';
import { CooError } from '../../src/errors.js';
import { createOwnFile, openOwnFile, writeOwnFile } from '../../src/util/own-write.js';
import { coo } from '../helpers/cli.js';
import { makeWorld } from '../helpers/lane.js';
import { holdingRunner, makeCase, remoteReceipts, types } from '../helpers/remote-runners.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * Files the runner writes at names anyone who can write its folders can predict (a late result, a
 * journal entry, the head it last saw, a pid file, a sandbox's prompt): a FIFO left at the name
 * never makes the runner wait, a link there is never written through, a folder there is a coded
 * error. One rule writes them all (util/own-write.ts): a fresh private file, then a rename.
 */

const dir = tempDir('fixed-names');
const closers: Array<() => Promise<void> | void> = [];
afterAll(async () => {
  for (const close of closers.reverse()) await close();
});

const OPTIONS = { what: 'the test file', remedy: 'move it away', code: 'IO_ERROR' as const };

function fifo(path: string): void {
  execFileSync('mkfifo', [path]);
}

function codeOf(run: () => unknown): string {
  try {
    run();
    return 'written';
  } catch (error) {
    return error instanceof CooError ? `${error.code}: ${error.message}` : `uncoded ${String(error)}`;
  }
}

describe('one rule writes a fixed name in a folder the runner owns', () => {
  it('a FIFO at the name is replaced by the file, never opened', () => {
    const path = join(dir, 'fifo.json');
    fifo(path);
    writeOwnFile(path, '{"a":1}', OPTIONS);
    expect(lstatSync(path).isFile()).toBe(true);
    expect(readFileSync(path, 'utf8')).toBe('{"a":1}');
  });

  it('a link at the name is replaced by the file: the file it pointed at is untouched', () => {
    const outside = join(dir, 'outside.txt');
    writeFileSync(outside, 'keep me\n');
    const path = join(dir, 'link.json');
    symlinkSync(outside, path);
    writeOwnFile(path, 'written', OPTIONS);
    expect(lstatSync(path).isFile()).toBe(true);
    expect(readFileSync(outside, 'utf8')).toBe('keep me\n');
    expect((lstatSync(path).mode & 0o777).toString(8)).toBe('600');
  });

  it('a folder at the name is a coded error that names it, and leaves no temporary file', () => {
    const folder = join(dir, 'held');
    mkdirSync(join(folder, 'name.json', 'inside'), { recursive: true });
    expect(codeOf(() => writeOwnFile(join(folder, 'name.json'), 'x', OPTIONS))).toMatch(/^IO_ERROR: cannot write the test file .*name\.json: a directory is there \(\w+\): move it away$/);
    expect(execFileSync('ls', ['-A', folder], { encoding: 'utf8' }).trim()).toBe('name.json');
  });

  it('a durable write flushes the file before its rename and the folder after it; one that is not flushes neither', () => {
    // The file system's calls as the rule makes them: fsync is watched through node's own module object.
    const fs = createRequire(import.meta.url)('node:fs') as typeof NodeFs;
    const real = fs.fsyncSync;
    const synced: string[] = [];
    fs.fsyncSync = (fd: number) => {
      synced.push(fs.fstatSync(fd).isDirectory() ? 'folder' : 'file');
      real(fd);
    };
    syncBuiltinESMExports();
    try {
      writeOwnFile(join(dir, 'durable', 'entry.json'), '{}', { ...OPTIONS, durable: true });
      expect(synced).toEqual(['file', 'folder']);
      synced.length = 0;
      writeOwnFile(join(dir, 'durable', 'other.json'), '{}', OPTIONS);
      expect(synced).toEqual([]);
    } finally {
      fs.fsyncSync = real;
      syncBuiltinESMExports();
    }
    expect(readFileSync(join(dir, 'durable', 'entry.json'), 'utf8')).toBe('{}');
  });

  it('a FIFO at the name of the folder the file goes in is a coded error that names it, never a wait', () => {
    const folder = join(dir, 'late-results');
    fifo(folder);
    expect(codeOf(() => writeOwnFile(join(folder, 'a.json'), 'x', OPTIONS))).toMatch(/^IO_ERROR: cannot make the folder of the test file .*late-results: a fifo is there \(EEXIST\): move it away$/);
  });

  it('an output file opened for a child: a FIFO or a link at its name is replaced, never waited on or written through', () => {
    const outside = join(dir, 'outside-out.txt');
    writeFileSync(outside, 'keep me\n');
    const linked = join(dir, 'oracle.stdout');
    symlinkSync(outside, linked);
    closeSync(createOwnFile(linked, OPTIONS));
    expect(lstatSync(linked).isFile()).toBe(true);
    expect(readFileSync(outside, 'utf8')).toBe('keep me\n');
    const piped = join(dir, 'oracle.stderr');
    fifo(piped);
    closeSync(createOwnFile(piped, OPTIONS));
    expect(lstatSync(piped).isFile()).toBe(true);
  });

  it("a prompt file handed to a child: a FIFO or a link at its name is a coded error, never a wait", () => {
    const piped = join(dir, 'prompt.md');
    fifo(piped);
    expect(codeOf(() => openOwnFile(piped, OPTIONS))).toMatch(/^IO_ERROR: the test file .*prompt\.md is a fifo, not a regular file: move it away$/);
    const linked = join(dir, 'prompt-link.md');
    symlinkSync(join(dir, 'outside.txt'), linked);
    expect(codeOf(() => openOwnFile(linked, OPTIONS))).toMatch(/^IO_ERROR: cannot read the test file .*prompt-link\.md: a symlink is there \(ELOOP\)/);
  });
});

describe('the runner at its fixed names', () => {
  it("a link at an executor's pid file: the pid is written in its place, the file the link named is untouched", async () => {
    const outside = join(dir, 'precious.txt');
    writeFileSync(outside, 'precious\n');
    const folder = join(dir, 'attempt');
    mkdirSync(folder);
    const pidFile = join(folder, 'executor.pid');
    symlinkSync(outside, pidFile);
    const run = await runExecutorProcess({ executor: 'codex', attemptId: 'ea_attempt_X_1', argv: ['/bin/true'], cwd: folder, env: {}, isolation: 'none', writable: [], readOnly: [], hide: [], timeoutSeconds: 5, pidFile, state: codexStreamState() });
    expect(run.exitCode).toBe(0);
    expect(readFileSync(outside, 'utf8')).toBe('precious\n');
    expect(lstatSync(pidFile).isFile()).toBe(true);
    expect(readFileSync(pidFile, 'utf8')).toMatch(/\d/);
  });

  it('a folder at an executor\'s pid file: the executor does not run on, and the run says why', async () => {
    const folder = join(dir, 'attempt-held');
    mkdirSync(join(folder, 'executor.pid', 'inside'), { recursive: true });
    const marker = join(dir, 'ran-on');
    const run = await runExecutorProcess({ executor: 'codex', attemptId: 'ea_attempt_X_1', argv: ['/bin/sh', '-c', `sleep 2; touch ${marker}`], cwd: folder, env: {}, isolation: 'none', writable: [], readOnly: [], hide: [], timeoutSeconds: 20, pidFile: join(folder, 'executor.pid'), state: codexStreamState() });
    expect(run.stderrTail).toMatch(/^cannot start codex: cannot write the executor's pid file .*executor\.pid: a directory is there/);
    expect(existsSync(marker)).toBe(false);
  });

  it('a FIFO at late-results/<attempt>.json when a late result arrives: the runner keeps the result there and goes on', async () => {
    const world = await makeCase(dir, closers);
    const messageId = await world.consult();
    const first = await world.machine('runner-1');
    const second = await world.machine('runner-2');
    const frozen = new Date();
    const { running, release } = await holdingRunner(world, first, { clock: () => frozen });
    const attemptId = attemptIdOf((await first.ledger.state()).messages.get(messageId)!, 1);
    mkdirSync(join(first.stateDir, 'late-results'), { recursive: true });
    const late = join(first.stateDir, 'late-results', `${attemptId}.json`);
    fifo(late);
    let tick = 0;
    const taker = second.runner({ monotonic: () => tick, clock: () => frozen, leaseGraceSeconds: 600 });
    await taker.runOnce();
    tick = 901_000;
    await taker.runOnce();
    expect(types(second.events)).toContain('takeover');
    release();
    await running;
    expect(first.events.filter((event) => event.type === 'late_result')).toEqual([expect.objectContaining({ messageId, attempt: 1 })]);
    expect(lstatSync(late).isFile()).toBe(true);
    expect(JSON.parse(readFileSync(late, 'utf8'))).toEqual(expect.objectContaining({ messageId, attempt: 1 }));
    expect(await remoteReceipts(world.served, messageId)).toEqual([{ attempt: 1, status: 'failed', blockers: ['interrupted'] }]);
  });
});

describe("the operator's outputs at names given", () => {
  it('coo allowed-signers --revocations with a FIFO at the name beside it the list was written through: written, never a wait', async () => {
    const world = await makeWorld(join(dir, 'world'));
    closers.push(() => world.close());
    const revocations = join(dir, 'revocations');
    fifo(`${revocations}.tmp`);
    const signers = coo(['allowed-signers', '--ledger', world.gitdir, '--revocations', revocations]);
    expect(signers.stderr).toBe('');
    expect(lstatSync(revocations).isFile()).toBe(true);
  });

  it('coo keygen with a link at the private key\'s name: the key is never written through it, with --force or to a dangling link without', () => {
    const keys = join(dir, 'keys');
    mkdirSync(keys);
    const exposed = join(dir, 'exposed.key');
    writeFileSync(exposed, '');
    symlinkSync(exposed, join(keys, 'coo.hermes.key'));
    const forced = coo(['keygen', '--actor', 'coo.hermes', '--out', keys, '--force']);
    expect(forced.stderr).toBe('');
    expect(readFileSync(exposed, 'utf8')).toBe('');
    expect(lstatSync(join(keys, 'coo.hermes.key')).isFile()).toBe(true);
    expect((lstatSync(join(keys, 'coo.hermes.key')).mode & 0o777).toString(8)).toBe('600');
    const dangling = join(dir, 'elsewhere.key');
    symlinkSync(dangling, join(keys, 'ea.codex.key'));
    const refused = coo(['keygen', '--actor', 'ea.codex', '--out', keys]);
    expect(refused.stderr).toMatch(/USAGE: .*ea\.codex\.key or .* exists; pass --force to overwrite/);
    expect(existsSync(dangling)).toBe(false);
  });
});
