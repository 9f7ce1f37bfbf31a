import { beforeAll, describe, expect, it } from 'vitest';
import { planAskedConsult } from '../../src/dispatch/asked-consult.js';
import { executorFactory } from '../../src/dispatch/executors.js';
import { crashAllowanceUsd } from '../../src/dispatch/lane.js';
import { messageFolder, receiptPath } from '../../src/ledger/layout.js';
import type { NewFile } from '../../src/ledger/ledger.js';
import type { AaConsultMessage, EaDispatchMessage } from '../../src/schema/message.js';
import { toYaml } from '../../src/schema/strict-yaml.js';
import { attemptIdFor } from '../../src/util/ids.js';
import { sha256Ref } from '../../src/util/hash.js';
import { addSeconds, isoSeconds } from '../../src/util/time.js';
import { attack, useKit, type Kit } from '../helpers/attack-kit.js';
import { claimFileOn, retryApprovalFile } from '../helpers/claim-files.js';
import { dispatchEnvelope, eaReceiptDoc, messageFiles } from '../helpers/ledger.js';
import { blockersOf, receiptsOf } from '../helpers/lane.js';
import { git, tempDir } from '../helpers/tmp.js';

/**
 * Money across attempts and actors: a dispatch's budget (`max_cost_usd`, retries included) pays for
 * its executor's runs and for the consults its agent asks (EA -> AA), in every attempt.
 */

const dir = tempDir('coo-attack-money-redteam-22-');
const getKit = useKit(dir);
let kit: Kit;
beforeAll(() => {
  kit = getKit();
});

const at = (offsetSeconds: number): string => isoSeconds(new Date(Date.now() + offsetSeconds * 1000));
const FILE = Buffer.from('export const add = (a: number, b: number) => a + b;\n');

/** A claim of `attempt` of message `id` at the ledger's head, as this build's runner writes it (claimFileOn); `asBefore`, as builds before spent_before_usd. */
async function claimEntry(id: string, folder: string, attempt: number, kind: 'aa' | 'ea', extra: Record<string, unknown> = {}, asBefore = false): Promise<NewFile> {
  return claimFileOn(await kit.world.ledger.state(), { id, folder, attempt, kind, runner: 'r22', claimedAt: at(0), extra }, asBefore);
}

/** A paid, failed receipt of the consult `envelope` (attempt 1): the provider took the call and billed it, then the answer never came. */
function paidConsultReceipt(envelope: AaConsultMessage, folder: string, costUsd: number): NewFile {
  const doc = {
    schema_version: 'aa_receipt.v0', message_id: envelope.message_id, attempt_id: attemptIdFor(envelope.message_id, 1), attempt_number: 1, target_actor: envelope.target_actor, status: 'failed', created_at: at(0),
    blockers: [{ code: 'aa_unavailable:transport', detail: 'the connection dropped after the provider billed the call' }], next_attempt_at: null, authority_class: 'advisory_only', transport: 'oracle', transport_session_id: null, engine: 'api', model: null, route: null,
    prompt_hash: envelope.payload_hash, context_manifest_hash: envelope.context_pin.context_manifest_hash, bundle_hash: null, output_ref: null, output_hash: null, output_validation: { schema_id: 'aa_answer.v0', status: 'not_run', errors: [] }, attachments: [],
    policy_decision_ref: 'x', usage: null, actual_cost_usd: costUsd, budget_remaining_usd: Math.max(0, envelope.budget.max_cost_usd - costUsd), warnings: [],
  };
  return { path: receiptPath(folder, 1), bytes: Buffer.from(toYaml(doc)) };
}

/** The CEO's approval of attempt 2 of `message`, given now for ten minutes. */
const retryApproval = (message: EaDispatchMessage): NewFile => retryApprovalFile(message.message_id, 2);

/** The files of a consult the agent of `message` asks in attempt 1 now, as the runner writes them, planned at the ledger's head (`maxCostUsd` undefined: the planner's default). */
async function askedConsult(message: EaDispatchMessage, maxCostUsd?: number, question = 'Is add() right for NaN?'): Promise<{ envelope: AaConsultMessage; files: NewFile[] }> {
  const state = await kit.world.ledger.state();
  const plan = planAskedConsult(state, {
    key: kit.keys.coo.key, now: new Date(), dispatch: message, attempt: 1, attemptId: attemptIdFor(message.message_id, 1, 'ea'), target: 'aa.chatgpt',
    question, files: [{ path: 'src/add.ts', sha256: sha256Ref(FILE), bytes: FILE }], ...(maxCostUsd === undefined ? {} : { maxCostUsd }),
  });
  const envelope = plan.envelopeAt(state);
  const folder = messageFolder(envelope.message_id, envelope.created_at);
  return { envelope, files: [{ path: `${folder}/envelope.yaml`, bytes: Buffer.from(toYaml(envelope)) }, ...[...plan.artifacts].map(([name, bytes]) => ({ path: `${folder}/${name}`, bytes }))] };
}

