import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { cooBounded, headOf, httpOracle, processesUnder, refusal, startBounded, until, watchArgs, writeKey } from '../helpers/damage.js';
import { blockersOf, FAKE_ORACLE, receiptsOf, worlds, type World } from '../helpers/lane.js';
import { nothingClaimed, queued } from '../helpers/startup.js';
import { agentScript, codesOf, dispatchTo, hostilePlaces, receiptsFor, watchOnce } from '../helpers/hostile-agent.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * A careless operator, round 22: a command line that gives a one-value flag twice, or leaves a
 * flag's value out so that the next flag is taken as it. Each is refused as USAGE (exit 2) before
 * the verb runs, naming the flag; nothing is written to the ledger, nothing claimed; `--json` taken
 * as another flag's value does not switch JSON errors on. And a runner SIGKILLed while its Oracle
 * runs: the next start says what it waits for and how to end it, and the attempt left claimed is
 * charged as a call that may have been paid, also when the state folder went with the runner.
 */

const dir = tempDir('operator-redteam-22-');
const fresh = worlds(join(dir, 'worlds'));
const env = { OPENAI_API_KEY: 'sk-test-key' };

describe('a one-value flag given twice', () => {
  it('coo command --budget 1 --budget 100 writes no command (it took the last, $100, before); --remote twice, -n and --limit together, are refused for every verb alike', async () => {
    const world = await fresh();
    const ceo = writeKey(world.dir, 'ceo', world.actors.ceo);
    const before = headOf(world.gitdir);
    const said = refusal(cooBounded(['command', '--ledger', world.gitdir, '--ceo-key', ceo, '--text', 'ship it', '--budget', '1', '--budget', '100']));
    expect(said).toBe('coo: USAGE: --budget was given twice: it takes one value, give it once; nothing was done');
    expect(headOf(world.gitdir)).toBe(before);
    const asJson = cooBounded(['command', '--ledger', world.gitdir, '--ceo-key', ceo, '--text', 'ship it', '--budget=1', '--json', '--budget', '100']);
    expect(asJson.status).toBe(2);
    expect(JSON.parse(asJson.stdout)).toMatchObject({ ok: false, error: { code: 'USAGE', message: expect.stringMatching(/^--budget was given twice/) } });
    expect(refusal(cooBounded(['log', '--ledger', world.gitdir, '--limit', '3', '-n', '4']))).toMatch(/^coo: USAGE: --limit was given twice/);
    // An empty one of the two is said as empty, first or last: the verb would have seen only the last.
    for (const args of [['log', '--ledger', '', '--ledger', world.gitdir], ['log', '--ledger', world.gitdir, '--ledger', '']]) {
      expect(refusal(cooBounded(args))).toMatch(/^coo: USAGE: --ledger was given an empty value/);
    }
    expect(headOf(world.gitdir)).toBe(before);
    // A repeatable flag may be given again: two --file, two --to, as ever (here refused only for the missing key).
    expect(refusal(cooBounded(['consult', '--ledger', world.gitdir, '--to', 'aa.chatgpt', '--to', 'aa.claude', '--file', 'a', '--file', 'b']))).toMatch(/^coo: USAGE: --key is required/);
  });

  it('coo watch --remote a --remote b (or --state-dir twice) is refused at start: nothing is claimed, the model never called', async () => {
    const world = await fresh();
    const ids = await queued(world);
    const before = headOf(world.gitdir);
    const key = writeKey(world.dir, 'coo', world.actors.coo);
    const args = [...watchArgs(world, key, join(world.dir, 'state')), '--once', '--isolation', 'none'];
    expect(refusal(await startBounded([...args, '--state-dir', join(world.dir, 'other-state')], env).ended)).toBe('coo: USAGE: --state-dir was given twice: it takes one value, give it once; nothing was done');
    expect(refusal(await startBounded([...args, '--remote', `file://${world.gitdir}`, '--remote', `file://${join(world.dir, 'nowhere.git')}`], env).ended)).toMatch(/^coo: USAGE: --remote was given twice/);
    await nothingClaimed(world, before, ids);
  });
});

