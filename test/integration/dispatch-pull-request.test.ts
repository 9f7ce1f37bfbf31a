import { mkdirSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { inspect } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generatePrivateKey } from '../../src/crypto/keys.js';
import { isCooError } from '../../src/errors.js';
import type { ChangedFile } from '../../src/dispatch/evidence.js';
import { pullRequestMarker, type PullRequestEvidence } from '../../src/dispatch/pull-request-body.js';
import { publishAttempt, pushAttemptBranch, type PublishOptions } from '../../src/dispatch/pull-request.js';
import { eaReceipt, type EaReceipt } from '../../src/schema/receipt.js';
import { codeOfAsync } from '../helpers/codes.js';
import { committedAttempt } from '../helpers/dispatch-attempt.js';
import { makeTargetRepo } from '../helpers/dispatch-repo.js';
import { startFakeGitHub, type FakeGitHub } from '../helpers/fake-github.js';
import { startGitHttpServer, type GitHttpServer } from '../helpers/git-http-server.js';
import { git, tempDir } from '../helpers/tmp.js';

/**
 * `--open-pr`: a succeeded attempt's branch pushed with the runner's token over git's smart HTTP
 * (stock `git http-backend` behind Basic authentication on 127.0.0.1) and one pull request opened
 * on a fake GitHub API on 127.0.0.1.
 */
const dir = tempDir('coo-dispatch-pr-');
const target = join(dir, 'target');
const base = makeTargetRepo(target);
const projectRoot = join(dir, 'served');
const remote = join(projectRoot, 'target.git');
const key = generatePrivateKey('coo.hermes');
const TOKEN = 'ghs_TestToken0123456789abcdefSECRET';
/** The token as git sends it: Basic credentials, base64. */
const BASIC = Buffer.from(`x-access-token:${TOKEN}`).toString('base64');
const SLUG = { owner: 'acme', repo: 'target' };
let github: FakeGitHub;
let server: GitHttpServer;
let n = 0;

beforeAll(async () => {
  mkdirSync(projectRoot);
  git(['init', '-q', '--bare', '-b', 'main', remote]);
  git(['push', '-q', remote, `${base}:refs/heads/main`], { cwd: target });
  github = await startFakeGitHub({ headExists: (_owner, _repo, branch) => remoteHead(branch) !== null });
  server = await startGitHttpServer({ projectRoot, token: TOKEN });
});

afterAll(async () => {
  await github.close();
  await server.close();
});

function remoteHead(branch: string): string | null {
  try {
    return git(['--git-dir', remote, 'rev-parse', '--verify', '--quiet', `refs/heads/${branch}`]).trim();
  } catch {
    return null;
  }
}

interface Attempt {
  readonly attemptId: string;
  readonly branch: string;
  readonly gitdir: string;
  readonly head: string;
  readonly files: readonly ChangedFile[];
}

/** One attempt's work committed by the COO on its own branch, as the runner leaves it after the receipt. */
async function attempt(): Promise<Attempt> {
  n += 1;
  return committedAttempt({ dir, repo: target, base, key }, n, `ea_attempt_PR${n}`);
}

function receiptOf(work: Attempt, status: EaReceipt['status'] = 'succeeded'): EaReceipt {
  return eaReceipt.parse({
    schema_version: 'ea_receipt.v0',
    message_id: 'msg_01JDX0000000000000000000AB',
    attempt_id: work.attemptId,
    attempt_number: 1,
    target_actor: 'ea.codex',
    status,
    created_at: '2026-12-01T12:00:05Z',
    blockers: status === 'succeeded' ? [] : [{ code: 'tests_failed', detail: '1 verification command(s) did not exit 0: sh test.sh (exit 1)' }],
    next_attempt_at: null,
    commands_run: ["sed -i 's/a - b/a + b/' src/add.js", 'sh test.sh'],
    inner_exit_codes: status === 'succeeded' ? [0, 0] : [0, 1],
    files_changed: work.files.map((file) => file.path),
    tests_run: ['sh test.sh'],
    head_sha: work.head,
    executor: 'codex',
    executor_session_id: 'thread-pr',
    model: 'gpt-5.5',
    base_sha: base,
    branch: work.branch,
    file_hashes: work.files.map((file) => ({ path: file.path, sha256: file.sha256 })),
    attachments: [],
    policy_decision_ref: 'trust/policy/000001.yaml@sha256:0',
    usage: null,
    actual_cost_usd: 0.01,
    warnings: [],
  });
}

