import { join } from 'node:path';
import v8 from 'node:v8';
import { runInNewContext } from 'node:vm';
import { afterEach, describe, expect, it } from 'vitest';
import { isTerminal, laneStateOf } from '../../src/authority/state.js';
import { coo } from '../helpers/cli.js';
import { FAKE_ORACLE, makeWorld, type World } from '../helpers/lane.js';
import { finished, startRunner } from '../helpers/runner-process.js';
import { tally } from '../helpers/tally.js';
import { git, tempDir } from '../helpers/tmp.js';

/** `COO_RELIABILITY=full`: 1,000 consults through the lane, and 4 runners on 100. The normal suite runs a tenth of each. */
const FULL = process.env['COO_RELIABILITY'] === 'full';
const MANY = FULL ? 1000 : 60;
const SHARED = FULL ? 100 : 20;

/** A full garbage collection, so the heap samples measure what is live. */
v8.setFlagsFromString('--expose-gc');
const collectGarbage = runInNewContext('gc') as () => void;

const dir = tempDir();
let world: World | null = null;
afterEach(async () => {
  await world?.close();
  world = null;
});

describe('load', () => {
  it(`takes ${MANY} queued consults through the lane: all complete, none lost, memory flat`, async () => {
    world = await makeWorld(join(dir, 'many'));
    const ids: string[] = [];
    for (let i = 0; i < MANY; i += 1) ids.push((await world.consult({ idempotencyKey: `load-${i}`, patterns: ['src/add.ts'] })).messageId);
    const samples: Array<{ rss: number; heap: number }> = [];
    let receipts = 0;
    const { OracleCli } = await import('../../src/consult/oracle.js');
    const transport = new OracleCli({ command: [process.execPath, FAKE_ORACLE, '--fake-mode', 'http'], route: { baseUrl: `${world.server.url}/v1` }, env: { OPENAI_API_KEY: 'sk-load' }, hide: [world.gitdir] });
    const runner = world.runner({
      transport,
      onEvent: (event) => {
        if (event.type !== 'receipt') return;
        receipts += 1;
        if (receipts % Math.max(1, Math.floor(MANY / 20)) !== 0) return;
        collectGarbage();
        const usage = process.memoryUsage();
        samples.push({ rss: usage.rss, heap: usage.heapUsed });
      },
    });
    await runner.runOnce();
    const state = await world.ledger.state();
    const lost = ids.filter((id) => !isTerminal(state.messages.get(id)!));
    expect(lost).toEqual([]);
    expect(ids.every((id) => laneStateOf(state.messages.get(id)!) === 'succeeded')).toBe(true);
    expect(world.server.requests).toHaveLength(MANY);
    // Memory stays flat once warm: the live heap after a full collection grows only by the ledger
    // state, a few kilobytes per consult (RSS alone moves by tens of megabytes with the collector).
    const settled = samples.slice(Math.floor(samples.length / 4));
    const growthMb = (settled.at(-1)!.heap - settled[0]!.heap) / 1024 / 1024;
    const peakMb = Math.max(...samples.map((sample) => sample.rss)) / 1024 / 1024;
    expect(samples.length).toBeGreaterThanOrEqual(20);
    expect(growthMb).toBeLessThan(FULL ? 16 : 8);
    tally('load', { test: 'lane', consults: MANY, completed: MANY - lost.length, lost: lost.length, paid_calls: world.server.requests.length, peak_rss_mb: Math.round(peakMb), heap_growth_after_warmup_mb: Number(growthMb.toFixed(1)) });
  });

  it(`lets 4 runner processes share ${SHARED} queued consults: each consulted exactly once, history linear`, async () => {
    world = await makeWorld(join(dir, 'shared'));
    const ids: string[] = [];
    for (let i = 0; i < SHARED; i += 1) ids.push((await world.consult({ idempotencyKey: `shared-${i}`, patterns: ['src/add.ts'] })).messageId);
    const results = await Promise.all([0, 1, 2, 3].map((n) => finished(startRunner(world!, { stateDir: join(dir, `runner-${n}`) }))));
    expect(results.map((result) => result.code)).toEqual([0, 0, 0, 0]);
    const state = await world.ledger.state();
    for (const id of ids) {
      const record = state.messages.get(id)!;
      expect(record.attempts).toHaveLength(1);
      expect(laneStateOf(record)).toBe('succeeded');
    }
    const canaries = world.server.requests.map((request) => request.canary);
    expect(canaries).toHaveLength(SHARED);
    expect(new Set(canaries).size).toBe(SHARED);
    expect(git(['--git-dir', world.gitdir, 'rev-list', '--merges', 'main']).trim()).toBe('');
    expect(coo(['verify', '--ledger', world.gitdir, '--no-checkpoint']).status).toBe(0);
    const runnersUsed = new Set([...state.messages.values()].flatMap((record) => record.attempts.map((attempt) => attempt.claim?.runner)));
    tally('load', { test: 'four runners', consults: SHARED, paid_calls: canaries.length, duplicate_calls: canaries.length - new Set(canaries).size, runners_that_claimed: runnersUsed.size });
  });
});
