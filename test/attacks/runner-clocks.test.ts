import { beforeAll, describe, expect, it } from 'vitest';
import { approvalPath, claimPath, messageFolder, receiptPath } from '../../src/ledger/layout.js';
import { startLanes } from '../../src/runner/startup.js';
import type { CooMessage } from '../../src/schema/message.js';
import { toYaml } from '../../src/schema/strict-yaml.js';
import { newMessageId } from '../../src/util/ids.js';
import { addSeconds, isoSeconds } from '../../src/util/time.js';
import { codeOfAsync } from '../helpers/codes.js';
import { attack, useKit, type Kit } from '../helpers/attack-kit.js';
import { dispatchEnvelope, eaReceiptDoc, messageFiles } from '../helpers/ledger.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * A runner's wall clock against the times the ledger already holds. The claim rule judges a
 * retry's start and the expiry of the CEO's approval of it by the time the claim states, which is
 * the runner's clock: one that runs behind would claim a retry after the approval expired. Times
 * in the ledger only move forward (up to the skew allowed between machines), so the validator
 * refuses a claim dated well before the newest time the ledger holds, and a runner whose clock is
 * that far behind refuses to start and claims nothing.
 */

const dir = tempDir('attacks-runner-clocks');
const getKit = useKit(dir);
let kit: Kit;
beforeAll(() => {
  kit = getKit();
});

const HOUR = 3600;

function claim(message: CooMessage, attempt: number, claimedAt: string): { path: string; bytes: Buffer } {
  const doc = { schema_version: 'claim.v0', message_id: message.message_id, attempt_id: `ea_attempt_${message.message_id.slice(4)}_${attempt}`, attempt_number: attempt, runner_id: 'run-behind', transport_session_id: 'run-behind', claimed_at: claimedAt };
  return { path: claimPath(messageFolder(message.message_id, message.created_at), attempt), bytes: Buffer.from(toYaml(doc)) };
}

function failedReceipt(message: CooMessage, attempt: number): { path: string; bytes: Buffer } {
  const doc = eaReceiptDoc(message.message_id, attempt, { target_actor: message.target_actor, created_at: message.created_at, commands_run: [], inner_exit_codes: [], tests_run: [] });
  return { path: receiptPath(messageFolder(message.message_id, message.created_at), attempt), bytes: Buffer.from(toYaml(doc)) };
}

function retryApproval(message: CooMessage, createdAt: Date, ttlSeconds: number): { path: string; bytes: Buffer } {
  const doc = {
    schema_version: 'approval.v0',
    approval_id: `apr_${newMessageId(createdAt.getTime()).slice(4)}`,
    approves: 'retry',
    request_hash: null,
    message_id: message.message_id,
    attempt_number: 2,
    reason: 'one more try',
    approved_by: 'ceo',
    created_at: isoSeconds(createdAt),
    expires_at: isoSeconds(addSeconds(createdAt, ttlSeconds)),
  };
  return { path: approvalPath(doc.approval_id, doc.created_at), bytes: Buffer.from(toYaml(doc)) };
}

describe('claims dated by a clock that runs behind', () => {
  attack("a claim of an approved retry, dated before the approval's expiry by a runner an hour behind, after the ledger already holds later times", 'library', 'CLOCK_BEHIND', async () => {
    const now = Date.now();
    const message = { ...dispatchEnvelope(undefined, new Date(now - 3 * HOUR * 1000)) } as CooMessage;
    await kit.append(messageFiles(message), kit.keys.coo.key);
    await kit.append([claim(message, 1, message.created_at), failedReceipt(message, 1)], kit.keys.coo.key);
    // The CEO approved the retry two hours ago, for an hour: it expired an hour ago.
    await kit.append([retryApproval(message, new Date(now - 2 * HOUR * 1000), HOUR)], kit.keys.ceo.key);
    // The runner's clock reads 90 minutes ago: inside the approval, by its own account.
    return kit.append([claim(message, 2, isoSeconds(new Date(now - 1.5 * HOUR * 1000)))], kit.keys.coo.key);
  });

  attack('a claim dated within the skew allowed between machines of the newest time the ledger holds is taken', 'library', 'accepted', async () => {
    const message = dispatchEnvelope();
    await kit.append(messageFiles(message), kit.keys.coo.key);
    return kit.append([claim(message, 1, isoSeconds(new Date(Date.now() - 120_000)))], kit.keys.coo.key);
  });
});

describe('a runner whose clock runs behind the ledger', () => {
  it('refuses to start (RUNNER_CONFIG, exit 2) before it claims anything, and starts with a clock in step', async () => {
    const options = { ledger: kit.world.ledger, key: kit.world.actors.coo, keyLabel: 'coo.key', repo: kit.world.target, isolation: 'none' as const };
    const refused = await startLanes({ ...options, clock: () => new Date(Date.now() - HOUR * 1000) }).catch((error: unknown) => error);
    expect(refused).toMatchObject({ code: 'RUNNER_CONFIG', message: expect.stringMatching(/clock reads .* behind .* the newest time the ledger holds .* set the clock right/) });
    expect(await codeOfAsync(() => startLanes({ ...options, clock: () => new Date(Date.now() - 60_000) }))).toBe('no error');
  });

  it('met mid-run, stops before it pays: its claim is refused as CLOCK_BEHIND, never read as another runner having taken the attempt', async () => {
    const { messageId } = await kit.world.consult({ idempotencyKey: 'clock-behind' });
    const before = kit.world.server.requests.length;
    const runner = kit.world.runner({ transport: kit.world.fakeOracle('ok'), clock: () => new Date(Date.now() - HOUR * 1000) });
    await expect(runner.runOnce()).rejects.toMatchObject({ code: 'CLOCK_BEHIND' });
    expect(kit.world.server.requests.length).toBe(before);
    expect((await kit.world.ledger.state()).messages.get(messageId)?.attempts).toEqual([]);
    // In step again, the runner takes it.
    await kit.world.runner({ transport: kit.world.fakeOracle('ok') }).runOnce();
    expect((await kit.world.ledger.state()).messages.get(messageId)?.attempts[0]?.receipt).toMatchObject({ status: 'succeeded' });
  });
});
