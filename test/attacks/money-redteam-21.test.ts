import { beforeAll, describe, expect, it } from 'vitest';
import { dispatchRequestHash } from '../../src/authority/rules/intents/dispatch.js';
import { approve } from '../../src/dispatch/approve.js';
import { isCooError } from '../../src/errors.js';
import { appendEnvelope } from '../../src/ledger/append-envelope.js';
import { claimPath, envelopePath, messageFolder, receiptPath } from '../../src/ledger/layout.js';
import type { NewFile } from '../../src/ledger/ledger.js';
import type { CooMessage, EaDispatchMessage } from '../../src/schema/message.js';
import { toYaml } from '../../src/schema/strict-yaml.js';
import { isoSeconds } from '../../src/util/time.js';
import { attack, useKit, type Kit } from '../helpers/attack-kit.js';
import { dispatchEnvelope, eaReceiptDoc, messageFiles } from '../helpers/ledger.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * Money and approvals, round 21: what a dispatch's attempts may cost the CEO's word, and what a
 * receipt may state about what was paid.
 */

const dir = tempDir('coo-attack-money-redteam-21-');
const getKit = useKit(dir);
let kit: Kit;
beforeAll(() => {
  kit = getKit();
});

const at = (offsetSeconds: number): string => isoSeconds(new Date(Date.now() + offsetSeconds * 1000));

function claimEntry(message: CooMessage, attempt: number, claimedAt: string): NewFile {
  const doc = { schema_version: 'claim.v0', message_id: message.message_id, attempt_id: `ea_attempt_${message.message_id.slice(4)}_${attempt}`, attempt_number: attempt, runner_id: 'r21', transport_session_id: 'r21', claimed_at: claimedAt };
  return { path: claimPath(messageFolder(message.message_id, message.created_at), attempt), bytes: Buffer.from(toYaml(doc)) };
}

function receiptEntry(message: CooMessage, attempt: number, overrides: Record<string, unknown>): NewFile {
  const doc = eaReceiptDoc(message.message_id, attempt, { created_at: at(0), commands_run: [], inner_exit_codes: [], tests_run: [], ...overrides });
  return { path: receiptPath(messageFolder(message.message_id, message.created_at), attempt), bytes: Buffer.from(toYaml(doc)) };
}

/** A dispatch queued and its first attempt claimed, as a runner leaves them. */
async function claimedDispatch(): Promise<CooMessage> {
  const message = dispatchEnvelope({}, new Date(Date.now() - 60_000));
  expect(await kit.append(messageFiles(message), kit.keys.coo.key)).toBe('accepted');
  expect(await kit.append([claimEntry(message, 1, at(-30))], kit.keys.coo.key)).toBe('accepted');
  return message;
}

describe('a dispatch receipt that schedules its own retry', () => {
  attack('an EA receipt whose next_attempt_at opens attempt 2 without the CEO', 'library', 'ATTEMPT_INVALID', async () => {
    const message = await claimedDispatch();
    return kit.append([receiptEntry(message, 1, { next_attempt_at: at(30) })], kit.keys.coo.key);
  });
  attack('the same receipt pushed with stock git', 'hook', 'ATTEMPT_INVALID', async () => {
    const message = await claimedDispatch();
    const entry = receiptEntry(message, 1, { next_attempt_at: at(30) });
    return kit.push({ [entry.path]: entry.bytes }, { key: kit.keys.coo.file });
  });

  attack('the receipt in history behind the hook, as coo verify replays it', 'verify', 'ATTEMPT_INVALID', async () => {
    const message = await claimedDispatch();
    const entry = receiptEntry(message, 1, { next_attempt_at: at(30) });
    let codes: string[] = [];
    await kit.bypass({ [entry.path]: entry.bytes }, { key: kit.keys.coo.file }, () => {
      codes = kit.verifyCodes();
    });
    return codes.includes('ATTEMPT_INVALID') ? 'ATTEMPT_INVALID' : `accepted (${codes.join(', ')})`;
  });
});

