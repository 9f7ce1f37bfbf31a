import { cpSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isCooError } from '../../src/errors.js';
import { createHash } from 'node:crypto';
import Ajv2020 from 'ajv/dist/2020.js';
import { STATEMENT_TYPE } from '../../src/audit/attest.js';
import { DISPATCH_PREDICATE_TYPE } from '../../src/audit/dispatch-attest.js';
import { formatPrivateKey, formatPublicKeyLine } from '../../src/crypto/keys.js';
import { approve } from '../../src/dispatch/approve.js';
import { pinnedCodexCommand } from '../../src/dispatch/codex.js';
import { enqueueDispatch, type DispatchRequest } from '../../src/dispatch/enqueue.js';
import { executorFactory } from '../../src/dispatch/executors.js';
import { startScriptedResponsesServer, type ScriptTurn, type ScriptedModelServer } from '../../src/offline/fake-responses-server.js';
import { showOutput } from '../../src/mcp/schemas.js';
import { showTool } from '../../src/mcp/tools.js';
import { coo, json } from '../helpers/cli.js';
import { statementOf, verifyDsse, type Dsse } from '../helpers/dsse.js';
import { makeTargetRepo } from '../helpers/dispatch-repo.js';
import { makeWorld, type World } from '../helpers/lane.js';
import { git, gitEnv, tempDir } from '../helpers/tmp.js';

/**
 * The audit side of the dispatch lane, through the built CLI: `coo show`, `coo report --html`,
 * `coo log`, `coo verify` and `coo cite` over a ledger holding a dispatch the real Codex CLI did,
 * one whose verification failed and that the CEO approved to retry, and one the CEO approved
 * before it was written.
 */

const dir = tempDir('dispatch-audit');
const FIX: ScriptTurn = { kind: 'patch', patch: '*** Update File: src/add.js\n@@\n-export const add = (a, b) => a - b;\n+export const add = (a, b) => a + b;' };
const DONE: ScriptTurn = { kind: 'message', text: 'Fixed add(); test.sh passes.' };

let w: World;
let model: ScriptedModelServer;
let ledger = '';
let base = '';
let fixed = '';
let broken = '';
let approved = '';
let retryApproval = '';
let dispatchApproval = '';
let ceoKeyFile = '';

beforeAll(async () => {
  w = await makeWorld(join(dir, 'world'));
  ledger = w.gitdir;
  const repo = join(w.dir, 'work');
  base = makeTargetRepo(repo);
  model = await startScriptedResponsesServer([FIX, DONE]);
  const executors = executorFactory({ command: pinnedCodexCommand(), baseUrl: `${model.url}/v1`, hide: [w.gitdir], env: { ...process.env, OPENAI_API_KEY: 'sk-test-key' } });
  const runner = w.runner({ repo, executors });
  const dispatch = (overrides: Partial<DispatchRequest>) =>
    enqueueDispatch({ ledger: w.ledger, key: w.actors.coo, now: new Date(), target: 'ea.codex', repo, task: 'Fix add() so that test.sh passes.', scope: ['src/**'], accept: ['test.sh passes'], verify: ['sh test.sh'], timeoutSeconds: 120, maxRuntimeSeconds: 120, ...overrides });
  fixed = (await dispatch({ idempotencyKey: 'audit-fixed' })).messageId;
  await runner.runOnce();
  model.setScript([FIX, DONE]);
  broken = (await dispatch({ idempotencyKey: 'audit-broken', verify: ['sh test.sh', 'exit 3'] })).messageId;
  await runner.runOnce();
  runner.close();
  retryApproval = (await approve({ ledger: w.ledger, key: w.actors.ceo, now: new Date(), messageId: broken, reason: 'the second verification command was wrong; run it again' })).approval.approval_id;
  const claude: Partial<DispatchRequest> = { target: 'ea.claude_code', idempotencyKey: 'audit-approved', task: 'Add a test for add(-1, 1).' };
  const hash = await dispatch(claude).then(
    () => null,
    (error: unknown) => (isCooError(error) && error.code === 'APPROVAL_REQUIRED' ? String(error.where) : null),
  );
  expect(hash).toMatch(/^sha256:/);
  dispatchApproval = (await approve({ ledger: w.ledger, key: w.actors.ceo, now: new Date(), requestHash: hash!, reason: 'Claude Code may add the test' })).approval.approval_id;
  approved = (await dispatch({ ...claude, approvalId: dispatchApproval })).messageId;
  ceoKeyFile = join(dir, 'ceo.key');
  writeFileSync(ceoKeyFile, formatPrivateKey(w.actors.ceo), { mode: 0o600 });
}, 240_000);