function evidenceOf(work: Attempt, status: EaReceipt['status'] = 'succeeded'): PullRequestEvidence {
  return {
    receipt: receiptOf(work, status),
    receiptPath: `receipts/2026/12/01/msg_01JDX0000000000000000000AB/${work.attemptId}.yaml`,
    receiptSha256: `sha256:${'ab'.repeat(32)}`,
    branch: work.branch,
    baseSha: base,
    files: work.files,
    cost: { usd: 0.0042, reported: true },
    issueNumber: 7,
  };
}

function options(work: Attempt, more: Partial<PublishOptions> = {}): PublishOptions {
  return { github: SLUG, evidence: evidenceOf(work), gitdir: work.gitdir, base: 'main', pushUrl: `${server.url}/target.git`, token: TOKEN, apiBaseUrl: github.url, ...more };
}

const creations = (): number => github.requests.filter((request) => request.method === 'POST' && request.path === '/repos/acme/target/pulls').length;

/** Every file under a folder that holds the token, as is or as git's Basic credentials. */
function filesWithToken(root: string): string[] {
  const out: string[] = [];
  const walk = (path: string): void => {
    const stat = statSync(path, { throwIfNoEntry: false });
    if (stat === undefined) return;
    if (stat.isDirectory()) for (const entry of readdirSync(path)) walk(join(path, entry));
    else if (stat.isFile()) {
      const bytes = readFileSync(path);
      if (bytes.includes(TOKEN) || bytes.includes(BASIC)) out.push(path);
    }
  };
  walk(root);
  return out;
}

