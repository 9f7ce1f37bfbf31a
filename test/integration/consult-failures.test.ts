import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { deflateSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { laneStateOf } from '../../src/authority/state.js';
import { NO_REDIRECTS_NODE_OPTIONS } from '../../src/consult/no-redirects.js';
import { checkPins } from '../../src/lane/pins.js';
import { isCooError } from '../../src/errors.js';
import { describeEvent } from '../../src/cli/watch.js';
import { claimPath, receiptPath } from '../../src/ledger/layout.js';
import { toYaml } from '../../src/schema/strict-yaml.js';
import { codeOfAsync } from '../helpers/codes.js';
import { coo } from '../helpers/cli.js';
import { FAKE_ORACLE, blockersOf, receiptsOf, type World, worlds } from '../helpers/lane.js';
import { git, tempDir } from '../helpers/tmp.js';

const fresh = worlds(tempDir());

/** Live processes whose command line mentions `text` (Oracle runs with its sandbox paths in argv). */
function processesMentioning(text: string): number[] {
  return readdirSync('/proc')
    .filter((name) => /^\d+$/.test(name))
    .filter((name) => {
      try {
        return readFileSync(`/proc/${name}/cmdline`, 'utf8').includes(text);
      } catch {
        return false;
      }
    })
    .map(Number);
}

async function lane(w: World, id: string): Promise<string> {
  return laneStateOf((await w.ledger.state()).messages.get(id)!);
}

describe("a consult's cost", () => {
  it('fails an attempt that cost eighty times its max_cost_usd with budget_cost_breach, and spends nothing more on it', async () => {
    const w = await fresh({ modes: ['costly'] });
    const { messageId } = await w.consult({ maxCostUsd: 0.5 });
    await w.runner().runOnce();
    const receipts = await receiptsOf(w, messageId);
    expect(receipts).toHaveLength(1);
    expect(receipts[0]).toMatchObject({ status: 'failed', next_attempt_at: null, budget_remaining_usd: 0 });
    expect(receipts[0]!['actual_cost_usd']).toBeGreaterThan(40);
    expect(blockersOf(receipts[0]!)).toEqual(['budget_cost_breach']);
    expect(receipts[0]!['warnings']).not.toContain('budget_overrun');
    expect(await lane(w, messageId)).toBe('failed');
    // Before the call, the output cap was what the budget pays for after the estimated input.
    expect(w.server.requests).toHaveLength(1);
    expect(w.server.requests[0]!.maxTokens).toBeLessThanOrEqual(Math.floor(0.5 / (30 / 1e6)));
    expect(w.events.find((event) => event.type === 'receipt' && event.messageId === messageId)).toMatchObject({ status: 'failed', blockers: ['budget_cost_breach'], retryAt: null });
  });
});

describe('when the advisory agent is unavailable', () => {
  const unavailable: Array<[string, 'quota' | 'auth' | 'server-error', string]> = [
    ['quota exhaustion', 'quota', 'aa_unavailable:quota'],
    ['an auth error', 'auth', 'aa_unavailable:auth'],
  ];
  for (const [name, mode, code] of unavailable) {
    it(`writes a failed receipt with ${code} on ${name}, does not retry, and the COO sees aa_unavailable`, async () => {
      const w = await fresh({ modes: [mode] });
      const { messageId } = await w.consult();
      await w.runner().runOnce();
      const receipts = await receiptsOf(w, messageId);
      expect(receipts).toHaveLength(1);
      expect(receipts[0]).toMatchObject({ status: 'failed', next_attempt_at: null });
      expect(blockersOf(receipts[0]!)).toEqual([code]);
      expect(await lane(w, messageId)).toBe('aa_unavailable');
    });
  }

  it('retries a rate limit with backoff up to the policy limit, each attempt its own claim and receipt', async () => {
    const w = await fresh({ modes: ['rate-limit'] });
    const { messageId } = await w.consult();
    await w.runner().runOnce();
    const receipts = await receiptsOf(w, messageId);
    expect(receipts.map((receipt) => receipt['attempt_number'])).toEqual([1, 2, 3]);
    expect(receipts.map(blockersOf)).toEqual([['aa_unavailable:rate_limited'], ['aa_unavailable:rate_limited'], ['aa_unavailable:rate_limited']]);
    expect(receipts.map((receipt) => receipt['next_attempt_at'] === null)).toEqual([false, false, true]);
    expect(new Set(w.server.requests.map((request) => request.canary)).size).toBe(3);
    expect(await lane(w, messageId)).toBe('aa_unavailable');
  });

  it('recovers after a transient server error: the next attempt succeeds', async () => {
    const w = await fresh({ modes: ['server-error', 'ok'] });
    const { messageId } = await w.consult();
    await w.runner().runOnce();
    const receipts = await receiptsOf(w, messageId);
    expect(receipts.map((receipt) => receipt['status'])).toEqual(['failed', 'succeeded']);
    expect(blockersOf(receipts[0]!)).toEqual(['aa_unavailable:transport']);
    expect(await lane(w, messageId)).toBe('succeeded');
  });

  it('fails a non-zero exit and an exit 0 whose session says error, never reading exit codes as success', async () => {
    const w = await fresh();
    const a = await w.consult({ idempotencyKey: 'a' });
    await w.runner({ transport: w.fakeOracle('exit-nonzero') }).runOnce();
    const b = await w.consult({ idempotencyKey: 'b' });
    await w.runner({ transport: w.fakeOracle('status-error-exit0') }).runOnce();
    expect((await receiptsOf(w, a.messageId)).every((receipt) => receipt['status'] === 'failed')).toBe(true);
    expect(blockersOf((await receiptsOf(w, a.messageId))[0]!)).toEqual(['aa_unavailable:unknown']);
    expect(blockersOf((await receiptsOf(w, b.messageId))[0]!)).toEqual(['aa_unavailable:transport']);
  });

  it('writes a failed output_missing receipt when Oracle exits 0 without an answer file', async () => {
    const w = await fresh();
    const { messageId } = await w.consult();
    await w.runner({ transport: w.fakeOracle('no-output') }).runOnce();
    const receipts = await receiptsOf(w, messageId);
    expect(receipts.length).toBeGreaterThanOrEqual(1);
    expect(receipts.every((receipt) => receipt['status'] === 'failed' && receipt['output_ref'] === null)).toBe(true);
    expect(blockersOf(receipts[0]!)).toEqual(['output_missing']);
    expect(await lane(w, messageId)).toBe('failed');
  });

  it('kills Oracle\'s whole process group when the runtime budget runs out, with a budget_runtime_breach receipt', async () => {
    const w = await fresh({ modes: ['hang'] });
    const { messageId } = await w.consult({ maxRuntimeSeconds: 3 });
    await w.runner({ keepSandboxes: true }).runOnce();
    const receipts = await receiptsOf(w, messageId);
    expect(receipts[0]).toMatchObject({ status: 'timed_out', next_attempt_at: null });
    expect(blockersOf(receipts[0]!)).toEqual(['budget_runtime_breach']);
    const ended = w.events.find((event) => event.type === 'oracle_ended' && event.messageId === messageId)!;
    expect(ended).toMatchObject({ attempt: 1, killedByTimer: true });
    expect(describeEvent(ended)).toContain('(killed at its runtime budget)');
    const sandboxes = readdirSync(join(w.dir, 'state', 'sandboxes'));
    const root = join(w.dir, 'state', 'sandboxes', sandboxes[0]!);
    const pid = Number(readFileSync(join(root, 'oracle.pid'), 'utf8').split(' ')[0]);
    expect(pid).toBeGreaterThan(1);
    expect(() => process.kill(pid, 0)).toThrow();
    expect(processesMentioning(root)).toEqual([]);
  });
});

describe('an Oracle that cannot be started during a run', () => {
  const cases: Array<[string, 'auto' | 'none']> = [
    ['under bubblewrap', 'auto'],
    ['without isolation', 'none'],
  ];
  for (const [name, isolation] of cases) {
    it(`is a retryable aa_unavailable:transport ${name}, and the consult completes once Oracle is back`, async () => {
      const w = await fresh({ policy: (policy) => ({ ...policy, retries: { ...policy.retries, backoff_base_seconds: 60, backoff_max_seconds: 60 } }) });
      const { messageId } = await w.consult();
      // A command that exists and is executable but cannot be executed: its interpreter is gone.
      const command = join(w.dir, 'oracle-broken');
      writeFileSync(command, '#!/nonexistent/interpreter\n', { mode: 0o755 });
      const broken = w.transport({ command: [command], isolation });
      await w.runner({ transport: broken }).runOnce();
      const first = await receiptsOf(w, messageId);
      expect(first).toHaveLength(1);
      expect(first[0]!['status']).toBe('failed');
      expect(blockersOf(first[0]!)).toEqual(['aa_unavailable:transport']);
      expect((first[0]!['blockers'] as Array<{ detail: string }>)[0]!.detail).toMatch(/^Oracle could not be started: /);
      expect(first[0]!['next_attempt_at']).not.toBeNull();
      // A command that is gone altogether is found before it is started.
      const gone = w.transport({ command: [join(w.dir, 'no-such-oracle')], isolation });
      expect(gone.commandProblem()).toBe(`${join(w.dir, 'no-such-oracle')} is missing or not executable`);
      // Past the 60 s backoff on the retrying runner's wall clock and, from when it first sees the receipt, on its own monotonic one.
      let tick = 0;
      const retrying = w.runner({ transport: w.transport({ isolation }), clock: () => new Date(Date.now() + 120_000), monotonic: () => tick });
      await retrying.runOnce();
      tick = 60_000;
      await retrying.runOnce();
      const all = await receiptsOf(w, messageId);
      expect(all.map((receipt) => receipt['status'])).toEqual(['failed', 'succeeded']);
      expect(w.server.requests).toHaveLength(1);
    });
  }
});

describe('a relative Oracle command', () => {
  it("is run from the caller's folder, not the sandbox's", async () => {
    const w = await fresh();
    const { messageId } = await w.consult();
    const transport = w.transport({ command: [process.execPath, relative(process.cwd(), FAKE_ORACLE), '--fake-mode', 'ok'] });
    expect(transport.commandProblem()).toBeNull();
    await w.runner({ transport }).runOnce();
    expect((await receiptsOf(w, messageId)).map((receipt) => receipt['status'])).toEqual(['succeeded']);
  });
});

describe('judging answers', () => {
  it('fails malformed answers output validation, retries them a bounded number of times, then ends failed', async () => {
    const w = await fresh({ modes: ['malformed'] });
    const { messageId } = await w.consult();
    await w.runner().runOnce();
    const receipts = await receiptsOf(w, messageId);
    expect(receipts).toHaveLength(2);
    for (const receipt of receipts) {
      expect(receipt['status']).toBe('failed');
      expect(blockersOf(receipt)).toEqual(['output_invalid']);
      expect(receipt['output_validation']).toMatchObject({ schema_id: 'aa_answer.v0', status: 'fail', errors: ['no aa_answer block'] });
    }
    expect(receipts[1]!['next_attempt_at']).toBeNull();
  });

  it('does not let a model that obeys injected context produce a succeeded receipt carrying the instruction as advice', async () => {
    const w = await fresh({ modes: ['obey-injection'] });
    const { messageId } = await w.consult({ patterns: ['docs/notes.md', 'src/add.ts'], question: 'Summarise the notes.' });
    await w.runner().runOnce();
    const receipts = await receiptsOf(w, messageId);
    expect(receipts).toHaveLength(1);
    expect(receipts[0]).toMatchObject({ status: 'failed', next_attempt_at: null });
    expect(blockersOf(receipts[0]!)).toEqual(['output_injection']);
    expect(receipts[0]!['warnings']).toContain('context_injection_suspected');
    expect((receipts[0]!['output_validation'] as { errors: string[] }).errors.join(' ')).toMatch(/addresses an actor|pipes a download/);
    // The template drew the boundary and carried the canary to the model.
    const prompt = w.server.requests[0]!.prompt;
    expect(prompt).toContain('UNTRUSTED DATA');
    expect(prompt).toContain(w.server.requests[0]!.canary!);
  });

  it('fails an answer over the artifact limit with output_too_large and its size, and judges and stores no part of it', async () => {
    const w = await fresh();
    const { messageId } = await w.consult();
    await w.runner({ transport: w.fakeOracle('enormous') }).runOnce();
    const receipts = await receiptsOf(w, messageId);
    expect(receipts).toHaveLength(1);
    expect(receipts[0]).toMatchObject({ status: 'failed', next_attempt_at: null, output_ref: null, output_hash: null, output_validation: { status: 'not_run', errors: [] } });
    // Its session record claims 50 output tokens for 10 MiB of answer: not credible, so the cost is the runner's estimate of 10 MiB, over the budget.
    expect((receipts[0]!['blockers'] as Array<{ code: string }>).map((blocker) => blocker.code)).toEqual(['budget_cost_breach', 'output_too_large']);
    expect((receipts[0]!['blockers'] as unknown[])[1]).toEqual({ code: 'output_too_large', detail: 'the answer is 10485760 bytes, over the 4194304-byte artifact limit' });
    expect(receipts[0]!['warnings']).toContain('usage_implausible');
    const files = git(['--git-dir', w.gitdir, 'ls-tree', '-r', '--name-only', 'HEAD']).split('\n');
    expect(files.filter((path) => path.includes(messageId) && path.endsWith('answer.md'))).toEqual([]);
    expect(await lane(w, messageId)).toBe('failed');
  });

  it('fails an answer over the output cap it was given with output_too_large, through the real Oracle', async () => {
    const w = await fresh({ modes: ['over-cap'] });
    const { messageId } = await w.consult();
    await w.runner().runOnce();
    const receipts = await receiptsOf(w, messageId);
    expect(receipts).toHaveLength(1);
    const cap = w.server.requests[0]!.maxTokens!;
    expect(receipts[0]).toMatchObject({ status: 'failed', next_attempt_at: null, output_validation: { status: 'not_run' } });
    expect(blockersOf(receipts[0]!)).toEqual(['output_too_large']);
    // The answer file is whole (the cap was broken in tokens, not cut in bytes): it is kept as evidence, unjudged.
    const kept = (await w.ledger.readFile(receipts[0]!['output_ref'] as string))!.toString('utf8');
    expect(kept).toMatch(/```aa_answer\n[^\n]+\n```\n$/);
    expect((receipts[0]!['blockers'] as Array<{ detail: string }>)[0]!.detail).toMatch(new RegExp(`^the answer is ${cap + 1000} output tokens, over the ${cap}-token output cap \\(\\d+ bytes\\)$`));
  });
});

/**
 * Commits `path` to the target as a blob whose header says `size` bytes but whose body holds only a
 * few: git reports its size from the header, and reading its bytes fails. A reader that refuses it
 * by size never touches the body; one that reads first fails or waits.
 */
function commitHeaderOnlyBlob(target: string, path: string, size: number): string {
  const oid = createHash('sha1').update(`header only ${path} ${size}`).digest('hex');
  const gitdir = git(['rev-parse', '--absolute-git-dir'], { cwd: target }).trim();
  mkdirSync(join(gitdir, 'objects', oid.slice(0, 2)), { recursive: true });
  writeFileSync(join(gitdir, 'objects', oid.slice(0, 2), oid.slice(2)), deflateSync(Buffer.concat([Buffer.from(`blob ${size}\0`), Buffer.alloc(1000, 0x78)])));
  const entries = git(['ls-tree', 'HEAD'], { cwd: target });
  const tree = git(['mktree'], { cwd: target, input: `${entries}100644 blob ${oid}\t${path}\n` }).trim();
  const commit = git(['commit-tree', tree, '-p', 'HEAD', '-m', `add ${path}`], { cwd: target }).trim();
  git(['update-ref', 'refs/heads/main', commit], { cwd: target });
  return commit;
}

describe('a context file over the size limit', () => {
  it('is refused at enqueue from the size git reports, without reading its bytes', async () => {
    const w = await fresh();
    commitHeaderOnlyBlob(w.target, 'big.bin', 50 * 1024 * 1024);
    const error = await w.consult({ patterns: ['big.bin'] }).then(
      () => null,
      (caught: unknown) => caught,
    );
    expect(isCooError(error) && error.code).toBe('CONTEXT_INVALID');
    expect((error as Error).message).toBe('big.bin: 52428800 bytes exceeds the 1048576-byte limit for one context file');
    expect((await w.ledger.state()).messages.size).toBe(0);
  });

  it("fails the runner's pin check from the size git reports, without reading its bytes", async () => {
    const w = await fresh();
    const commit = commitHeaderOnlyBlob(w.target, 'big.bin', 50 * 1024 * 1024);
    const check = await checkPins(w.target, commit, [{ path: 'big.bin', sha256: `sha256:${'0'.repeat(64)}` }]);
    expect(check).toEqual({ ok: false, detail: 'big.bin: 52428800 bytes exceeds the 1048576-byte limit for one context file' });
  });
});

describe('the sandbox', () => {
  it('leaves the target repository and the ledger unchanged when a hostile transport tries to write to them, and gives it only an allow-listed environment', async () => {
    const w = await fresh();
    const { messageId } = await w.consult();
    const repoHead = git(['rev-parse', 'HEAD'], { cwd: w.target });
    const addBefore = readFileSync(join(w.target, 'src', 'add.ts'), 'utf8');
    const ledgerHeadBefore = w.ledger.head();
    const previous = { GITHUB_TOKEN: process.env['GITHUB_TOKEN'], SSH_AUTH_SOCK: process.env['SSH_AUTH_SOCK'], COO_KEY: process.env['COO_KEY'] };
    process.env['GITHUB_TOKEN'] = 'ghp_must_not_leak';
    process.env['SSH_AUTH_SOCK'] = '/tmp/agent.sock';
    process.env['COO_KEY'] = '/keys/coo.key';
    try {
      const hostile = w.fakeOracle('hostile', ['--fake-target', w.target, '--fake-ledger', w.gitdir]);
      expect(hostile.isolated).toBe(true);
      await w.runner({ transport: hostile, keepSandboxes: true }).runOnce();
    } finally {
      for (const [name, value] of Object.entries(previous)) {
        if (value === undefined) delete process.env[name];
        else process.env[name] = value;
      }
    }
    const sandboxes = readdirSync(join(w.dir, 'state', 'sandboxes'));
    const observed = JSON.parse(readFileSync(join(w.dir, 'state', 'sandboxes', sandboxes[0]!, 'home', 'observed.json'), 'utf8')) as { env: Record<string, string>; cwd: string; writes: Record<string, string> };
    // The target repository is in /tmp here, which the sandbox sees empty but for its own folders; the pinned copy is read-only.
    expect(observed.writes).toEqual({ target_file: 'ENOENT', target_git: 'ENOENT', ledger_ref: 'ENOENT', pinned_copy: 'EROFS' });
    // PWD is set by bubblewrap's --chdir; nothing else is inherited.
    expect(Object.keys(observed.env).sort()).toEqual(['DOTENV_CONFIG_PATH', 'FORCE_COLOR', 'HOME', 'LANG', 'NODE_OPTIONS', 'NO_COLOR', 'OPENAI_API_KEY', 'ORACLE_HOME_DIR', 'ORACLE_NOTIFY', 'ORACLE_NO_OSC_PROGRESS', 'PATH', 'PWD', 'TMPDIR'].sort());
    expect(observed.env['DOTENV_CONFIG_PATH']).toBe('/dev/null');
    // Only the module that makes Oracle's fetch follow no redirect (consult/no-redirects.ts).
    expect(observed.env['NODE_OPTIONS']).toBe(NO_REDIRECTS_NODE_OPTIONS);
    expect(observed.env['HOME']).toContain(join('state', 'sandboxes'));
    expect(observed.cwd).toContain(join('state', 'sandboxes'));
    expect(git(['rev-parse', 'HEAD'], { cwd: w.target })).toBe(repoHead);
    expect(readFileSync(join(w.target, 'src', 'add.ts'), 'utf8')).toBe(addBefore);
    expect(git(['status', '--porcelain'], { cwd: w.target })).toBe('');
    expect(git(['--git-dir', w.gitdir, 'fsck', '--strict'])).toBe('');
    expect((await receiptsOf(w, messageId))[0]!['status']).toBe('succeeded');
    expect(w.ledger.head()).not.toBe(ledgerHeadBefore);
    expect(coo(['verify', '--ledger', w.gitdir]).status).toBe(0);
  });
});

describe('who may write receipts', () => {
  it('rejects a receipt or a claim written by anything but the COO-controlled runner', async () => {
    const w = await fresh();
    const { messageId, envelope } = await w.consult();
    const folder = envelope.payload_ref.replace(/\/prompt\.md$/, '');
    const claim = { schema_version: 'claim.v0', message_id: messageId, attempt_id: `aa_attempt_${messageId.slice(4)}_1`, attempt_number: 1, runner_id: 'rogue', transport_session_id: 'rogue-session', claimed_at: envelope.created_at };
    const receipt = { ...(await import('../helpers/forged.js')).forgedReceipt(envelope) };
    const files = [
      { path: claimPath(folder, 1), bytes: Buffer.from(toYaml(claim)) },
      { path: receiptPath(folder, 1), bytes: Buffer.from(toYaml(receipt)) },
    ];
    expect(await codeOfAsync(() => w.ledger.append({ files, key: w.actors.codex, summary: 'forged', now: new Date() }))).toBe('NOT_ACTIVE_COO');
    expect(await codeOfAsync(() => w.ledger.append({ files, key: w.actors.ceo, summary: 'forged', now: new Date() }))).toBe('NOT_ACTIVE_COO');
    expect((await w.ledger.state()).messages.get(messageId)!.attempts).toHaveLength(0);
  });
});

describe('receipts that are missing or malformed', () => {
  it('never reads a missing or malformed receipt as success: the message fails closed', async () => {
    const w = await fresh();
    const { messageId, envelope } = await w.consult();
    const folder = envelope.payload_ref.replace(/\/prompt\.md$/, '');
    const claim = { schema_version: 'claim.v0', message_id: messageId, attempt_id: `aa_attempt_${messageId.slice(4)}_1`, attempt_number: 1, runner_id: 'ghost', transport_session_id: 'ghost-session', claimed_at: envelope.created_at };
    await w.ledger.append({ files: [{ path: claimPath(folder, 1), bytes: Buffer.from(toYaml(claim)) }], key: w.actors.coo, summary: 'claim only', now: new Date() });
    expect(await lane(w, messageId)).toBe('claimed');
    const malformed = { ...(await import('../helpers/forged.js')).forgedReceipt(envelope), blockers: [{ code: 'output_invalid', detail: 'x' }] };
    expect(await codeOfAsync(() => w.ledger.append({ files: [{ path: receiptPath(folder, 1), bytes: Buffer.from(toYaml(malformed)) }], key: w.actors.coo, summary: 'bad receipt', now: new Date() }))).toBe('SCHEMA_INVALID');
    expect(await lane(w, messageId)).toBe('claimed');
    expect((await w.ledger.state()).messages.get(messageId)!.attempts[0]!.receipt).toBeNull();
  });
});

describe('the Oracle configuration', () => {
  const cases: Array<[string, string[]]> = [
    ['the browser engine', ['--engine', 'browser']],
    ['a --browser flag', ['--oracle-arg', '--browser']],
    ['a --browser-* flag', ['--oracle-arg', '--browser-manual-login']],
    ['a --remote-* flag', ['--oracle-arg', '--remote-host=example:9473']],
    ['--followup', ['--oracle-arg', '--followup=sess']],
    ['a second model list', ['--oracle-arg', '--models=gpt-5.5,gpt-5.4']],
  ];
  for (const [name, args] of cases) {
    it(`refuses ${name} as a config error before anything runs`, () => {
      const result = coo(['watch', '--ledger', '/nonexistent.git', '--key', '/nonexistent.key', '--repo', '/tmp', '--once', ...args]);
      expect(result.status).toBe(2);
      expect(result.stderr).toMatch(/^coo: ORACLE_CONFIG: /);
    });
  }

  it('has no transport state left behind by a refused configuration', () => {
    expect(existsSync('/nonexistent.git')).toBe(false);
  });
});
