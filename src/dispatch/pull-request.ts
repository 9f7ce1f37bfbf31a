import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type * as OctokitRest from '@octokit/rest';
import { CooError, type ErrorCode } from '../errors.js';
import { checkTimeLimitMs, LIMITS } from '../limits.js';
import { killGroup } from '../util/bubblewrap.js';
import { importPackage } from '../util/import-package.js';
import { GIT_NO_REDIRECTS } from '../util/git-env.js';
import { REDIRECT_STATUSES } from '../util/redirects.js';
import { ambiguousDestination, refsTakenFor, takenDestination } from '../util/push-destination.js';
import { tokenOrigin } from '../util/token-url.js';
import { pullRequestMarker, pullRequestTitle, renderPullRequestBody, type PullRequestEvidence } from './pull-request-body.js';

/**
 * Publishing a succeeded attempt: its branch pushed with the runner's own credentials, then one
 * pull request whose body is the receipt's evidence. The token goes to git through a credential
 * helper that reads it from the environment of the one push, scoped to the push URL's origin, and
 * to Octokit in memory: never into a repository's config, a file, an argument or a message. The
 * EA has exited long before, and never had it.
 */

export interface RepoSlug {
  readonly owner: string;
  readonly repo: string;
}

/** `OWNER/REPO`, as `--open-pr` and the dispatch's `repo` field write it. */
export function parseRepoSlug(text: string): RepoSlug {
  const match = /^([A-Za-z0-9_.-]+)\/([A-Za-z0-9_.-]+)$/.exec(text);
  if (match === null || match[1]!.startsWith('.') || match[2]!.startsWith('.')) throw new CooError('USAGE', `--open-pr takes OWNER/REPO, got ${JSON.stringify(text)}`);
  return { owner: match[1]!, repo: match[2]! };
}

/** Where the branch goes when no push URL is given: the repository on github.com, over https. */
export function defaultPushUrl(slug: RepoSlug): string {
  return `https://github.com/${slug.owner}/${slug.repo}.git`;
}

export interface PushOptions {
  /** The target repository's common git folder, which holds the attempt's commit (AttemptWorktree.gitdir). */
  readonly gitdir: string;
  readonly branch: string;
  readonly headSha: string;
  /** The head commit must carry this attempt's `Coo-Attempt` trailer (evidence.ts writes it). */
  readonly attemptId: string;
  /** https://, http:// on a loopback address only, or a local path or file:// URL (no credentials used). */
  readonly pushUrl: string;
  readonly token: string;
  readonly timeoutMs?: number;
}

/** `created`: the remote had no such branch; `up_to_date`: it already held the head (an earlier call). */
export type PushOutcome = 'created' | 'up_to_date';

const DEFAULT_TIMEOUT_MS = 120_000;
const TOKEN = /^[\x21-\x7e]{1,1024}$/;
/** Proxies and certificate stores the operator set up: the only variables of the runner git keeps. */
const KEPT_ENV = ['PATH', 'http_proxy', 'https_proxy', 'HTTP_PROXY', 'HTTPS_PROXY', 'no_proxy', 'NO_PROXY', 'ALL_PROXY', 'SSL_CERT_FILE', 'SSL_CERT_DIR', 'GIT_SSL_CAINFO', 'GIT_SSL_CAPATH'];
/** The one credential git can ask for: the token from the push's own environment, for `get` only. */
const HELPER = '!f() { if test "$1" = get; then printf "username=x-access-token\\npassword=%s\\n" "$COO_PUSH_TOKEN"; fi; }; f';

/** Any message that leaves this module passes here: the token is never in it, whatever git or the API said. */
function redact(text: string, token: string): string {
  return token === '' ? text : text.split(token).join('***');
}

function fail(code: ErrorCode, message: string, token: string): CooError {
  return new CooError(code, redact(message, token).slice(0, 2 * LIMITS.pathChars));
}

/** The origin the push's credential is scoped to, or null for a local remote, which needs none. */
function credentialOrigin(pushUrl: string): string | null {
  if (pushUrl.startsWith('/') || pushUrl.startsWith('file:///')) return null;
  return tokenOrigin(pushUrl, 'push URL', ' or a local path');
}

interface GitResult {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
  readonly timedOut: boolean;
}

/**
 * git with hooks off, no redirect followed (GIT_NO_REDIRECTS: the branch and the token's use go to the
 * push URL alone) and an environment of our own (nothing of the runner's git or user config), under a timer.
 */
