import { join } from 'node:path';
import { codeOf } from '../helpers/attack-kit.js';
import { describe, expect, it } from 'vitest';
import { laneStateOf } from '../../src/authority/state.js';
import { describeEvent } from '../../src/cli/watch.js';
import { appendEnvelope } from '../../src/ledger/append-envelope.js';
import { appendKillSwitch, appendTrustVersion } from '../../src/ledger/trust-update.js';
import { toYaml } from '../../src/schema/strict-yaml.js';
import { sha256Ref } from '../../src/util/hash.js';
import { newMessageId } from '../../src/util/ids.js';
import { writeFileSync } from 'node:fs';
import { formatPrivateKey } from '../../src/crypto/keys.js';
import { codeOfAsync } from '../helpers/codes.js';
import { push, stockCommit } from '../helpers/stock.js';
import { blockersOf, receiptsOf, worlds } from '../helpers/lane.js';
import { git, tempDir } from '../helpers/tmp.js';

/** `YYYY-MM/DD/HH` of a timestamp: where the layout puts a message created then. */
const hourFolder = (at: string): string => `${at.slice(0, 7)}/${at.slice(8, 10)}/${at.slice(11, 13)}`;

const fresh = worlds(tempDir());

describe('the consult lane', () => {
  it('given a valid envelope targeting aa.chatgpt, invokes Oracle, stores the answer at a deterministic path and commits a COO-signed aa_receipt.v0', async () => {
    const w = await fresh();
    const { messageId, envelope } = await w.consult();
    expect(envelope.context_pin.repo_commit_sha).toBe(git(['rev-parse', 'HEAD'], { cwd: w.target }).trim());
    expect(envelope.context_pin.files.map((file) => file.path)).toEqual(['README.md', 'src/add.ts']);
    const summary = await w.runner().runOnce();
    expect(summary.receipts).toBe(1);
    const [receipt] = await receiptsOf(w, messageId);
    expect(receipt).toMatchObject({ status: 'succeeded', authority_class: 'advisory_only', engine: 'api', transport: 'oracle', model: 'gpt-5.5', route: { offline: true } });
    const folder = `messages/${hourFolder(envelope.created_at)}/${messageId}`;
    expect(receipt!['output_ref']).toBe(`${folder}/artifacts/001/answer.md`);
    const answer = (await w.ledger.readFile(`${folder}/artifacts/001/answer.md`))!;
    expect(receipt!['output_hash']).toBe(sha256Ref(answer));
    expect(receipt!['prompt_hash']).toBe(envelope.payload_hash);
    expect(receipt!['context_manifest_hash']).toBe(envelope.context_pin.context_manifest_hash);
    expect((receipt!['usage'] as { reported: boolean }).reported).toBe(true);
    expect(receipt!['actual_cost_usd']).toBeGreaterThan(0);
    // The cost is Oracle's own figure from its session record, which the receipt keeps as an attachment.
    const session = (receipt!['attachments'] as Array<{ path: string }>).find((item) => item.path.endsWith('oracle-session.json'))!;
    const meta = JSON.parse((await w.ledger.readFile(session.path))!.toString('utf8')) as { usage: { cost: number } };
    expect(receipt!['actual_cost_usd']).toBeCloseTo(meta.usage.cost, 6);
    expect(w.server.requests).toHaveLength(1);
    expect(w.server.requests[0]!.prompt).toContain('export function add(a: number, b: number)');
    const log = git(['--git-dir', w.gitdir, 'log', '-1', '--format=%s']);
    expect(log).toContain(`receipt ${messageId} attempt 1: succeeded`);
    expect(laneStateOf((await w.ledger.state()).messages.get(messageId)!)).toBe('succeeded');
    // The runner says when Oracle starts and when its process is gone, between the claim and the receipt.
    const mine = w.events.filter((event) => 'messageId' in event && event.messageId === messageId);
    expect(mine.map((event) => event.type)).toEqual(['claimed', 'oracle_started', 'oracle_ended', 'receipt']);
    expect(mine[2]).toMatchObject({ attempt: 1, exitCode: 0, signal: null, killedByTimer: false });
    expect(describeEvent(mine[2]!)).toMatch(new RegExp(`^Oracle ended for ${messageId} attempt 1 after \\d+\\.\\d s \\(exit 0\\)$`));
  });

  it('sends the pinned bytes, not the working tree, when a file changes after pinning', async () => {
    const w = await fresh();
    const { messageId } = await w.consult({ patterns: ['src/add.ts'] });
    git(['-c', 'user.name=x', '-c', 'user.email=x@x', 'commit', '-q', '--allow-empty', '-m', 'move on'], { cwd: w.target });
    const { writeFileSync } = await import('node:fs');
    writeFileSync(join(w.target, 'src', 'add.ts'), 'export const add = () => 42; // changed after pinning\n');
    await w.runner().runOnce();
    expect((await receiptsOf(w, messageId))[0]!['status']).toBe('succeeded');
    expect(w.server.requests[0]!.prompt).toContain('return a + b;');
    expect(w.server.requests[0]!.prompt).not.toContain('changed after pinning');
  });

  it('leaves a consult whose pinned commit is gone from the repository queued and unclaimed, without calling Oracle, saying why (the runner lacks it, as a clone behind would)', async () => {
    const w = await fresh();
    const { writeFileSync } = await import('node:fs');
    writeFileSync(join(w.target, 'src', 'extra.ts'), 'export const x = 1;\n');
    git(['add', '-A'], { cwd: w.target });
    git(['-c', 'user.name=x', '-c', 'user.email=x@x', 'commit', '-q', '-m', 'to be dropped'], { cwd: w.target });
    const { messageId } = await w.consult({ patterns: ['src/extra.ts'] });
    git(['reset', '-q', '--hard', 'HEAD~1'], { cwd: w.target });
    git(['reflog', 'expire', '--expire=now', '--all'], { cwd: w.target });
    git(['gc', '-q', '--prune=now'], { cwd: w.target });
    const summary = await w.runner().runOnce();
    expect(summary.held).toEqual([messageId]);
    expect(await receiptsOf(w, messageId)).toEqual([]);
    expect(w.events).toContainEqual(expect.objectContaining({ type: 'error', messageId, code: 'RUNNER_CONFIG', message: expect.stringContaining('does not hold commit') }));
    expect(w.server.requests).toHaveLength(0);
    expect(laneStateOf((await w.ledger.state()).messages.get(messageId)!)).toBe('queued');
  });

  it('fails closed with stale_context when a pinned file does not match its hash', async () => {
    const w = await fresh();
    const { envelope } = await w.consult({ idempotencyKey: 'template' });
    const wrong = `sha256:${'0'.repeat(64)}`;
    const id = newMessageId(Date.now());
    const folder = `messages/${hourFolder(envelope.created_at)}/${id}`;
    const manifest = Buffer.from(toYaml({ schema_version: 'context_manifest.v0', repo_commit_sha: envelope.context_pin.repo_commit_sha, files: [{ path: 'src/add.ts', sha256: wrong, bytes: 10 }] }));
    const prompt = Buffer.from('Is add() correct?\n');
    const forged = {
      ...envelope,
      message_id: id,
      idempotency_key: 'mismatch',
      payload_ref: `${folder}/prompt.md`,
      payload_hash: sha256Ref(prompt),
      context_pin: { repo_commit_sha: envelope.context_pin.repo_commit_sha, context_manifest_ref: `${folder}/context-manifest.yaml`, context_manifest_hash: sha256Ref(manifest), files: [{ path: 'src/add.ts', sha256: wrong }] },
    };
    await appendEnvelope(w.ledger, Buffer.from(toYaml(forged)), new Map([['prompt.md', prompt], ['context-manifest.yaml', manifest]]), w.actors.coo, new Date());
    await w.runner().runOnce();
    const [receipt] = await receiptsOf(w, id);
    expect(blockersOf(receipt!)).toEqual(['stale_context']);
    expect(String((receipt!['blockers'] as Array<{ detail: string }>)[0]!.detail)).toContain('src/add.ts');
    expect(w.server.requests.filter((request) => request.prompt.includes('Is add() correct?\n'))).toHaveLength(0);
  });

  it('blocks an expired consult and a consult past its deadline without calling Oracle, and refuses one at its hop limit when it is written', async () => {
    const w = await fresh();
    const expired = await w.consult({ ttlSeconds: 1, idempotencyKey: 'expired' });
    const parent = await w.consult({ idempotencyKey: 'parent' });
    expect(await codeOf(() => w.consult({ parentMessageId: parent.messageId, maxHops: 1, idempotencyKey: 'child' }))).toBe('POLICY_LIMIT');
    const later = new Date(Date.now() + 5_000);
    await w.runner({ clock: () => later }).runOnce();
    expect(blockersOf((await receiptsOf(w, expired.messageId))[0]!)).toEqual(['expired']);
    expect((await receiptsOf(w, parent.messageId))[0]!['status']).toBe('succeeded');
    expect(w.server.requests).toHaveLength(1);

    const late = await w.consult({ ttlSeconds: 1, maxRuntimeSeconds: 1, idempotencyKey: 'late' });
    const afterDeadline = new Date(Date.parse(late.envelope.deadline_at) + 1000);
    w.server.setModes(['rate-limit']);
    await w.runner({ clock: () => afterDeadline }).runOnce();
    expect(blockersOf((await receiptsOf(w, late.messageId))[0]!)).toEqual(['expired']);
  });

  it('returns the same message for a duplicate idempotency key, also when a second envelope was committed by stock git, and never invokes Oracle twice', async () => {
    const w = await fresh();
    const first = await w.consult({ idempotencyKey: 'review-once' });
    const again = await w.consult({ idempotencyKey: 'review-once' });
    expect(again).toMatchObject({ messageId: first.messageId, existing: true, commit: null });
    // A second envelope with the same key and request, under a new message id, committed and pushed with stock git.
    const id = newMessageId(Date.now() + 1);
    const folder = `messages/${hourFolder(first.envelope.created_at)}/${id}`;
    const prompt = (await w.ledger.readFile(first.envelope.payload_ref))!.toString('utf8');
    const manifest = (await w.ledger.readFile(first.envelope.context_pin.context_manifest_ref))!.toString('utf8');
    const copy = { ...first.envelope, message_id: id, payload_ref: `${folder}/prompt.md`, context_pin: { ...first.envelope.context_pin, context_manifest_ref: `${folder}/context-manifest.yaml` } };
    const keyFile = join(w.dir, 'coo.key');
    writeFileSync(keyFile, formatPrivateKey(w.actors.coo), { mode: 0o600 });
    const work = join(w.dir, 'clone');
    git(['clone', '-q', w.gitdir, work]);
    const seq = (await w.ledger.state()).seq + 1;
    stockCommit(work, { [`${folder}/envelope.yaml`]: toYaml(copy), [`${folder}/prompt.md`]: prompt, [`${folder}/context-manifest.yaml`]: manifest }, { key: keyFile, seq, sign: [`${folder}/envelope.yaml`] });
    const pushed = push(work, 'main');
    expect(pushed.stderr).toContain('push accepted');
    await w.runner().runOnce();
    await w.runner().runOnce();
    const state = await w.ledger.state();
    expect(state.messages.get(id)!.duplicateOf).toBe(first.messageId);
    expect(laneStateOf(state.messages.get(id)!)).toBe('duplicate');
    expect(state.messages.get(id)!.attempts).toHaveLength(0);
    expect(await receiptsOf(w, first.messageId)).toHaveLength(1);
    expect(w.server.requests).toHaveLength(1);
    expect(await codeOfAsync(() => w.consult({ idempotencyKey: 'review-once', question: 'another question' }))).toBe('IDEMPOTENCY_CONFLICT');
  });

  it('blocks a consult whose estimate cannot fit max_cost, and passes Oracle a --max-output that fits', async () => {
    const w = await fresh();
    const tiny = await w.consult({ maxCostUsd: 0.0001, idempotencyKey: 'tiny' });
    const fits = await w.consult({ maxCostUsd: 0.05, idempotencyKey: 'fits' });
    await w.runner().runOnce();
    const blocked = (await receiptsOf(w, tiny.messageId))[0]!;
    expect(blocked['status']).toBe('blocked');
    expect(blockersOf(blocked)).toEqual(['budget_preflight']);
    expect(w.server.requests).toHaveLength(1);
    // $0.05 at $30 per million output tokens, after the input estimate: well under the model cap of 32000.
    const maxTokens = w.server.requests[0]!.maxTokens!;
    expect(maxTokens).toBeGreaterThanOrEqual(512);
    expect(maxTokens).toBeLessThan((0.05 * 1_000_000) / 30);
    expect((await receiptsOf(w, fits.messageId))[0]!['status']).toBe('succeeded');
  });

  it("blocks when the correlation's remaining budget or the daily cap cannot pay", async () => {
    const w = await fresh({ policy: (p) => ({ ...p, budgets: { ...p.budgets, max_cost_usd_per_correlation: 0.028, daily_cost_cap_usd: 50 } }) });
    const first = await w.consult({ correlationId: 'corr_shared', idempotencyKey: 'one' });
    await w.runner().runOnce();
    const spent = (await receiptsOf(w, first.messageId))[0]!['actual_cost_usd'] as number;
    expect(spent).toBeGreaterThan(0.003);
    const second = await w.consult({ correlationId: 'corr_shared', idempotencyKey: 'two' });
    expect(second.envelope.budget.correlation_budget_remaining_usd).toBeCloseTo(0.028 - spent, 6);
    await w.runner().runOnce();
    expect(blockersOf((await receiptsOf(w, second.messageId))[0]!)).toEqual(['correlation_budget_exhausted']);

    const state = await w.ledger.state();
    const policy = state.policy!.doc;
    await appendTrustVersion(w.ledger, { role: 'policy', document: { ...policy, version: undefined, budgets: { ...policy.budgets, max_cost_usd_per_correlation: 20, daily_cost_cap_usd: spent } } }, w.actors.ceo, new Date());
    const third = await w.consult({ idempotencyKey: 'three' });
    await w.runner().runOnce();
    expect(blockersOf((await receiptsOf(w, third.messageId))[0]!)).toEqual(['daily_cap_reached']);
    expect(w.server.requests).toHaveLength(1);
  });

  it('blocks queued consults while the kill switch is on, and consults again once it is off', async () => {
    const w = await fresh();
    await appendKillSwitch(w.ledger, 'on', 'runaway spend review', 'ceo', w.actors.ceo, new Date());
    const held = await w.consult({ idempotencyKey: 'held' });
    await w.runner().runOnce();
    const receipt = (await receiptsOf(w, held.messageId))[0]!;
    expect(receipt['status']).toBe('blocked');
    expect(blockersOf(receipt)).toEqual(['kill_switch']);
    expect(w.server.requests).toHaveLength(0);
    await appendKillSwitch(w.ledger, 'off', 'review done', 'ceo', w.actors.ceo, new Date());
    const after = await w.consult({ idempotencyKey: 'after' });
    await w.runner().runOnce();
    expect((await receiptsOf(w, after.messageId))[0]!['status']).toBe('succeeded');
    expect(w.server.requests).toHaveLength(1);
  });

  it('refuses to act on a ledger rolled back behind the head it saw before', async () => {
    const w = await fresh();
    await w.consult({ idempotencyKey: 'seen' });
    await w.runner().runOnce();
    git(['--git-dir', w.gitdir, 'update-ref', 'refs/heads/main', 'main~2']);
    await w.consult({ idempotencyKey: 'after-rollback' });
    expect(await codeOfAsync(() => w.runner().runOnce())).toBe('HISTORY_FORK');
    expect(w.server.requests).toHaveLength(1);
  });

  it('leaves a consult queued, unclaimed, while the runner lacks its provider key, and says so once', async () => {
    const w = await fresh();
    const allowed = await w.consult({ target: 'aa.gemini', idempotencyKey: 'gemini' });
    const runner = w.runner({ transport: w.transport({ env: { OPENAI_API_KEY: 'sk-test-key' } }) });
    await runner.runOnce();
    await runner.runOnce();
    // The runner holds no GEMINI_API_KEY: its own configuration, not the consult's fault. Nothing is
    // claimed or receipted, the consult stays queued, and the reason is said once, not every pass.
    expect(await receiptsOf(w, allowed.messageId)).toEqual([]);
    expect((await w.ledger.state()).messages.get(allowed.messageId)!.attempts).toEqual([]);
    const errors = w.events.filter((event) => event.type === 'error');
    expect(errors).toEqual([{ type: 'error', messageId: allowed.messageId, code: 'ORACLE_CONFIG', message: expect.stringContaining('GEMINI_API_KEY') }]);
    expect(w.server.requests).toHaveLength(0);
    await w.runner().runOnce();
    expect((await receiptsOf(w, allowed.messageId)).map((receipt) => receipt['status'])).toEqual(['succeeded']);
  });
});