/** A $1 dispatch from the head of the kit's target repository, written a minute ago. */
function baseDispatch(): EaDispatchMessage {
  const message = dispatchEnvelope({}, new Date(Date.now() - 60_000)) as EaDispatchMessage;
  return { ...message, dispatch: { ...message.dispatch, base_ref: git(['rev-parse', 'HEAD'], { cwd: kit.world.target }).trim() } };
}

/**
 * A $1 dispatch whose attempt 1 failed after its agent asked a consult that cost `consultUsd` and
 * its executor cost `executorUsd` (all of the budget by default). The CEO approves attempt 2.
 */
async function spentDispatch(consultUsd = 0.8, executorUsd = 0.2): Promise<EaDispatchMessage> {
  const message = baseDispatch();
  const folder = messageFolder(message.message_id, message.created_at);
  expect(await kit.append(messageFiles(message), kit.keys.coo.key)).toBe('accepted');
  expect(await kit.append([await claimEntry(message.message_id, folder, 1, 'ea', { allowance_usd: 1 })], kit.keys.coo.key)).toBe('accepted');
  const { envelope, files } = await askedConsult(message, consultUsd);
  const consultFolder = messageFolder(envelope.message_id, envelope.created_at);
  expect(await kit.append(files, kit.keys.coo.key)).toBe('accepted');
  expect(await kit.append([await claimEntry(envelope.message_id, consultFolder, 1, 'aa', { allowance_usd: consultUsd })], kit.keys.coo.key)).toBe('accepted');
  const consultReceipt = paidConsultReceipt(envelope, consultFolder, consultUsd);
  expect(await kit.append([consultReceipt], kit.keys.coo.key)).toBe('accepted');
  const receipt = eaReceiptDoc(message.message_id, 1, { created_at: at(0), base_sha: message.dispatch.base_ref, commands_run: [], inner_exit_codes: [], tests_run: [], actual_cost_usd: executorUsd, consults: [{ message_id: envelope.message_id, receipt: consultReceipt.path }] });
  expect(await kit.append([{ path: receiptPath(folder, 1), bytes: Buffer.from(toYaml(receipt)) }], kit.keys.coo.key)).toBe('accepted');
  expect(await kit.append([retryApproval(message)], kit.keys.ceo.key)).toBe('accepted');
  return message;
}

const secondClaim = (message: EaDispatchMessage, allowanceUsd: number, asBefore = false): Promise<NewFile> => claimEntry(message.message_id, messageFolder(message.message_id, message.created_at), 2, 'ea', { allowance_usd: allowanceUsd }, asBefore);

describe("a dispatch retried after its agent's consult spent most of its budget", () => {
  attack("a claim of attempt 2 allowed the $0.80 the executor's first run left, which the consult already spent", 'library', 'POLICY_LIMIT', async () => {
    const message = await spentDispatch();
    return kit.append([await secondClaim(message, 0.8)], kit.keys.coo.key);
  });

  attack('the same claim pushed with stock git', 'hook', 'POLICY_LIMIT', async () => {
    const message = await spentDispatch();
    const entry = await secondClaim(message, 0.8);
    return kit.push({ [entry.path]: entry.bytes }, { key: kit.keys.coo.file });
  });

  attack('the same claim in history behind the hook, as coo verify replays it', 'verify', 'POLICY_LIMIT', async () => {
    const message = await spentDispatch();
    const entry = await secondClaim(message, 0.8);
    let codes: string[] = [];
    await kit.bypass({ [entry.path]: entry.bytes }, { key: kit.keys.coo.file }, () => {
      codes = kit.verifyCodes();
    });
    return codes.includes('POLICY_LIMIT') ? 'POLICY_LIMIT' : `accepted (${codes.join(', ')})`;
  });
});