afterAll(async () => {
  await w.close();
  await model.close();
});

interface ShownDispatch {
  dispatch: { task: string; base_sha: string; scope_paths: string[]; acceptance_criteria: string[]; verification_commands: string[]; approval: { approval_id: string; approved_by: string; reason: string; used_by: string | null } | null; retry_approvals: Array<{ approval_id: string; approves: string; attempt_number: number }> };
  attempts: Array<{
    dispatch?: {
      status: string;
      blockers: Array<{ code: string }>;
      executor: string;
      model: string | null;
      branch: string | null;
      head_sha: string | null;
      files: Array<{ path: string; sha256: string | null }>;
      commands: Array<{ command: string; exit_code: number; by: string }>;
      cost_usd: number;
      attachments: Array<{ path: string; sha256: string }>;
    };
  }>;
}

/** Adds a commit to a copy of the ledger behind the hook's back, as anyone with write access to the files could. */
function bypass(gitdir: string, files: Record<string, string>, key: string): void {
  const work = join(dir, `bypass-${Math.random().toString(36).slice(2)}`);
  git(['clone', '-q', gitdir, work]);
  const seq = Number(/Ledger-Seq: (\d+)/.exec(git(['log', '-1', '--format=%B'], { cwd: work }))![1]) + 1;
  for (const [path, content] of Object.entries(files)) {
    mkdirSync(join(work, path, '..'), { recursive: true });
    writeFileSync(join(work, path), content);
  }
  git(['add', '-A'], { cwd: work });
  git(['-c', 'gpg.format=ssh', '-c', `user.signingkey=${key}`, 'commit', '-q', '-S', '-m', 'bypass', '-m', `Ledger-Seq: ${seq}`], { cwd: work, env: gitEnv() });
  git(['--git-dir', gitdir, 'fetch', '-q', work, 'main:refs/heads/main']);
}

