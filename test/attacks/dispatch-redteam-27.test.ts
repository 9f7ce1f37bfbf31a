import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { generatePrivateKey } from '../../src/crypto/keys.js';
import { isCooError } from '../../src/errors.js';
import { enqueueDispatch } from '../../src/dispatch/enqueue.js';
import { executorFactory } from '../../src/dispatch/executors.js';
import { pinnedCodexCommand } from '../../src/dispatch/codex.js';
import { pushAttemptBranch } from '../../src/dispatch/pull-request.js';
import { startScriptedResponsesServer } from '../../src/offline/fake-responses-server.js';
import { committedAttempt } from '../helpers/dispatch-attempt.js';
import { makeTargetRepo } from '../helpers/dispatch-repo.js';
import { startFakeGitHub } from '../helpers/fake-github.js';
import { receiptsOf, worlds } from '../helpers/lane.js';
import { git, tempDir } from '../helpers/tmp.js';

/**
 * The dispatch lane's pull-request push against a target's remote that holds a ref git also reads
 * as the branch pushed: git matches a push's destination (`refs/heads/coo/attempt-N`) against the
 * remote's refs by the rules it reads a short name by, so a branch or tag named after the full ref
 * is taken for it. Alone, git pushes to that ref instead; beside the real branch, git refuses the
 * push before sending anything. Either way the push says so, naming the ref to delete, and nothing
 * on either side moves. The remote is a local bare repository; no network.
 */

const dir = tempDir('dispatch-redteam-27');
const target = join(dir, 'target');
const base = makeTargetRepo(target);
const key = generatePrivateKey('coo.hermes');
const TOKEN = 'ghs_TestToken0123456789abcdefSECRET';
let n = 0;

/** One attempt's work committed by the COO on its own branch, as the runner leaves it after the receipt. */
async function attempt() {
  n += 1;
  const work = await committedAttempt({ dir, repo: target, base, key }, n, `ea_attempt_AMB${n}`);
  const { attemptId, head } = work;
  const remote = join(dir, `remote-${n}.git`);
  git(['init', '-q', '--bare', '-b', 'main', remote]);
  git(['push', '-q', remote, `${base}:refs/heads/main`], { cwd: target });
  const push = { gitdir: work.gitdir, branch: work.branch, headSha: head, attemptId, pushUrl: remote, token: TOKEN };
  return { push, remote, head, ref: `refs/heads/${work.branch}`, gitdir: work.gitdir };
}

function refsOf(gitdir: string): string {
  return git(['--git-dir', gitdir, 'for-each-ref', '--format=%(objectname) %(refname)']);
}

async function refusal(fn: () => Promise<unknown>): Promise<{ code: string; message: string }> {
  try {
    await fn();
  } catch (error) {
    if (isCooError(error)) return { code: error.code, message: error.message };
    throw error;
  }
  return { code: 'no error', message: '' };
}