describe('what a claim states was spent before it', () => {
  attack('a claim of attempt 2 stating $0.20 spent before it, where the executor and the consult spent $1', 'library', 'POLICY_LIMIT', async () => {
    const message = await spentDispatch();
    return kit.append([await claimEntry(message.message_id, messageFolder(message.message_id, message.created_at), 2, 'ea', { allowance_usd: 0.8, spent_before_usd: 0.2 })], kit.keys.coo.key);
  });

  attack('the same claim pushed with stock git', 'hook', 'POLICY_LIMIT', async () => {
    const message = await spentDispatch();
    const entry = await claimEntry(message.message_id, messageFolder(message.message_id, message.created_at), 2, 'ea', { allowance_usd: 0.8, spent_before_usd: 0.2 });
    return kit.push({ [entry.path]: entry.bytes }, { key: kit.keys.coo.file });
  });

  it('takes a claim of attempt 2 written as before spent_before_usd was stated, allowed what the executor alone left, as builds before this rule did, and verifies', async () => {
    const message = await spentDispatch();
    expect(await kit.append([await secondClaim(message, 0.8, true)], kit.keys.coo.key)).toBe('accepted');
    expect(kit.verifyCodes()).toEqual([]);
  });
});

describe("a dispatch retried after its agent's consult spent part of its budget (guards)", () => {
  it('takes a claim of attempt 2 allowed what the executor and the consult together left, and refuses one a cent over it', async () => {
    const message = await spentDispatch(0.5, 0.2);
    expect(await kit.append([await secondClaim(message, 0.31)], kit.keys.coo.key)).toBe('POLICY_LIMIT');
    expect(await kit.append([await secondClaim(message, 0.3)], kit.keys.coo.key)).toBe('accepted');
  });

  it('counts nothing for a consult its agent asked and left behind unclaimed: it can no longer be paid', async () => {
    const message = baseDispatch();
    const folder = messageFolder(message.message_id, message.created_at);
    expect(await kit.append(messageFiles(message), kit.keys.coo.key)).toBe('accepted');
    expect(await kit.append([await claimEntry(message.message_id, folder, 1, 'ea', { allowance_usd: 1 })], kit.keys.coo.key)).toBe('accepted');
    const { envelope, files } = await askedConsult(message, 0.6);
    expect(await kit.append(files, kit.keys.coo.key)).toBe('accepted');
    const receipt = eaReceiptDoc(message.message_id, 1, { created_at: at(0), base_sha: message.dispatch.base_ref, commands_run: [], inner_exit_codes: [], tests_run: [], actual_cost_usd: 0.2, consults: [{ message_id: envelope.message_id, receipt: null }] });
    expect(await kit.append([{ path: receiptPath(folder, 1), bytes: Buffer.from(toYaml(receipt)) }], kit.keys.coo.key)).toBe('accepted');
    expect(await kit.append([retryApproval(message)], kit.keys.ceo.key)).toBe('accepted');
    expect(await kit.append([await secondClaim(message, 0.8)], kit.keys.coo.key)).toBe('accepted');
  });
});

describe("the runner's side of a dispatch retried after its agent's consult spent its budget", () => {
  it('charges attempt 2 of a runner that died after a claim stating no allowance nothing the consult already spent', async () => {
    const message = await spentDispatch(0.5, 0.2);
    expect(await kit.append([await claimEntry(message.message_id, messageFolder(message.message_id, message.created_at), 2, 'ea')], kit.keys.coo.key)).toBe('accepted');
    const state = await kit.world.ledger.state();
    const record = state.messages.get(message.message_id)!;
    expect(crashAllowanceUsd({ state, record, message, attempt: 2, consultsUsd: 0, today: at(0).slice(0, 10) })).toBeCloseTo(0.3, 9);
  });

  it('blocks attempt 2 at its pre-flight (budget_preflight), at no cost and with no executor started, when attempt 1 and its consult spent the budget', async () => {
    const message = await spentDispatch();
    await kit.world.runner({ executors: executorFactory({ command: ['/bin/false'], hide: [kit.world.gitdir] }) }).runOnce();
    const receipts = await receiptsOf(kit.world, message.message_id);
    expect(receipts).toHaveLength(2);
    expect(receipts[1]).toMatchObject({ attempt_number: 2, status: 'blocked', actual_cost_usd: 0 });
    expect(blockersOf(receipts[1]!)).toEqual(['budget_preflight']);
  });
});

/**
 * A dispatch attempt whose claim let it spend less than its dispatch's budget (its pre-flight held it to what the day,
 * the correlation or the CEO's command had left): the consult its agent asks spends from that claim, which the consult's
 * own pre-flight does not count as held, so the consult may cost no more than the claim left.
 */