describe("a flag's value left out, so the next flag is taken as it", () => {
  it('coo consult --prompt --json writes no consult asking "--json" (it wrote one before) and prints no JSON error; --prompt=--json still gives that text', async () => {
    const world = await fresh();
    const key = writeKey(world.dir, 'coo', world.actors.coo);
    const before = headOf(world.gitdir);
    const base = ['consult', '--ledger', world.gitdir, '--key', key, '--to', 'aa.chatgpt', '--repo', world.target, '--file', 'README.md'];
    expect(refusal(cooBounded([...base, '--prompt', '--json']))).toBe('coo: USAGE: --prompt was given --json, a flag of this verb, as its value: give --prompt its value (or --prompt=--json if that is meant); nothing was done');
    expect(refusal(cooBounded([...base, '--max-cost', '--prompt', 'Is it right?']))).toMatch(/^coo: USAGE: --max-cost was given --prompt, a flag of this verb, as its value/);
    expect(headOf(world.gitdir)).toBe(before);
    // `--json` where the parser takes it as a value is not `--json`: a refusal says itself on stderr only.
    const missing = cooBounded(['consult', '--ledger', world.gitdir, '--key', key, '--to', 'aa.chatgpt', '--prompt', '--json']);
    expect(missing.stdout).toBe('');
    const written = cooBounded([...base, '--prompt=--json', '--json']);
    expect(written.status, written.stderr).toBe(0);
    expect(JSON.parse(written.stdout)).toMatchObject({ existing: false });
    expect(headOf(world.gitdir)).not.toBe(before);
  });
});

/** A consult whose model never answers, claimed by a `coo watch --once` that is then SIGKILLed while its Oracle waits on the model. */
async function killedMidCall(world: World): Promise<{ messageId: string; args: string[]; state: string }> {
  const { messageId } = await world.consult();
  const state = join(world.dir, 'watch-state');
  const args = [...watchArgs(world, writeKey(world.dir, 'coo', world.actors.coo), state, httpOracle(world.dir)), '--once'];
  const runner = startBounded(args, env);
  await until('the model called', () => world.server.requests.length === 1);
  runner.child.kill('SIGKILL');
  await runner.ended;
  return { messageId, args, state };
}

/** The fake Oracles still running for a world: a killed runner's orphans. */
function orphans(world: World): number[] {
  return processesUnder(world.dir)
    .filter((line) => line.includes(FAKE_ORACLE))
    .map((line) => Number(line.trim().split(' ')[0]));
}

