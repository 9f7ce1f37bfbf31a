import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadPrivateKey } from '../../src/cli/common.js';
import { enqueueConsult } from '../../src/consult/enqueue.js';
import { errorClassOf } from '../../src/errors.js';
import { dispatchRequestHash } from '../../src/authority/rules/intents/dispatch.js';
import { approvalPath, claimPath, messageFolder } from '../../src/ledger/layout.js';
import type { CooMessage, EaDispatchMessage } from '../../src/schema/message.js';
import { toYaml } from '../../src/schema/strict-yaml.js';
import { addSeconds, isoSeconds } from '../../src/util/time.js';
import { newMessageId } from '../../src/util/ids.js';
import { attack, firstOr, useKit, type Kit } from '../helpers/attack-kit.js';
import { dispatchEnvelope, messageFiles } from '../helpers/ledger.js';
import { makeCase, remoteReceipts, type Case } from '../helpers/remote-runners.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * A runner whose clock runs behind the server's by more than the skew allowed between machines,
 * but not so far that its claim falls before an entry it builds on (time-redteam.test.ts): by its
 * clock a message that expired minutes ago is still live, and a day that is over still has its cap.
 * Its claim fixes the times the attempt is judged by, so the hook, which judges it as it lands,
 * refuses a claim dated behind the server's clock (CLOCK_SKEW); the runner says CLOCK_BEHIND,
 * claims nothing and pays nothing.
 */

const dir = tempDir('coo-attack-time-redteam-3-');
const getKit = useKit(dir);
let kit: Kit;
beforeAll(() => {
  kit = getKit();
});
const closers: Array<() => Promise<void> | void> = [];
afterAll(async () => {
  for (const close of closers.reverse()) await close();
});

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;

/** The COO's machine enqueues, through the remote, a consult it dates `at` and that lives `ttlSeconds`. */
async function consultAt(world: Case, at: Date, ttlSeconds: number): Promise<string> {
  const coo = await world.machine('coo');
  const key = loadPrivateKey(world.served.keys.coo);
  const published = await coo.remote.write((ledger) => enqueueConsult({ ledger, key, now: at, ttlSeconds, target: 'aa.chatgpt', repo: world.served.target, patterns: ['README.md'], question: 'Is add() correct for NaN?', maxRuntimeSeconds: 60 }));
  return published.result.messageId;
}

function claimEntry(message: CooMessage, claimedAt: Date): { path: string; bytes: Buffer } {
  const doc = { schema_version: 'claim.v0', message_id: message.message_id, attempt_id: `ea_attempt_${message.message_id.slice(4)}_1`, attempt_number: 1, runner_id: 'behind', transport_session_id: 'behind', claimed_at: isoSeconds(claimedAt) };
  return { path: claimPath(messageFolder(message.message_id, message.created_at), 1), bytes: Buffer.from(toYaml(doc)) };
}

/** A dispatch a clock `behindMs` behind wrote 30 minutes ago by its reading, and the claim that clock dates now. */
async function writtenBehind(behindMs: number): Promise<Record<string, Buffer>> {
  const message = dispatchEnvelope({}, new Date(Date.now() - behindMs - 30 * MINUTE));
  expect(await kit.append(messageFiles(message), kit.keys.coo.key)).toBe('accepted');
  const claim = claimEntry(message, new Date(Date.now() - behindMs));
  return { [claim.path]: claim.bytes };
}

describe('a runner whose clock runs behind the server it pushes to', () => {
  it('twenty minutes behind, given a consult that expired fifteen minutes ago: the hook refuses its claim, it says CLOCK_BEHIND, claims nothing and pays nothing; a runner with the right clock blocks the consult as expired', async () => {
    const world = await makeCase(join(dir, 'remote'), closers);
    const messageId = await consultAt(world, new Date(Date.now() - 25 * MINUTE), 600);
    const slow = await world.machine('slow');
    await expect(slow.runner({ clock: () => new Date(Date.now() - 20 * MINUTE) }).runOnce()).rejects.toMatchObject({
      code: 'CLOCK_BEHIND',
      message: expect.stringMatching(/CLOCK_SKEW .*claimed_at .* behind the clock that judges it.*this machine's clock runs behind the remote's/),
    });
    expect(errorClassOf('CLOCK_BEHIND')).toBe('usage');
    expect(slow.events.filter((event) => event.type === 'claimed')).toEqual([]);
    expect(await remoteReceipts(world.served, messageId)).toEqual([]);
    expect(world.model.requests).toHaveLength(0);

    const right = await world.machine('right');
    await right.runner().runOnce();
    expect(await remoteReceipts(world.served, messageId)).toEqual([{ attempt: 1, status: 'blocked', blockers: ['expired'] }]);
    expect(world.model.requests).toHaveLength(0);
  });

  it('a claim whose date went stale on its way (the clock set right, or a slow remote, between its dating and the refusal) is skipped, not taken for a clock behind: the runner goes on, and its next pass claims, dated anew, and pays once', async () => {
    const world = await makeCase(join(dir, 'stale'), closers);
    const messageId = await consultAt(world, new Date(Date.now() - 15 * MINUTE), 3600);
    const machine = await world.machine('jumped');
    // Behind by ten minutes until the remote refuses the claim it dated; right from then on (an NTP step mid-write).
    let behindMs = 10 * MINUTE;
    const append = machine.remote.append.bind(machine.remote);
    machine.remote.append = (async (options: Parameters<typeof append>[0]) => {
      try {
        return await append(options);
      } catch (error) {
        behindMs = 0;
        throw error;
      }
    }) as typeof append;
    const runner = machine.runner({ clock: () => new Date(Date.now() - behindMs) });
    await runner.runOnce();
    expect(behindMs).toBe(0);
    expect(machine.events).toContainEqual(expect.objectContaining({ type: 'skipped', messageId, reason: expect.stringMatching(/was not claimed: the claim, dated .*, reached the remote too late/) }));
    expect(machine.events.filter((event) => event.type === 'claimed')).toEqual([]);
    expect(world.model.requests).toHaveLength(0);

    await runner.runOnce();
    expect(await remoteReceipts(world.served, messageId)).toEqual([{ attempt: 1, status: 'succeeded', blockers: [] }]);
    expect(world.model.requests).toHaveLength(1);
  });
});

