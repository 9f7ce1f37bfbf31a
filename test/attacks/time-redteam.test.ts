import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { generatePrivateKey } from '../../src/crypto/keys.js';
import { executorFactory } from '../../src/dispatch/executors.js';
import { appendTrustVersion } from '../../src/ledger/trust-update.js';
import type { RunnerEvent } from '../../src/runner/runner.js';
import { attemptIdFor } from '../../src/util/ids.js';
import { approve } from '../../src/dispatch/approve.js';
import { agentScript, dispatchTo, FIX, hostilePlaces } from '../helpers/hostile-agent.js';
import { approvalPath, claimPath, messageFolder, receiptPath } from '../../src/ledger/layout.js';
import type { CooMessage, EaDispatchMessage } from '../../src/schema/message.js';
import { dispatchRequestHash } from '../../src/authority/rules/intents/dispatch.js';
import { toYaml } from '../../src/schema/strict-yaml.js';
import { newMessageId } from '../../src/util/ids.js';
import { addSeconds, isoSeconds } from '../../src/util/time.js';
import { attack, firstOr, useKit, type Kit } from '../helpers/attack-kit.js';
import { dispatchEnvelope, eaReceiptDoc, messageFiles } from '../helpers/ledger.js';
import { receiptsOf, worlds } from '../helpers/lane.js';
import { git, tempDir } from '../helpers/tmp.js';

/**
 * Time and authority over time, from a second machine whose clock runs ahead or behind. The
 * ledger's commits order its entries: a claim dated before an entry it builds on (by more than the
 * skew allowed between machines) was written by a clock that runs behind, by whose reading a
 * message past its deadline, or a retry past its approval's expiry, is still live. The one
 * validator refuses it wherever it is written (the writer, the hook, coo verify); a runner with
 * such a clock says so and claims nothing.
 */

const dir = tempDir('coo-attack-time-redteam-');
const getKit = useKit(dir);
let kit: Kit;
beforeAll(() => {
  kit = getKit();
});
const fresh = worlds(join(dir, 'worlds'));
const place = hostilePlaces(dir, 'place-');

const HOUR = 3600;

interface Entry {
  readonly path: string;
  readonly bytes: Buffer;
}

function claim(message: CooMessage, attempt: number, claimedAt: string): Entry {
  const doc = { schema_version: 'claim.v0', message_id: message.message_id, attempt_id: `ea_attempt_${message.message_id.slice(4)}_${attempt}`, attempt_number: attempt, runner_id: 'behind', transport_session_id: 'behind', claimed_at: claimedAt };
  return { path: claimPath(messageFolder(message.message_id, message.created_at), attempt), bytes: Buffer.from(toYaml(doc)) };
}

function failedReceipt(message: CooMessage, attempt: number): Entry {
  const doc = eaReceiptDoc(message.message_id, attempt, { created_at: message.created_at, commands_run: [], inner_exit_codes: [], tests_run: [] });
  return { path: receiptPath(messageFolder(message.message_id, message.created_at), attempt), bytes: Buffer.from(toYaml(doc)) };
}

function approval(fields: Record<string, unknown>, createdAt: Date, ttlSeconds: number): Entry & { readonly id: string } {
  const doc = {
    schema_version: 'approval.v0',
    approval_id: `apr_${newMessageId(createdAt.getTime()).slice(4)}`,
    reason: 'approved',
    approved_by: 'ceo',
    created_at: isoSeconds(createdAt),
    expires_at: isoSeconds(addSeconds(createdAt, ttlSeconds)),
    ...fields,
  };
  return { path: approvalPath(doc.approval_id, doc.created_at), bytes: Buffer.from(toYaml(doc)), id: doc.approval_id };
}

function retryApproval(message: CooMessage, createdAt: Date, ttlSeconds: number): Entry {
  return approval({ approves: 'retry', request_hash: null, message_id: message.message_id, attempt_number: 2 }, createdAt, ttlSeconds);
}

