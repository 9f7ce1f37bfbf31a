import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, existsSync, lstatSync, mkdirSync, renameSync, rmSync, symlinkSync, truncateSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { cooBounded, headOf, httpOracle, HUNG_MS, processesUnder, refusal, startBounded, until, watchArgs, writeKey } from '../helpers/damage.js';
import { laneState } from '../helpers/startup.js';
import { blockersOf, receiptsOf, worlds, type World } from '../helpers/lane.js';
import { call, INITIALIZE, line } from '../helpers/mcp-raw.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * A careless operator, round 31: a ledger left open to every user, or left by a machine that stopped
 * mid-write with main naming a commit whose file never reached the disk, given to the verbs that
 * write, to `coo mcp` with its requests already waiting on standard input, and to the runner; and a
 * writer killed at each step of its write. Every one refuses with what to do, or recovers; none
 * builds on a half state, none acts on a request before its start checks ended.
 */

const dir = tempDir('operator-redteam-31-');
const fresh = worlds(dir);
const COO = join(import.meta.dirname, '..', '..', 'dist', 'cli', 'main.js');
const env = { OPENAI_API_KEY: 'sk-test-key' };

function git(args: readonly string[]): { status: number | null; stdout: string; stderr: string } {
  const ran = spawnSync('git', args, { encoding: 'utf8', timeout: HUNG_MS });
  return { status: ran.status, stdout: ran.stdout, stderr: ran.stderr };
}

function consultOf(world: World, key: string, extra: NodeJS.ProcessEnv = {}) {
  return cooBounded(['consult', '--ledger', world.gitdir, '--key', key, '--to', 'aa.chatgpt', '--repo', world.target, '--file', 'src/add.ts', '--prompt', 'Is add() right?'], { env: extra });
}

/** `coo mcp` without a runner, its initialize and a consult already written into its standard input, which then ends. */
function mcpAtOnce(world: World, key: string, asked: Record<string, unknown> = {}, extra: NodeJS.ProcessEnv = {}) {
  const input = line(INITIALIZE) + line({ method: 'notifications/initialized' }) + call(1, 'consult', { to: 'aa.chatgpt', files: ['src/add.ts'], prompt: 'Is add() right?', ...asked });
  const ran = spawnSync(process.execPath, [COO, 'mcp', '--ledger', world.gitdir, '--key', key, '--repo', world.target], {
    input,
    encoding: 'utf8',
    env: { ...process.env, ...env, COO_LEDGER: '', COO_KEY: '', XDG_STATE_HOME: join(world.dir, 'xdg'), ...extra },
    timeout: HUNG_MS,
  });
  return { status: ran.status, stdout: ran.stdout, stderr: ran.stderr };
}

describe('a ledger every user may write, given to the verbs that write and to coo mcp without a runner', () => {
  it('is refused before anything is written (exit 2, naming the path and how to close it), as coo watch refuses it; coo mcp answers none of the requests already waiting on its input; closed again, both write', async () => {
    const world = await fresh();
    const key = writeKey(world.dir, 'coo', world.actors.coo);
    const heads = join(world.gitdir, 'refs', 'heads');
    const mode = lstatSync(heads).mode & 0o777;
    chmodSync(heads, mode | 0o002);
    const before = headOf(world.gitdir);
    const said = `${heads}, in the ledger ${world.gitdir}, may be written by every user: any local user could rewrite the ledger under coo; close it (chmod -R o-w ${world.gitdir}; a ledger shared with a group keeps git config core.sharedRepository group, not 0666 or 0777), and start again`;

    expect(refusal(consultOf(world, key))).toBe(`coo: USAGE: ${said}`);
    const served = mcpAtOnce(world, key);
    expect({ status: served.status, stdout: served.stdout }).toEqual({ status: 2, stdout: '' });
    expect(served.stderr).toContain(`coo: RUNNER_CONFIG: ${said}`);
    const watched = cooBounded([...watchArgs(world, key, join(world.dir, 'state')), '--once'], { env });
    expect(refusal(watched)).toContain(`coo: RUNNER_CONFIG: ${said}`);
    expect(headOf(world.gitdir)).toBe(before);

    chmodSync(heads, mode);
    const landed = consultOf(world, key);
    expect(landed.status, landed.stderr).toBe(0);
    expect(laneState(world, landed.stdout.trim())).toBe('queued');
    const again = mcpAtOnce(world, key);
    expect(again.status, again.stderr).toBe(0);
    expect(again.stdout).toContain('"id":1');
  });
});