describe('what a receipt states it cost (guard: the schema bounds it)', () => {
  for (const [what, cost, code] of [
    ['a negative cost', -0.01, undefined],
    ['a cost beyond what a document can hold', 1e12, undefined],
    // YAML's .nan and .inf are no JSON numbers: refused as the document is read.
    ['a cost that is not a number', Number.NaN, 'YAML_NON_JSON'],
    ['an infinite cost', Number.POSITIVE_INFINITY, 'YAML_NON_JSON'],
  ] as const) {
    attack(`an EA receipt stating ${what}`, 'library', code ?? 'SCHEMA_INVALID', async () => {
      const message = await claimedDispatch();
      return kit.append([receiptEntry(message, 1, { actual_cost_usd: cost })], kit.keys.coo.key);
    });
  }
});

/** A dispatch to Claude Code, whose edge asks for the CEO's approval, with the CEO's approval of its exact request. */
async function approvedDispatch(overrides: Record<string, unknown> = {}): Promise<EaDispatchMessage> {
  const base = dispatchEnvelope({ target_actor: 'ea.claude_code', ...overrides }, new Date(Date.now() + 1000)) as EaDispatchMessage;
  const message = { ...base, dispatch: { ...base.dispatch, executor: 'claude_code' } } as EaDispatchMessage;
  const { approval } = await approve({ ledger: kit.world.ledger, key: kit.keys.ceo.key, now: new Date(), reason: 'go', requestHash: dispatchRequestHash(message) });
  return { ...message, approval_id: approval.approval_id } as EaDispatchMessage;
}

/** The code the ledger refused `files` with, when its message says `why`; the whole message otherwise. */
async function codeAndWhy(files: readonly NewFile[], why: string): Promise<string> {
  try {
    await kit.world.ledger.append({ files, key: kit.keys.coo.key, summary: 'attack', now: new Date() });
    return 'accepted';
  } catch (error) {
    if (isCooError(error)) return error.message.includes(why) ? error.code : `${error.code}: ${error.message}`;
    throw error;
  }
}

/** Another message asking what `first` asks: its own id, time, folder and default branch. */
function repeatOf(first: EaDispatchMessage, dispatch: Partial<EaDispatchMessage['dispatch']> = {}): EaDispatchMessage {
  const other = dispatchEnvelope({ target_actor: 'ea.claude_code' }, new Date(Date.now() + 2000)) as EaDispatchMessage;
  return { ...first, message_id: other.message_id, created_at: other.created_at, payload_ref: other.payload_ref, dispatch: { ...first.dispatch, attempt_id: other.dispatch.attempt_id, branch_name: other.dispatch.branch_name, ...dispatch } };
}

describe("a repeated dispatch and the CEO's approval of the first (guard)", () => {
  it("the writer's repeat (same idempotency key, same request) returns the first and writes nothing: the approval stays the first's", async () => {
    const first = await approvedDispatch();
    expect(await kit.append(messageFiles(first), kit.keys.coo.key)).toBe('accepted');
    const head = kit.head();
    const repeat = repeatOf(first);
    const result = await appendEnvelope(kit.world.ledger, Buffer.from(toYaml(repeat)), new Map(), kit.keys.coo.key, new Date());
    expect(result).toMatchObject({ existing: true, messageId: first.message_id, path: envelopePath(messageFolder(first.message_id, first.created_at)) });
    expect(kit.head()).toBe(head);
    expect((await kit.world.ledger.state()).approvals.get(first.approval_id!)?.usedBy).toBe(first.message_id);
  });

  attack('a repeat of an approved dispatch written past the writer, naming the used approval', 'library', 'APPROVAL_INVALID', async () => {
    const first = await approvedDispatch();
    expect(await kit.append(messageFiles(first), kit.keys.coo.key)).toBe('accepted');
    return codeAndWhy(messageFiles(repeatOf(first)), 'was used by');
  });

  attack("a repeat under the first's idempotency key with another task, riding on the first's approval", 'library', 'APPROVAL_INVALID', async () => {
    const first = await approvedDispatch();
    expect(await kit.append(messageFiles(first), kit.keys.coo.key)).toBe('accepted');
    return codeAndWhy(messageFiles(repeatOf(first, { acceptance_criteria: ['anything goes'] })), 'approves another request');
  });
});
