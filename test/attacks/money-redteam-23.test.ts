import { beforeAll, describe, expect, it } from 'vitest';
import { sendCommand } from '../../src/inbox/ceo-messages.js';
import { judgedSpend } from '../../src/lane/budget.js';
import { appendTrustVersion } from '../../src/ledger/trust-update.js';
import { messageFolder, receiptPath } from '../../src/ledger/layout.js';
import type { NewFile } from '../../src/ledger/ledger.js';
import type { EaDispatchMessage } from '../../src/schema/message.js';
import { toYaml } from '../../src/schema/strict-yaml.js';
import { isoSeconds } from '../../src/util/time.js';
import { attack, useKit, type Kit } from '../helpers/attack-kit.js';
import { claimFileOn, retryApprovalFile } from '../helpers/claim-files.js';
import { dispatchEnvelope, eaReceiptDoc, messageFiles } from '../helpers/ledger.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * Money shared by several messages: what a CEO command's budget (`budget_usd`) lets all the work under
 * it spend, however many runners claim that work at once, and whatever each message's own budget
 * allows. A claim holds its allowance against the command until its receipt lands.
 */

const dir = tempDir('coo-attack-money-redteam-23-');
const getKit = useKit(dir);
let kit: Kit;
beforeAll(() => {
  kit = getKit();
});

const at = (offsetSeconds: number): string => isoSeconds(new Date(Date.now() + offsetSeconds * 1000));

/** A CEO command with a budget of `budgetUsd`, and `count` dispatches under it of `eachUsd` each, all written before any runs. */
async function commandWithDispatches(budgetUsd: number, count: number, eachUsd: number): Promise<EaDispatchMessage[]> {
  const command = await sendCommand({ ledger: kit.world.ledger, key: kit.keys.ceo.key, now: new Date(Date.now() - 120_000), text: 'Fix add() for NaN.', budgetUsd });
  const dispatches: EaDispatchMessage[] = [];
  for (let index = 0; index < count; index += 1) {
    const message = dispatchEnvelope(
      { correlation_id: command.envelope.correlation_id, parent_message_id: command.messageId, causality_chain: [command.messageId], hop_count: 1, budget: { max_cost_usd: eachUsd, max_runtime_seconds: 600, correlation_budget_remaining_usd: null } },
      new Date(Date.now() - 60_000),
    ) as EaDispatchMessage;
    expect(await kit.append(messageFiles(message), kit.keys.coo.key)).toBe('accepted');
    dispatches.push(message);
  }
  return dispatches;
}

const folderOf = (message: EaDispatchMessage): string => messageFolder(message.message_id, message.created_at);

/** The claim of `attempt` of `message` allowed `allowanceUsd` at the ledger's head, as this build's runner writes it (claimFileOn); `asBefore`, as builds before spent_before_usd. */
async function claim(message: EaDispatchMessage, allowanceUsd: number, asBefore = false, attempt = 1): Promise<NewFile> {
  return claimFileOn(await kit.world.ledger.state(), { id: message.message_id, folder: folderOf(message), attempt, kind: 'ea', runner: 'r23', claimedAt: at(0), extra: { allowance_usd: allowanceUsd } }, asBefore);
}

/** The failed receipt of attempt 1 of `message`, which cost `costUsd`. */
function receipt(message: EaDispatchMessage, costUsd: number): NewFile {
  const doc = eaReceiptDoc(message.message_id, 1, { created_at: at(0), commands_run: [], inner_exit_codes: [], tests_run: [], actual_cost_usd: costUsd });
  return { path: receiptPath(folderOf(message), 1), bytes: Buffer.from(toYaml(doc)) };
}

/** The CEO's approval of attempt 2 of `message`, given now for ten minutes. */
const retryApproval = (message: EaDispatchMessage): NewFile => retryApprovalFile(message.message_id, 2);

describe("two dispatches under a $2 command, each of $1.50, claimed by two runners at once", () => {
  attack('the second claim allowed $1.50, where the first holds $1.50 of the $2', 'library', 'POLICY_LIMIT', async () => {
    const [first, second] = await commandWithDispatches(2, 2, 1.5);
    expect(await kit.append([await claim(first!, 1.5)], kit.keys.coo.key)).toBe('accepted');
    return kit.append([await claim(second!, 1.5)], kit.keys.coo.key);
  });

  attack('the same claim pushed with stock git', 'hook', 'POLICY_LIMIT', async () => {
    const [first, second] = await commandWithDispatches(2, 2, 1.5);
    expect(await kit.append([await claim(first!, 1.5)], kit.keys.coo.key)).toBe('accepted');
    const entry = await claim(second!, 1.5);
    return kit.push({ [entry.path]: entry.bytes }, { key: kit.keys.coo.file });
  });

  attack('the same claim in history behind the hook, as coo verify replays it', 'verify', 'POLICY_LIMIT', async () => {
    const [first, second] = await commandWithDispatches(2, 2, 1.5);
    expect(await kit.append([await claim(first!, 1.5)], kit.keys.coo.key)).toBe('accepted');
    const entry = await claim(second!, 1.5);
    let codes: string[] = [];
    await kit.bypass({ [entry.path]: entry.bytes }, { key: kit.keys.coo.file }, () => {
      codes = kit.verifyCodes();
    });
    return codes.includes('POLICY_LIMIT') ? 'POLICY_LIMIT' : `accepted (${codes.join(', ')})`;
  });

  attack('both claims in one commit, as a panel is claimed, each allowed $1.50', 'library', 'POLICY_LIMIT', async () => {
    const [first, second] = await commandWithDispatches(2, 2, 1.5);
    return kit.append([await claim(first!, 1.5), await claim(second!, 1.5)], kit.keys.coo.key);
  });
});

