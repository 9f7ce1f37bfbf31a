import { existsSync, mkdirSync, readdirSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadPrivateKey } from '../../src/cli/common.js';
import { OracleCli } from '../../src/consult/oracle.js';
import { publishAttempt, pushAttemptBranch, type PublishOptions } from '../../src/dispatch/pull-request.js';
import { isCooError } from '../../src/errors.js';
import { Ledger } from '../../src/ledger/ledger.js';
import { startFakeModelServer, type FakeModelServer } from '../../src/offline/fake-model-server.js';
import { AccessRefused } from '../../src/remote/git-remote.js';
import { RemoteLedger } from '../../src/remote/publish.js';
import { Runner, type RunnerEvent } from '../../src/runner/runner.js';
import type { ActorPolicy } from '../../src/schema/policy.js';
import { cooAsync } from '../helpers/cli.js';
import { refusal } from '../helpers/damage.js';
import { serveGitHttp } from '../helpers/git-http.js';
import { consultThrough, makeServedLedger, makeWriter, publishedJson, type ServedLedger, type Writer } from '../helpers/remote-ledger.js';
import { blockersOf, offlineEndpoints, receiptsOf, worlds } from '../helpers/lane.js';
import { cliEnded, holdAnswers, remoteReceipts, runnerEntryPoints, types } from '../helpers/remote-runners.js';
import { makeTargetRepo } from '../helpers/dispatch-repo.js';
import { git, tempDir } from '../helpers/tmp.js';

/**
 * A server coo talks HTTP to with a credential answers with a redirect to another origin (another
 * port of 127.0.0.1, which records every header it gets). No credential the operator gave for the
 * first reaches the second: coo follows no redirect with one, and says so with a coded error that
 * names neither the credential nor where the redirect pointed.
 */

const dir = tempDir('secrets-redteam-5-');
const TOKEN = 'ghs_RedirectedLedgerToken0123456789SECRET';
const closers: Array<() => Promise<void>> = [];

afterAll(async () => {
  for (const close of closers.reverse()) await close().catch(() => undefined);
});

interface Seen {
  readonly method: string;
  readonly path: string;
  readonly headers: IncomingHttpHeaders;
}

async function listen(server: Server): Promise<{ url: string; port: number }> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  closers.push(
    () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  );
  return { url: `http://127.0.0.1:${port}`, port };
}

/** Another origin that records every request it gets and answers each 401 with `body`: where a redirect must never lead. */
async function recordingOrigin(body: string): Promise<{ url: string; port: number; seen: Seen[] }> {
  const seen: Seen[] = [];
  const { url, port } = await listen(
    createServer((req, res) => {
      seen.push({ method: req.method ?? '', path: req.url ?? '', headers: req.headers });
      req.resume();
      res.writeHead(401, { 'content-type': 'application/json' });
      res.end(body);
    }),
  );
  return { url, port, seen };
}

/**
 * Elsewhere: the origin a redirect points at. It records every request, asks for credentials
 * (401) when it got none, as a server fishing for them does, and serves the same ledgers when it
 * got some, so a git that follows goes on talking to it.
 */
async function startElsewhere(projectRoot: string): Promise<{ url: string; port: number; requests: Seen[] }> {
  const requests: Seen[] = [];
  const server = createServer((req, res) => {
    requests.push({ method: req.method ?? '', path: req.url ?? '', headers: req.headers });
    if (req.headers.authorization === undefined && req.headers['private-token'] === undefined) {
      req.resume();
      res.writeHead(401, { 'www-authenticate': 'Basic realm="elsewhere"' });
      res.end();
      return;
    }
    serveGitHttp(req, res, projectRoot);
  });
  return { ...(await listen(server)), requests };
}

type Redirect = 'none' | 'first' | 'later';