/** A dispatch to Claude Code, whose edge asks for the CEO's approval, dated `at`. */
function claudeDispatch(at: Date): EaDispatchMessage {
  const base = dispatchEnvelope({ target_actor: 'ea.claude_code' }, at) as EaDispatchMessage;
  return { ...base, dispatch: { ...base.dispatch, executor: 'claude_code' } } as EaDispatchMessage;
}

/** The CEO approves a Claude Code dispatch now; the COO's machine writes it dated `behindSeconds` earlier, as its clock reads. */
async function approvedDispatchBehind(behindSeconds: number): Promise<string> {
  const now = Date.now();
  const dispatch = claudeDispatch(new Date(now - behindSeconds * 1000));
  const entry = approval({ approves: 'dispatch', request_hash: dispatchRequestHash(dispatch), message_id: null, attempt_number: null }, new Date(now), 600);
  expect(await kit.append([entry], kit.keys.ceo.key)).toBe('accepted');
  return kit.append(messageFiles({ ...dispatch, approval_id: entry.id } as CooMessage), kit.keys.coo.key);
}

/** A finished Codex turn that used a million input tokens: a paid call. */
const CODEX_PAID = [
  { type: 'thread.started', thread_id: 'thread-paid' },
  { type: 'turn.started' },
  { type: 'item.completed', item: { id: 'i1', type: 'agent_message', text: 'Done.' } },
  { type: 'turn.completed', usage: { input_tokens: 100_000, cached_input_tokens: 0, output_tokens: 1000 } },
]
  .map((event) => `printf '%s\\n' '${JSON.stringify(event)}'`)
  .join('\n');

const files = (entries: readonly Entry[]): Record<string, Buffer> => Object.fromEntries(entries.map((entry) => [entry.path, entry.bytes]));

/**
 * A dispatch that failed three hours ago and a retry approval the CEO gave two hours ago for ten
 * minutes (long expired), and the claim of the retry a runner whose clock runs two hours and a
 * quarter behind writes now: by its clock the approval has not expired.
 */
async function expiredRetry(): Promise<{ claim: Entry }> {
  const now = Date.now();
  const message = dispatchEnvelope({}, new Date(now - 3 * HOUR * 1000));
  expect(await kit.append(messageFiles(message), kit.keys.coo.key)).toBe('accepted');
  expect(await kit.append([claim(message, 1, message.created_at), failedReceipt(message, 1)], kit.keys.coo.key)).toBe('accepted');
  const approvedAt = new Date(now - 2 * HOUR * 1000);
  expect(await kit.append([retryApproval(message, approvedAt, 600)], kit.keys.ceo.key)).toBe('accepted');
  return { claim: claim(message, 2, isoSeconds(new Date(approvedAt.getTime() - 15 * 60_000))) };
}

