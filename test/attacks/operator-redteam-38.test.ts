import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { enqueueConsult } from '../../src/consult/enqueue.js';
import { coo } from '../helpers/cli.js';
import { codeOfAsync } from '../helpers/codes.js';
import { writeKey } from '../helpers/damage.js';
import { worlds } from '../helpers/lane.js';
import { tempDir } from '../helpers/tmp.js';

const dir = tempDir('operator-redteam-38-');
const fresh = worlds(dir);

describe('number flags bounded as the envelope and the tools bound them', () => {
  it('refuses a --max-runtime past a day and a --max-hops past 64 as USAGE naming the range, writing nothing', async () => {
    // A policy at the schema's own bounds: the flags' range is the envelope's, not this policy's.
    const w = await fresh({ policy: (policy) => ({ ...policy, limits: { ...policy.limits, max_hops: 64 }, budgets: { ...policy.budgets, max_runtime_seconds: 86_400 } }) });
    const env = { ...process.env, COO_LEDGER: w.gitdir, COO_KEY: writeKey(w.dir, 'coo', w.actors.coo) };
    const consult = (prompt: string, ...extra: string[]) => coo(['consult', '--to', 'aa.chatgpt', '--repo', w.target, '--file', 'src/add.ts', '--prompt', prompt, ...extra], { env });
    const head = w.ledger.head();
    const cases: ReadonlyArray<readonly [readonly string[], string]> = [
      [['--max-runtime', '9000000000000'], 'coo: USAGE: --max-runtime takes a whole number of seconds from 1 to 86400, got "9000000000000"'],
      [['--max-runtime', '86401'], 'coo: USAGE: --max-runtime takes a whole number of seconds from 1 to 86400, got "86401"'],
      [['--max-hops', '65'], 'coo: USAGE: --max-hops takes a whole number of hops from 1 to 64, got "65"'],
    ];
    const said = cases.map(([extra], index) => consult(`Question ${index}?`, ...extra)).map((result) => [result.status, result.stderr.split('\n')[0]]);
    expect(said).toEqual(cases.map(([, words]) => [2, words]));
    const dispatch = coo(['dispatch', '--to', 'ea.codex', '--repo', w.target, '--task', 'fix add', '--scope', 'src/**', '--accept', 'add works', '--verify', 'true', '--timeout', '2d'], { env });
    expect([dispatch.status, dispatch.stderr.split('\n')[0]]).toEqual([2, 'coo: USAGE: --timeout takes a duration of at most 86400s, got "2d"']);
    expect(w.ledger.head()).toBe(head);
    // The guard: the bounds themselves are taken.
    const edge = consult('Taken?', '--max-runtime', '86400', '--max-hops', '64');
    expect([edge.status, edge.stderr]).toEqual([0, '']);
  });

  it('refuses a coo clone --timeout whose milliseconds a timer cannot hold, and clones with a day', async () => {
    const w = await fresh();
    const trustRoot = w.actors.ceo.publicKey.keyId;
    const over = coo(['clone', w.gitdir, join(w.dir, 'over.git'), '--trust-root', trustRoot, '--timeout', '2147484']);
    expect([over.status, over.stderr]).toEqual([2, 'coo: USAGE: --timeout takes a number of seconds above 0 and at most 86400, got "2147484"\n']);
    expect(existsSync(join(w.dir, 'over.git'))).toBe(false);
    const day = coo(['clone', w.gitdir, join(w.dir, 'day.git'), '--trust-root', trustRoot, '--timeout', '86400']);
    expect([day.status, day.stderr]).toEqual([0, '']);
  });
});

describe('a library request whose time to live or runtime ends past any date', () => {
  it('is refused as POLICY_LIMIT by the plan every writer shares, never thrown as an invalid date', async () => {
    const w = await fresh();
    const ask = { ledger: w.ledger, key: w.actors.coo, now: new Date(), target: 'aa.chatgpt', repo: w.target, patterns: ['src/add.ts'], question: 'Is add() correct for NaN?' };
    const head = w.ledger.head();
    expect(await codeOfAsync(() => enqueueConsult({ ...ask, ttlSeconds: 9e15 }))).toBe('POLICY_LIMIT');
    expect(await codeOfAsync(() => enqueueConsult({ ...ask, maxRuntimeSeconds: 9e12 }))).toBe('POLICY_LIMIT');
    expect(await codeOfAsync(() => enqueueConsult({ ...ask, ttlSeconds: Number.NaN }))).toBe('POLICY_LIMIT');
    expect(w.ledger.head()).toBe(head);
  });
});