function git(args: readonly string[], env: NodeJS.ProcessEnv, timeoutMs: number): Promise<GitResult> {
  return new Promise((resolvePromise) => {
    const child = spawn('git', ['-c', 'core.hooksPath=/dev/null', '-c', 'core.fsmonitor=false', ...GIT_NO_REDIRECTS, ...args], { env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      if (child.pid !== undefined) killGroup(child.pid);
    }, timeoutMs);
    child.stdout.on('data', (chunk: Buffer) => out.push(chunk));
    child.stderr.on('data', (chunk: Buffer) => err.push(chunk));
    let settled = false;
    const finish = (code: number | null, extra = ''): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolvePromise({ code, stdout: Buffer.concat(out).toString('utf8'), stderr: `${Buffer.concat(err).toString('utf8')}${extra}`, timedOut });
    };
    child.on('error', (error) => finish(null, `cannot run git: ${error.message}`));
    child.on('close', (code) => finish(code));
  });
}

function firstLine(text: string): string {
  return text.trim().split('\n').find((line) => line.trim() !== '') ?? '';
}

/**
 * Pushes the head commit to `refs/heads/<branch>` of the remote, from a scratch repository that
 * borrows the target's objects: the target's own config (its remotes, `insteadOf` rewrites,
 * credential helpers that would store the token) plays no part. The push is a compare-and-swap
 * on "the branch does not exist", so a branch already there at another commit is refused, never
 * overwritten; one already at the head is left as it is.
 */
export async function pushAttemptBranch(options: PushOptions): Promise<PushOutcome> {
  const { token } = options;
  if (!TOKEN.test(token)) throw new CooError('USAGE', 'the push token is empty or has characters a token cannot have');
  if (!/^[0-9a-f]{40}$/.test(options.headSha)) throw new CooError('USAGE', 'the head must be a full commit id');
  const origin = credentialOrigin(options.pushUrl);
  const objects = join(resolve(options.gitdir), 'objects');
  if (!fs.existsSync(objects)) throw new CooError('USAGE', `${options.gitdir} is not a git folder`);
  const timeoutMs = checkTimeLimitMs(options.timeoutMs, 'pushAttemptBranch') ?? DEFAULT_TIMEOUT_MS;
  const scratch = fs.mkdtempSync(join(tmpdir(), 'coo-push-'));
  try {
    const env: NodeJS.ProcessEnv = { HOME: scratch, LANG: 'C', GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: '/dev/null', GIT_TERMINAL_PROMPT: '0' };
    for (const name of KEPT_ENV) if (process.env[name] !== undefined) env[name] = process.env[name];
    const repo = join(scratch, 'push.git');
    const init = await git(['init', '--quiet', '--bare', '--template=', repo], env, timeoutMs);
    if (init.code !== 0) throw fail('PUSH_FAILED', `git init: ${firstLine(init.stderr)}`, token);
    fs.writeFileSync(join(repo, 'objects', 'info', 'alternates'), `${objects}\n`);
    const local = { ...env, GIT_DIR: repo };
    const check = await git(['check-ref-format', `refs/heads/${options.branch}`], local, timeoutMs);
    if (check.code !== 0 || options.branch.startsWith('-')) throw new CooError('USAGE', `${JSON.stringify(options.branch)} is not a branch name`);
    const commit = await git(['cat-file', 'commit', options.headSha], local, timeoutMs);
    if (commit.code !== 0) throw new CooError('PR_REFUSED', `${options.headSha} is not a commit in ${options.gitdir}`);
    const message = commit.stdout.slice(commit.stdout.indexOf('\n\n') + 2);
    if (!message.split('\n').includes(`Coo-Attempt: ${options.attemptId}`)) throw new CooError('PR_REFUSED', `${options.headSha} is not the commit of ${options.attemptId} (no Coo-Attempt trailer naming it)`);
    const ref = `refs/heads/${options.branch}`;
    const credential: NodeJS.ProcessEnv =
      origin === null
        ? {}
        : { GIT_CONFIG_COUNT: '2', GIT_CONFIG_KEY_0: 'credential.helper', GIT_CONFIG_VALUE_0: '', GIT_CONFIG_KEY_1: `credential.${origin}.helper`, GIT_CONFIG_VALUE_1: HELPER, COO_PUSH_TOKEN: token };
    const push = await git(['push', '--porcelain', '--no-verify', `--force-with-lease=${ref}:`, options.pushUrl, `${options.headSha}:${ref}`], { ...local, ...credential }, timeoutMs);
    if (push.timedOut) throw fail('PUSH_FAILED', `git push to ${options.pushUrl}: no answer within ${timeoutMs} ms`, token);
    // git takes another of the remote's refs for the branch's (a branch or tag named after its full ref): alone, it pushes there instead
    // (the lease, which expects no ref, refuses it), and beside the branch, it refuses the push before sending anything.
    const ambiguous = ambiguousDestination(push);
    const taken = takenDestination(push, options.headSha, ref);
    if (ambiguous !== null || taken !== null) {
      const stray = taken ?? `another ref beside it (one of ${refsTakenFor(ref).join(', ')})`;
      throw fail(
        'REMOTE_REJECTED',
        `${options.pushUrl} holds ${stray}, which git takes for ${ref}, so the branch cannot be pushed by its name${ambiguous === null ? '' : ` (git: ${ambiguous})`}; nothing was pushed, and the work stays on ${options.branch} here; delete that ref on the remote (git ls-remote REMOTE ${ref} lists it), then publish again`,
        token,
      );
    }
    // --porcelain: one line per ref, "<flag>\t<from>:<to>\t<summary>"; the flag says what happened.
    const line = push.stdout.split('\n').find((entry) => entry.split('\t')[1] === `${options.headSha}:${ref}`);
    const [flag, , summary] = line?.split('\t') ?? [];
    if (flag === '*') return 'created';
    if (flag === '=') return 'up_to_date';
    if (flag === '!' && /stale info|fetch first|non-fast-forward|already exists/.test(summary ?? '')) {
      throw fail('PUSH_CONFLICT', `${options.pushUrl} already has ${options.branch} at another commit: not overwritten (${summary})`, token);
    }
    throw fail('PUSH_FAILED', `git push to ${options.pushUrl}: ${summary ?? (firstLine(push.stderr.replace(/^To .*\n/m, '')) || `exit ${push.code ?? 'by a signal'}`)}`, token);
  } finally {
    fs.rmSync(scratch, { recursive: true, force: true });
  }
}

