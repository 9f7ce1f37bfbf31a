import { join } from 'node:path';
import { afterAll, describe, expect } from 'vitest';
import { verifyLedger } from '../../src/audit/verify.js';
import { enqueuePanel } from '../../src/consult/enqueue.js';
import { readLog } from '../../src/ledger/log.js';
import type { Ledger } from '../../src/ledger/ledger.js';
import { appendTrustVersion } from '../../src/ledger/trust-update.js';
import type { ActorPolicy } from '../../src/schema/policy.js';
import { attack } from '../helpers/attack-kit.js';
import { makeWorld, type World } from '../helpers/lane.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * Review of the one-commit panel claim: a panel that waits is said once a pass for each member,
 * not once for each member it was judged from.
 */

const dir = tempDir('panel-claims-');
const closers: Array<() => Promise<void> | void> = [];
afterAll(async () => {
  for (const close of closers.reverse()) await close();
});

const REVIEW = (policy: ActorPolicy): ActorPolicy => ({ ...policy, panels: [{ name: 'review', from: 'coo.*', members: ['aa.chatgpt', 'aa.gemini', 'aa.claude'] }] });

async function world(name: string, policy = REVIEW): Promise<World> {
  const made = await makeWorld(join(dir, name), { policy });
  closers.push(() => made.close());
  return made;
}

describe('a panel that waits on this runner', () => {
  attack('a member whose route cannot be called here: one pass says each member waits once, and judges the panel once', 'runner', 'once each', async () => {
    const w = await world('waits-once');
    const panel = await enqueuePanel({ ledger: w.ledger, key: w.actors.coo, now: new Date(), repo: w.target, patterns: ['src/add.ts'], question: 'Is add() correct for NaN?', maxRuntimeSeconds: 60 });
    await w.runner({ transport: w.transport({ env: { OPENAI_API_KEY: 'sk-test-key', ANTHROPIC_API_KEY: 'sk-ant-test-key' } }) }).runOnce();
    const said = panel.members.map((member) => w.events.filter((event) => event.type === 'skipped' && event.messageId === member.messageId).length);
    expect(w.server.requests).toHaveLength(0);
    return said.every((count) => count === 1) ? 'once each' : `said ${said.join(', ')} times`;
  });
});

/** The ledger, whose `nth` receipt commit fails (its disk full, the process killed there): what came before it stays written. */
function failingAt(ledger: Ledger, nth: number): Ledger {
  let receipts = 0;
  return new Proxy(ledger, {
    get(target, prop) {
      const value: unknown = Reflect.get(target, prop);
      if (prop !== 'append' || typeof value !== 'function') return typeof value === 'function' ? value.bind(target) : value;
      return (options: { summary: string }) => {
        if (options.summary.startsWith('receipt ') && (receipts += 1) === nth) throw new Error('the ledger stopped here');
        return Reflect.apply(value, target, [options]);
      };
    },
  });
}

describe('a panel the ledger stops', () => {
  attack('the runner stops between the stop receipts of its members: the member left queued is not then paid alone', 'runner', 'unpaid', async () => {
    const GEMINI_FIRST = (policy: ActorPolicy): ActorPolicy => ({ ...policy, panels: [{ name: 'review', from: 'coo.*', members: ['aa.gemini', 'aa.chatgpt'] }] });
    const w = await world('stop-interrupted', GEMINI_FIRST);
    const policy = (await w.ledger.state()).policy!.doc;
    const models = { ...policy.models, 'gemini-3.1-pro': { ...policy.models['gemini-3.1-pro']!, input_usd_per_million: 400, output_usd_per_million: 400 } };
    await appendTrustVersion(w.ledger, { role: 'policy', document: { ...policy, version: undefined, models } }, w.actors.ceo, new Date());
    await enqueuePanel({ ledger: w.ledger, key: w.actors.coo, now: new Date(), repo: w.target, patterns: ['src/add.ts'], question: 'Is add() correct for NaN?', maxRuntimeSeconds: 60, maxCostUsd: 0.05 });
    await w.runner({ ledger: failingAt(w.ledger, 2) }).runOnce();
    await w.runner().runOnce();
    // The replay (coo verify) takes the members' claims and receipts written in one commit.
    const { findings } = await verifyLedger(w.gitdir, { full: true });
    expect(findings.map((finding) => finding.code)).toEqual([]);
    return w.server.requests.length === 0 ? 'unpaid' : `paid ${w.server.requests.length}`;
  });
});

describe('a panel claimed together', () => {
  attack('every member claimed in one commit, run and receipted: the replay (coo verify) takes the commit of several claims', 'runner', 'one claim commit, verified', async () => {
    const w = await world('claimed-together');
    await enqueuePanel({ ledger: w.ledger, key: w.actors.coo, now: new Date(), repo: w.target, patterns: ['src/add.ts'], question: 'Is add() correct for NaN?', maxRuntimeSeconds: 60 });
    await w.runner().runOnce();
    expect(w.server.requests).toHaveLength(3);
    const { findings } = await verifyLedger(w.gitdir, { full: true });
    const claimCommits = (await readLog(w.ledger.reader, w.ledger.trees, w.ledger.head(), await w.ledger.state(), 1000)).filter((entry) => entry.files.some((file) => file.endsWith('/claims/001.yaml')));
    return findings.length === 0 && claimCommits.length === 1 && claimCommits[0]!.files.filter((file) => file.endsWith('/claims/001.yaml')).length === 3 ? 'one claim commit, verified' : `${claimCommits.length} claim commits, findings ${JSON.stringify(findings)}`;
  });
});
