import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { acknowledge } from '../../src/inbox/ack.js';
import { sendCommand } from '../../src/inbox/ceo-messages.js';
import { attack, codeOf } from '../helpers/attack-kit.js';
import { makeWorld, type World } from '../helpers/lane.js';
import { connectMcp, structured, textOf, type McpSession } from '../helpers/mcp.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * The ack tool, attacked by an agent COO: it acknowledges only what reached it, only what exists,
 * and each item once. Each refusal is a coded tool error whose next step is about acknowledging
 * (not the consult advice the same code carries for other tools), and nothing lands.
 */

const dir = tempDir('mcp-ack-attacks');
let w: World;
let session: McpSession;
let commandId: string;

beforeAll(async () => {
  w = await makeWorld(join(dir, 'world'));
  session = await connectMcp(w);
  commandId = (await sendCommand({ ledger: w.ledger, key: w.actors.ceo, now: new Date(), text: 'Ship it.' })).messageId;
});
afterAll(async () => {
  await session.close();
  await w.close();
});

async function acks(): Promise<number> {
  return [...(await w.ledger.state()).messages.values()].filter((record) => record.intent === 'ack').length;
}

/** The ack tool's refusal: its code, with the next step checked to be about the inbox; 'accepted' when it was not refused. */
async function ackCode(args: Record<string, unknown>, step: RegExp): Promise<string> {
  const before = await acks();
  const result = await session.call('ack', args);
  if (result.isError !== true) return 'accepted';
  const [head, next] = textOf(result).split('\n');
  expect(next).toMatch(step);
  expect(next).not.toMatch(/consult/);
  expect(await acks()).toBe(before);
  return head!.split(':')[0]!;
}

describe('the ack tool acknowledges what reached the COO, once', () => {
  attack('an ack over MCP of a consult the COO queued that has no answer: nothing addressed to it', 'library', 'POLICY_INTENT_NOT_ALLOWED', async () => {
    const consult = await w.consult();
    return ackCode({ message_id: consult.messageId }, /inbox tool/);
  });

  attack('an ack over MCP of a well-formed message id the ledger never held', 'library', 'MESSAGE_UNKNOWN', () => ackCode({ message_id: 'msg_00000000000000000000000000' }, /inbox tool lists/));

  it('an ack called again with the same note returns the acknowledgement already there', async () => {
    const first = structured<{ message_id: string; existing: boolean }>(await session.call('ack', { message_id: commandId, note: 'on it' }));
    const again = structured<{ message_id: string; existing: boolean }>(await session.call('ack', { message_id: commandId, note: 'on it' }));
    expect([first.existing, again.existing, again.message_id]).toEqual([false, true, first.message_id]);
    expect(await acks()).toBe(1);
  });

  attack('a second ack over MCP of the same item with another note', 'library', 'MESSAGE_DUPLICATE', () => ackCode({ message_id: commandId, note: 'changed my mind' }, /acknowledged already/));

  attack('a second ack over MCP of the same item without the note', 'library', 'MESSAGE_DUPLICATE', () => ackCode({ message_id: commandId }, /acknowledged already/));

  attack('a second acknowledgement through the library with another note', 'library', 'MESSAGE_DUPLICATE', () => codeOf(() => acknowledge({ ledger: w.ledger, key: w.actors.coo, now: new Date(), messageId: commandId, note: 'again' })));

  attack("an ack over MCP of the COO's own acknowledgement", 'library', 'POLICY_INTENT_NOT_ALLOWED', async () => {
    const ack = [...(await w.ledger.state()).messages.values()].find((record) => record.intent === 'ack')!;
    return ackCode({ message_id: ack.id }, /inbox tool/);
  });
});
