import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { enqueueCrossCheck } from '../../src/consult/cross-check.js';
import { enqueuePanel } from '../../src/consult/enqueue.js';
import { appendTrustVersion } from '../../src/ledger/trust-update.js';
import type { ActorPolicy } from '../../src/schema/policy.js';
import type { ActorRegistry } from '../../src/schema/registry.js';
import { attack, codeOf } from '../helpers/attack-kit.js';
import { blockersOf, makeWorld, receiptsOf, type World } from '../helpers/lane.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * The actor model, attacked where the registry changes under advice already given: an answer is
 * the model's that gave it, whatever the registry says of its agent since, so its challenger is
 * told apart from that model too.
 */

const dir = tempDir('actors-redteam-9');

type Actor = ActorRegistry['actors'][number];

/** An advisory agent reaching `model` through OpenRouter. */
function viaOpenRouter(id: string, model: string): Actor {
  return { id, class: 'advisory_agent', description: `${model} through OpenRouter.`, keys: [], transport: { kind: 'oracle', engine: 'api', model, provider_key_env: 'OPENROUTER_API_KEY', route: 'openrouter' } };
}

/** The registry in force with `change` applied to its actors. */
async function moveActors(w: World, change: (actors: readonly Actor[]) => Actor[]): Promise<void> {
  const registry = (await w.ledger.state()).registry!.doc;
  await appendTrustVersion(w.ledger, { role: 'registry', document: { ...registry, version: undefined, actors: change(registry.actors) } }, w.actors.ceo, new Date());
}

const withCrossChecks = (policy: ActorPolicy): ActorPolicy => ({
  ...policy,
  models: { ...policy.models, 'openai/gpt-5.5': policy.models['gpt-5.5']!, 'gpt-5.4': policy.models['gpt-5.5']! },
  edges: [...policy.edges, { from: 'aa.*', to: 'aa.*', intents: ['cross_check'], requires: [] }],
});

describe("an answer is challenged by another model than the one that gave it, whatever the registry says of its agent since", () => {
  let w: World;
  let answered: string;
  beforeAll(async () => {
    w = await makeWorld(join(dir, 'moved'), { policy: withCrossChecks });
    // aa.second_opinion is ChatGPT's model again, through OpenRouter: it may not challenge aa.chatgpt's answer.
    await moveActors(w, (actors) => [...actors, viaOpenRouter('aa.second_opinion', 'openai/gpt-5.5')]);
    answered = (await w.consult()).messageId;
    await w.runner().runOnce();
    expect((await receiptsOf(w, answered)).map((receipt) => [receipt['status'], receipt['model']])).toEqual([['succeeded', 'gpt-5.5']]);
  });
  afterAll(async () => w.close());

  const crossCheck = (target: string) => enqueueCrossCheck({ ledger: w.ledger, key: w.actors.coo, now: new Date(), of: answered, target, maxRuntimeSeconds: 60 });

  attack("a cross-check of ChatGPT's answer by ChatGPT's model under OpenRouter's name, while the registry still gives aa.chatgpt that model", 'library', 'POLICY_INTENT_NOT_ALLOWED', () => codeOf(() => crossCheck('aa.second_opinion')));

  // The registry moves aa.chatgpt to another model: the answer above is still gpt-5.5's.
  attack("the same cross-check once the registry has moved aa.chatgpt to another model: the answer is still its model's", 'library', 'POLICY_INTENT_NOT_ALLOWED', async () => {
    await moveActors(w, (actors) => actors.map((actor) => (actor.id === 'aa.chatgpt' ? { ...actor, transport: { ...actor.transport!, model: 'gpt-5.4' } } : actor)));
    return codeOf(() => crossCheck('aa.second_opinion'));
  });

  it('lets Claude challenge the answer: the attacks above are refused for the model alone', async () => {
    expect(await codeOf(() => crossCheck('aa.claude'))).toBe('accepted');
  });
});

describe("a queued cross-check is held again before it is claimed to the model that gave the answer", () => {
  let w: World;
  beforeAll(async () => {
    w = await makeWorld(join(dir, 'queued'), { policy: withCrossChecks });
  });
  afterAll(async () => w.close());

  attack("a cross-check written for Claude, whose challenger the registry then moves to the answering model (gpt-5.5) as it moves the author away", 'runner', 'policy_denied', async () => {
    const answered = (await w.consult()).messageId;
    await w.runner().runOnce();
    const { messageId } = await enqueueCrossCheck({ ledger: w.ledger, key: w.actors.coo, now: new Date(), of: answered, target: 'aa.claude', maxRuntimeSeconds: 60 });
    await moveActors(w, (actors) => {
      const chatgpt = actors.find((actor) => actor.id === 'aa.chatgpt')!.transport!;
      return actors.map((actor) => (actor.id === 'aa.chatgpt' ? { ...actor, transport: { ...chatgpt, model: 'gpt-5.4' } } : actor.id === 'aa.claude' ? { ...actor, transport: chatgpt } : actor));
    });
    await w.runner().runOnce();
    const [receipt] = await receiptsOf(w, messageId);
    return receipt!['status'] === 'succeeded' ? 'succeeded' : blockersOf(receipt!).join(',');
  });
});

describe("a panel member's retry is held to the models its siblings answered with", () => {
  let w: World;
  beforeAll(async () => {
    w = await makeWorld(join(dir, 'panel'), {
      policy: (policy) => ({
        ...policy,
        models: { ...policy.models, 'gpt-5.4': policy.models['gpt-5.5']! },
        retries: { ...policy.retries, backoff_base_seconds: 120, backoff_max_seconds: 120 },
        panels: [{ name: 'review', from: 'coo.*', members: ['aa.chatgpt', 'aa.claude', 'aa.gemini'] }],
      }),
    });
  });
  afterAll(async () => w.close());

  attack("Claude's retry once the registry has moved Claude to the model ChatGPT answered with (gpt-5.5) and ChatGPT away from it", 'runner', 'policy_denied', async () => {
    // Claude is rate-limited once; ChatGPT and Gemini answer.
    w.server.setModelModes('claude-sonnet-4-6', ['rate-limit', 'ok']);
    const panel = await enqueuePanel({ ledger: w.ledger, key: w.actors.coo, now: new Date(), repo: w.target, patterns: ['src/add.ts'], question: 'Is add() correct for NaN?', maxRuntimeSeconds: 60 });
    await w.runner().runOnce();
    const claude = panel.members.find((member) => member.target === 'aa.claude')!.messageId;
    expect((await receiptsOf(w, claude)).map((receipt) => [receipt['status'], receipt['next_attempt_at'] !== null])).toEqual([['failed', true]]);
    await moveActors(w, (actors) => {
      const chatgpt = actors.find((actor) => actor.id === 'aa.chatgpt')!.transport!;
      return actors.map((actor) => (actor.id === 'aa.chatgpt' ? { ...actor, transport: { ...chatgpt, model: 'gpt-5.4' } } : actor.id === 'aa.claude' ? { ...actor, transport: chatgpt } : actor));
    });
    // Runners of one pass each, their clocks past the retry's time: the first sees the retry, the second claims it.
    const later = (seconds: number) => new Date(Date.now() + seconds * 1000);
    await w.runner({ clock: () => later(150), monotonic: () => 1_000_000 }).runOnce();
    await w.runner({ clock: () => later(300), monotonic: () => 1_150_000 }).runOnce();
    const receipts = await receiptsOf(w, claude);
    expect(receipts).toHaveLength(2);
    return receipts[1]!['status'] === 'succeeded' ? 'succeeded' : blockersOf(receipts[1]!).join(',');
  });
});