describe('coo show on a dispatch', () => {
  it('prints the task, base, scope, acceptance, verification and each attempt\'s executor, branch, files, commands, cost and attachments', () => {
    const result = coo(['show', fixed, '--ledger', ledger]);
    expect(result.status).toBe(0);
    const text = result.stdout;
    expect(text).toContain(`${fixed} ea_dispatch coo.hermes -> ea.codex: succeeded`);
    expect(text).toContain('    Fix add() so that test.sh passes.');
    expect(text).toContain(`base ${base}`);
    expect(text).toContain('scope: src/**');
    expect(text).toContain('accept: test.sh passes');
    expect(text).toContain('verify: sh test.sh');
    expect(text).toContain('executor codex, model gpt-5.5');
    expect(text).toMatch(/branch coo\/\S+ at [0-9a-f]{40} \(base [0-9a-f]{40}\), committed and signed by the runner/);
    expect(text).toMatch(/changed src\/add\.js sha256:[0-9a-f]{64}/);
    expect(text).toContain('verified `sh test.sh` exit 0');
    expect(text).toMatch(/cost \$[\d.]+ \(\d+ tokens\)/);
    expect(text).toMatch(/attachment \S+\/codex-events\.jsonl sha256:[0-9a-f]{64}/);
    expect(text).toMatch(/attachment \S+\/verify-01\.log sha256:[0-9a-f]{64}/);
  });

  it('prints a failed verification with its exit code and blocker, and the CEO\'s approval of the retry', () => {
    const text = coo(['show', broken, '--ledger', ledger]).stdout;
    expect(text).toContain(`${broken} ea_dispatch coo.hermes -> ea.codex:`);
    expect(text).toContain('blocker tests_failed');
    expect(text).toContain('verified `exit 3` exit 3');
    expect(text).toContain(`approval ${retryApproval} by ceo`);
    expect(text).toContain(`retry of ${broken} as attempt 2; reason: the second verification command was wrong; run it again`);
    expect(text).toContain('  attempt 2: approved, not run yet');
  });

  it('prints the CEO\'s approval of a dispatch the policy gives to the CEO', () => {
    const text = coo(['show', approved, '--ledger', ledger]).stdout;
    expect(text).toContain(`${approved} ea_dispatch coo.hermes -> ea.claude_code: queued`);
    expect(text).toMatch(new RegExp(`approval ${dispatchApproval} by ceo at \\S+ \\(expires \\S+\\): dispatch request sha256:[0-9a-f]{64} \\(used by ${approved}\\); reason: Claude Code may add the test`));
  });

  it('carries the same with --json: the request, its approval, and each attempt\'s evidence with commands paired to exit codes', () => {
    const view = json<ShownDispatch>(coo(['show', fixed, '--ledger', ledger, '--json']));
    expect(view.dispatch).toMatchObject({ task: 'Fix add() so that test.sh passes.\n', base_sha: base, scope_paths: ['src/**'], acceptance_criteria: ['test.sh passes'], verification_commands: ['sh test.sh'], approval: null });
    const evidence = view.attempts[0]!.dispatch!;
    expect(evidence).toMatchObject({ status: 'succeeded', blockers: [], executor: 'codex', model: 'gpt-5.5' });
    expect(git(['-C', join(w.dir, 'work'), 'rev-parse', evidence.branch!]).trim()).toBe(evidence.head_sha);
    expect(evidence.files).toEqual([{ path: 'src/add.js', sha256: expect.stringMatching(/^sha256:[0-9a-f]{64}$/) as unknown as string }]);
    expect(evidence.commands.at(-1)).toEqual({ command: 'sh test.sh', exit_code: 0, by: 'verification' });
    expect(evidence.cost_usd).toBeGreaterThan(0);
    expect(evidence.attachments.map((item) => item.path.split('/').pop())).toEqual(expect.arrayContaining(['codex-events.jsonl', 'verify-01.log', 'final-message.md']));
    const failed = json<ShownDispatch>(coo(['show', broken, '--ledger', ledger, '--json']));
    expect(failed.attempts[0]!.dispatch!.commands.slice(-2)).toEqual([
      { command: 'sh test.sh', exit_code: 0, by: 'verification' },
      { command: 'exit 3', exit_code: 3, by: 'verification' },
    ]);
    expect(failed.dispatch.retry_approvals).toHaveLength(1);
    expect(failed.dispatch.retry_approvals[0]).toMatchObject({ approval_id: retryApproval, approves: 'retry', attempt_number: 2 });
    const queued = json<ShownDispatch>(coo(['show', approved, '--ledger', ledger, '--json']));
    expect(queued.dispatch.approval).toMatchObject({ approval_id: dispatchApproval, approved_by: 'ceo', reason: 'Claude Code may add the test', used_by: approved });
  });

  it('gives the MCP show tool a dispatch its output schema accepts, with the same request and evidence', async () => {
    const view = await showTool({ ledger: w.ledger, key: w.actors.coo, repo: join(w.dir, 'work'), auditDir: null, clock: () => new Date() }, { message_id: fixed });
    const parsed = showOutput.parse(view) as unknown as ShownDispatch;
    expect(parsed.dispatch.verification_commands).toEqual(['sh test.sh']);
    expect(parsed.attempts[0]!.dispatch!.status).toBe('succeeded');
  });

  it('shows an approval by its id: who approved what, and what used it', () => {
    const text = coo(['show', dispatchApproval, '--ledger', ledger]).stdout;
    expect(text).toMatch(new RegExp(`^approval ${dispatchApproval} by ceo .*used by ${approved}`));
    expect(json(coo(['show', retryApproval, '--ledger', ledger, '--json']))).toMatchObject({ approval_id: retryApproval, approves: 'retry', message_id: broken, attempt_number: 2, approved_by: 'ceo' });
  });

  it('keeps control characters in the task from reaching the terminal', async () => {
    const repo = join(w.dir, 'work');
    const { messageId } = await enqueueDispatch({ ledger: w.ledger, key: w.actors.coo, now: new Date(), target: 'ea.codex', repo, task: 'Fix add().\u001b[2J\u001b]0;owned\u0007 now', scope: ['src/**'], accept: ['ok'], verify: ['sh test.sh'], idempotencyKey: 'audit-escape' });
    const text = coo(['show', messageId, '--ledger', ledger]).stdout;
    expect(text).not.toContain('\u001b');
    expect(text).not.toContain('\u0007');
    expect(text).toContain('Fix add().\\u001b[2J\\u001b]0;owned\\u0007 now');
  });
});