export interface PublishOptions {
  /** Where the pull request is opened (`--open-pr OWNER/REPO`). */
  readonly github: RepoSlug;
  /** The receipt and its evidence; its head commit is what is pushed. */
  readonly evidence: PullRequestEvidence;
  /** The target repository's common git folder (AttemptWorktree.gitdir). */
  readonly gitdir: string;
  /** The branch the pull request asks to merge into. */
  readonly base: string;
  /** Defaults to defaultPushUrl(github). */
  readonly pushUrl?: string;
  /** The runner's GitHub token: used for the push and the API, never stored, never printed. */
  readonly token: string;
  /** GitHub API base URL, for GitHub Enterprise (default https://api.github.com). */
  readonly apiBaseUrl?: string;
  readonly title?: string;
  /** Bounds the push, and each of the API calls. */
  readonly timeoutMs?: number;
}

export interface PublishedPullRequest {
  readonly url: string;
  readonly number: number;
  /** False when the attempt already had its pull request: nothing was opened. */
  readonly created: boolean;
  /** What the push did; null when the pull request already existed and nothing was pushed. */
  readonly pushed: PushOutcome | null;
}

type Octokit = InstanceType<typeof OctokitRest.Octokit>;

/**
 * The API's fetch: it follows no redirect. fetch takes the token's `Authorization` off a request
 * redirected to another origin, but a 307 or 308 sends the request's body on to wherever it points:
 * the pull request's title and body, the receipt's evidence of a repository that may be private. A
 * redirect is refused instead, naming the status and never where it pointed.
 */
async function fetchFollowingNoRedirect(input: string | URL | Request, init?: RequestInit): Promise<Response> {
  const response = await fetch(input, { ...init, redirect: 'manual' });
  if (!REDIRECT_STATUSES.includes(response.status)) return response;
  await response.body?.cancel().catch(() => undefined);
  throw new RedirectRefused(response.status);
}

/** A redirect the API answered and fetchFollowingNoRedirect refused; Octokit reports it as its cause, under a status of its own (500). */
class RedirectRefused extends Error {
  constructor(readonly status: number) {
    super(`the API answered ${status}, a redirect, which coo does not follow: the token and the pull request go to the API URL named alone; give the repository's current OWNER/REPO, or --github-api-url its current URL`);
  }
}

/** How many of the newest pull requests the marker check reads when none has the branch as its head. */
const RECENT = 100;