describe('a ledger open to every user where a link or an alternates file leads, and a clone open to every user written through its remote', () => {
  /** A ledger whose `refs/heads` is closed, with `open` making some part git reads through a link writable by every user. */
  async function openThrough(open: (world: World) => string): Promise<{ world: World; key: string; ledger: string }> {
    const world = await fresh();
    const key = writeKey(world.dir, 'coo', world.actors.coo);
    return { world, key, ledger: open(world) };
  }

  it('a ledger given as a link to a folder every user may write into, its objects kept in such a folder through a link, and an alternates file naming one: each writer refuses (exit 2), naming the path and the link, and writes nothing', async () => {
    const cases: Array<[string, (world: World) => string, RegExp]> = [
      ['the ledger given as a link', (world) => {
        chmodSync(join(world.gitdir, 'refs', 'heads'), 0o777);
        const link = join(world.dir, 'ledger-link.git');
        symlinkSync(world.gitdir, link);
        return link;
      }, /refs\/heads \(reached through \S*ledger-link\.git\), in the ledger \S*ledger-link\.git, may be written by every user/],
      ['the ledger under a folder that is a link (as macOS gives /var): named as given, told to chmod, no link named', (world) => {
        chmodSync(join(world.gitdir, 'refs', 'heads'), 0o777);
        const above = join(world.dir, 'above-link');
        symlinkSync(world.dir, above);
        return join(above, 'ledger.git');
      }, /above-link\/ledger\.git\/refs\/heads, in the ledger \S*above-link\/ledger\.git, may be written by every user: any local user could rewrite the ledger under coo; close it \(chmod -R o-w \S*above-link\/ledger\.git;/],
      ['objects kept elsewhere through a link', (world) => {
        const kept = join(world.dir, 'objects-elsewhere');
        renameSync(join(world.gitdir, 'objects'), kept);
        symlinkSync(kept, join(world.gitdir, 'objects'));
        chmodSync(kept, 0o777);
        return world.gitdir;
      }, /objects-elsewhere \(reached through \S*\/objects\), in the ledger .* may be written by every user: .*close it \(let only its owner write \S*objects-elsewhere, or take \S*\/objects away;/],
      ['an alternates file naming an open folder', (world) => {
        const shared = join(world.dir, 'shared-objects');
        mkdirSync(shared, { mode: 0o755 });
        chmodSync(shared, 0o777);
        writeFileSync(join(world.gitdir, 'objects', 'info', 'alternates'), `${shared}\n`);
        return world.gitdir;
      }, /shared-objects \(reached through \S*objects\/info\/alternates\), in the ledger .* may be written by every user/],
      ['an alternates file naming a closed folder whose own alternates file names an open one', (world) => {
        const [closed, open] = [join(world.dir, 'closed-objects'), join(world.dir, 'open-objects')];
        mkdirSync(join(closed, 'info'), { recursive: true, mode: 0o755 });
        mkdirSync(open, { mode: 0o755 });
        chmodSync(open, 0o777);
        writeFileSync(join(closed, 'info', 'alternates'), '../open-objects\n');
        writeFileSync(join(world.gitdir, 'objects', 'info', 'alternates'), `"${closed}"\n`);
        return world.gitdir;
      }, /open-objects \(reached through \S*closed-objects\/info\/alternates\), in the ledger .* may be written by every user/],
      ['a relative alternates line read from objects kept elsewhere through a link', (world) => {
        const store = join(world.dir, 'store');
        mkdirSync(store, { mode: 0o755 });
        renameSync(join(world.gitdir, 'objects'), join(store, 'objects'));
        symlinkSync(join(store, 'objects'), join(world.gitdir, 'objects'));
        const other = join(store, 'other');
        mkdirSync(other, { mode: 0o755 });
        chmodSync(other, 0o777);
        writeFileSync(join(store, 'objects', 'info', 'alternates'), '../other\n');
        return world.gitdir;
      }, /store\/other \(reached through \S*objects\/info\/alternates\), in the ledger .* may be written by every user/],
    ];
    for (const [what, open, said] of cases) {
      const { world, key, ledger } = await openThrough(open);
      const before = headOf(world.gitdir);
      const asked = cooBounded(['consult', '--ledger', ledger, '--key', key, '--to', 'aa.chatgpt', '--repo', world.target, '--file', 'src/add.ts', '--prompt', 'Is add() right?']);
      expect(asked.status, what).toBe(2);
      expect(refusal(asked), what).toMatch(new RegExp(`^coo: USAGE: .*${said.source}`));
      expect(headOf(world.gitdir), what).toBe(before);
    }
  });

  it('a hook linked to /dev/null (to turn it off), a device every user may write, is no part of the ledger to rewrite: the writer writes (guard)', async () => {
    const world = await fresh();
    const key = writeKey(world.dir, 'coo', world.actors.coo);
    symlinkSync('/dev/null', join(world.gitdir, 'hooks', 'post-update'));
    const asked = cooBounded(['consult', '--ledger', world.gitdir, '--key', key, '--to', 'aa.chatgpt', '--repo', world.target, '--file', 'src/add.ts', '--prompt', 'Is add() right?']);
    expect(asked.status, asked.stderr).toBe(0);
  });

  it('a write through --remote from a clone every user may write is refused before any git runs in the clone (a command another user put in its config never runs), and lands once the clone is closed', async () => {
    const world = await fresh();
    const key = writeKey(world.dir, 'coo', world.actors.coo);
    const clone = join(world.dir, 'clone.git');
    const cloned = cooBounded(['clone', world.gitdir, clone, '--trust-root', world.actors.ceo.publicKey.keyId]);
    expect(cloned.status, cloned.stderr).toBe(0);
    // Another user's command, where git in the clone runs it for every fetch from the origin.
    const ran = join(world.dir, 'their-command-ran');
    const theirs = join(world.dir, 'upload-pack');
    writeFileSync(theirs, `#!/bin/sh\ntouch '${ran}'\nexec git-upload-pack "$@"\n`, { mode: 0o755 });
    expect(git(['--git-dir', clone, 'config', 'remote.origin.uploadpack', theirs]).status).toBe(0);
    const heads = join(clone, 'refs', 'heads');
    chmodSync(heads, 0o777);
    const before = headOf(world.gitdir);
    const asked = (): ReturnType<typeof cooBounded> => cooBounded(['consult', '--ledger', clone, '--remote', world.gitdir, '--key', key, '--to', 'aa.chatgpt', '--repo', world.target, '--file', 'src/add.ts', '--prompt', 'Is add() right?']);

    expect(refusal(asked())).toMatch(new RegExp(`^coo: USAGE: ${heads.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}, in the ledger ${clone.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}, may be written by every user`));
    expect(existsSync(ran)).toBe(false);
    expect(headOf(world.gitdir)).toBe(before);

    chmodSync(heads, 0o755);
    const landed = asked();
    expect(landed.status, landed.stderr).toBe(0);
    expect(headOf(world.gitdir)).not.toBe(before);
  });
});

describe("main naming a commit whose file never reached the disk (a machine stopped mid-write)", () => {
  for (const loss of ['gone', 'empty'] as const) {
    it(`with its file ${loss === 'gone' ? 'missing' : 'left empty'}, every writer, coo mcp, coo watch and coo verify refuse with what to do, never a stack trace; nothing is written or claimed`, async () => {
      const world = await fresh();
      const key = writeKey(world.dir, 'coo', world.actors.coo);
      const queued = consultOf(world, key);
      expect(queued.status, queued.stderr).toBe(0);
      const head = headOf(world.gitdir);
      const object = join(world.gitdir, 'objects', head.slice(0, 2), head.slice(2));
      if (loss === 'gone') rmSync(object);
      else {
        chmodSync(object, 0o644);
        truncateSync(object, 0);
      }
      const remedy = /^coo: NOT_FOUND: commit [0-9a-f]{40} is missing from the ledger: .*put the ledger back from a copy or its remote \(coo clone\), or move main to the last commit git fsck finds whole .*then run coo verify$/;
      for (const ran of [
        consultOf(world, key),
        mcpAtOnce(world, key),
        cooBounded([...watchArgs(world, key, join(world.dir, 'state')), '--once'], { env }),
        cooBounded(['verify', '--ledger', world.gitdir]),
      ]) {
        expect(ran.status).toBe(1);
        expect(ran.stderr).not.toMatch(/\n\s+at /);
        expect(ran.stderr.trimEnd().split('\n').at(-1)).toMatch(remedy);
      }
      expect(headOf(world.gitdir)).toBe(head);
      expect(existsSync(join(world.gitdir, 'refs', 'heads', 'main.lock'))).toBe(false);
    });
  }
});

describe('a writer SIGKILLed at each step of its write (guards: these held already)', () => {
  for (const point of ['ref-update', 'after-ref-update'] as const) {
    it(`killed ${point === 'ref-update' ? 'after its objects, before main moves' : 'after main moved, before it let go of the lock'}: coo verify and git fsck find the ledger whole, the next writer lands at once, and the entry is ${point === 'ref-update' ? 'absent' : 'there once'}`, async () => {
      const world = await fresh();
      const key = writeKey(world.dir, 'coo', world.actors.coo);
      const before = headOf(world.gitdir);
      expect(consultOf(world, key, { COO_FAILPOINT: point }).status).toBeNull();
      expect(headOf(world.gitdir) === before).toBe(point === 'ref-update');
      const verified = cooBounded(['verify', '--ledger', world.gitdir]);
      expect(verified.status, verified.stderr).toBe(0);
      const fsck = git(['--git-dir', world.gitdir, 'fsck', '--no-dangling']);
      expect({ status: fsck.status, stderr: fsck.stderr }).toEqual({ status: 0, stderr: '' });
      const next = consultOf(world, key);
      expect(next.status, next.stderr).toBe(0);
      expect(existsSync(join(world.gitdir, 'refs', 'heads', 'main.lock'))).toBe(false);
      const messages = git(['--git-dir', world.gitdir, 'ls-tree', '-r', '--name-only', 'main']).stdout.split('\n').filter((path) => path.endsWith('/envelope.yaml'));
      expect(messages).toHaveLength(point === 'ref-update' ? 1 : 2);
    });
  }
});

describe('coo mcp without a runner SIGKILLed at each step of an agent\'s consult (guards: these held already)', () => {
  for (const point of ['ref-update', 'after-ref-update'] as const) {
    it(`killed ${point === 'ref-update' ? 'before main moves' : 'after main moved'}, unanswered: the agent's retry under its idempotency key is answered with one message, never two; the ledger verifies`, async () => {
      const world = await fresh();
      const key = writeKey(world.dir, 'coo', world.actors.coo);
      const asked = { idempotency_key: 'retry-after-a-crash' };
      const before = headOf(world.gitdir);
      const killed = mcpAtOnce(world, key, asked, { COO_FAILPOINT: point });
      expect(killed.status).toBeNull();
      expect(headOf(world.gitdir) === before).toBe(point === 'ref-update');
      expect(killed.stdout).not.toContain('"id":1');
      const retried = mcpAtOnce(world, key, asked);
      expect(retried.status, retried.stderr).toBe(0);
      const answer = retried.stdout.split('\n').filter((text) => text.includes('"id":1')).map((text) => JSON.parse(text) as { result?: { isError?: boolean; structuredContent?: { message_id?: string } } });
      expect(answer).toHaveLength(1);
      expect(answer[0]!.result?.isError ?? false).toBe(false);
      const messageId = answer[0]!.result!.structuredContent!.message_id!;
      expect(laneState(world, messageId)).toBe('queued');
      const envelopes = git(['--git-dir', world.gitdir, 'ls-tree', '-r', '--name-only', 'main']).stdout.split('\n').filter((path) => path.endsWith('/envelope.yaml'));
      expect(envelopes).toHaveLength(1);
      expect(cooBounded(['verify', '--ledger', world.gitdir]).status).toBe(0);
    });
  }
});

describe('coo mcp --run stopped by SIGTERM while the model it pays for runs', () => {
  it('ends its Oracle, receipts the attempt interrupted and exits 130, as coo watch does (it exited 0, as if nothing was cut short); coo verify finds the ledger whole, and the next runner answers it, calling the model once more for attempt 2 alone', async () => {
    const world = await fresh({ modes: ['hang'] });
    const { messageId } = await world.consult();
    const key = writeKey(world.dir, 'coo', world.actors.coo);
    const state = join(world.dir, 'mcp-state');
    const args = ['mcp', '--run', '--ledger', world.gitdir, '--key', key, '--repo', world.target, '--state-dir', state, '--oracle-command', httpOracle(world.dir), '--oracle-base-url', `${world.server.url}/v1`];
    // Its standard input stays open: an agent still connected.
    const server = spawn(process.execPath, [COO, ...args], { env: { ...process.env, ...env, COO_LEDGER: '', COO_KEY: '', XDG_STATE_HOME: join(world.dir, 'xdg') }, stdio: ['pipe', 'pipe', 'pipe'] });
    let stderr = '';
    server.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    const ended = new Promise<number | null>((done) => server.on('close', (code) => done(code)));
    try {
      await until('the model called', () => world.server.requests.length === 1 || server.exitCode !== null);
      expect(server.exitCode, stderr).toBeNull();
      server.kill('SIGTERM');
      const status = await ended;
      expect(stderr).not.toMatch(/\n\s+at /);
      expect(status, stderr).toBe(130);
      // With --run too, the signal ends the agent's session as a closed stdin does, and one line says so.
      expect(stderr).toMatch(/^coo mcp: stopped by SIGTERM: nothing more is read, and the session ends once the calls in hand are done \(a second signal ends it at once\)$/m);
      expect(processesUnder(state)).toEqual([]);
      const [receipt] = await receiptsOf(world, messageId);
      expect(blockersOf(receipt!)).toEqual(['interrupted']);
      expect(cooBounded(['verify', '--ledger', world.gitdir]).status).toBe(0);

      world.server.setModes(['ok']);
      const again = await startBounded([...watchArgs(world, key, state), '--once'], env).ended;
      expect(again.status, again.stderr).toBe(0);
      expect(laneState(world, messageId)).toBe('succeeded');
      expect(world.server.requests).toHaveLength(2);
    } finally {
      if (server.exitCode === null) server.kill('SIGKILL');
    }
  });
});