describe('a runner whose clock runs behind cannot keep an expired approval or envelope alive', () => {
  attack('the claim of an approved retry, dated before the approval by a clock behind, after the approval expired', 'library', 'CLOCK_SKEW', async () => {
    const { claim: late } = await expiredRetry();
    return kit.append([late], kit.keys.coo.key);
  });

  attack('the same claim pushed with stock git', 'hook', 'CLOCK_SKEW', async () => {
    const { claim: late } = await expiredRetry();
    return kit.push(files([late]), { key: kit.keys.coo.file });
  });

  attack("the same claim written behind the hook's back", 'verify', 'CLOCK_SKEW', async () => {
    const { claim: late } = await expiredRetry();
    let codes: string[] = [];
    await kit.bypass(files([late]), { key: kit.keys.coo.file }, () => {
      codes = kit.verifyCodes();
    });
    return firstOr(codes, 'CLOCK_SKEW');
  });

  attack('the first claim of a dispatch past its deadline, dated an hour before its envelope by a clock behind', 'library', 'CLOCK_SKEW', async () => {
    const message = dispatchEnvelope({}, new Date(Date.now() - 3 * HOUR * 1000));
    expect(await kit.append(messageFiles(message), kit.keys.coo.key)).toBe('accepted');
    return kit.append([claim(message, 1, isoSeconds(addSeconds(new Date(message.created_at), -HOUR)))], kit.keys.coo.key);
  });

  it('takes a claim dated before its envelope and its approval by less than the allowed skew: machines whose clocks differ by a few minutes still work', async () => {
    const now = Date.now();
    const message = dispatchEnvelope({}, new Date(now - HOUR * 1000));
    expect(await kit.append(messageFiles(message), kit.keys.coo.key)).toBe('accepted');
    expect(await kit.append([claim(message, 1, isoSeconds(new Date(now - HOUR * 1000 - 240_000))), failedReceipt(message, 1)], kit.keys.coo.key)).toBe('accepted');
    const approvedAt = new Date(now - 60_000);
    expect(await kit.append([retryApproval(message, approvedAt, 600)], kit.keys.ceo.key)).toBe('accepted');
    expect(await kit.append([claim(message, 2, isoSeconds(new Date(approvedAt.getTime() - 240_000)))], kit.keys.coo.key)).toBe('accepted');
  });

  it('a runner whose clock runs four hours behind, given a consult whose deadline passed hours ago: says CLOCK_SKEW, claims nothing and pays nothing; a runner with the right clock blocks it as expired', async () => {
    const w = await fresh();
    const created = new Date(Date.now() - 3 * HOUR * 1000);
    const { messageId } = await w.consult({ now: created, ttlSeconds: 600 });
    await w.runner({ clock: () => new Date(Date.now() - 4 * HOUR * 1000) }).runOnce();
    expect(w.events).toContainEqual(expect.objectContaining({ type: 'error', messageId, code: 'CLOCK_SKEW' }));
    expect(w.events.filter((event) => event.type === 'claimed')).toEqual([]);
    expect((await w.ledger.state()).messages.get(messageId)!.attempts).toEqual([]);
    expect(w.server.requests).toHaveLength(0);
    await w.runner().runOnce();
    expect((await receiptsOf(w, messageId)).map((receipt) => receipt['blockers'])).toEqual([[expect.objectContaining({ code: 'expired' })]]);
    expect(w.server.requests).toHaveLength(0);
  });
});

describe("a COO machine whose clock runs a little behind the CEO's", () => {
  it('writes the dispatch the CEO just approved, dated a minute before the approval by its clock: taken, as machines within the allowed skew are', async () => {
    expect(await approvedDispatchBehind(60)).toBe('accepted');
  });

  attack('a dispatch dated ten minutes before the approval it names', 'library', 'APPROVAL_INVALID', () => approvedDispatchBehind(600));
});

describe('a runner whose clock runs ahead cannot start a retry early', () => {
  it('a consult rate limited with a 60 s backoff, then a runner ten minutes ahead: it waits the 60 s on its own clock before it claims the retry, and pays once for each attempt', async () => {
    const w = await fresh({ modes: ['rate-limit', 'ok'], policy: (policy) => ({ ...policy, retries: { ...policy.retries, backoff_base_seconds: 60, backoff_max_seconds: 60 } }) });
    const { messageId } = await w.consult();
    await w.runner().runOnce();
    const [first] = await receiptsOf(w, messageId);
    expect(Date.parse(String(first!['next_attempt_at'])) - Date.parse(String(first!['created_at']))).toBe(60_000);
    const paid = w.server.requests.length;

    let tick = 0;
    const ahead = w.runner({ clock: () => new Date(Date.now() + 10 * 60_000), monotonic: () => tick });
    const summary = await ahead.runOnce();
    expect(summary.waiting.length).toBeGreaterThan(0);
    tick = 59_000;
    await ahead.runOnce();
    expect((await w.ledger.state()).messages.get(messageId)!.attempts).toHaveLength(1);
    expect(w.server.requests).toHaveLength(paid);

    tick = 60_000;
    await ahead.runOnce();
    expect((await receiptsOf(w, messageId)).map((receipt) => receipt['status'])).toEqual(['failed', 'succeeded']);
    expect(w.server.requests).toHaveLength(paid + 1);
  });
});