describe('a retry under a command whose other work spent and holds most of its budget', () => {
  attack("attempt 2 of the first, allowed the $1 its own budget has left, where the second's claim holds $1 of the $2 and attempt 1 cost $0.50", 'library', 'POLICY_LIMIT', async () => {
    const [first, second] = await commandWithDispatches(2, 2, 1.5);
    expect(await kit.append([await claim(first!, 1)], kit.keys.coo.key)).toBe('accepted');
    expect(await kit.append([await claim(second!, 1)], kit.keys.coo.key)).toBe('accepted');
    expect(await kit.append([receipt(first!, 0.5)], kit.keys.coo.key)).toBe('accepted');
    expect(await kit.append([retryApproval(first!)], kit.keys.ceo.key)).toBe('accepted');
    return kit.append([await claim(first!, 1, false, 2)], kit.keys.coo.key);
  });
});

describe('claims under a command that fit what it has left (guards)', () => {
  it("takes the second claim allowed the $0.50 the first's hold leaves of the $2, and refuses one a cent over it", async () => {
    const [first, second] = await commandWithDispatches(2, 2, 1.5);
    expect(await kit.append([await claim(first!, 1.5)], kit.keys.coo.key)).toBe('accepted');
    expect(await kit.append([await claim(second!, 0.51)], kit.keys.coo.key)).toBe('POLICY_LIMIT');
    expect(await kit.append([await claim(second!, 0.5)], kit.keys.coo.key)).toBe('accepted');
  });

  it("counts a receipt's cost, not its claim's hold, once it lands: $0.20 spent of the first's $1.50 leaves the second $1.50", async () => {
    const [first, second] = await commandWithDispatches(2, 2, 1.5);
    expect(await kit.append([await claim(first!, 1.5)], kit.keys.coo.key)).toBe('accepted');
    expect(await kit.append([receipt(first!, 0.2)], kit.keys.coo.key)).toBe('accepted');
    expect(await kit.append([await claim(second!, 1.5)], kit.keys.coo.key)).toBe('accepted');
  });

  it('takes the second claim written as before spent_before_usd was stated, as builds before this rule did, and verifies', async () => {
    const [first, second] = await commandWithDispatches(2, 2, 1.5);
    expect(await kit.append([await claim(first!, 1.5, true)], kit.keys.coo.key)).toBe('accepted');
    expect(await kit.append([await claim(second!, 1.5, true)], kit.keys.coo.key)).toBe('accepted');
    // Close both, so the day's cap is not held by them in later cases.
    expect(await kit.append([receipt(first!, 0), receipt(second!, 0)], kit.keys.coo.key)).toBe('accepted');
    expect(kit.verifyCodes()).toEqual([]);
  });
});

describe("two dispatches of one day, under no command, beside each other at the day's cap", () => {
  /** Lowers the day's cap to what today has spent and holds, plus $1.50, and writes two $1.50 dispatches of two correlations. */
  async function atTheCap(): Promise<[EaDispatchMessage, EaDispatchMessage]> {
    const state = await kit.world.ledger.state();
    const today = at(0).slice(0, 10);
    const { spentTodayUsd } = judgedSpend(state, 'corr_none', today, 0);
    const policy = state.policy!.doc;
    const cap = Math.ceil((spentTodayUsd + 1.5) * 100) / 100;
    await appendTrustVersion(kit.world.ledger, { role: 'policy', document: { ...policy, version: undefined, budgets: { ...policy.budgets, max_cost_usd_per_message: 1.5, max_cost_usd_per_correlation: 1.5, daily_cost_cap_usd: cap } } }, kit.keys.ceo.key, new Date());
    const made = [0, 1].map(() => dispatchEnvelope({ budget: { max_cost_usd: 1.5, max_runtime_seconds: 600, correlation_budget_remaining_usd: null } }, new Date(Date.now() - 60_000)) as EaDispatchMessage);
    for (const message of made) expect(await kit.append(messageFiles(message), kit.keys.coo.key)).toBe('accepted');
    return [made[0]!, made[1]!];
  }

  attack("the second claim allowed $1, where the first holds $1 of the $1.50 the day's cap leaves", 'library', 'POLICY_LIMIT', async () => {
    const [first, second] = await atTheCap();
    expect(await kit.append([await claim(first, 1)], kit.keys.coo.key)).toBe('accepted');
    const refused = await kit.append([await claim(second, 1)], kit.keys.coo.key);
    // What the day has left still takes a claim that fits it (guard).
    expect(await kit.append([await claim(second, 0.5)], kit.keys.coo.key)).toBe('accepted');
    return refused;
  });
});