describe('coo report --html and coo log on dispatches', () => {
  it('lists each dispatch attempt with its branch, verification and cost, and each approval with who approved what', () => {
    const out = join(dir, 'report.html');
    const result = coo(['report', '--ledger', ledger, '--html', out]);
    expect(result.status).toBe(0);
    const html = readFileSync(out, 'utf8');
    const section = /<section id="dispatches">([\s\S]*?)<\/section>/.exec(html)?.[1] ?? '';
    const rows = section.split('<tr class="dispatch').slice(1);
    const row = (id: string, attempt: number) => rows.find((item) => item.includes(id) && item.includes(`attempt ${attempt}<`)) ?? '';
    expect(row(fixed, 1)).toMatch(/data-status="succeeded"/);
    expect(row(fixed, 1)).toMatch(/<code>coo\/[^<]+<\/code> at <code class="nowrap" title="[0-9a-f]{40}">/);
    expect(row(fixed, 1)).toContain('<span class="badge ok" title="exit 0">exit 0</span> <code>sh test.sh</code>');
    expect(row(fixed, 1)).toMatch(/data-label="cost">\$0\.\d+/);
    expect(row(broken, 1)).toContain('<span class="badge bad" title="exit 3">exit 3</span> <code>exit 3</code>');
    expect(row(broken, 1)).toContain('tests_failed');
    expect(row(broken, 2)).toContain('approved, not run yet');
    expect(row(broken, 2)).toContain(`<code class="nowrap">${retryApproval}</code> <small>by ceo</small>`);
    expect(section).toMatch(new RegExp(`${approved}[\\s\\S]*?<code class="nowrap">${dispatchApproval}</code> <small>by ceo</small>`));
    const approvals = /<section id="approvals">([\s\S]*?)<\/section>/.exec(html)?.[1] ?? '';
    expect(approvals).toContain('Claude Code may add the test');
    expect(approvals).toMatch(new RegExp(`${dispatchApproval}[\\s\\S]*?ceo[\\s\\S]*?a dispatch: request <code>sha256:[0-9a-f]{64}</code> <small>used by</small> <code class="nowrap">${approved}</code>`));
    expect(approvals).toContain(`a retry: <code class="nowrap">${broken}</code> attempt 2`);
    const timeline = /<section id="timeline">([\s\S]*?)<\/section>/.exec(html)?.[1] ?? '';
    expect(timeline).toContain(`approval ${retryApproval} by ceo: retry of ${broken} as attempt 2`);
    expect(timeline).toContain(`approval ${dispatchApproval} by ceo: dispatch request sha256:`);
  });

  it('labels approval commits in coo log by who approved what', () => {
    const entries = json<Array<{ signer: { actor: string } | null; summary: string; files: string[] }>>(coo(['log', '--ledger', ledger, '-n', '50', '--json']));
    const retry = entries.find((entry) => entry.files.some((file) => file.includes(retryApproval)))!;
    expect(retry.signer?.actor).toBe('ceo');
    expect(retry.summary).toBe(`approval ${retryApproval}: retry ${broken} as attempt 2`);
    const text = coo(['log', '--ledger', ledger, '-n', '50']).stdout;
    expect(text).toMatch(new RegExp(`ceo: approval ${dispatchApproval} of dispatch request sha256:[0-9a-f]{64}`));
  });
});