describe("the COO key rotated while a dispatch's agent runs", () => {

  it('the receipt the ledger refuses (signed by the retired key) is kept, and the runner restarted with the new key publishes it, its cost and its work, never an interrupted attempt at $0', async () => {
    const p = await place('kept');
    const { messageId } = await dispatchTo(p, 'rotated-mid-run');
    const attemptId = attemptIdFor(messageId, 1, 'ea');
    const worktree = join(p.stateDir, 'dispatch', attemptId, 'worktree');
    // The agent waits until the rotation has landed, then does the work and reports a paid turn.
    const agent = agentScript(p.world.dir, `while [ ! -e .rotated ]; do sleep 0.05; done; rm .rotated; ${FIX}`, CODEX_PAID);
    const executors = executorFactory({ command: [agent], hide: [p.world.gitdir], env: { PATH: process.env['PATH'], OPENAI_API_KEY: 'sk-test-key' } });
    const rotated = generatePrivateKey('coo.hermes');
    const events: RunnerEvent[] = [];
    let rotation: Promise<void> | null = null;
    const onEvent = (event: RunnerEvent): void => {
      events.push(event);
      if (event.type !== 'executor_started') return;
      rotation = (async () => {
        const registry = (await p.world.ledger.state()).registry!.doc;
        await appendTrustVersion(p.world.ledger, { role: 'registry', document: { ...registry, version: undefined }, actorKeys: new Map([['coo.hermes', rotated.publicKey]]) }, p.world.actors.ceo, new Date());
        writeFileSync(join(worktree, '.rotated'), '');
      })();
    };
    const first = p.world.runner({ repo: p.repo, executors, stateDir: p.stateDir, onEvent });
    await expect(first.runOnce()).rejects.toMatchObject({ code: 'RUNNER_CONFIG' });
    await rotation;
    const kept = events.filter((event) => event.type === 'result_kept');
    expect(kept).toEqual([expect.objectContaining({ messageId, attempt: 1 })]);
    const keptCost = Number(/actual_cost_usd: ([0-9.]+)/.exec(Buffer.from((JSON.parse(readFileSync((kept[0] as { kept: string }).kept, 'utf8')) as { files: Array<{ path: string; base64: string }> }).files.find((file) => file.path.endsWith('receipts/001.yaml'))!.base64, 'base64').toString('utf8'))![1]);
    expect(keptCost).toBeGreaterThan(0);
    expect((await p.world.ledger.state()).messages.get(messageId)!.attempts[0]!.receipt).toBeNull();

    // The first runner's process is gone (a record naming a pid that has ended), and the operator starts one with the new key.
    const runners = join(p.world.gitdir, 'coo', 'runners');
    const gone = spawnSync('true').pid;
    for (const name of readdirSync(runners)) writeFileSync(join(runners, name), JSON.stringify({ host: JSON.parse(readFileSync(join(runners, name), 'utf8')).host, pid: gone, started: null }));
    const never = executorFactory({ command: [join(p.world.dir, 'no-such-agent')], hide: [p.world.gitdir], env: { PATH: process.env['PATH'], OPENAI_API_KEY: 'sk-test-key' } });
    await p.world.runner({ repo: p.repo, executors: never, stateDir: p.stateDir, key: rotated, onEvent: (event) => events.push(event) }).runOnce();

    const [receipt] = await receiptsOf(p.world, messageId);
    expect(receipt).toMatchObject({ status: 'succeeded', actual_cost_usd: keptCost });
    const state = await p.world.ledger.state();
    expect(state.spendByCorrelation.get(state.messages.get(messageId)!.correlation)).toBe(keptCost);
    expect(existsSync((kept[0] as { kept: string }).kept)).toBe(false);
    expect(git(['rev-parse', String(receipt!['branch'])], { cwd: p.repo }).trim()).toBe(receipt!['head_sha']);
  });
});

