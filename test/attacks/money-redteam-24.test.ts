import { beforeAll, describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { enqueuePanel } from '../../src/consult/enqueue.js';
import { sendCommand } from '../../src/inbox/ceo-messages.js';
import { costUsd, judgedSpend, MIN_OUTPUT_TOKENS, sharedAllowanceRefusal } from '../../src/lane/budget.js';
import { claimPath, messageFolder, receiptPath } from '../../src/ledger/layout.js';
import type { NewFile } from '../../src/ledger/ledger.js';
import type { EaDispatchMessage } from '../../src/schema/message.js';
import { toYaml } from '../../src/schema/strict-yaml.js';
import { isoSeconds } from '../../src/util/time.js';
import { attemptIdOf } from '../../src/authority/runnable.js';
import { attack, useKit, type Kit } from '../helpers/attack-kit.js';
import { claimFileOn } from '../helpers/claim-files.js';
import { dispatchEnvelope, eaReceiptDoc, messageFiles } from '../helpers/ledger.js';
import { blockersOf, receiptsOf, worlds } from '../helpers/lane.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * A CEO command's budget (`budget_usd`) caps what its correlation spends in all. Work whose chain
 * starts at the command is held to it; so is a message with no parent that took the command's
 * `correlation_id` (`coo consult --correlation`, the MCP tools' correlation_id): its chain never
 * reaches the command, but its spend counts in the command's correlation.
 */

const dir = tempDir('coo-attack-money-redteam-24-');
const getKit = useKit(dir);
let kit: Kit;
beforeAll(() => {
  kit = getKit();
});
const fresh = worlds(join(dir, 'worlds'));

const at = (offsetSeconds: number): string => isoSeconds(new Date(Date.now() + offsetSeconds * 1000));
const folderOf = (message: EaDispatchMessage): string => messageFolder(message.message_id, message.created_at);

/**
 * A $2 command, a $1.50 dispatch under it whose attempt 1 cost $1.50, and a $1.50 dispatch with no
 * parent in the command's correlation: what the command has left is $0.50.
 */
async function commandSpentWithLooseDispatch(): Promise<EaDispatchMessage> {
  const command = await sendCommand({ ledger: kit.world.ledger, key: kit.keys.ceo.key, now: new Date(Date.now() - 120_000), text: 'Fix add() for NaN.', budgetUsd: 2 });
  const correlation = command.envelope.correlation_id;
  const budget = { max_cost_usd: 1.5, max_runtime_seconds: 600, correlation_budget_remaining_usd: null };
  const under = dispatchEnvelope({ correlation_id: correlation, parent_message_id: command.messageId, causality_chain: [command.messageId], hop_count: 1, budget }, new Date(Date.now() - 60_000)) as EaDispatchMessage;
  expect(await kit.append(messageFiles(under), kit.keys.coo.key)).toBe('accepted');
  expect(await kit.append([await claim(under, 1.5)], kit.keys.coo.key)).toBe('accepted');
  const spent = eaReceiptDoc(under.message_id, 1, { created_at: at(0), commands_run: [], inner_exit_codes: [], tests_run: [], actual_cost_usd: 1.5 });
  expect(await kit.append([{ path: receiptPath(folderOf(under), 1), bytes: Buffer.from(toYaml(spent)) }], kit.keys.coo.key)).toBe('accepted');
  // The envelope rule holds only a chain that starts at the command: this one asks $1.50 of the $0.50 left, and is written.
  const loose = dispatchEnvelope({ correlation_id: correlation, budget }, new Date(Date.now() - 30_000)) as EaDispatchMessage;
  expect(await kit.append(messageFiles(loose), kit.keys.coo.key)).toBe('accepted');
  return loose;
}

/** The claim of attempt 1 of `message` allowed `allowanceUsd`, stating what was spent before it, and `fields` beside. */
async function claim(message: EaDispatchMessage, allowanceUsd: number, fields: Record<string, unknown> = {}): Promise<NewFile> {
  return claimFileOn(await kit.world.ledger.state(), { id: message.message_id, folder: folderOf(message), attempt: 1, kind: 'ea', runner: 'r24', claimedAt: at(0), extra: { allowance_usd: allowanceUsd, ...fields } });
}

/** The claim as this build's runner writes it: stating the budget of the command whose correlation it is. */
const claimNow = (message: EaDispatchMessage, allowanceUsd: number): Promise<NewFile> => claim(message, allowanceUsd, { command_budget_usd: 2 });

describe("a consult with no parent in a $1 command's correlation, after the consult under the command spent all but a little of it", () => {
  attack("the runner's pre-flight holds it to what the command has left: it is not paid for", 'runner', 'correlation_budget_exhausted', async () => {
    // The model answers past the output cap it is given: the consult under the command spends what its pre-flight allowed, and more.
    const w = await fresh({ modes: ['over-cap'] });
    const command = await sendCommand({ ledger: w.ledger, key: w.actors.ceo, now: new Date(), text: 'Ask about add().', budgetUsd: 1 });
    const correlation = command.envelope.correlation_id;
    const under = await w.consult({ parentMessageId: command.messageId });
    await w.runner().runOnce();
    expect(await receiptsOf(w, under.messageId)).toHaveLength(1);
    const state = await w.ledger.state();
    const spent = state.spendByCorrelation.get(correlation) ?? 0;
    // What the command has left pays for less than the least call a pre-flight admits; the policy's $20 a correlation leaves plenty.
    expect(1 - spent).toBeLessThan(costUsd(0, MIN_OUTPUT_TOKENS, state.policy!.doc.models['gpt-5.5']!));
    expect(spent).toBeLessThan(state.policy!.doc.budgets.max_cost_usd_per_correlation / 2);
    const paid = w.server.requests.length;
    const loose = await w.consult({ correlationId: correlation, question: 'And for Infinity?' });
    expect([loose.envelope.parent_message_id, loose.envelope.correlation_id]).toEqual([null, correlation]);
    await w.runner().runOnce();
    if (w.server.requests.length > paid) return 'accepted';
    const receipts = await receiptsOf(w, loose.messageId);
    expect(receipts.map((receipt) => [receipt['status'], receipt['actual_cost_usd']])).toEqual([['blocked', 0]]);
    return blockersOf(receipts[0]!).join(',');
  });

  attack("while another runner's claim of the consult under a $1 command holds the whole $1: it is left unclaimed and judged again", 'runner', 'held', async () => {
    const w = await fresh();
    const command = await sendCommand({ ledger: w.ledger, key: w.actors.ceo, now: new Date(), text: 'Ask about add().', budgetUsd: 1 });
    const correlation = command.envelope.correlation_id;
    const under = await w.consult({ parentMessageId: command.messageId });
    const record = (await w.ledger.state()).messages.get(under.messageId)!;
    const now = new Date();
    const elsewhere = { schema_version: 'claim.v0', message_id: record.id, attempt_id: attemptIdOf(record, 1), attempt_number: 1, runner_id: 'run-elsewhere', transport_session_id: 'session-elsewhere', claimed_at: isoSeconds(now), allowance_usd: 1 };
    await w.ledger.append({ files: [{ path: claimPath(messageFolder(record.id, record.createdAt), 1), bytes: Buffer.from(toYaml(elsewhere)) }], key: w.actors.coo, now, summary: `claim ${record.id} attempt 1` });
    const loose = await w.consult({ correlationId: correlation, question: 'And for Infinity?' });
    await w.runner().runOnce();
    if (w.server.requests.length > 0) return 'accepted';
    expect(await receiptsOf(w, loose.messageId)).toEqual([]);
    expect(w.events).toContainEqual(expect.objectContaining({ type: 'skipped', messageId: loose.messageId, reason: expect.stringMatching(/correlation's remaining budget .*open attempts may still spend/) }));
    return 'held';
  });
});

describe("a panel with no parent in a $1 command's correlation", () => {
  attack("while another runner's claim of the consult under the command holds the whole $1: neither member is paid for", 'runner', 'held', async () => {
    const w = await fresh({ policy: (policy) => ({ ...policy, panels: [{ name: 'review', from: 'coo.*', members: ['aa.chatgpt', 'aa.claude'] }] }) });
    const command = await sendCommand({ ledger: w.ledger, key: w.actors.ceo, now: new Date(), text: 'Ask about add().', budgetUsd: 1 });
    const under = await w.consult({ parentMessageId: command.messageId });
    const record = (await w.ledger.state()).messages.get(under.messageId)!;
    const now = new Date();
    const elsewhere = { schema_version: 'claim.v0', message_id: record.id, attempt_id: attemptIdOf(record, 1), attempt_number: 1, runner_id: 'run-elsewhere', transport_session_id: 'session-elsewhere', claimed_at: isoSeconds(now), allowance_usd: 1 };
    await w.ledger.append({ files: [{ path: claimPath(messageFolder(record.id, record.createdAt), 1), bytes: Buffer.from(toYaml(elsewhere)) }], key: w.actors.coo, now, summary: `claim ${record.id} attempt 1` });
    const panel = await enqueuePanel({ ledger: w.ledger, key: w.actors.coo, now: new Date(), repo: w.target, patterns: ['src/add.ts'], question: 'Is add() correct for NaN?', maxRuntimeSeconds: 60, correlationId: command.envelope.correlation_id });
    await w.runner().runOnce();
    if (w.server.requests.length > 0) return 'accepted';
    for (const member of panel.members) expect(await receiptsOf(w, member.messageId)).toEqual([]);
    expect(w.events).toContainEqual(expect.objectContaining({ type: 'skipped', messageId: panel.members[0]!.messageId, reason: expect.stringMatching(/open attempts may still spend/) }));
    return 'held';
  });
});

describe("a claim of a dispatch with no parent in a $2 command's correlation, which has $0.50 left", () => {
  attack('allowed $1.50, stating the command\'s budget as this build writes it', 'library', 'POLICY_LIMIT', async () => {
    const loose = await commandSpentWithLooseDispatch();
    return kit.append([await claimNow(loose, 1.5)], kit.keys.coo.key);
  });

  attack('the same claim pushed with stock git', 'hook', 'POLICY_LIMIT', async () => {
    const loose = await commandSpentWithLooseDispatch();
    const entry = await claimNow(loose, 1.5);
    return kit.push({ [entry.path]: entry.bytes }, { key: kit.keys.coo.file });
  });

  attack('the same claim in history behind the hook, as coo verify replays it', 'verify', 'POLICY_LIMIT', async () => {
    const loose = await commandSpentWithLooseDispatch();
    const entry = await claimNow(loose, 1.5);
    let codes: string[] = [];
    await kit.bypass({ [entry.path]: entry.bytes }, { key: kit.keys.coo.file }, () => {
      codes = kit.verifyCodes();
    });
    return codes.includes('POLICY_LIMIT') ? 'POLICY_LIMIT' : `accepted (${codes.join(', ')})`;
  });

  attack('allowed $0.50, stating there is no command (command_budget_usd null)', 'library', 'POLICY_LIMIT', async () => {
    const loose = await commandSpentWithLooseDispatch();
    return kit.append([await claim(loose, 0.5, { command_budget_usd: null })], kit.keys.coo.key);
  });
});

describe("claims in a command's correlation that fit, or were written before command_budget_usd (guards)", () => {
  it("takes the claim allowed the $0.50 the command has left, stating its budget, and refuses one a cent over it", async () => {
    const loose = await commandSpentWithLooseDispatch();
    expect(await kit.append([await claimNow(loose, 0.51)], kit.keys.coo.key)).toBe('POLICY_LIMIT');
    expect(await kit.append([await claimNow(loose, 0.5)], kit.keys.coo.key)).toBe('accepted');
    expect(await kit.append([{ path: receiptPath(folderOf(loose), 1), bytes: Buffer.from(toYaml(eaReceiptDoc(loose.message_id, 1, { created_at: at(0), commands_run: [], inner_exit_codes: [], tests_run: [], actual_cost_usd: 0 }))) }], kit.keys.coo.key)).toBe('accepted');
  });

  it('takes the $1.50 claim written as the build before command_budget_usd wrote it (spent_before_usd stated), and verifies: history stands', async () => {
    const loose = await commandSpentWithLooseDispatch();
    expect(await kit.append([await claim(loose, 1.5)], kit.keys.coo.key)).toBe('accepted');
    // Close it, so the day's cap is not held by it in later cases.
    expect(await kit.append([{ path: receiptPath(folderOf(loose), 1), bytes: Buffer.from(toYaml(eaReceiptDoc(loose.message_id, 1, { created_at: at(0), commands_run: [], inner_exit_codes: [], tests_run: [], actual_cost_usd: 0 }))) }], kit.keys.coo.key)).toBe('accepted');
    expect(kit.verifyCodes()).toEqual([]);
  });
});

describe("the command's budget across a day's end (guard)", () => {
  it("holds the loose dispatch to the $0.50 the command has left on the next day too: a correlation's spend is not the day's", async () => {
    const loose = await commandSpentWithLooseDispatch();
    const state = await kit.world.ledger.state();
    const tomorrow = isoSeconds(new Date(Date.now() + 86_400_000)).slice(0, 10);
    const judged = judgedSpend(state, loose.correlation_id, tomorrow, 0, loose.message_id);
    expect([judged.commandBudgetUsd, judged.spentOnCorrelationUsd]).toEqual([2, 1.5]);
    expect(sharedAllowanceRefusal(state, loose.correlation_id, tomorrow, 0.51, loose.message_id)).toMatch(/CEO command's budget/);
    expect(sharedAllowanceRefusal(state, loose.correlation_id, tomorrow, 0.5, loose.message_id)).toBeNull();
  });
});
