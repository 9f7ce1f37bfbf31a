import { join } from 'node:path';
import { afterAll, describe, expect } from 'vitest';
import { enqueuePanel, type PanelEnqueued } from '../../src/consult/enqueue.js';
import { attemptIdOf } from '../../src/authority/runnable.js';
import { folderOf } from '../../src/authority/state.js';
import { claimPath } from '../../src/ledger/layout.js';
import type { Ledger } from '../../src/ledger/ledger.js';
import { appendTrustVersion } from '../../src/ledger/trust-update.js';
import { toYaml } from '../../src/schema/strict-yaml.js';
import { isoSeconds } from '../../src/util/time.js';
import type { ActorPolicy } from '../../src/schema/policy.js';
import { attack, codeOf } from '../helpers/attack-kit.js';
import { blockersOf, makeWorld, receiptsOf, type World } from '../helpers/lane.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * Money, round 19: a panel is paid for whole or not at all, whichever runner looks at it. A member
 * one runner cannot run (its provider key is not there, its route is not configured) leaves every
 * member unclaimed there, for a runner that can run them all; a member the ledger stops (no price
 * for its model, the policy no longer allows it) stops every member, unpaid, with a coded blocker.
 */

const dir = tempDir('money-redteam-19');
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

function ask(w: World): Promise<PanelEnqueued> {
  return enqueuePanel({ ledger: w.ledger, key: w.actors.coo, now: new Date(), repo: w.target, patterns: ['src/add.ts'], question: 'Is add() correct for NaN?', maxRuntimeSeconds: 60 });
}

/** The runner's environment without the Gemini member's provider key: its route cannot be called here. */
const NO_GEMINI_KEY = { OPENAI_API_KEY: 'sk-test-key', ANTHROPIC_API_KEY: 'sk-ant-test-key' };

/** What each member of the panel came to: its attempts' receipts' statuses and blockers, or 'queued' with no attempt. */
async function outcome(w: World, panel: PanelEnqueued): Promise<string[]> {
  const state = await w.ledger.state();
  const out: string[] = [];
  for (const member of panel.members) {
    const record = state.messages.get(member.messageId)!;
    if (record.attempts.length === 0) {
      out.push(`${member.target} queued`);
      continue;
    }
    const receipts = await receiptsOf(w, member.messageId);
    out.push(`${member.target} ${receipts.map((receipt) => `${String(receipt['status'])}:${blockersOf(receipt).join(',')}`).join(' ') || 'claimed'}`);
  }
  return out;
}

describe('a panel one member of which this runner cannot run', () => {
  attack("the Gemini member's provider key is on no runner (the start-up check holds aa.gemini): the ChatGPT member is not paid beside it", 'runner', 'unpaid', async () => {
    const w = await world('held-member');
    const panel = await ask(w);
    const runner = w.runner({ transport: w.transport({ env: NO_GEMINI_KEY }), waiting: new Map([['aa.gemini', { code: 'ORACLE_CONFIG', message: 'GEMINI_API_KEY is not set' }]]) });
    await runner.runOnce();
    // Nothing is claimed, nothing is paid: both members stay queued, together, and the runner says why.
    expect(await outcome(w, panel)).toEqual(['aa.chatgpt queued', 'aa.gemini queued']);
    const chatgpt = panel.members[0]!.messageId;
    expect(w.events).toContainEqual(expect.objectContaining({ type: 'skipped', messageId: chatgpt, reason: expect.stringMatching(/panel member aa\.gemini cannot be run by this runner \(ORACLE_CONFIG: GEMINI_API_KEY is not set\)/) }));
    return w.server.requests.length === 0 ? 'unpaid' : `paid ${w.server.requests.length}`;
  });

  attack("the Gemini member's route cannot be called by a runner whose start-up never looked (its key gone since): the ChatGPT member is not paid beside it", 'runner', 'unpaid', async () => {
    const w = await world('unroutable-member');
    const panel = await ask(w);
    await w.runner({ transport: w.transport({ env: NO_GEMINI_KEY }) }).runOnce();
    expect(await outcome(w, panel)).toEqual(['aa.chatgpt queued', 'aa.gemini queued']);
    return w.server.requests.length === 0 ? 'unpaid' : `paid ${w.server.requests.length}`;
  });

  attack('a runner without the Gemini key leaves the panel; a runner with every key then runs it whole', 'runner', 'whole', async () => {
    const w = await world('split-runners');
    const panel = await ask(w);
    await w.runner({ transport: w.transport({ env: NO_GEMINI_KEY }), waiting: new Map([['aa.gemini', { code: 'ORACLE_CONFIG', message: 'GEMINI_API_KEY is not set' }]]) }).runOnce();
    expect(w.server.requests).toHaveLength(0);
    await w.runner({ stateDir: join(w.dir, 'state-2') }).runOnce();
    expect(await outcome(w, panel)).toEqual(['aa.chatgpt succeeded:', 'aa.gemini succeeded:']);
    return w.server.requests.length === 2 ? 'whole' : `paid ${w.server.requests.length}`;
  });
});

