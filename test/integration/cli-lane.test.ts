import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeModelServer, type FakeModelServer } from '../../src/offline/fake-model-server.js';
import { coo, cooAsync, json } from '../helpers/cli.js';
import { makeTargetRepo } from '../helpers/lane.js';
import { git, tempDir } from '../helpers/tmp.js';

const dir = tempDir();
const keys = join(dir, 'keys');
const ledger = join(dir, 'ledger.git');
const target = join(dir, 'target');
let server: FakeModelServer;

beforeAll(async () => {
  server = await startFakeModelServer();
  for (const actor of ['ceo', 'coo.hermes']) expect(coo(['keygen', '--actor', actor, '--out', keys]).status).toBe(0);
  expect(coo(['init', '--ledger', ledger, '--ceo-key', join(keys, 'ceo.key'), '--actor', `coo.hermes=${join(keys, 'coo.hermes.pub')}`]).status).toBe(0);
  makeTargetRepo(target);
});
afterAll(async () => {
  await server.close();
});

const env = { COO_LEDGER: ledger, COO_KEY: join(keys, 'coo.hermes.key'), OPENAI_API_KEY: 'sk-cli-test' };
const watchOnce = (): ReturnType<typeof cooAsync> =>
  cooAsync(['watch', '--once', '--repo', target, '--state-dir', join(dir, 'state'), '--oracle-base-url', `${server.url}/v1`], { env });

