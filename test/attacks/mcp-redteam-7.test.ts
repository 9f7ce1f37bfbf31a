import { describe, expect, it } from 'vitest';
import { sendCommand } from '../../src/inbox/ceo-messages.js';
import { worlds } from '../helpers/lane.js';
import { LIMITS } from '../../src/limits.js';
import { call, line, rawSession, refusal } from '../helpers/mcp-raw.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * `coo mcp` against an agent COO whose one hostile action is a key: a consult, a dispatch or an
 * adoption whose idempotency_key is the one the COO's acknowledgement of an inbox item is written
 * under (`ack-<message id>`). The ack tool takes no key, and the COO's slot of keys is one for all
 * its envelopes, so the item could never be acknowledged again: each ack was refused as a key
 * reused. The form is the acknowledgements' alone, refused for any other envelope by the validator.
 * And two acks of one item sent at once with different notes: the second was refused as a key
 * reused (give a new idempotency_key, which the ack tool does not take), not as the second
 * acknowledgement it is, which it is when sent after the first.
 * And names no SDK sends: a resource URI that is no URI, answered as the server's own failure ("report
 * it to the operator"), and a tool name or URI of megabytes, echoed whole in the answer and the log.
 */
const fresh = worlds(tempDir('mcp-redteam-7-'));

describe("coo mcp asked to write under the key of an acknowledgement", () => {
  it('refuses a consult and a dispatch whose idempotency_key is ack-<an inbox item>, writes nothing, and the item is acknowledged after', async () => {
    const w = await fresh();
    const commandId = (await sendCommand({ ledger: w.ledger, key: w.actors.ceo, now: new Date(), text: 'Ship it.' })).messageId;
    const session = await rawSession(w);
    try {
      const head = w.ledger.head();
      const squatted = `ack-${commandId}`;
      const consult = await session.ask(call(1, 'consult', { to: 'aa.chatgpt', files: ['src/add.ts'], prompt: 'Is add() right?', idempotency_key: squatted }), 1);
      expect(refusal(consult)).toBe('tool error IDEMPOTENCY_CONFLICT');
      expect(consult.result?.content?.[0]?.text).toContain(`"${squatted}" is the key of the acknowledgement of ${commandId}`);
      const dispatch = await session.ask(call(2, 'dispatch', { to: 'ea.codex', task: 'Fix add().', scope: ['src/**'], accept: ['add(1, 2) is 3'], verify: ['true'], idempotency_key: squatted }), 2);
      expect(refusal(dispatch)).toBe('tool error IDEMPOTENCY_CONFLICT');
      expect(w.ledger.head()).toBe(head);
      // A key that only starts the same way names no message: it is any request's.
      const other = await session.ask(call(3, 'consult', { to: 'aa.chatgpt', files: ['src/add.ts'], prompt: 'Is add() right?', idempotency_key: 'ack-later' }), 3);
      expect(refusal(other)).toBe('answered');
      const ack = await session.ask(call(4, 'ack', { message_id: commandId, note: 'On it.' }), 4);
      expect([refusal(ack), ack.result?.structuredContent?.['acknowledges'], ack.result?.structuredContent?.['existing']]).toEqual(['answered', commandId, false]);
    } finally {
      await session.close();
    }
  });
});

describe('coo mcp asked to acknowledge one item twice at once', () => {
  it('writes one acknowledgement, answers the same note with it and another note as a second acknowledgement, as it does one after the other', async () => {
    const w = await fresh();
    const commandId = (await sendCommand({ ledger: w.ledger, key: w.actors.ceo, now: new Date(), text: 'Ship it.' })).messageId;
    const session = await rawSession(w);
    try {
      const from = session.answers.length;
      session.stdin.write([call(1, 'ack', { message_id: commandId, note: 'On it.' }), call(2, 'ack', { message_id: commandId, note: 'On it.' }), call(3, 'ack', { message_id: commandId, note: 'Not now.' })].join(''));
      const [first, same, other] = [await session.answer(1, from), await session.answer(2, from), await session.answer(3, from)];
      const ackId = first.result?.structuredContent?.['message_id'];
      expect([refusal(first), refusal(same), same.result?.structuredContent?.['message_id']]).toEqual(['answered', 'answered', ackId]);
      expect(refusal(other)).toBe('tool error MESSAGE_DUPLICATE');
      expect(other.result?.content?.[0]?.text).toContain(`was acknowledged by ${String(ackId)}, once for all`);
      const after = await session.ask(call(4, 'ack', { message_id: commandId, note: 'Not now.' }), 4);
      expect(refusal(after)).toBe('tool error MESSAGE_DUPLICATE');
      const acks = [...(await w.ledger.state()).messages.values()].filter((record) => record.intent === 'ack');
      expect(acks.map((record) => record.id)).toEqual([ackId]);
    } finally {
      await session.close();
    }
  });
});

describe('coo mcp asked for a resource by no URI, or for a tool or resource by a name of megabytes', () => {
  it(`refuses each as the client's mistake with a coded error of bounded size, and answers a name of ${LIMITS.mcpNameChars} characters as an unknown one`, async () => {
    const w = await fresh();
    const session = await rawSession(w);
    try {
      const head = w.ledger.head();
      const huge = 'x'.repeat(300_000);
      const cases: ReadonlyArray<readonly [string, Record<string, unknown>]> = [
        ['no URI', { method: 'resources/read', params: { uri: 'not a uri' } }],
        ['a URI cut short', { method: 'resources/read', params: { uri: 'http://[::1' } }],
        ['a URI of megabytes', { method: 'resources/read', params: { uri: `coo://messages/${huge}/envelope` } }],
        ['a tool name of megabytes', { method: 'tools/call', params: { name: huge, arguments: {} } }],
      ];
      for (const [index, [what, message]] of cases.entries()) {
        const found = await session.ask(line({ id: index + 1, ...message }), index + 1);
        expect([what, refusal(found)]).toEqual([what, '-32602 MCP_MESSAGE_INVALID']);
        expect(JSON.stringify(found).length).toBeLessThan(1_000);
      }
      const bound = await session.ask(call(10, 'y'.repeat(LIMITS.mcpNameChars), {}), 10);
      expect(refusal(bound)).toBe('tool error USAGE');
      expect(refusal(await session.ask(call(11, 'verify', {}), 11))).toBe('answered');
      expect(w.ledger.head()).toBe(head);
    } finally {
      await session.close();
    }
  });
});