/**
 * The ledger's remote as the operator names it: git's smart HTTP behind a token (Basic
 * `x-access-token:TOKEN`, or a `PRIVATE-TOKEN` header as GitLab takes one). With `redirect`
 * `first` it answers every request with a 302 to `location` (its path kept); with `later`, only
 * the requests after the first (upload-pack, receive-pack) with a 307.
 */
async function startFront(projectRoot: string): Promise<{ url: string; redirect: Redirect; location: string; requests: Seen[] }> {
  const requests: Seen[] = [];
  const basic = `Basic ${Buffer.from(`x-access-token:${TOKEN}`).toString('base64')}`;
  const front = { url: '', redirect: 'none' as Redirect, location: '', requests };
  const server = createServer((req, res) => {
    requests.push({ method: req.method ?? '', path: req.url ?? '', headers: req.headers });
    const moved = front.redirect === 'first' || (front.redirect === 'later' && req.method === 'POST');
    if (moved) {
      req.resume();
      res.writeHead(front.redirect === 'first' ? 302 : 307, { location: `${front.location}${req.url ?? '/'}` });
      res.end();
      return;
    }
    if (req.headers.authorization !== basic && req.headers['private-token'] !== TOKEN) {
      req.resume();
      res.writeHead(401, { 'www-authenticate': 'Basic realm="ledger"' });
      res.end();
      return;
    }
    serveGitHttp(req, res, projectRoot);
  });
  front.url = (await listen(server)).url;
  return front;
}

/** The three ways an operator gives git a token: a credential helper for every host, a header git is told to send, the URL's user info. */
const CREDENTIALS = {
  helper: { env: { GIT_CONFIG_COUNT: '1', GIT_CONFIG_KEY_0: 'credential.helper', GIT_CONFIG_VALUE_0: `!f() { echo username=x-access-token; echo password=${TOKEN}; }; f` }, inUrl: false },
  header: { env: { GIT_CONFIG_COUNT: '1', GIT_CONFIG_KEY_0: 'http.extraHeader', GIT_CONFIG_VALUE_0: `PRIVATE-TOKEN: ${TOKEN}` }, inUrl: false },
  url: { env: {}, inUrl: true },
} as const;

function withToken(url: string): string {
  return url.replace('http://', `http://x-access-token:${TOKEN}@`);
}

let model: FakeModelServer;

beforeAll(async () => {
  model = await startFakeModelServer(['ok']);
  closers.push(() => model.close());
});

const cli = cliEnded;

function runners(writer: Writer, served: ServedLedger, stateDir: string): Array<readonly string[]> {
  return runnerEntryPoints(writer, served, stateDir, model.url);
}