describe("a target's remote that holds a ref git takes for the attempt's branch", () => {
  it.each([
    ['a branch named after the full ref, at another commit', (ref: string) => `refs/heads/${ref}`, 'base'],
    ['a branch named after the full ref, at the head itself', (ref: string) => `refs/heads/${ref}`, 'head'],
    ['a tag named after the full ref', (ref: string) => `refs/tags/${ref}`, 'base'],
    ['a ref named refs/ and the full ref', (ref: string) => `refs/${ref}`, 'head'],
    ['a remote-tracking ref named after the full ref', (ref: string) => `refs/remotes/${ref}`, 'base'],
  ] as const)('alone (%s), is said as REMOTE_REJECTED naming that ref, not a branch already there, and moves nothing', async (_what, strayOf, at) => {
    const work = await attempt();
    const stray = strayOf(work.ref);
    git(['push', '-q', work.remote, `${at === 'head' ? work.head : base}:${stray}`], { cwd: target });
    const remoteBefore = refsOf(work.remote);
    const localBefore = refsOf(work.gitdir);
    const said = await refusal(() => pushAttemptBranch(work.push));
    expect(said.code).toBe('REMOTE_REJECTED');
    expect(said.message).toContain(stray);
    expect(said.message).toContain('delete that ref');
    expect(said.message).not.toContain(TOKEN);
    // Nothing moved: the stray ref is as it was, no branch was made, and the work stays on its branch.
    expect(refsOf(work.remote)).toBe(remoteBefore);
    expect(refsOf(work.gitdir)).toBe(localBefore);
    expect(git(['--git-dir', work.gitdir, 'rev-parse', work.ref]).trim()).toBe(work.head);
  });

  it('beside the branch itself, is said as REMOTE_REJECTED naming the refs git may have taken, not a push that failed', async () => {
    const work = await attempt();
    git(['push', '-q', work.remote, `${work.head}:${work.ref}`], { cwd: target });
    git(['push', '-q', work.remote, `${base}:refs/tags/${work.ref}`], { cwd: target });
    const remoteBefore = refsOf(work.remote);
    const said = await refusal(() => pushAttemptBranch(work.push));
    expect(said.code).toBe('REMOTE_REJECTED');
    expect(said.message).toContain(`refs/tags/${work.ref}`);
    expect(said.message).toContain('matches more than one');
    expect(refsOf(work.remote)).toBe(remoteBefore);
  });

  it('once the stray ref is deleted, pushes the branch by its own name', async () => {
    const work = await attempt();
    const stray = `refs/heads/${work.ref}`;
    git(['push', '-q', work.remote, `${base}:${stray}`], { cwd: target });
    expect((await refusal(() => pushAttemptBranch(work.push))).code).toBe('REMOTE_REJECTED');
    git(['--git-dir', work.remote, 'update-ref', '-d', stray]);
    expect(await pushAttemptBranch(work.push)).toBe('created');
    expect(git(['--git-dir', work.remote, 'rev-parse', work.ref]).trim()).toBe(work.head);
    expect(await pushAttemptBranch(work.push)).toBe('up_to_date');
  });

  it('is not confused with refs git never takes for the branch, nor with the branch already at another commit', async () => {
    const work = await attempt();
    // Refs that end in the branch's name but not in its full ref are never read as it.
    git(['push', '-q', work.remote, `${base}:refs/heads/x/${work.push.branch}`, `${base}:refs/tags/${work.push.branch}`], { cwd: target });
    expect(await pushAttemptBranch(work.push)).toBe('created');
    const other = await attempt();
    git(['push', '-q', other.remote, `${base}:${other.ref}`], { cwd: target });
    expect((await refusal(() => pushAttemptBranch(other.push))).code).toBe('PUSH_CONFLICT');
    expect(git(['--git-dir', other.remote, 'rev-parse', other.ref]).trim()).toBe(base);
  });
});

describe('a runner whose pull-request push meets such a ref', () => {
  const world = worlds(join(dir, 'runner'));

  it('keeps the work and its succeeded receipt, opens no pull request, and says why in its event, naming the ref to delete', async () => {
    const w = await world();
    const repo = join(w.dir, 'work');
    const start = makeTargetRepo(repo);
    const remote = join(w.dir, 'forge.git');
    git(['init', '-q', '--bare', '-b', 'main', remote]);
    git(['push', '-q', remote, `${start}:refs/heads/main`], { cwd: repo });
    const model = await startScriptedResponsesServer([
      { kind: 'patch', patch: '*** Update File: src/add.js\n@@\n-export const add = (a, b) => a - b;\n+export const add = (a, b) => a + b;' },
      { kind: 'message', text: 'Fixed add(); test.sh passes.' },
    ]);
    const github = await startFakeGitHub({ headExists: () => true });
    try {
      const executors = executorFactory({ command: pinnedCodexCommand(), baseUrl: `${model.url}/v1`, hide: [w.gitdir], env: { ...process.env, OPENAI_API_KEY: 'sk-test-key' } });
      const { messageId, envelope } = await enqueueDispatch({ ledger: w.ledger, key: w.actors.coo, now: new Date(), target: 'ea.codex', repo, task: 'Fix add() so that test.sh passes.', scope: ['src/**'], accept: ['test.sh passes'], verify: ['sh test.sh'], timeoutSeconds: 120, maxRuntimeSeconds: 120, openPr: 'acme/work' });
      const stray = `refs/heads/refs/heads/${envelope.dispatch.branch_name}`;
      git(['push', '-q', remote, `${start}:${stray}`], { cwd: repo });
      const runner = w.runner({ repo, executors, pullRequests: { token: TOKEN, base: 'main', pushUrl: remote, apiBaseUrl: github.url } });
      expect((await runner.runOnce()).receipts).toBe(1);
      const [receipt] = await receiptsOf(w, messageId);
      expect(receipt).toMatchObject({ status: 'succeeded', branch: envelope.dispatch.branch_name });
      // Nothing lost: the work stays on its branch in the target, at the head the receipt names.
      expect(git(['rev-parse', envelope.dispatch.branch_name], { cwd: repo }).trim()).toBe(receipt!['head_sha']);
      expect(github.pulls).toEqual([]);
      expect(git(['--git-dir', remote, 'rev-parse', stray]).trim()).toBe(start);
      expect(w.events).toContainEqual(expect.objectContaining({ type: 'pull_request', messageId, url: null, created: false, detail: expect.stringMatching(new RegExp(`^REMOTE_REJECTED: .*holds ${stray}.*delete that ref`)) }));
    } finally {
      await github.close();
      await model.close();
    }
  });
});