describe('the lane from the command line', () => {
  let messageId = '';

  it('enqueues a consult and prints its id, or the whole envelope with --json', () => {
    const result = coo(['consult', '--to', 'aa.chatgpt', '--repo', target, '--file', 'src/**', '--prompt', 'Review add().', '--max-cost', '0.5', '--ttl', '30m', '--idempotency-key', 'cli-1', '--json'], { env });
    expect(result.stderr).toBe('');
    expect(result.status).toBe(0);
    const printed = json<{ message_id: string; envelope: { context_pin: { files: Array<{ path: string }> }; budget: { max_cost_usd: number } } }>(result);
    messageId = printed.message_id;
    expect(printed.envelope.context_pin.files.map((file) => file.path)).toEqual(['src/add.ts']);
    expect(printed.envelope.budget.max_cost_usd).toBe(0.5);
    const again = coo(['consult', '--to', 'aa.chatgpt', '--repo', target, '--file', 'src/**', '--prompt', 'Review add().', '--max-cost', '0.5', '--idempotency-key', 'cli-1'], { env });
    expect(again.stdout).toBe(`${messageId}\n`);
    expect(again.stderr).toContain(`coo consult: ${messageId} (already queued`);
  });

  it('refuses bad consult input with coded errors', () => {
    const cases: Array<[string[], number, RegExp]> = [
      [['--to', 'aa.chatgpt', '--repo', target, '--file', 'src/**'], 2, /exactly one of --prompt or --prompt-file/],
      [['--to', 'aa.chatgpt', '--repo', target, '--file', '../etc/passwd', '--prompt', 'x'], 3, /CONTEXT_INVALID: .*escapes the repository/],
      [['--to', 'aa.chatgpt', '--repo', target, '--file', 'nothing/**', '--prompt', 'x'], 3, /CONTEXT_INVALID: .*matches nothing/],
      [['--to', 'aa.chatgpt', '--repo', target, '--rev', 'no-such-rev', '--file', 'src/**', '--prompt', 'x'], 3, /CONTEXT_INVALID/],
      [['--to', 'aa.grok', '--repo', target, '--file', 'src/**', '--prompt', 'x'], 3, /ACTOR_UNKNOWN/],
      [['--to', 'ea.codex', '--repo', target, '--file', 'src/**', '--prompt', 'x'], 3, /POLICY_EDGE_NOT_ALLOWED|POLICY_INTENT_NOT_ALLOWED/],
      [['--to', 'aa.chatgpt', '--repo', target, '--file', 'src/**', '--prompt', 'x', '--ttl', 'soon'], 2, /--ttl takes a duration/],
    ];
    for (const [args, status, stderr] of cases) {
      const result = coo(['consult', ...args], { env });
      expect(result.status, args.join(' ')).toBe(status);
      expect(result.stderr).toMatch(stderr);
    }
  });

  it('runs the queued consult with coo watch --once and shows a succeeded message', async () => {
    const result = await watchOnce();
    expect(result.status).toBe(0);
    expect(result.stderr).toContain(`receipt ${messageId} attempt 1: succeeded`);
    const shown = json<{ lane_state: string; attempts: Array<{ receipt: { document: { status: string } } }> }>(coo(['show', messageId, '--json'], { env }));
    expect(shown.lane_state).toBe('succeeded');
    expect(shown.attempts[0]!.receipt.document.status).toBe('succeeded');
  });

  it('shows a consult with its question, pinned context, budget, each attempt with its receipt, and where the answer is; --answer prints the answer', () => {
    const text = coo(['show', messageId], { env }).stdout;
    const receipt = json<{ attempts: Array<{ consult: { answer_ref: string; answer_hash: string; model: string } }> }>(coo(['show', messageId, '--json'], { env })).attempts[0]!.consult;
    expect(text.split('\n')).toEqual([
      `${messageId} aa_consult coo.hermes -> aa.chatgpt: succeeded`,
      '  question:',
      '    Review add().',
      expect.stringMatching(/^ {2}context: 1 file\(s\) pinned at [0-9a-f]{40}: src\/add\.ts$/),
      expect.stringMatching(/^ {2}budget: at most \$0\.5 and \d+ s; starts by \S+, ends by \S+$/),
      expect.stringMatching(new RegExp(`^ {2}attempt 1 aa_attempt_${messageId.slice(4)}_1: claimed by \\S+, succeeded messages/\\S+/receipts/001\\.yaml$`)),
      expect.stringMatching(/^ {4}model \S+ \(openai-compatible, offline\), cost \$[\d.]+, \$[\d.]+ of the budget left$/),
      `    answer ${receipt.answer_ref} ${receipt.answer_hash} (coo show --answer prints it)`,
      '',
    ]);
    const answer = coo(['show', messageId, '--answer'], { env });
    expect(answer.status).toBe(0);
    expect(answer.stdout).toContain('```aa_answer');
    expect(coo(['show', messageId, '--answer', '--json'], { env }).stdout).toContain(`"answer_ref": "${receipt.answer_ref}"`);
  });

  it('holds consults with the kill switch and releases them', async () => {
    expect(coo(['kill-switch', 'on', '--reason', 'spend review'], { env }).status).toBe(0);
    const queued = json<{ message_id: string }>(coo(['consult', '--to', 'aa.chatgpt', '--repo', target, '--file', 'README.md', '--prompt', 'Anything?', '--json'], { env }));
    expect((await watchOnce()).stderr).toContain(`receipt ${queued.message_id} attempt 1: blocked (kill_switch)`);
    expect(coo(['kill-switch', 'off', '--reason', 'done'], { env }).status).toBe(0);
    expect(coo(['kill-switch', 'maybe', '--reason', 'x'], { env }).status).toBe(2);
    expect(coo(['verify'], { env }).status).toBe(0);
  });

  it('notes at start when git has stopped packing the ledger after a failed background run', async () => {
    expect((await watchOnce()).stderr).not.toContain('note:');
    const log = join(ledger, 'gc.log');
    writeFileSync(log, 'fatal: write error: No space left on device\n');
    try {
      const result = await watchOnce();
      expect(result.status).toBe(0);
      expect(result.stderr).toContain(`coo watch: note: git's last background packing of this ledger failed, and git skips packing it while ${log} is there (for up to a day, gc.logExpiry; git said "fatal: write error: No space left on device")`);
    } finally {
      rmSync(log);
    }
  });
});