describe('a ledger remote over http that redirects to another origin', { timeout: 240_000 }, () => {
  it('coo clone: refused (REMOTE_UNREACHABLE, naming the redirect and the remote without its token); the other origin gets nothing, whether the token comes from a credential helper, a header or the URL', async () => {
    const served = await makeServedLedger(join(dir, 'clone'));
    const elsewhere = await startElsewhere(served.root);
    const front = await startFront(served.root);
    // Where the redirect points carries credentials of its own: they are never repeated either.
    front.location = elsewhere.url.replace('http://', 'http://fished:LocationSecret0123456789@');
    const shown = `${front.url}/${served.name}`;
    for (const redirect of ['first', 'later'] as const) {
      for (const [name, credential] of Object.entries(CREDENTIALS)) {
        front.redirect = 'none';
        const into = join(dir, 'clone', `${redirect}-${name}.git`);
        // The token works: without the redirect the clone is made.
        const plain = await cooAsync(['clone', credential.inUrl ? withToken(shown) : shown, `${into}.plain`, '--trust-root', served.ceoKeyId], { env: { HOME: join(dir, 'clone'), ...credential.env } });
        expect(plain.status, plain.stderr).toBe(0);
        front.redirect = redirect;
        const cloned = await cooAsync(['clone', credential.inUrl ? withToken(shown) : shown, into, '--trust-root', served.ceoKeyId], { env: { HOME: join(dir, 'clone'), ...credential.env } });
        expect({ status: cloned.status, stdout: cloned.stdout }, `${redirect} ${name}`).toEqual({ status: 1, stdout: '' });
        expect(cloned.stderr.trim()).toMatch(
          new RegExp(`^coo: REMOTE_UNREACHABLE: cannot clone ${shown.replace(/\./g, '\\.')}: \\S+: .*The requested URL returned error: 30[27] \\(a redirect, which coo never follows: the credentials for this URL go to it alone; give the URL the remote moved to, on GitLab the one ending in \\.git\\); nothing was cloned$`),
        );
        expect(cloned.stderr).not.toContain(TOKEN);
        expect(cloned.stderr).not.toContain('LocationSecret');
        expect(cloned.stderr).not.toContain(String(elsewhere.port));
        expect(existsSync(into)).toBe(false);
        expect(elsewhere.requests, `${redirect} ${name}`).toEqual([]);
      }
    }
  });

  it('coo watch --once and coo mcp --run through a remote that now redirects: refused at start (RUNNER_CONFIG, exit 2), nothing claimed; the other origin gets nothing', async () => {
    const served = await makeServedLedger(join(dir, 'start'));
    const elsewhere = await startElsewhere(served.root);
    const front = await startFront(served.root);
    front.location = elsewhere.url;
    const shown = `${front.url}/${served.name}`;
    for (const name of ['helper', 'header'] as const) {
      front.redirect = 'none';
      const writer = await makeWriter(join(dir, 'start', name), 'coo', served, shown, CREDENTIALS[name].env);
      publishedJson(await consultThrough(writer, served));
      const before = { remote: served.head(), clone: writer.head() };
      const requests = model.requests.length;
      front.redirect = 'first';
      for (const args of runners(writer, served, join(dir, 'start', name, 'state'))) {
        const line = refusal(await cli(args, { HOME: writer.home, ...CREDENTIALS[name].env }));
        expect(line, `${name} ${args[0]}`).toMatch(
          new RegExp(`^coo: RUNNER_CONFIG: ${shown.replace(/\./g, '\\.')} refused this runner \\(fatal: unable to access '${front.url.replace(/\./g, '\\.')}/${served.name}/': The requested URL returned error: 302 \\(a redirect, which coo never follows: .*\\)\\): .*; nothing was claimed or written$`),
        );
        expect(line).not.toContain(TOKEN);
        expect(served.head()).toBe(before.remote);
        expect(writer.head()).toBe(before.clone);
        expect(model.requests).toHaveLength(requests);
      }
      expect(elsewhere.requests, name).toEqual([]);
    }
  });

  it('a redirect that appears in flight, between the paid call and its receipt: the receipt waits in the journal (cut off, naming the redirect); the other origin gets nothing; it lands once the redirect is gone', async () => {
    const served = await makeServedLedger(join(dir, 'flight'));
    const elsewhere = await startElsewhere(served.root);
    const front = await startFront(served.root);
    front.location = elsewhere.url;
    const writer = await makeWriter(join(dir, 'flight'), 'coo', served, `${front.url}/${served.name}`, CREDENTIALS.header.env);
    const messageId = publishedJson(await consultThrough(writer, served)).message_id;
    // The runner runs in this process: its git sends the header this environment names.
    const saved = Object.fromEntries(Object.keys(CREDENTIALS.header.env).map((name) => [name, process.env[name]]));
    Object.assign(process.env, CREDENTIALS.header.env);
    const ledger = Ledger.open(writer.gitdir);
    try {
      const remote = new RemoteLedger(ledger, { remote: writer.url });
      const held = holdAnswers(new OracleCli({ route: { baseUrl: `${model.url}/v1` }, env: { OPENAI_API_KEY: 'sk-test-key' }, hide: [writer.gitdir], isolation: 'none' }));
      const events: RunnerEvent[] = [];
      const stateDir = join(dir, 'flight', 'state');
      const runner = new Runner({ ledger, key: loadPrivateKey(served.keys.coo), repo: served.target, stateDir, transport: held.transport, remote, onEvent: (event) => events.push(event) });
      try {
        const running = runner.runOnce();
        await held.paid;
        front.redirect = 'first';
        held.release();
        await running;
        expect(types(events)).toEqual(expect.arrayContaining(['claimed', 'journaled', 'cut_off']));
        const cut = events.find((event) => event.type === 'cut_off');
        expect(cut).toMatchObject({ detail: expect.stringMatching(/returned error: 302 \(a redirect, which coo never follows/) });
        expect(JSON.stringify(events)).not.toContain(TOKEN);
        expect(readdirSync(join(stateDir, 'journal'))).toHaveLength(1);
        expect(await remoteReceipts(served, messageId)).toEqual([]);
        expect(elsewhere.requests).toEqual([]);

        // A sync alone says the same, with the refusal as its cause.
        const synced = await remote.sync().then(
          () => null,
          (error: unknown) => error,
        );
        expect(isCooError(synced) && synced.code).toBe('REMOTE_UNREACHABLE');
        expect((synced as Error).cause).toBeInstanceOf(AccessRefused);

        front.redirect = 'none';
        await runner.runOnce();
        expect(await remoteReceipts(served, messageId)).toEqual([{ attempt: 1, status: 'succeeded', blockers: [] }]);
        expect(readdirSync(join(stateDir, 'journal'))).toHaveLength(0);
        expect(elsewhere.requests).toEqual([]);
      } finally {
        runner.close();
      }
    } finally {
      ledger.close();
      for (const [name, value] of Object.entries(saved)) {
        if (value === undefined) delete process.env[name];
        else process.env[name] = value;
      }
    }
  });
});

/** Keys long enough to be told apart in any text, one per route's header. */
const PROVIDER_KEYS = {
  OPENAI_API_KEY: 'sk-proj-RedirectedOpenAiKey0123456789SECRET',
  ANTHROPIC_API_KEY: 'sk-ant-RedirectedAnthropicKey0123456789SECRET',
  GEMINI_API_KEY: 'AIzaRedirectedGeminiKey0123456789SECRET',
};

/** One attempt a consult: each would end as the first. */
const ONE_ATTEMPT = { policy: (policy: ActorPolicy): ActorPolicy => ({ ...policy, retries: { ...policy.retries, transient_max_attempts: 1 } }) };

describe('a provider endpoint that redirects a consult to another origin', { timeout: 120_000 }, () => {
  const fresh = worlds(tempDir('secrets-redteam-5-consult-'));
  const routes = [
    ['aa.chatgpt', 'authorization', 'OPENAI_API_KEY'],
    ['aa.claude', 'x-api-key', 'ANTHROPIC_API_KEY'],
    ['aa.gemini', 'x-goog-api-key', 'GEMINI_API_KEY'],
  ] as const;
  for (const [target, header, keyEnv] of routes) {
    it(`${target} (its key in ${header}): the redirect is not followed, the key reaches no other origin, and the receipt says why (aa_unavailable:transport) without the key`, async () => {
      const w = await fresh(ONE_ATTEMPT);
      const other = await recordingOrigin('{"error":{"message":"unauthorized"}}');
      const elsewhere = other.seen;
      const asked: Seen[] = [];
      const front = await listen(
        createServer((req, res) => {
          asked.push({ method: req.method ?? '', path: req.url ?? '', headers: req.headers });
          req.resume();
          res.writeHead(307, { location: `${other.url}${req.url ?? '/'}` });
          res.end();
        }),
      );
      const transport = w.transport({ route: { baseUrl: `${front.url}/v1` }, endpoints: offlineEndpoints(front), env: PROVIDER_KEYS });
      const { messageId } = await w.consult({ target, idempotencyKey: `redirect-${target}` });
      await w.runner({ transport }).runOnce();
      const receipts = await receiptsOf(w, messageId);
      // The key went where the operator pointed it, and nowhere else.
      expect(asked.length).toBeGreaterThan(0);
      expect(String(asked[0]!.headers[header])).toContain(PROVIDER_KEYS[keyEnv]);
      expect(elsewhere).toEqual([]);
      expect(receipts).toHaveLength(1);
      for (const receipt of receipts) {
        expect(receipt['status']).toBe('failed');
        expect(blockersOf(receipt)).toEqual(['aa_unavailable:transport']);
        const text = JSON.stringify(receipt);
        expect(text).toMatch(/answered 307, a redirect, which coo does not follow/);
        for (const key of Object.values(PROVIDER_KEYS)) expect(text).not.toContain(key);
        expect(text).not.toContain(String(other.port));
      }
      const events = JSON.stringify(w.events);
      for (const key of Object.values(PROVIDER_KEYS)) expect(events).not.toContain(key);
    });
  }
});

describe('a provider endpoint whose redirect points at itself, at a file, at ssh, or carries credentials of its own', { timeout: 120_000 }, () => {
  const fresh = worlds(tempDir('secrets-redteam-5-where-'));
  it('is refused the same way each time: where it pointed is never followed nor repeated', async () => {
    const w = await fresh(ONE_ATTEMPT);
    let location = '';
    const front = await listen(
      createServer((req, res) => {
        req.resume();
        res.writeHead(302, { location: location.replace('SELF', `http://127.0.0.1:${(req.socket.localPort ?? 0).toString()}${req.url ?? '/'}`) });
        res.end();
      }),
    );
    const transport = w.transport({ route: { baseUrl: `${front.url}/v1` }, env: PROVIDER_KEYS });
    for (const [n, where] of ['SELF', 'file:///etc/passwd', 'ssh://fished:LocationSecret0123456789@127.0.0.1/ledger.git', 'http://fished:LocationSecret0123456789@127.0.0.1:9/v1'].entries()) {
      location = where;
      const { messageId } = await w.consult({ idempotencyKey: `where-${n}` });
      await w.runner({ transport }).runOnce();
      const receipts = await receiptsOf(w, messageId);
      expect(receipts, where).toHaveLength(1);
      for (const receipt of receipts) {
        expect(blockersOf(receipt), where).toEqual(['aa_unavailable:transport']);
        const text = JSON.stringify(receipt);
        expect(text).toContain(`coo: ${front.url} answered 302, a redirect, which coo does not follow`);
        for (const secret of ['LocationSecret', '/etc/passwd', ...Object.values(PROVIDER_KEYS)]) expect(text).not.toContain(secret);
      }
    }
  });
});

describe('--open-pr: the branch pushed and the pull request opened, against servers that redirect to another origin', { timeout: 120_000 }, () => {
  const PUSH_TOKEN = 'ghs_RedirectedPushToken0123456789SECRET';

  /** A repository whose head is an attempt's commit (its Coo-Attempt trailer), as the runner leaves it. */
  function attemptRepo(name: string): { gitdir: string; head: string; attemptId: string } {
    const repo = join(dir, 'pr', name);
    const attemptId = 'ea_attempt_01JREDIRECT0000000000000001';
    makeTargetRepo(repo);
    git(['commit', '-q', '--allow-empty', '-m', `Fix add\n\nCoo-Attempt: ${attemptId}`], { cwd: repo });
    return { gitdir: join(repo, '.git'), head: git(['rev-parse', 'HEAD'], { cwd: repo }).trim(), attemptId };
  }

  it('the push: git follows no redirect, so the branch and the token go to the push URL alone (PUSH_FAILED, naming the redirect, not the token)', async () => {
    const root = join(dir, 'pr', 'served');
    mkdirSync(root, { recursive: true });
    git(['init', '-q', '--bare', join(root, 'target.git')]);
    const elsewhere = await startElsewhere(root);
    const front = await startFront(root);
    front.location = elsewhere.url;
    const work = attemptRepo('push');
    // The token works: without the redirect the branch is pushed.
    expect(await pushAttemptBranch({ gitdir: work.gitdir, branch: 'coo/attempt-plain', headSha: work.head, attemptId: work.attemptId, pushUrl: `${front.url}/target.git`, token: TOKEN })).toBe('created');
    for (const redirect of ['first', 'later'] as const) {
      front.redirect = redirect;
      const error = await pushAttemptBranch({ gitdir: work.gitdir, branch: `coo/attempt-${redirect}`, headSha: work.head, attemptId: work.attemptId, pushUrl: `${front.url}/target.git`, token: TOKEN }).then(
        () => null,
        (caught: unknown) => caught,
      );
      expect(isCooError(error) && error.code, redirect).toBe('PUSH_FAILED');
      expect((error as Error).message).toMatch(/returned error: 30[27]/);
      expect((error as Error).message).not.toContain(TOKEN);
      expect(elsewhere.requests, redirect).toEqual([]);
    }
  });

  it('the GitHub API: a redirect to another origin is not followed: nothing, token or pull request, reaches it, and the failure names no token', async () => {
    const other = await recordingOrigin('{"message":"Bad credentials"}');
    const elsewhere = other.seen;
    // The look for an existing pull request finds none; the request that opens one, with its body, is redirected.
    const asked: string[] = [];
    const api = await listen(
      createServer((req, res) => {
        asked.push(`${req.method ?? ''} ${req.url ?? ''}`);
        req.resume();
        if (req.method === 'GET') {
          res.writeHead(200, { 'content-type': 'application/json' });
          res.end('[]');
          return;
        }
        res.writeHead(307, { location: `${other.url}${req.url ?? '/'}` });
        res.end();
      }),
    );
    const work = attemptRepo('api');
    const pushUrl = join(dir, 'pr', 'api-target.git');
    git(['init', '-q', '--bare', pushUrl]);
    // What the pull request's body is rendered from: enough of a receipt to open one.
    const receipt = {
      status: 'succeeded',
      message_id: 'msg_01JDX0000000000000000000AB',
      attempt_id: work.attemptId,
      attempt_number: 1,
      target_actor: 'ea.codex',
      created_at: '2026-12-01T12:00:05Z',
      head_sha: work.head,
      files_changed: ['src/add.js'],
      commands_run: [],
      inner_exit_codes: [],
      tests_run: [],
    } as unknown as PublishOptions['evidence']['receipt'];
    const evidence: PublishOptions['evidence'] = { receipt, receiptPath: 'receipts/001.yaml', receiptSha256: `sha256:${'ab'.repeat(32)}`, branch: 'coo/attempt-api' };
    const error = await publishAttempt({ github: { owner: 'acme', repo: 'target' }, evidence, gitdir: work.gitdir, base: 'main', pushUrl, token: PUSH_TOKEN, apiBaseUrl: api.url }).then(
      () => null,
      (caught: unknown) => caught,
    );
    expect(asked.some((line) => line.startsWith('POST '))).toBe(true);
    expect(git(['--git-dir', pushUrl, 'rev-parse', 'refs/heads/coo/attempt-api']).trim()).toBe(work.head);
    expect(isCooError(error) && error.code).toBe('GITHUB_FAILED');
    expect((error as Error).message).toMatch(/^GitHub 307 on acme\/target \(opening the pull request\): the API answered 307, a redirect, which coo does not follow/);
    expect((error as Error).message).not.toContain(PUSH_TOKEN);
    expect((error as Error).message).not.toContain(other.url);
    // A 307 would have sent the request's body on (fetch drops only Authorization): nothing arrived there.
    expect(elsewhere).toEqual([]);
  });
});
