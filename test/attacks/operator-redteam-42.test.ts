import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { pushAttemptBranch } from '../../src/dispatch/pull-request.js';
import { cloneLedger } from '../../src/remote/clone.js';
import { RemoteLedger } from '../../src/remote/publish.js';
import { coo } from '../helpers/cli.js';
import { codeOf, codeOfAsync } from '../helpers/codes.js';
import { writeKey } from '../helpers/damage.js';
import { worlds } from '../helpers/lane.js';
import { tempDir } from '../helpers/tmp.js';

const dir = tempDir('operator-redteam-42-');
const fresh = worlds(dir);

describe('numbers read as a person writes them', () => {
  it('refuses a --max-cost, a --timeout or a --limit in hexadecimal, binary or octal (Number() read 0x4 as 4) as USAGE, writing nothing; decimals still pass', async () => {
    const w = await fresh();
    const env = { ...process.env, COO_LEDGER: w.gitdir, COO_KEY: writeKey(w.dir, 'coo', w.actors.coo) };
    const consult = (prompt: string, ...extra: string[]) => coo(['consult', '--to', 'aa.chatgpt', '--repo', w.target, '--file', 'src/add.ts', '--prompt', prompt, ...extra], { env });
    const head = w.ledger.head();
    const said = ['0x4', '0b100', '0o4'].map((cost, index) => consult(`Question ${index}?`, '--max-cost', cost)).map((result) => [result.status, result.stderr.split('\n')[0]]);
    expect(said).toEqual(['0x4', '0b100', '0o4'].map((cost) => [2, `coo: USAGE: --max-cost takes a positive number, got "${cost}"`]));
    const clone = coo(['clone', w.gitdir, join(w.dir, 'hex.git'), '--trust-root', w.actors.ceo.publicKey.keyId, '--timeout', '0x10']);
    expect([clone.status, clone.stderr]).toEqual([2, 'coo: USAGE: --timeout takes a number of seconds above 0 and at most 86400, got "0x10"\n']);
    expect(existsSync(join(w.dir, 'hex.git'))).toBe(false);
    const log = coo(['log', '--limit', '0x10'], { env });
    expect([log.status, log.stderr]).toEqual([2, 'coo: USAGE: --limit takes a whole number of commits from 1 to 9007199254740991, got "0x10"\n']);
    expect(w.ledger.head()).toBe(head);
    // The guard: decimal forms are read as before.
    const taken = consult('Taken?', '--max-cost', '0.25');
    expect([taken.status, taken.stderr]).toEqual([0, '']);
    expect(coo(['log', '--limit', '1e1'], { env }).status).toBe(2);
    expect(coo(['log', '--limit', '2'], { env }).status).toBe(0);
  });
});

describe("a library caller's time limits", () => {
  it('are refused as USAGE past a day, at 0, or not a number, before anything is made: a timer of 2^31 ms or more fires at once; so is a fetch bound that is no bound (NaN, Infinity) or stops every fetch (0)', async () => {
    const w = await fresh();
    const trustRoot = { keyId: w.actors.ceo.publicKey.keyId };
    for (const timeoutMs of [2 ** 31, 86_400_001, 0, -1, Number.NaN, Number.POSITIVE_INFINITY]) {
      const gitdir = join(w.dir, `clone-${String(timeoutMs)}.git`);
      expect(await codeOfAsync(() => cloneLedger({ url: w.gitdir, gitdir, trustRoot, now: new Date(), timeoutMs }))).toBe('USAGE');
      expect(existsSync(gitdir)).toBe(false);
      expect(codeOf(() => new RemoteLedger(w.ledger, { remote: w.gitdir, timeoutMs }))).toBe('USAGE');
      expect(await codeOfAsync(() => pushAttemptBranch({ gitdir: w.gitdir, branch: 'coo/x', headSha: 'a'.repeat(40), attemptId: 'att_x', pushUrl: 'https://127.0.0.1/x.git', token: 'ghp_test', timeoutMs }))).toBe('USAGE');
    }
    for (const maxFetchBytes of [Number.NaN, Number.POSITIVE_INFINITY, 0, 1.5, 2 ** 41]) {
      const gitdir = join(w.dir, `fetch-${String(maxFetchBytes)}.git`);
      expect(await codeOfAsync(() => cloneLedger({ url: w.gitdir, gitdir, trustRoot, now: new Date(), maxFetchBytes }))).toBe('USAGE');
      expect(existsSync(gitdir)).toBe(false);
      expect(codeOf(() => new RemoteLedger(w.ledger, { remote: w.gitdir, maxFetchBytes }))).toBe('USAGE');
    }
    // The guard: a day is taken.
    const day = await cloneLedger({ url: w.gitdir, gitdir: join(w.dir, 'day.git'), trustRoot, now: new Date(), timeoutMs: 86_400_000 });
    expect(day.head).toBe(w.ledger.head());
  });
});