describe('coo verify and coo cite on dispatches', () => {
  it('verifies a ledger with dispatches, approvals and ea receipts clean with --full', () => {
    const report = json<{ ok: boolean; findings: Array<{ code: string }>; replayed: number }>(coo(['verify', '--ledger', ledger, '--full', '--json']));
    expect(report.findings.filter((finding) => finding.code !== 'HEARTBEAT_EXPIRED')).toEqual([]);
    expect(report.replayed).toBeGreaterThan(10);
  });

  it('finds an approval changed by one byte in a CEO-signed commit written behind the hook\'s back', () => {
    const copy = join(dir, 'tampered.git');
    cpSync(ledger, copy, { recursive: true });
    const path = git(['--git-dir', copy, 'ls-tree', '-r', '--name-only', 'main']).split('\n').find((file) => file.endsWith(`${retryApproval}.yaml`))!;
    const original = git(['--git-dir', copy, 'show', `main:${path}`]);
    const changed = original.replace('run it again', 'run it agaim');
    expect(changed).not.toBe(original);
    bypass(copy, { [path]: changed }, ceoKeyFile);
    const result = coo(['verify', '--ledger', copy, '--full', '--json']);
    expect(result.status).toBe(3);
    const findings = json<{ findings: Array<{ code: string; path?: string }> }>(result).findings.filter((finding) => finding.code !== 'HEARTBEAT_EXPIRED');
    expect(findings.length).toBeGreaterThan(0);
    expect(findings.some((finding) => finding.path?.startsWith(path) === true)).toBe(true);
    expect(findings.map((finding) => finding.code)).toContain('WRITE_ONCE');
  });

  it('attests a dispatch: the signed head commit and the changed files are the subjects, the receipt\'s evidence the predicate, and @sigstore/verify accepts it with the COO public key only', () => {
    const cooKey = join(dir, 'coo.key');
    writeFileSync(cooKey, formatPrivateKey(w.actors.coo), { mode: 0o600 });
    const out = join(dir, 'dispatch.intoto.json');
    const result = coo(['attest', fixed, '--ledger', ledger, '--key', cooKey, '--out', out]);
    expect(result.stderr).toBe('');
    expect(result.status).toBe(0);
    const dsse = JSON.parse(readFileSync(out, 'utf8')) as Dsse;
    expect(verifyDsse(dsse, formatPublicKeyLine(w.actors.coo.publicKey))).toBeDefined();
    expect(() => verifyDsse(dsse, formatPublicKeyLine(w.actors.ceo.publicKey))).toThrow(/signature verification failed/);
    const statement = statementOf<{ _type: string; predicateType: string; subject: Array<{ name: string; digest: Record<string, string> }>; predicate: Record<string, unknown> }>(dsse);
    expect(statement._type).toBe(STATEMENT_TYPE);
    expect(statement.predicateType).toBe(DISPATCH_PREDICATE_TYPE);
    const receipt = json<{ attempts: Array<{ receipt: { document: { branch: string; head_sha: string } } }> }>(coo(['show', fixed, '--ledger', ledger, '--json'])).attempts[0]!.receipt.document;
    const repo = join(w.dir, 'work');
    // The head the receipt names is the branch's commit in the target repository, signed by the COO.
    expect(git(['rev-parse', receipt.branch], { cwd: repo }).trim()).toBe(receipt.head_sha);
    const [head, ...rest] = statement.subject;
    expect(head).toEqual({ name: `local/work@${receipt.branch}`, digest: { gitCommit: receipt.head_sha } });
    const files = rest.slice(0, -1);
    expect(files.map((file) => file.name)).toEqual(['src/add.js']);
    for (const file of files) expect(createHash('sha256').update(git(['show', `${receipt.head_sha}:${file.name}`], { cwd: repo })).digest('hex')).toBe(file.digest['sha256']);
    expect(rest.at(-1)!.name).toMatch(/\/envelope\.yaml$/);
    expect(statement.predicate).toMatchObject({
      authority: 'governed_execution',
      message: { message_id: fixed, intent: 'ea_dispatch', source_actor: 'coo.hermes', target_actor: 'ea.codex' },
      attempt: { attempt_number: 1, status: 'succeeded', blockers: [] },
      base: { base_sha: base },
      scope: ['src/**'],
      branch: receipt.branch,
      head_sha: receipt.head_sha,
      verification: [{ command: 'sh test.sh', exit_code: 0 }],
      executor: { kind: 'codex' },
    });
    const schema = JSON.parse(readFileSync(join(import.meta.dirname, '..', '..', 'docs', 'attestation', 'dispatch-receipt.v0.schema.json'), 'utf8')) as object;
    const ajv = new Ajv2020.default({ strict: true, allErrors: true });
    expect(ajv.validate(schema, statement.predicate), JSON.stringify(ajv.errors)).toBe(true);
  });

  it('refuses to cite a dispatch, saying where its evidence is instead', () => {
    const result = coo(['cite', fixed, '--ledger', ledger]);
    expect(result.status).toBe(2);
    expect(result.stdout).toBe('');
    expect(result.stderr).toContain(`${fixed} is ea_dispatch: only advisory consults are cited`);
    expect(result.stderr).toContain(`coo show ${fixed}`);
  });
});
