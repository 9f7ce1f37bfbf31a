import { join } from 'node:path';
import { afterAll, describe, expect } from 'vitest';
import { enqueueDispatch } from '../../src/dispatch/enqueue.js';
import type { ExecutorFactory } from '../../src/dispatch/executor.js';
import { LIMITS } from '../../src/limits.js';
import { attack } from '../helpers/attack-kit.js';
import { blockersOf, makeTargetRepo, makeWorld, receiptsOf, type World } from '../helpers/lane.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * A runner that holds a message (its target's lane cannot run there) ends it only once no runner may
 * start it by any clock within the skew the ledger allows between machines: a held runner whose clock
 * runs ahead never receipts `expired` what a runner that can run it, its clock right, could still start.
 */

const dir = tempDir('liveness-skew-redteam');
const closers: Array<() => Promise<void> | void> = [];
afterAll(async () => {
  for (const close of closers.reverse()) await close();
});

async function world(name: string): Promise<World> {
  const made = await makeWorld(join(dir, name));
  closers.push(() => made.close());
  return made;
}

const NO_GEMINI_KEY = { OPENAI_API_KEY: 'sk-test-key', ANTHROPIC_API_KEY: 'sk-ant-test-key' };
const HELD_GEMINI = new Map([['aa.gemini', { code: 'ORACLE_CONFIG' as const, message: 'GEMINI_API_KEY is not set' }]]);
const SKEW_MS = LIMITS.clockSkewSeconds * 1000;

async function outcome(w: World, messageId: string): Promise<string> {
  const receipts = await receiptsOf(w, messageId);
  return receipts.map((receipt) => `${String(receipt['status'])}:${blockersOf(receipt).join(',')}`).join(' ') || 'queued';
}

describe('a held runner whose clock runs ahead', () => {
  attack('a consult to aa.gemini held here, 60 s past its expiry by this runner’s clock (within the skew): it stays queued, and the pass wakes once the skew is past too', 'runner', 'queued', async () => {
    const w = await world('ahead-consult');
    const asked = await w.consult({ target: 'aa.gemini', ttlSeconds: 60 });
    const expiry = Date.parse(asked.envelope.expires_at);
    const summary = await w.runner({ clock: () => new Date(expiry + 60_000), transport: w.transport({ env: NO_GEMINI_KEY }), waiting: HELD_GEMINI }).runOnce();
    expect(summary.held).toEqual([asked.messageId]);
    expect(summary.waiting).toContain(new Date(expiry + SKEW_MS).toISOString().replace(/\.\d{3}Z$/, 'Z'));
    expect(w.server.requests).toHaveLength(0);
    return outcome(w, asked.messageId);
  });

  attack('the same consult once the skew is past its expiry too: receipted expired, unpaid', 'runner', 'blocked:expired', async () => {
    const w = await world('past-skew-consult');
    const asked = await w.consult({ target: 'aa.gemini', ttlSeconds: 60 });
    const expiry = Date.parse(asked.envelope.expires_at);
    const summary = await w.runner({ clock: () => new Date(expiry + SKEW_MS), transport: w.transport({ env: NO_GEMINI_KEY }), waiting: HELD_GEMINI }).runOnce();
    expect(summary.held).toEqual([]);
    expect(w.server.requests).toHaveLength(0);
    return outcome(w, asked.messageId);
  });

  attack('a dispatch to ea.codex held here (no executor), 60 s past its expiry by this runner’s clock: it stays queued for a runner that can still start it', 'runner', 'queued', async () => {
    const w = await world('ahead-dispatch');
    const repo = join(w.dir, 'work');
    makeTargetRepo(repo);
    const now = new Date();
    const { messageId } = await enqueueDispatch({ ledger: w.ledger, key: w.actors.coo, now, repo, target: 'ea.codex', task: 'Fix add().', scope: ['src/**'], accept: ['it passes'], verify: ['true'], timeoutSeconds: 60, maxRuntimeSeconds: 60, ttlSeconds: 60 });
    const executors: ExecutorFactory = () => {
      throw new Error('no executor is started for a held dispatch');
    };
    const summary = await w.runner({ repo, executors, clock: () => new Date(now.getTime() + 120_000), waiting: new Map([['ea.codex', { code: 'EXECUTOR_CONFIG', message: 'codex is not on PATH' }]]) }).runOnce();
    expect(summary.held).toEqual([messageId]);
    return outcome(w, messageId);
  });
});