describe('coo watch', () => {
  it('wakes when a new envelope is committed, writes its receipt and heartbeats, and stops cleanly on SIGTERM', async () => {
    const { spawn } = await import('node:child_process');
    const { COO } = await import('../helpers/cli.js');
    const child = spawn(process.execPath, [COO, 'watch', '--json', '--heartbeat', '--repo', target, '--state-dir', join(dir, 'state'), '--oracle-base-url', `${server.url}/v1`], {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const events: Array<{ type: string; messageId?: string; status?: string; time?: string }> = [];
    let buffered = '';
    child.stdout.on('data', (chunk: Buffer) => {
      buffered += chunk.toString('utf8');
      const lines = buffered.split('\n');
      buffered = lines.pop() ?? '';
      for (const line of lines) if (line.trim() !== '') events.push(JSON.parse(line) as { type: string });
    });
    const until = async (check: () => boolean): Promise<void> => {
      for (let i = 0; i < 800 && !check(); i += 1) await new Promise((resolve) => setTimeout(resolve, 25));
      expect(check()).toBe(true);
    };
    await until(() => events.some((event) => event.type === 'heartbeat'));
    const queued = json<{ message_id: string }>(await cooAsync(['consult', '--to', 'aa.chatgpt', '--repo', target, '--file', 'README.md', '--prompt', 'Watch me.', '--json'], { env }));
    await until(() => events.some((event) => event.type === 'receipt' && event.messageId === queued.message_id));
    expect(events.find((event) => event.type === 'receipt' && event.messageId === queued.message_id)?.status).toBe('succeeded');
    // Every line says when it was printed, so runners' streams can be laid side by side.
    for (const event of events) expect(event.time).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
    child.kill('SIGTERM');
    const code = await new Promise<number | null>((resolve) => child.on('exit', (status) => resolve(status)));
    expect(code).toBe(0);
    expect(coo(['verify'], { env }).status).toBe(0);
  });
});

describe('coo demo', () => {
  it('runs the whole lane offline and leaves a ledger that verifies', () => {
    const demoDir = join(dir, 'demo');
    const result = coo(['demo', '--dir', demoDir]);
    expect(result.stderr).toBe('');
    expect(result.status).toBe(0);
    expect(result.stdout).toContain(': succeeded');
    expect(result.stdout).toContain('blocker output_injection');
    expect(result.stdout).toMatch(/coo verify: ok/);
    expect(coo(['verify', '--ledger', join(demoDir, 'ledger.git')]).status).toBe(0);
    // Each step is numbered once, and the story says what its sandbox is.
    const steps = result.stdout.split('\n').flatMap((line) => /^(\d+)\. /.exec(line)?.[1] ?? []);
    expect(steps).toEqual(['1', '2', '3', '4', '5', '6', '7', '8', '9', '10', '11', '12']);
    expect(result.stdout).toContain('runs Oracle or Codex under bubblewrap');
    // Again in the same folder: it says it replaces the earlier demo, keys included; --json gives the outcome.
    const again = coo(['demo', '--dir', demoDir, '--json']);
    expect(again.status).toBe(0);
    expect(again.stderr.split('\n')[0]).toBe(`coo demo: replacing the earlier demo in ${demoDir}: its keys, ledger, target repository and runner state are deleted`);
    expect(json<Record<string, unknown>>(again)).toMatchObject({ dir: demoDir, isolation: 'bwrap', consults: [{ lane_state: 'succeeded' }, { lane_state: 'failed' }], verify: { ok: true } });
    expect(coo(['demo', '--dir', target]).status).toBe(2);
  });

  it('dispatches to the real Codex CLI, which fixes the target repository on a branch the runner verified, committed and signed, and stock git reads that signature as Good', () => {
    const demoDir = join(dir, 'demo-dispatch');
    const result = coo(['demo', '--dir', demoDir]);
    expect(result.status).toBe(0);
    const messageId = /dispatch (msg_\w+) queued to ea\.codex/.exec(result.stdout)![1]!;
    expect(result.stdout).toContain(`dispatch ${messageId}: succeeded`);
    expect(result.stdout).toContain('verified by the runner: `node --test` exit 0');
    const shown = json<{ attempts: Array<{ receipt: { document: Record<string, unknown> } }> }>(coo(['show', messageId, '--ledger', join(demoDir, 'ledger.git'), '--json']));
    const receipt = shown.attempts[0]!.receipt.document;
    expect(receipt).toMatchObject({ schema_version: 'ea_receipt.v0', status: 'succeeded', executor: 'codex', files_changed: ['src/mean.js'], tests_run: ['node --test'], blockers: [] });
    const repo = join(demoDir, 'target');
    const branch = receipt['branch'] as string;
    expect(git(['-C', repo, 'rev-parse', branch]).trim()).toBe(receipt['head_sha']);
    expect(git(['-C', repo, 'show', `${branch}:src/mean.js`])).toContain('/ xs.length;');
    expect(git(['-C', repo, 'show', 'main:src/mean.js'])).toContain('/ (xs.length + 1);');
    const signers = join(demoDir, 'allowed_signers');
    expect(git(['-C', repo, '-c', 'gpg.format=ssh', '-c', `gpg.ssh.allowedSignersFile=${signers}`, 'log', '-1', '--format=%G? %GS', branch]).trim()).toBe('G coo.hermes');
  });
});