describe('a claim dated behind the clock of the hook that takes it', () => {
  attack("a claim a day behind the server, on a dispatch the same clock wrote (its spend would count on yesterday's cap, its message expired by the server's clock)", 'hook', 'CLOCK_SKEW', async () =>
    kit.push(await writtenBehind(24 * HOUR), { key: kit.keys.coo.file }),
  );

  attack('a claim an hour behind the server', 'hook', 'CLOCK_SKEW', async () => kit.push(await writtenBehind(HOUR), { key: kit.keys.coo.file }));

  it('takes a claim four minutes behind the server: machines whose clocks differ by less than the allowed skew still work', async () => {
    expect(await kit.push(await writtenBehind(4 * MINUTE), { key: kit.keys.coo.file })).toBe('accepted');
  });

  it('coo verify, which has no clock of the past, takes a claim dated a day behind written behind the hook, as it takes one dated ahead', async () => {
    const files = await writtenBehind(24 * HOUR);
    let codes: string[] = ['unset'];
    await kit.bypass(files, { key: kit.keys.coo.file }, () => {
      codes = kit.verifyCodes();
    });
    expect(firstOr(codes, 'CLOCK_SKEW')).toBe('accepted');
  });
});

/**
 * The CEO approved a Claude Code dispatch `approvedAgoMs` ago for ten minutes; the COO's machine,
 * whose clock runs `behindMs` behind, writes the dispatch now, dated by its clock within the
 * approval's life: the dispatch files, pushed with stock git.
 */
async function approvedDispatchBehind(approvedAgoMs: number, behindMs: number): Promise<Record<string, Buffer>> {
  const base = dispatchEnvelope({ target_actor: 'ea.claude_code' }, new Date(Date.now() - behindMs)) as EaDispatchMessage;
  const dispatch = { ...base, dispatch: { ...base.dispatch, executor: 'claude_code' } } as EaDispatchMessage;
  const approvedAt = new Date(Date.now() - approvedAgoMs);
  const doc = { schema_version: 'approval.v0', approval_id: `apr_${newMessageId(approvedAt.getTime()).slice(4)}`, reason: 'approved', approved_by: 'ceo', created_at: isoSeconds(approvedAt), expires_at: isoSeconds(addSeconds(approvedAt, 600)), approves: 'dispatch', request_hash: dispatchRequestHash(dispatch), message_id: null, attempt_number: null };
  expect(await kit.append([{ path: approvalPath(doc.approval_id, doc.created_at), bytes: Buffer.from(toYaml(doc)) }], kit.keys.ceo.key)).toBe('accepted');
  return Object.fromEntries(messageFiles({ ...dispatch, approval_id: doc.approval_id } as CooMessage).map((entry) => [entry.path, entry.bytes]));
}

describe("a dispatch that uses the CEO's approval, dated behind the clock of the hook that takes it", () => {
  attack('an approval that expired twenty minutes ago, used by a dispatch a COO clock twenty-five minutes behind dates within its life', 'hook', 'CLOCK_SKEW', async () =>
    kit.push(await approvedDispatchBehind(30 * MINUTE, 25 * MINUTE), { key: kit.keys.coo.file }),
  );

  it('takes one a COO clock four minutes behind writes right after the approval', async () => {
    expect(await kit.push(await approvedDispatchBehind(MINUTE, 4 * MINUTE), { key: kit.keys.coo.file })).toBe('accepted');
  });
});