describe('a panel one member of which the ledger stops', () => {
  attack("the CEO moves a queued panel's Gemini member to a model the policy does not price: the registry is refused, so no member can be left unpriced", 'library', 'PANEL_INVALID', async () => {
    const w = await world('unpriced-member');
    await ask(w);
    const registry = (await w.ledger.state()).registry!.doc;
    const actors = registry.actors.map((actor) => (actor.id === 'aa.gemini' ? { ...actor, transport: { ...actor.transport!, model: 'gemini-unpriced' } } : actor));
    return codeOf(() => appendTrustVersion(w.ledger, { role: 'registry', document: { ...registry, version: undefined, actors } }, w.actors.ceo, new Date()));
  });

  attack("a budget the ChatGPT member fits and the dearer Gemini member does not: every member is blocked, unpaid, budget_preflight", 'runner', 'budget_preflight budget_preflight', async () => {
    const w = await world('member-budget');
    const policy = (await w.ledger.state()).policy!.doc;
    const models = { ...policy.models, 'gemini-3.1-pro': { ...policy.models['gemini-3.1-pro']!, input_usd_per_million: 400, output_usd_per_million: 400 } };
    await appendTrustVersion(w.ledger, { role: 'policy', document: { ...policy, version: undefined, models } }, w.actors.ceo, new Date());
    const panel = await enqueuePanel({ ledger: w.ledger, key: w.actors.coo, now: new Date(), repo: w.target, patterns: ['src/add.ts'], question: 'Is add() correct for NaN?', maxRuntimeSeconds: 60, maxCostUsd: 0.05 });
    await w.runner().runOnce();
    expect(w.server.requests).toHaveLength(0);
    const lines = await outcome(w, panel);
    return lines.map((line) => line.split(':')[1]).join(' ');
  });

  attack('the Gemini member is held on this runner and the ledger stops the panel (it expired): every member is receipted, unpaid, none left queued', 'runner', 'expired expired', async () => {
    const w = await world('expired-held');
    const panel = await enqueuePanel({ ledger: w.ledger, key: w.actors.coo, now: new Date(), repo: w.target, patterns: ['src/add.ts'], question: 'Is add() correct for NaN?', maxRuntimeSeconds: 60, ttlSeconds: 60 });
    const later = new Date(Date.now() + 120_000);
    await w.runner({ clock: () => later, transport: w.transport({ env: NO_GEMINI_KEY }), waiting: new Map([['aa.gemini', { code: 'ORACLE_CONFIG', message: 'GEMINI_API_KEY is not set' }]]) }).runOnce();
    expect(w.server.requests).toHaveLength(0);
    const lines = await outcome(w, panel);
    return lines.map((line) => line.split(' ')[1]!.split(':')[1]).join(' ');
  });
});

describe("a panel's claims", () => {
  attack("another runner's claim lands between this runner's pre-flight and its claims, leaving the day room for one member and not both: no member is claimed or paid", 'runner', 'unpaid', async () => {
    // Both members priced alike, so that each may spend what the other may.
    const w = await makeWorld(join(dir, 'joint-claim'), { policy: (policy) => ({ ...REVIEW(policy), budgets: { ...policy.budgets, daily_cost_cap_usd: 2 }, models: { ...policy.models, 'gemini-3.1-pro': { ...policy.models['gpt-5.5']! } } }) });
    closers.push(() => w.close());
    const panel = await enqueuePanel({ ledger: w.ledger, key: w.actors.coo, now: new Date(), repo: w.target, patterns: ['src/add.ts'], question: 'Is add() correct for NaN?', maxRuntimeSeconds: 60, maxCostUsd: 0.1 });
    const elsewhere = await w.consult({ maxCostUsd: 2, idempotencyKey: 'elsewhere' });
    let moved = false;
    // The ledger as this runner sees it: when its first claim is written, another runner's claim of $2 less one and a half members' allowances has just landed.
    const ledger = new Proxy(w.ledger, {
      get(target, prop) {
        if (prop === 'append') {
          return async (options: Parameters<Ledger['append']>[0]) => {
            if (!moved && options.summary.startsWith('claim ')) {
              moved = true;
              const files = typeof options.files === 'function' ? await options.files(await target.state()) : options.files;
              const allowance = Number(/allowance_usd: ([\d.]+)/.exec(files[0]!.bytes.toString('utf8'))![1]);
              const record = (await target.state()).messages.get(elsewhere.messageId)!;
              const claim = { schema_version: 'claim.v0', message_id: record.id, attempt_id: attemptIdOf(record, 1), attempt_number: 1, runner_id: 'run-elsewhere', transport_session_id: 'session-elsewhere', claimed_at: isoSeconds(new Date()), allowance_usd: Number((2 - 1.5 * allowance).toFixed(6)) };
              await target.append({ files: [{ path: claimPath(folderOf(record), 1), bytes: Buffer.from(toYaml(claim)) }], key: w.actors.coo, now: new Date(), summary: `claim ${record.id} attempt 1` });
            }
            return target.append(options);
          };
        }
        const value: unknown = Reflect.get(target, prop, target);
        return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
      },
    });
    await w.runner({ ledger, monotonic: () => 0 }).runOnce();
    expect(moved).toBe(true);
    expect(await outcome(w, panel)).toEqual(['aa.chatgpt queued', 'aa.gemini queued']);
    return w.server.requests.length === 0 ? 'unpaid' : `paid ${w.server.requests.length}`;
  });
});