/**
 * The attempt's pull request, if it has one: first any whose head is the attempt's branch (open or
 * closed), then, as a second guard for a branch renamed or deleted since, the newest pull requests
 * whose body carries the attempt's marker.
 */
async function findPullRequest(octokit: Octokit, slug: RepoSlug, branch: string, marker: string, signal: AbortSignal): Promise<{ url: string; number: number } | null> {
  const byHead = (await octokit.rest.pulls.list({ owner: slug.owner, repo: slug.repo, head: `${slug.owner}:${branch}`, state: 'all', per_page: 100, request: { signal } })).data.filter((pr) => pr.head.ref === branch);
  const found = byHead.find((pr) => (pr.body ?? '').includes(marker)) ?? byHead[0];
  if (found !== undefined) return { url: found.html_url, number: found.number };
  const recent = (await octokit.rest.pulls.list({ owner: slug.owner, repo: slug.repo, state: 'all', sort: 'created', direction: 'desc', per_page: RECENT, request: { signal } })).data;
  const marked = recent.find((pr) => (pr.body ?? '').includes(marker));
  return marked === undefined ? null : { url: marked.html_url, number: marked.number };
}

/**
 * Pushes a succeeded attempt's branch and opens its pull request, once: a second call for the same
 * attempt finds the first pull request and returns it without pushing or creating anything.
 */
export async function publishAttempt(options: PublishOptions): Promise<PublishedPullRequest> {
  const { receipt } = options.evidence;
  const { token, github: slug } = options;
  if (receipt.status !== 'succeeded') throw new CooError('PR_REFUSED', `${receipt.attempt_id} ended ${receipt.status}: only a succeeded attempt is proposed`);
  if (receipt.head_sha === null || receipt.files_changed.length === 0) throw new CooError('PR_REFUSED', `${receipt.attempt_id} changed nothing: there is no commit to propose`);
  if (!TOKEN.test(token)) throw new CooError('USAGE', 'the GitHub token is empty or has characters a token cannot have');
  const pushUrl = options.pushUrl ?? defaultPushUrl(slug);
  credentialOrigin(pushUrl);
  if (options.apiBaseUrl !== undefined) tokenOrigin(options.apiBaseUrl, 'GitHub API URL');
  const timeoutMs = checkTimeLimitMs(options.timeoutMs, 'publishAttempt') ?? DEFAULT_TIMEOUT_MS;
  const marker = pullRequestMarker(receipt.attempt_id);
  const { Octokit } = await importPackage<typeof OctokitRest>('@octokit/rest');
  const octokit = new Octokit({
    auth: token,
    userAgent: 'coo-commons',
    ...(options.apiBaseUrl === undefined ? {} : { baseUrl: options.apiBaseUrl }),
    log: { debug: () => undefined, info: () => undefined, warn: () => undefined, error: () => undefined },
    request: { fetch: fetchFollowingNoRedirect },
  });
  const apiError = (what: string, error: unknown): CooError => {
    const cause = (error as { cause?: unknown }).cause;
    const status = cause instanceof RedirectRefused ? cause.status : (error as { status?: number }).status;
    return fail('GITHUB_FAILED', `GitHub${status === undefined ? '' : ` ${status}`} on ${slug.owner}/${slug.repo} (${what}): ${firstLine((error as Error).message)}`, token);
  };
  const find = (): Promise<{ url: string; number: number } | null> =>
    findPullRequest(octokit, slug, options.evidence.branch, marker, AbortSignal.timeout(timeoutMs)).catch((error: unknown) => {
      throw apiError('listing pull requests', error);
    });
  const existing = await find();
  if (existing !== null) return { ...existing, created: false, pushed: null };
  const pushed = await pushAttemptBranch({ gitdir: options.gitdir, branch: options.evidence.branch, headSha: receipt.head_sha, attemptId: receipt.attempt_id, pushUrl, token, timeoutMs });
  try {
    const created = await octokit.rest.pulls.create({
      owner: slug.owner,
      repo: slug.repo,
      base: options.base,
      head: options.evidence.branch,
      title: options.title ?? pullRequestTitle(receipt),
      body: renderPullRequestBody(options.evidence),
      request: { signal: AbortSignal.timeout(timeoutMs) },
    });
    return { url: created.data.html_url, number: created.data.number, created: true, pushed };
  } catch (error) {
    // 422: GitHub already has an open pull request for this head (one opened between our look and now).
    const raced = (error as { status?: number }).status === 422 ? await find() : null;
    if (raced === null) throw apiError('opening the pull request', error);
    return { ...raced, created: false, pushed };
  }
}