describe("a consult an agent asks inside an attempt its claim held below its dispatch's budget", () => {
  /** A $1 dispatch whose attempt 1 is claimed with an allowance of $0.30, and the files of a consult its agent asks for `maxCostUsd` (the planner's default when undefined). */
  async function heldAttempt(maxCostUsd?: number, asBefore = false): Promise<{ message: EaDispatchMessage; files: NewFile[]; envelope: AaConsultMessage }> {
    const message = baseDispatch();
    const folder = messageFolder(message.message_id, message.created_at);
    expect(await kit.append(messageFiles(message), kit.keys.coo.key)).toBe('accepted');
    expect(await kit.append([await claimEntry(message.message_id, folder, 1, 'ea', { allowance_usd: 0.3 }, asBefore)], kit.keys.coo.key)).toBe('accepted');
    return { message, ...(await askedConsult(message, maxCostUsd)) };
  }

  attack('a consult of $0.75 asked in an attempt whose claim holds $0.30', 'library', 'BUDGET_EXCEEDED', async () => {
    const { files } = await heldAttempt(0.75);
    return kit.append(files, kit.keys.coo.key);
  });

  it('takes such a consult under a claim written as before spent_before_usd was stated, as builds before this rule did, and verifies', async () => {
    const { files } = await heldAttempt(0.75, true);
    expect(await kit.append(files, kit.keys.coo.key)).toBe('accepted');
    expect(kit.verifyCodes()).toEqual([]);
  });

  it("is offered by default what the attempt's claim holds, not what the dispatch's budget has left, and lands", async () => {
    const { files, envelope } = await heldAttempt();
    expect(envelope.budget.max_cost_usd).toBeCloseTo(0.3, 9);
    expect(await kit.append(files, kit.keys.coo.key)).toBe('accepted');
  });

  it("a second consult in that attempt may cost only what the first left of the claim's $0.30", async () => {
    const { message, files } = await heldAttempt(0.2);
    expect(await kit.append(files, kit.keys.coo.key)).toBe('accepted');
    const ask = async (maxCostUsd: number): Promise<NewFile[]> => (await askedConsult(message, maxCostUsd, `Is add() right for Infinity (${maxCostUsd})?`)).files;
    expect(await kit.append(await ask(0.2), kit.keys.coo.key)).toBe('BUDGET_EXCEEDED');
    expect(await kit.append(await ask(0.1), kit.keys.coo.key)).toBe('accepted');
  });
});

/**
 * A dispatch attempt claimed two minutes before its dispatch's deadline_at: the runner runs its executor until that
 * deadline, not for the whole timeout_seconds, so a consult its agent asks ends by then too.
 */
describe("a consult an agent asks in an attempt its dispatch's deadline cuts short", () => {
  /** A dispatch whose deadline_at is two minutes away, its attempt 1 claimed now, and a consult its agent asks, planned now. */
  async function lateAttempt(asBefore = false): Promise<{ message: EaDispatchMessage; files: NewFile[]; envelope: AaConsultMessage }> {
    const created = new Date(Date.now() - 60_000);
    const base = baseDispatch();
    const message = { ...base, expires_at: isoSeconds(addSeconds(created, 90)), deadline_at: isoSeconds(addSeconds(created, 180)) };
    const folder = messageFolder(message.message_id, message.created_at);
    expect(await kit.append(messageFiles(message), kit.keys.coo.key)).toBe('accepted');
    expect(await kit.append([await claimEntry(message.message_id, folder, 1, 'ea', { allowance_usd: 1 }, asBefore)], kit.keys.coo.key)).toBe('accepted');
    return { message, ...(await askedConsult(message, 0.2)) };
  }

  attack("a consult whose deadline_at is a minute past its dispatch's", 'library', 'POLICY_LIMIT', async () => {
    const { message, files, envelope } = await lateAttempt();
    const late = { ...envelope, deadline_at: isoSeconds(addSeconds(new Date(message.deadline_at), 60)) };
    return kit.append([{ path: files[0]!.path, bytes: Buffer.from(toYaml(late)) }, ...files.slice(1)], kit.keys.coo.key);
  });

  it('takes such a consult under a claim written as before spent_before_usd was stated, as builds before this rule did, and verifies', async () => {
    const { message, files, envelope } = await lateAttempt(true);
    const late = { ...envelope, deadline_at: isoSeconds(addSeconds(new Date(message.deadline_at), 60)) };
    expect(await kit.append([{ path: files[0]!.path, bytes: Buffer.from(toYaml(late)) }, ...files.slice(1)], kit.keys.coo.key)).toBe('accepted');
    expect(kit.verifyCodes()).toEqual([]);
  });

  it("is planned to end by its dispatch's deadline_at, and lands", async () => {
    const { message, files, envelope } = await lateAttempt();
    expect(Date.parse(envelope.deadline_at)).toBeLessThanOrEqual(Date.parse(message.deadline_at));
    expect(await kit.append(files, kit.keys.coo.key)).toBe('accepted');
  });
});
