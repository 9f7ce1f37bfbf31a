import { spawn } from 'node:child_process';
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { cooBounded, headOf, httpOracle, processesUnder, startBounded, until, watchArgs, writeKey } from '../helpers/damage.js';
import { laneState } from '../helpers/startup.js';
import { blockersOf, receiptsOf, worlds } from '../helpers/lane.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * A careless operator, round 21: mistakes made while a runner or a writer runs. A terminal closed
 * under `coo watch`, a `coo watch --json` piped to a reader that quit, and a writer killed while it
 * held the ledger's lock, its pid then another program's: none burns or strands queued work, none
 * ends in a stack trace.
 */

const dir = tempDir('operator-redteam-21-');
const fresh = worlds(dir);
const env = { OPENAI_API_KEY: 'sk-test-key' };

describe('the terminal coo watch runs in closed (SIGHUP) while Oracle runs', () => {
  it('stops the runner as Ctrl-C does: Oracle ended, the attempt receipted interrupted, one closing line, exit 130; never a runner gone with no receipt and its Oracle left running; the next run answers it', async () => {
    const world = await fresh({ modes: ['hang'] });
    const { messageId } = await world.consult();
    const state = join(world.dir, 'watch-state');
    const args = watchArgs(world, writeKey(world.dir, 'coo', world.actors.coo), state, httpOracle(world.dir));
    const runner = startBounded([...args, '--once'], env);
    await until('Oracle started', () => runner.stderr().includes(`consulting for ${messageId} attempt 1`) && world.server.requests.length === 1);
    runner.child.kill('SIGHUP');
    const ended = await runner.ended;
    expect(ended.status).toBe(130);
    expect(ended.stderr.trimEnd().split('\n').at(-1)).toMatch(
      new RegExp(`^coo watch: stopped by SIGHUP: ${messageId} attempt 1 was cut short, its processes ended, and it is receipted failed \\(interrupted\\); the next coo watch runs attempt 2 from \\S+$`),
    );
    expect(processesUnder(state)).toEqual([]);
    const [receipt] = await receiptsOf(world, messageId);
    expect(blockersOf(receipt!)).toEqual(['interrupted']);

    world.server.setModes(['ok']);
    const again = await startBounded([...args, '--once'], env).ended;
    expect(again.status).toBe(0);
    expect(laneState(world, messageId)).toBe('succeeded');
  });
});

describe('coo watch --json whose reader went away (piped to jq or head, which quit)', () => {
  it('goes on running: the consult it claims next is answered and receipted, never a stack trace after the claim leaving it claimed with no receipt; Ctrl-C still stops it', async () => {
    const world = await fresh();
    const state = join(world.dir, 'watch-state');
    const runner = startBounded([...watchArgs(world, writeKey(world.dir, 'coo', world.actors.coo), state), '--json'], env);
    await until('watching', () => runner.stderr().includes('(Ctrl-C stops)'));
    runner.child.stdout!.destroy();
    const { messageId } = await world.consult();
    await until('the consult answered', () => laneState(world, messageId) === 'succeeded' || runner.child.exitCode !== null);
    expect(runner.child.exitCode).toBeNull();
    runner.child.kill('SIGINT');
    const ended = await runner.ended;
    expect(ended.stderr).not.toMatch(/EPIPE|\n\s+at /);
    expect(ended.status).toBe(0);
    expect(laneState(world, messageId)).toBe('succeeded');
  });
});

describe('a writer killed while it held the ledger lock, its pid since taken by another program', () => {
  it('leaves a lock the next writer knows is stale by the start time it records: coo consult lands at once, never LEDGER_LOCKED until the operator removes the lock by hand', async () => {
    const world = await fresh();
    const key = writeKey(world.dir, 'coo', world.actors.coo);
    const consult = (extra: NodeJS.ProcessEnv = {}): ReturnType<typeof cooBounded> =>
      cooBounded(['consult', '--ledger', world.gitdir, '--key', key, '--to', 'aa.chatgpt', '--repo', world.target, '--file', 'src/add.ts', '--prompt', 'Is add() right?'], { env: extra });
    const before = headOf(world.gitdir);
    const killed = consult({ COO_FAILPOINT: 'ref-update' });
    expect(killed.status).toBeNull();
    const lock = join(world.gitdir, 'refs', 'heads', 'main.lock');
    const left = JSON.parse(readFileSync(lock, 'utf8')) as { pid: number };
    // The dead writer's pid now names a live program.
    const other = spawn('sleep', ['60'], { stdio: 'ignore' });
    try {
      writeFileSync(lock, JSON.stringify({ ...left, pid: other.pid }));
      expect(headOf(world.gitdir)).toBe(before);
      const ran = consult();
      expect(ran.stderr).toBe('');
      expect(ran.status).toBe(0);
      expect(headOf(world.gitdir)).not.toBe(before);
      expect(existsSync(lock)).toBe(false);
      expect(laneState(world, ran.stdout.trim())).toBe('queued');
    } finally {
      other.kill('SIGKILL');
    }
  });
});

describe("the runner's state folder removed while Oracle runs (an operator cleaning up)", () => {
  it('is no failure of the advisory agent: the attempt is receipted interrupted, naming the folder, with a next attempt, never a terminal aa_unavailable; the next run answers it', async () => {
    const world = await fresh({ modes: ['slow'] });
    const { messageId } = await world.consult();
    const state = join(world.dir, 'watch-state');
    const args = [...watchArgs(world, writeKey(world.dir, 'coo', world.actors.coo), state, httpOracle(world.dir)), '--once'];
    const runner = startBounded(args, env);
    await until('the model called', () => world.server.requests.length === 1);
    rmSync(state, { recursive: true, force: true });
    const ended = await runner.ended;
    expect(ended.status).toBe(0);
    const [receipt] = await receiptsOf(world, messageId);
    expect(blockersOf(receipt!)).toEqual(['interrupted']);
    expect(String((receipt!['blockers'] as Array<{ detail: string }>)[0]!.detail)).toMatch(/^the attempt's folder \S+ was removed from the runner's state folder while Oracle ran/);
    expect(receipt!['next_attempt_at']).not.toBeNull();

    world.server.setModes(['ok']);
    expect((await startBounded(args, env).ended).status).toBe(0);
    expect(laneState(world, messageId)).toBe('succeeded');
  });
});

describe('--json after -- on the command line', () => {
  it('is an operand, not the option: a failure is said as one coded line on stderr only, never also as JSON on standard output; before --, it is JSON as ever', () => {
    const world = join(dir, 'no-such-ledger');
    const operand = cooBounded(['show', '--ledger', world, '--', '--json']);
    expect(operand.status).toBe(2);
    expect(operand.stdout).toBe('');
    expect(operand.stderr).toMatch(/^coo: LEDGER_NOT_FOUND: /);
    const option = cooBounded(['show', '--ledger', world, '--json', '--', 'msg']);
    expect(JSON.parse(option.stdout)).toMatchObject({ ok: false, error: { code: 'LEDGER_NOT_FOUND' } });
  });
});
