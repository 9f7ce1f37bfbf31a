import { describe, expect, it } from 'vitest';
import { enqueuePanel } from '../../src/consult/enqueue.js';
import { appendEnvelope } from '../../src/ledger/append-envelope.js';
import { planEnvelope } from '../../src/ledger/envelope-plan.js';
import type { ActorPolicy } from '../../src/schema/policy.js';
import { toYaml } from '../../src/schema/strict-yaml.js';
import { codeOfAsync } from '../helpers/codes.js';
import { worlds } from '../helpers/lane.js';
import { type Answer, call, rawSession, refusal } from '../helpers/mcp-raw.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * Idempotency keys a client gives, and the numbers its arguments carry. A panel's member is written
 * under `<key>~<member>`, and a key given with a `~` could spell it: a consult under `k~aa.chatgpt`
 * left the panel asked later under `k` refused for that member as a key reused. And a number JSON
 * can write but a double cannot hold (1e400, 1e-400) was refused in zod's words for what it was
 * read as ("expected number, received Infinity"; "expected number to be >0" of 1e-400).
 */
const fresh = worlds(tempDir('mcp-redteam-37-'));
const review = (policy: ActorPolicy): ActorPolicy => ({ ...policy, panels: [{ name: 'review', from: 'coo.*', members: ['aa.chatgpt', 'aa.claude'] }] });
const ASK = { files: ['src/add.ts'], prompt: 'Is add() correct for NaN?' };

/** The text of a tool's answer: its error or its result. */
const textOf = (answer: Answer): string => answer.result?.content?.[0]?.text ?? answer.error?.message ?? '';
const messagesOf = async (w: Awaited<ReturnType<typeof fresh>>): Promise<number> => (await w.ledger.state()).messages.size;

describe('an idempotency key given with the character that joins a panel member key', () => {
  it("refuses a consult under k~aa.chatgpt, writing nothing, and the panel asked under k then queues both members", async () => {
    const w = await fresh({ policy: review });
    const session = await rawSession(w);
    try {
      const before = await messagesOf(w);
      const single = await session.ask(call(1, 'consult', { ...ASK, to: 'aa.chatgpt', idempotency_key: 'k~aa.chatgpt' }), 1);
      expect(refusal(single)).toBe('tool error USAGE');
      expect(textOf(single)).toContain('Give a key without "~"');
      expect(await messagesOf(w)).toBe(before);
      const panel = await session.ask(call(2, 'consult', { ...ASK, to: ['aa.chatgpt', 'aa.claude'], idempotency_key: 'k' }), 2);
      expect(refusal(panel)).toBe('answered');
      const members = (panel.result?.structuredContent?.['panel'] as { members: Array<{ target: string }> }).members;
      expect(members.map((member) => member.target)).toEqual(['aa.chatgpt', 'aa.claude']);
      const again = await session.ask(call(3, 'consult', { ...ASK, to: ['aa.chatgpt', 'aa.claude'], idempotency_key: 'k' }), 3);
      expect([refusal(again), again.result?.structuredContent?.['existing']]).toEqual(['answered', true]);
      expect(await messagesOf(w)).toBe(before + 2);
    } finally {
      await session.close();
    }
  });

  it('refuses the same key from a dispatch over MCP, a panel asked under a~b, and an envelope written by hand', async () => {
    const w = await fresh({ policy: review });
    const session = await rawSession(w);
    try {
      const before = await messagesOf(w);
      const dispatch = await session.ask(call(1, 'dispatch', { to: 'ea.codex', task: 'fix add', scope: ['src/**'], accept: ['add works'], verify: ['true'], idempotency_key: 'k~aa.chatgpt' }), 1);
      expect([refusal(dispatch), textOf(dispatch).includes('Give a key without "~"')]).toEqual(['tool error USAGE', true]);
      const panel = codeOfAsync(() => enqueuePanel({ ledger: w.ledger, key: w.actors.coo, now: new Date(), repo: w.target, patterns: ASK.files, question: ASK.prompt, members: ['aa.chatgpt', 'aa.claude'], idempotencyKey: 'a~b' }));
      expect(await panel).toBe('USAGE');
      const now = new Date();
      const plan = planEnvelope(await w.ledger.state(), w.actors.codex, 'coo.hermes', { maxRuntimeSeconds: 1 }, now, 'blocker');
      const blocker = { ...plan.header, idempotency_key: 'k~aa.chatgpt', intent: 'blocker', authority_class: 'evidence', budget: { max_cost_usd: 0, max_runtime_seconds: 1 }, about_message_id: null, blocker: { code: 'needs_decision', detail: 'stuck' }, expected_receipt_schema: null };
      expect(await codeOfAsync(() => appendEnvelope(w.ledger, Buffer.from(toYaml(blocker)), new Map(), w.actors.codex, now))).toBe('USAGE');
      expect(await messagesOf(w)).toBe(before);
    } finally {
      await session.close();
    }
  });
});