describe('a runner SIGKILLed while its Oracle runs', () => {
  for (const json of [false, true]) {
    it(`the next start${json ? ' with --json' : ''} says it waits for the orphaned Oracle, its pid, until when, and how to end it now; the attempt is then receipted interrupted and charged, never $0`, async () => {
      const world = await fresh({ modes: ['hang', 'ok'] });
      const { messageId, args } = await killedMidCall(world);
      expect(orphans(world)).not.toHaveLength(0);
      const next = startBounded(json ? [...args, '--json'] : args, env);
      const stream = (): string => (json ? '' : next.stderr());
      let pid: number;
      if (json) {
        let stdout = '';
        next.child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
        await until('the orphan event', () => stdout.includes('"oracle_orphan"'));
        const event = JSON.parse(stdout.split('\n').find((line) => line.includes('"oracle_orphan"'))!) as { messageId: string; attempt: number; pid: number; until: string };
        expect(event).toMatchObject({ messageId, attempt: 1 });
        pid = event.pid;
      } else {
        await until('the wait said', () => stream().includes('waiting for the Oracle'));
        const line = stream().split('\n').find((one) => one.includes('waiting for the Oracle'))!;
        expect(line).toMatch(new RegExp(`^coo watch: waiting for the Oracle \\(pid (\\d+)\\) of ${messageId} attempt 1, left running by the runner run-\\S+ that stopped, to end: until \\S+ at most \\(its runtime budget\\), then it is ended and the attempt recovered; to end it now: kill -- -\\d+$`));
        pid = Number(/kill -- -(\d+)$/.exec(line)![1]);
      }
      // What the line says to do: the orphan and its children end, and the runner goes on at once.
      expect(processesUnder(world.dir).map((line) => Number(line.trim().split(' ')[0]))).toContain(pid);
      process.kill(-pid, 'SIGKILL');
      expect((await next.ended).status).toBe(0);
      const [first, second] = await receiptsOf(world, messageId);
      expect(blockersOf(first!)).toEqual(['interrupted']);
      expect(first!['actual_cost_usd']).toBeGreaterThan(0);
      expect(second!['status']).toBe('succeeded');
    });
  }

  it('with its attempt record removed alone, the next start ends the orphaned Oracle at once, never left running, and charges the attempt from its claim, never $0', async () => {
    const world = await fresh({ modes: ['hang', 'ok'] });
    const { messageId, args, state } = await killedMidCall(world);
    const left = orphans(world);
    expect(left).not.toHaveLength(0);
    const attempt = join(state, 'sandboxes', `aa_attempt_${messageId.slice('msg_'.length)}_1`, 'attempt.json');
    rmSync(attempt);
    expect((await startBounded(args, env).ended).status).toBe(0);
    expect(orphans(world)).toEqual([]);
    const [first, second] = await receiptsOf(world, messageId);
    expect(blockersOf(first!)).toEqual(['interrupted']);
    expect(first!['actual_cost_usd']).toBeGreaterThan(0);
    expect(second!['status']).toBe('succeeded');
  });

  it('with its state folder removed too, the next start charges the attempt left claimed from its claim, never $0 for the call the model was seen to take', async () => {
    const world = await fresh({ modes: ['hang', 'ok'] });
    const { messageId, args, state } = await killedMidCall(world);
    const left = orphans(world);
    rmSync(state, { recursive: true, force: true });
    try {
      expect((await startBounded(args, env).ended).status).toBe(0);
    } finally {
      for (const pid of left) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // Gone already.
        }
      }
    }
    const [first, second] = await receiptsOf(world, messageId);
    expect(blockersOf(first!)).toEqual(['interrupted']);
    expect(String((first!['blockers'] as Array<{ detail: string }>)[0]!.detail)).toMatch(/this state folder holds none of its files \(removed with the folder/);
    expect(first!['actual_cost_usd']).toBeGreaterThan(0);
    expect(second!['status']).toBe('succeeded');
  });
});

describe('a dispatch runner SIGKILLed while its agent runs, its state folder then removed', () => {
  const place = hostilePlaces(join(dir, 'dispatch'), 'o22');

  it('the next start charges the attempt left claimed what it was allowed (usage_unreported), never $0 for an agent that ran', async () => {
    const where = await place('crash-removed');
    const { messageId, envelope } = await dispatchTo(where, 'crash-removed');
    const agent = agentScript(where.world.dir, 'sleep 60', '');
    expect(watchOnce(where, agent, { env: { COO_FAILPOINT: 'during-executor' } }).signal).toBe('SIGKILL');
    const left = processesUnder(where.stateDir).filter((line) => !line.includes('cli/main.js')).map((line) => Number(line.trim().split(' ')[0]));
    rmSync(where.stateDir, { recursive: true, force: true });
    try {
      expect(watchOnce(where, agent).hung).toBe(false);
    } finally {
      for (const pid of left) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // Gone already.
        }
      }
    }
    const [receipt] = await receiptsFor(where, messageId);
    expect(codesOf(receipt)).toEqual(['interrupted']);
    expect(String((receipt!['blockers'] as Array<{ detail: string }>)[0]!.detail)).toMatch(/this state folder holds none of its files/);
    expect(receipt!['actual_cost_usd']).toBe(envelope.budget.max_cost_usd);
    expect(receipt!['warnings']).toContain('usage_unreported');
  });
});
