import { mkdtempSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { Runner } from '../../src/runner/runner.js';
import { watchLedger } from '../../src/runner/watch.js';
import { enqueuePanel } from '../../src/consult/enqueue.js';
import { enqueueDispatch } from '../../src/dispatch/enqueue.js';
import type { ExecutorFactory } from '../../src/dispatch/executor.js';
import type { ActorPolicy } from '../../src/schema/policy.js';
import { LIMITS } from '../../src/limits.js';
import { attack } from '../helpers/attack-kit.js';
import { blockersOf, makeTargetRepo, makeWorld, receiptsOf, type World } from '../helpers/lane.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * Liveness: every message that lands in the queue ends in a receipt in bounded time. A message no
 * runner here can run (its target's lane is held at start: a provider key, an executor missing)
 * stays queued while it may still run elsewhere; once its time is up (its expiry, or its deadline for
 * a retry), any runner that sees it receipts it `expired` (or `deadline_passed`), unpaid, and a
 * watch wakes at that time rather than waiting for something else to move the ledger.
 */

const dir = tempDir('liveness-redteam');
const closers: Array<() => Promise<void> | void> = [];
afterAll(async () => {
  for (const close of closers.reverse()) await close();
});

const REVIEW = (policy: ActorPolicy): ActorPolicy => ({ ...policy, panels: [{ name: 'review', from: 'coo.*', members: ['aa.chatgpt', 'aa.gemini'] }] });

async function world(name: string): Promise<World> {
  const made = await makeWorld(join(dir, name), { policy: REVIEW });
  closers.push(() => made.close());
  return made;
}

/** The runner's environment without the Gemini member's provider key, and the start-up check that holds aa.gemini for it. */
const NO_GEMINI_KEY = { OPENAI_API_KEY: 'sk-test-key', ANTHROPIC_API_KEY: 'sk-ant-test-key' };
const HELD_GEMINI = new Map([['aa.gemini', { code: 'ORACLE_CONFIG' as const, message: 'GEMINI_API_KEY is not set' }]]);

/** Each attempt's receipt as `status:blockers`, or 'queued' when the message has none. */
async function outcome(w: World, messageId: string): Promise<string> {
  const receipts = await receiptsOf(w, messageId);
  return receipts.map((receipt) => `${String(receipt['status'])}:${blockersOf(receipt).join(',')}`).join(' ') || 'queued';
}

describe('a message no runner here can run', () => {
  attack('a consult to aa.gemini, held on this runner, is past its expiry by more than the skew allowed between machines: it is receipted expired, unpaid, never left queued', 'runner', 'blocked:expired', async () => {
    const w = await world('held-expired');
    const asked = await w.consult({ target: 'aa.gemini', ttlSeconds: 60 });
    // Past the skew allowed between machines too: no runner that can run it may still start it.
    const later = new Date(Date.now() + 60_000 + (LIMITS.clockSkewSeconds + 60) * 1000);
    const summary = await w.runner({ clock: () => later, transport: w.transport({ env: NO_GEMINI_KEY }), waiting: HELD_GEMINI }).runOnce();
    expect(w.server.requests).toHaveLength(0);
    expect(summary.held).toEqual([]);
    return outcome(w, asked.messageId);
  });

  attack('a consult to aa.gemini, held on this runner, before its expiry: it stays queued, unclaimed, and the pass says to wake once its expiry is past by the skew allowed between machines', 'runner', 'queued', async () => {
    const w = await world('held-live');
    const asked = await w.consult({ target: 'aa.gemini', ttlSeconds: 600 });
    const summary = await w.runner({ transport: w.transport({ env: NO_GEMINI_KEY }), waiting: HELD_GEMINI }).runOnce();
    expect(summary.held).toEqual([asked.messageId]);
    expect(summary.waiting).toContain(new Date(Date.parse(asked.envelope.expires_at) + LIMITS.clockSkewSeconds * 1000).toISOString().replace(/\.\d{3}Z$/, 'Z'));
    expect(w.server.requests).toHaveLength(0);
    return outcome(w, asked.messageId);
  });

  attack('a panel whose Gemini member is held here: the pass says to wake at the panel’s expiry, and past it every member is receipted expired, unpaid', 'runner', 'blocked:expired blocked:expired', async () => {
    const w = await world('panel-held');
    const panel = await enqueuePanel({ ledger: w.ledger, key: w.actors.coo, now: new Date(), repo: w.target, patterns: ['src/add.ts'], question: 'Is add() correct for NaN?', maxRuntimeSeconds: 60, ttlSeconds: 600 });
    const first = await w.runner({ transport: w.transport({ env: NO_GEMINI_KEY }), waiting: HELD_GEMINI }).runOnce();
    const expiry = (await readExpiry(w, panel.members[0]!.messageId))!;
    expect(first.waiting).toContain(expiry);
    const later = new Date(Date.parse(expiry) + 1000);
    await w.runner({ stateDir: join(w.dir, 'state-2'), clock: () => later, transport: w.transport({ env: NO_GEMINI_KEY }), waiting: HELD_GEMINI }).runOnce();
    expect(w.server.requests).toHaveLength(0);
    return (await Promise.all(panel.members.map((member) => outcome(w, member.messageId)))).join(' ');
  });


  attack('a dispatch to ea.codex, whose executor is missing on this runner (held at start), is past its expiry by more than the skew allowed between machines: it is receipted expired, nothing started', 'runner', 'blocked:expired', async () => {
    const w = await world('held-dispatch');
    const repo = join(w.dir, 'work');
    makeTargetRepo(repo);
    const { messageId } = await enqueueDispatch({ ledger: w.ledger, key: w.actors.coo, now: new Date(), repo, target: 'ea.codex', task: 'Fix add().', scope: ['src/**'], accept: ['it passes'], verify: ['true'], timeoutSeconds: 60, maxRuntimeSeconds: 60, ttlSeconds: 60 });
    let started = 0;
    const executors: ExecutorFactory = () => {
      started += 1;
      throw new Error('no executor is started for an expired dispatch');
    };
    const later = new Date(Date.now() + 60_000 + (LIMITS.clockSkewSeconds + 60) * 1000);
    await w.runner({ repo, executors, clock: () => later, waiting: new Map([['ea.codex', { code: 'EXECUTOR_CONFIG', message: 'codex is not on PATH' }]]) }).runOnce();
    expect(started).toBe(0);
    return outcome(w, messageId);
  });
});

describe('odd times', () => {
  attack('a consult dated 290 s back whose expiry passed before it landed (within the skew the ledger allows): the first pass receipts it expired, unpaid', 'runner', 'blocked:expired', async () => {
    const w = await world('born-expired');
    const asked = await w.consult({ now: new Date(Date.now() - 290_000), ttlSeconds: 200 });
    await w.runner().runOnce();
    expect(w.server.requests).toHaveLength(0);
    return outcome(w, asked.messageId);
  });
});

describe('a wake far off', () => {
  it('a watch whose pass waits on a time 40 days off (an expiry, a deadline years away) runs once and waits, never spinning', async () => {
    const gitdir = mkdtempSync(join(dir, 'far-wake-'));
    let passes = 0;
    let idle: () => void = () => undefined;
    const first = new Promise<void>((resolve) => (idle = resolve));
    const runner = {
      cutOffAt: null,
      heartbeatSeconds: null,
      runOnce: () => {
        passes += 1;
        return Promise.resolve({ receipts: 0, waiting: [new Date(Date.now() + 40 * 86_400_000).toISOString()], held: [], kept: [] });
      },
      checkKillSwitch: () => Promise.resolve(),
    } as unknown as Runner;
    const controller = new AbortController();
    const watching = watchLedger(runner, gitdir, { signal: controller.signal, onIdle: () => idle() });
    await first;
    // A timer past 2^31-1 ms fires after 1 ms: a spinning watch runs hundreds of passes in this time; a right one runs none more.
    await new Promise((resolve) => setTimeout(resolve, 300));
    controller.abort();
    await watching;
    expect(passes).toBe(1);
  });
});

/** The expires_at of a message's envelope. */
async function readExpiry(w: World, messageId: string): Promise<string | null> {
  const { readMessage } = await import('../../src/lane/envelope.js');
  const record = (await w.ledger.state()).messages.get(messageId);
  return record === undefined ? null : (await readMessage(w.ledger, record)).expires_at;
}