describe('dispatch --open-pr', () => {
  it('opens one pull request whose body carries the receipt\'s evidence', async () => {
    const work = await attempt();
    const before = creations();
    const result = await publishAttempt(options(work));
    expect(result).toMatchObject({ created: true, pushed: 'created' });
    expect(creations()).toBe(before + 1);
    expect(remoteHead(work.branch)).toBe(work.head);
    const pull = github.pulls.find((entry) => entry.number === result.number)!;
    expect(result.url).toBe(pull.html_url);
    expect(pull).toMatchObject({ state: 'open', head: { ref: work.branch }, base: { ref: 'main' } });
    const body = pull.body!;
    expect(body.split('\n')[0]).toBe(pullRequestMarker(work.attemptId));
    expect(body).toContain(': **succeeded**');
    expect(body).toContain(`Head \`${work.head}\``);
    expect(body).toContain(`- \`src/add.js\` modified, \`${work.files[0]!.sha256}\``);
    expect(body).toContain("- `sed -i 's/a - b/a + b/' src/add.js`: exit 0");
    expect(body).toContain('**Verification, run by the COO in the attempt\'s worktree**\n- `sh test.sh`: exit 0');
    expect(body).toContain(`| receipt | \`receipts/2026/12/01/msg_01JDX0000000000000000000AB/${work.attemptId}.yaml\` \`sha256:${'ab'.repeat(32)}\` |`);
    expect(body).toContain('| cost | $0.0042 |');
    expect(body).toContain('Refs #7');
    // Octokit sent the runner's token to the API; git's push carried it as Basic credentials.
    expect(github.requests.at(-1)!.authorization).toBe(`token ${TOKEN}`);
    expect(server.requests.some((request) => request.authorization === `Basic ${BASIC}`)).toBe(true);
  });

  it('returns the same pull request for a second call of the same attempt and creates none, pushing nothing', async () => {
    const work = await attempt();
    const first = await publishAttempt(options(work));
    const pushesBefore = server.requests.length;
    const before = creations();
    const second = await publishAttempt(options(work));
    expect(second).toEqual({ url: first.url, number: first.number, created: false, pushed: null });
    expect(creations()).toBe(before);
    expect(server.requests.length).toBe(pushesBefore);
  });

  it('returns the attempt\'s closed pull request instead of opening another', async () => {
    const work = await attempt();
    const first = await publishAttempt(options(work));
    github.pulls.find((entry) => entry.number === first.number)!.state = 'closed';
    const before = creations();
    expect(await publishAttempt(options(work))).toMatchObject({ number: first.number, created: false });
    expect(creations()).toBe(before);
  });

  it('finds the attempt\'s pull request by its marker when its head no longer names the branch', async () => {
    const work = await attempt();
    const number = github.pulls.length + 1;
    github.pulls.push({ number, state: 'closed', title: 'renamed', body: `${pullRequestMarker(work.attemptId)}\nmoved`, html_url: `https://github.example/acme/target/pull/${number}`, head: { ref: 'renamed', label: 'acme:renamed' }, base: { ref: 'main' } });
    const before = creations();
    expect(await publishAttempt(options(work))).toMatchObject({ number, created: false, pushed: null });
    expect(creations()).toBe(before);
    expect(remoteHead(work.branch)).toBeNull();
  });

  it('returns the pull request another call opened between its look and its own opening, and creates none', async () => {
    const work = await attempt();
    const number = github.pulls.length + 1;
    github.onRequest = (method, path) => {
      if (method !== 'POST' || path !== '/repos/acme/target/pulls') return;
      github.onRequest = null;
      github.pulls.push({ number, state: 'open', title: 'first', body: pullRequestMarker(work.attemptId), html_url: `https://github.example/acme/target/pull/${number}`, head: { ref: work.branch, label: `acme:${work.branch}` }, base: { ref: 'main' } });
    };
    expect(await publishAttempt(options(work))).toMatchObject({ number, created: false, pushed: 'created' });
    expect(github.pulls.filter((pull) => pull.head.ref === work.branch)).toHaveLength(1);
  });

  it('opens the pull request when the branch was pushed by an earlier call that stopped before it', async () => {
    const work = await attempt();
    expect(await pushAttemptBranch({ gitdir: work.gitdir, branch: work.branch, headSha: work.head, attemptId: work.attemptId, pushUrl: `${server.url}/target.git`, token: TOKEN })).toBe('created');
    expect(await publishAttempt(options(work))).toMatchObject({ created: true, pushed: 'up_to_date' });
  });

  it('does not overwrite a remote branch that is at another commit, and opens nothing', async () => {
    const work = await attempt();
    git(['push', '-q', remote, `${base}:refs/heads/${work.branch}`], { cwd: target });
    const before = creations();
    expect(await codeOfAsync(() => publishAttempt(options(work)))).toBe('PUSH_CONFLICT');
    expect(remoteHead(work.branch)).toBe(base);
    expect(creations()).toBe(before);
  });

  it('pushes to a local bare repository without credentials, and refuses a fast-forward of a branch already there', async () => {
    const work = await attempt();
    const local = join(dir, `local-${n}.git`);
    git(['init', '-q', '--bare', local]);
    const push = { gitdir: work.gitdir, branch: work.branch, headSha: work.head, attemptId: work.attemptId, pushUrl: local, token: TOKEN };
    expect(await pushAttemptBranch(push)).toBe('created');
    expect(await pushAttemptBranch(push)).toBe('up_to_date');
    const other = join(dir, `other-${n}.git`);
    git(['init', '-q', '--bare', other]);
    git(['push', '-q', other, `${base}:refs/heads/${work.branch}`], { cwd: target });
    // The head descends from the base: a plain push would move the branch; the lane's never does.
    expect(await codeOfAsync(() => pushAttemptBranch({ ...push, pushUrl: other }))).toBe('PUSH_CONFLICT');
    expect(git(['--git-dir', other, 'rev-parse', `refs/heads/${work.branch}`]).trim()).toBe(base);
  });

  it('keeps the token out of every output, error, repository config and file', async () => {
    const leftovers = (): string[] => readdirSync(tmpdir()).filter((name) => name.startsWith('coo-push-'));
    const before = leftovers().length;
    const work = await attempt();
    const writes: string[] = [];
    const stdout = process.stdout.write.bind(process.stdout);
    const stderr = process.stderr.write.bind(process.stderr);
    const capture = (chunk: string | Uint8Array): boolean => {
      writes.push(Buffer.from(chunk).toString('utf8'));
      return true;
    };
    process.stdout.write = capture as typeof process.stdout.write;
    process.stderr.write = capture as typeof process.stderr.write;
    const errors: unknown[] = [];
    try {
      await publishAttempt(options(work));
      // A token the server refuses, a failing API and a conflicting branch: every error is coded and clean.
      const wrong = await attempt();
      errors.push(await publishAttempt(options(wrong, { token: `${TOKEN}x` })).catch((error: unknown) => error));
      github.failNext('POST', 500, `boom ${TOKEN}`);
      errors.push(await publishAttempt(options(await attempt())).catch((error: unknown) => error));
      errors.push(await pushAttemptBranch({ gitdir: work.gitdir, branch: work.branch, headSha: base, attemptId: work.attemptId, pushUrl: `${server.url}/target.git`, token: TOKEN }).catch((error: unknown) => error));
    } finally {
      process.stdout.write = stdout;
      process.stderr.write = stderr;
    }
    expect(errors.map((error) => (isCooError(error) ? error.code : inspect(error)))).toEqual(['PUSH_FAILED', 'GITHUB_FAILED', 'PR_REFUSED']);
    for (const error of errors) expect(inspect(error, { depth: 10 })).not.toContain(TOKEN);
    expect(writes.join('')).not.toContain(TOKEN);
    expect(writes.join('')).not.toContain(BASIC);
    expect(git(['config', '--file', join(target, '.git', 'config'), '--list'])).not.toContain(TOKEN);
    expect(filesWithToken(dir)).toEqual([]);
    expect(leftovers().length).toBe(before);
  });

  it('pushes past the target repository\'s own credential helper, URL rewrites and the runner\'s git tracing, so none of them gets the token', async () => {
    const work = await attempt();
    const config = join(target, '.git', 'config');
    const stored = join(dir, 'stored-credentials');
    const trace = join(dir, 'curl-trace');
    git(['config', '--file', config, 'credential.helper', `store --file=${stored}`]);
    git(['config', '--file', config, `url.${join(dir, 'nowhere.git')}.insteadOf`, server.url]);
    const saved = { GIT_TRACE_CURL: process.env['GIT_TRACE_CURL'], GIT_TRACE_REDACT: process.env['GIT_TRACE_REDACT'] };
    process.env['GIT_TRACE_CURL'] = trace;
    process.env['GIT_TRACE_REDACT'] = '0';
    try {
      expect(await publishAttempt(options(work))).toMatchObject({ created: true, pushed: 'created' });
    } finally {
      for (const [name, value] of Object.entries(saved)) {
        if (value === undefined) delete process.env[name];
        else process.env[name] = value;
      }
      git(['config', '--file', config, '--remove-section', 'credential']);
      git(['config', '--file', config, '--remove-section', `url.${join(dir, 'nowhere.git')}`]);
    }
    expect(remoteHead(work.branch)).toBe(work.head);
    expect(filesWithToken(dir)).toEqual([]);
  });

  it('turns a failed API call into a coded error, before anything is pushed when the lookup fails', async () => {
    const work = await attempt();
    github.failNext('GET', 401, 'Bad credentials');
    const error = await publishAttempt(options(work)).catch((caught: unknown) => caught);
    expect(isCooError(error) && error.code).toBe('GITHUB_FAILED');
    expect((error as Error).message).toContain('GitHub 401 on acme/target (listing pull requests): Bad credentials');
    expect(remoteHead(work.branch)).toBeNull();
  });

  it('gives up on an API that does not answer within the time box, with a coded error', async () => {
    const silent: Server = createServer(() => undefined);
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    try {
      const work = await attempt();
      const url = `http://127.0.0.1:${(silent.address() as AddressInfo).port}`;
      expect(await codeOfAsync(() => publishAttempt(options(work, { apiBaseUrl: url, timeoutMs: 200 })))).toBe('GITHUB_FAILED');
    } finally {
      silent.close();
    }
  });

  it('refuses to publish an attempt that did not succeed, or a head that is not the attempt\'s commit', async () => {
    const work = await attempt();
    const requests = github.requests.length;
    expect(await codeOfAsync(() => publishAttempt({ ...options(work), evidence: evidenceOf(work, 'failed') }))).toBe('PR_REFUSED');
    expect(github.requests.length).toBe(requests);
    const other = await attempt();
    expect(await codeOfAsync(() => pushAttemptBranch({ gitdir: work.gitdir, branch: work.branch, headSha: other.head, attemptId: work.attemptId, pushUrl: `${server.url}/target.git`, token: TOKEN }))).toBe('PR_REFUSED');
    expect(remoteHead(work.branch)).toBeNull();
  });

  it('refuses a push or API URL that carries credentials or would send the token over plain http off loopback, before any request', async () => {
    const work = await attempt();
    const push = { gitdir: work.gitdir, branch: work.branch, headSha: work.head, attemptId: work.attemptId, token: TOKEN };
    expect(await codeOfAsync(() => pushAttemptBranch({ ...push, pushUrl: 'http://git.example.com/acme/target.git' }))).toBe('USAGE');
    expect(await codeOfAsync(() => pushAttemptBranch({ ...push, pushUrl: `https://x-access-token:${TOKEN}@github.com/acme/target.git` }))).toBe('USAGE');
    expect(await codeOfAsync(() => pushAttemptBranch({ ...push, pushUrl: 'ssh://git@github.com/acme/target.git' }))).toBe('USAGE');
    expect(await codeOfAsync(() => pushAttemptBranch({ ...push, pushUrl: remote, token: 'two\nlines' }))).toBe('USAGE');
    expect(await pushAttemptBranch({ ...push, pushUrl: `file://${remote}` })).toBe('created');
    const requests = github.requests.length;
    expect(await codeOfAsync(() => publishAttempt(options(work, { apiBaseUrl: 'http://api.example.com' })))).toBe('USAGE');
    expect(github.requests.length).toBe(requests);
  });
});
