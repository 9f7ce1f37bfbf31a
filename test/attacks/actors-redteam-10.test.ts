import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { emptyState, stateFromJson, stateToJson, type MessageRecord } from '../../src/authority/state.js';
import { enqueuePanel } from '../../src/consult/enqueue.js';
import { appendTrustVersion } from '../../src/ledger/trust-update.js';
import type { ActorRegistry } from '../../src/schema/registry.js';
import { attack } from '../helpers/attack-kit.js';
import { claimedByAGoneRunner } from '../helpers/gone-runner.js';
import { blockersOf, makeWorld, receiptsOf, type World } from '../helpers/lane.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * The actor model, attacked where a panel member's answer is still being given when the registry
 * changes: the model its claimed attempt was sent to is the model its answer will be, so a sibling
 * the registry has since moved onto that model is one model with it.
 */

const dir = tempDir('actors-redteam-10');

type Actor = ActorRegistry['actors'][number];

/** The registry in force with `change` applied to its actors. */
async function moveActors(w: World, change: (actors: readonly Actor[]) => Actor[]): Promise<void> {
  const registry = (await w.ledger.state()).registry!.doc;
  await appendTrustVersion(w.ledger, { role: 'registry', document: { ...registry, version: undefined, actors: change(registry.actors) } }, w.actors.ceo, new Date());
}

describe("a panel member is held to the model a sibling's attempt in flight was claimed on", () => {
  let w: World;
  beforeAll(async () => {
    w = await makeWorld(join(dir, 'in-flight'), {
      policy: (policy) => ({
        ...policy,
        models: { ...policy.models, 'gpt-5.4': policy.models['gpt-5.5']! },
        panels: [{ name: 'review', from: 'coo.*', members: ['aa.chatgpt', 'aa.claude'] }],
      }),
    });
  });
  afterAll(async () => w.close());

  attack("Claude's member, once the registry has moved Claude onto the model ChatGPT's claimed attempt was sent to (gpt-5.5) and ChatGPT away from it", 'runner', 'policy_denied', async () => {
    const panel = await enqueuePanel({ ledger: w.ledger, key: w.actors.coo, now: new Date(), repo: w.target, patterns: ['src/add.ts'], question: 'Is add() correct for NaN?', maxRuntimeSeconds: 60 });
    const chatgpt = panel.members.find((member) => member.target === 'aa.chatgpt')!.messageId;
    const claude = panel.members.find((member) => member.target === 'aa.claude')!.messageId;
    // Another runner has ChatGPT's member in flight on gpt-5.5: its receipt has not landed.
    await claimedByAGoneRunner(w, chatgpt, 0.5, new Date());
    await moveActors(w, (actors) => {
      const transport = actors.find((actor) => actor.id === 'aa.chatgpt')!.transport!;
      return actors.map((actor) => (actor.id === 'aa.chatgpt' ? { ...actor, transport: { ...transport, model: 'gpt-5.4' } } : actor.id === 'aa.claude' ? { ...actor, transport } : actor));
    });
    expect((await w.ledger.state()).messages.get(chatgpt)!.attempts.map((attempt) => attempt.receipt)).toEqual([null]);
    await w.runner().runOnce();
    const receipts = await receiptsOf(w, claude);
    expect(receipts).toHaveLength(1);
    expect(JSON.stringify(receipts[0]!['blockers'])).toContain('PANEL_INVALID: panel');
    expect(JSON.stringify(receipts[0]!['blockers'])).toContain('aa.chatgpt and aa.claude are one model (gpt-5.5)');
    return receipts[0]!['status'] === 'succeeded' ? 'succeeded' : blockersOf(receipts[0]!).join(',');
  });
});

describe('a checkpoint keeps the model an attempt was claimed on and the model its receipt names', () => {
  it('reads back both through a JSON round trip', () => {
    const attempt = {
      number: 1,
      attemptId: 'att',
      claim: { path: 'c.yaml', session: 's', runner: 'r', at: '2026-12-05T00:00:00Z', seq: 3, model: 'gpt-5.5' },
      receipt: { path: 'r.yaml', status: 'succeeded' as const, blockers: [], costUsd: 0, nextAttemptAt: null, createdAt: '2026-12-05T00:00:01Z', seq: 4, model: 'gpt-5.5' },
    };
    const record = { id: 'msg', attempts: [attempt] } as unknown as MessageRecord;
    const state = { ...emptyState(), messages: new Map([['msg', record]]) };
    const back = stateFromJson(JSON.parse(JSON.stringify(stateToJson(state))));
    expect(back.messages.get('msg')!.attempts[0]).toEqual(attempt);
  });
});
