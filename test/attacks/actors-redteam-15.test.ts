import { beforeAll, describe, expect, it } from 'vitest';
import { acknowledge } from '../../src/inbox/ack.js';
import { sendCommand } from '../../src/inbox/ceo-messages.js';
import type { CooMessage } from '../../src/schema/message.js';
import { attack, codeOf, useKit, type Kit } from '../helpers/attack-kit.js';
import { coo, json } from '../helpers/cli.js';
import { dispatchEnvelope, envelopeFile } from '../helpers/ledger.js';
import { connectMcp, structured } from '../helpers/mcp.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * The actor model under attack, round 15: who takes a CEO command up. Only the COO it is addressed
 * to does, by its ack or by work it starts under the command; an execution agent's or the CEO's own
 * message naming the command as its parent keeps no lapsed command standing for the COO.
 */

const dir = tempDir('actors-redteam-15');
const getKit = useKit(dir);
let kit: Kit;
beforeAll(() => {
  kit = getKit();
});

const HOUR_MS = 60 * 60_000;

/** A CEO command sent two hours ago that the COO had a minute to take up. */
async function lapsedCommand(text: string): Promise<{ id: string; sentAt: number; correlation: string }> {
  const sentAt = Date.now() - 2 * HOUR_MS;
  const { messageId } = await sendCommand({ ledger: kit.world.ledger, key: kit.world.actors.ceo, now: new Date(sentAt), text, ttlSeconds: 60 });
  const record = (await kit.world.ledger.state()).messages.get(messageId)!;
  return { id: messageId, sentAt, correlation: record.correlation };
}

/** A blocker from `source` to the COO with the command as its parent, dated within the command's minute. */
function blockerUnder(command: { id: string; sentAt: number; correlation: string }, source: string): CooMessage {
  return dispatchEnvelope(
    {
      source_actor: source,
      principal: source,
      target_actor: 'coo.hermes',
      intent: 'blocker',
      authority_class: 'evidence',
      about_message_id: null,
      blocker: { code: 'needs_decision', detail: 'about the command' },
      expected_receipt_schema: null,
      dispatch: undefined,
      payload_ref: undefined,
      payload_hash: undefined,
      context_pin: undefined,
      parent_message_id: command.id,
      causality_chain: [command.id],
      correlation_id: command.correlation,
      hop_count: 1,
      budget: { max_cost_usd: 0, max_runtime_seconds: 1, correlation_budget_remaining_usd: null },
    },
    new Date(command.sentAt + 10_000),
  );
}

describe("an execution agent's message under a CEO command it was never sent", () => {
  /**
   * Such a blocker is refused as it is written since the reply rule (rules/envelope.ts checkChain: an agent replies within
   * its own exchanges); history from before the rule, or a hookless remote, may still hold one: `then` runs with it in main.
   */
  async function withForeignBlocker(command: { id: string; sentAt: number; correlation: string }, then: () => Promise<unknown>): Promise<string> {
    const file = envelopeFile(blockerUnder(command, 'ea.codex'));
    expect(await kit.append([file], kit.keys.codex.key)).toBe('SCHEMA_INVALID');
    let code = 'not run';
    await kit.bypass({ [file.path]: file.bytes }, { key: kit.keys.codex.file }, async () => {
      code = await codeOf(then);
    });
    return code;
  }

  attack('keeps the command standing for a COO that acks it two hours after it lapsed', 'library', 'COMMAND_EXPIRED', async () => {
    const command = await lapsedCommand('Make add() right, EA probe.');
    return withForeignBlocker(command, () => acknowledge({ ledger: kit.world.ledger, key: kit.world.actors.coo, now: new Date(), messageId: command.id }));
  });
  attack('keeps the command standing for work the COO starts under it two hours after it lapsed', 'library', 'COMMAND_EXPIRED', async () => {
    const command = await lapsedCommand('Make add() right, EA probe for work.');
    return withForeignBlocker(command, () => kit.world.consult({ ledger: kit.world.ledger, now: new Date(), parentMessageId: command.id, question: 'Where is add() wrong now?' }));
  });
});

describe('the COO taking a command up in time', () => {
  it('its own work under the command within the minute keeps it standing: an ack two hours on is accepted', async () => {
    const command = await lapsedCommand('Make add() right, COO probe.');
    await kit.world.consult({ ledger: kit.world.ledger, now: new Date(command.sentAt + 10_000), parentMessageId: command.id, question: 'Where is add() wrong?' });
    expect(await codeOf(() => acknowledge({ ledger: kit.world.ledger, key: kit.world.actors.coo, now: new Date(), messageId: command.id }))).toBe('accepted');
  });
});

describe('coo show of a CEO command', () => {
  it('says a command the COO never took up lapsed, with its expires_at, and not of a live one or one taken up in time', async () => {
    const lapsed = await lapsedCommand('Make add() right, shown lapsed.');
    const taken = await lapsedCommand('Make add() right, shown taken up.');
    await acknowledge({ ledger: kit.world.ledger, key: kit.world.actors.coo, now: new Date(taken.sentAt + 10_000), messageId: taken.id });
    const { messageId: live } = await sendCommand({ ledger: kit.world.ledger, key: kit.world.actors.ceo, now: new Date(), text: 'Make add() right, shown live.', ttlSeconds: 3600 });
    const expiresAt = (await kit.world.ledger.state()).messages.get(lapsed.id)!.expiresAt;
    const shown = coo(['show', lapsed.id, '--ledger', kit.world.gitdir]);
    expect(shown.status).toBe(0);
    expect(shown.stdout).toContain(`  lapsed at ${expiresAt}: the COO never took it up`);
    expect(json<{ lapsed_at?: string }>(coo(['show', lapsed.id, '--ledger', kit.world.gitdir, '--json'])).lapsed_at).toBe(expiresAt);
    for (const id of [taken.id, live]) {
      const view = json<{ lapsed_at?: string; lane_state: string }>(coo(['show', id, '--ledger', kit.world.gitdir, '--json']));
      expect(view.lane_state).toBe(id === live ? 'awaiting_ack' : 'acknowledged');
      expect(view.lapsed_at).toBeUndefined();
      expect(coo(['show', id, '--ledger', kit.world.gitdir]).stdout).not.toContain('lapsed at');
    }
    const session = await connectMcp(kit.world);
    try {
      expect(structured<{ lapsed_at?: string }>(await session.call('show', { message_id: lapsed.id })).lapsed_at).toBe(expiresAt);
      expect(structured<{ lapsed_at?: string }>(await session.call('show', { message_id: live })).lapsed_at).toBeUndefined();
    } finally {
      await session.close();
    }
  });
});
