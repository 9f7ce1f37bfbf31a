import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { cooBounded, headOf, refusal, startBounded, watchArgs, writeKey } from '../helpers/damage.js';
import { worlds } from '../helpers/lane.js';
import { nothingClaimed, queued } from '../helpers/startup.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * A careless operator, round 22: a command line that gives a one-value flag twice, or leaves a
 * flag's value out so that the next flag is taken as it. Each is refused as USAGE (exit 2) before
 * the verb runs, naming the flag; nothing is written to the ledger, nothing claimed; `--json` taken
 * as another flag's value does not switch JSON errors on.
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