describe('a retry approval that expired before any runner claimed it', () => {
  /** A dispatch that failed three hours ago, and the CEO's approval of its retry given two hours ago for ten minutes. */
  async function lapsed(): Promise<CooMessage> {
    const now = Date.now();
    const message = dispatchEnvelope({}, new Date(now - 3 * HOUR * 1000));
    expect(await kit.append(messageFiles(message), kit.keys.coo.key)).toBe('accepted');
    expect(await kit.append([claim(message, 1, message.created_at), failedReceipt(message, 1)], kit.keys.coo.key)).toBe('accepted');
    expect(await kit.append([retryApproval(message, new Date(now - 2 * HOUR * 1000), 600)], kit.keys.ceo.key)).toBe('accepted');
    return message;
  }

  it('the CEO may approve that attempt again, and a claim within the new approval is taken: the dispatch never waits for ever', async () => {
    const message = await lapsed();
    expect(await kit.append([retryApproval(message, new Date(Date.now() - 60_000), 600)], kit.keys.ceo.key)).toBe('accepted');
    expect(await kit.append([claim(message, 2, isoSeconds(new Date()))], kit.keys.coo.key)).toBe('accepted');
  });

  attack('a second approval of the same attempt while the first still holds', 'library', 'ATTEMPT_INVALID', async () => {
    const message = await lapsed();
    expect(await kit.append([retryApproval(message, new Date(Date.now() - 60_000), 600)], kit.keys.ceo.key)).toBe('accepted');
    return kit.append([retryApproval(message, new Date(), 600)], kit.keys.ceo.key);
  });

  it('a runner says the approval expired (APPROVAL_INVALID) and claims nothing, never "claimed by another runner"; approved again, the retry runs', async () => {
    const p = await place('lapsed');
    const { messageId } = await dispatchTo(p, 'lapsed-approval');
    const env = { PATH: process.env['PATH'], OPENAI_API_KEY: 'sk-test-key' };
    const failing = executorFactory({ command: [agentScript(p.world.dir, 'true')], hide: [p.world.gitdir], env });
    await p.world.runner({ repo: p.repo, executors: failing, stateDir: p.stateDir }).runOnce();
    const [ended] = await receiptsOf(p.world, messageId);
    expect(ended!['status']).not.toBe('succeeded');
    await approve({ ledger: p.world.ledger, key: p.world.actors.ceo, now: new Date(Date.now() - 2 * HOUR * 1000), reason: 'one more try', messageId, ttlSeconds: 600 });

    const fixing = executorFactory({ command: [agentScript(p.world.dir, FIX)], hide: [p.world.gitdir], env });
    const events: RunnerEvent[] = [];
    await p.world.runner({ repo: p.repo, executors: fixing, stateDir: p.stateDir, onEvent: (event) => events.push(event) }).runOnce();
    expect(events).toContainEqual(expect.objectContaining({ type: 'error', messageId, code: 'APPROVAL_INVALID', message: expect.stringContaining('expired') }));
    expect(events.filter((event) => event.type === 'skipped' || event.type === 'claimed' || event.type === 'executor_started')).toEqual([]);
    expect((await p.world.ledger.state()).messages.get(messageId)!.attempts).toHaveLength(1);

    await approve({ ledger: p.world.ledger, key: p.world.actors.ceo, now: new Date(), reason: 'one more try, in time', messageId });
    await p.world.runner({ repo: p.repo, executors: fixing, stateDir: p.stateDir }).runOnce();
    expect((await receiptsOf(p.world, messageId)).map((receipt) => receipt['status'])).toEqual([ended!['status'], 'succeeded']);
  });
});
