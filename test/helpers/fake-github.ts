import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface FakeGitHub {
  readonly url: string;
  readonly requests: Array<{ method: string; path: string; authorization: string | undefined; body: unknown; query: URLSearchParams }>;
  readonly comments: Array<{ id: number; body: string; html_url: string }>;
  /** Pull requests, oldest first; a test may close one (`state = 'closed'`) or add one. */
  readonly pulls: FakePull[];
  /** The next request with this method gets this status and message instead of its answer. */
  failNext(method: string, status: number, message: string): void;
  /** Called as each request arrives, before it is answered: a test may change the state under it. */
  onRequest: ((method: string, path: string) => void) | null;
  close(): Promise<void>;
}

export interface FakePull {
  number: number;
  state: 'open' | 'closed';
  title: string;
  body: string | null;
  html_url: string;
  head: { ref: string; label: string };
  base: { ref: string };
}

export interface FakeGitHubOptions {
  /** Whether the head branch exists in the repository: GitHub refuses a pull request from a branch it does not have. */
  readonly headExists?: (owner: string, repo: string, branch: string) => boolean;
}

/**
 * The GitHub REST endpoints `coo cite --post` (issue comments) and the dispatch lane's `--open-pr`
 * (pull requests: list, create) use, on 127.0.0.1, recording every request.
 */
export async function startFakeGitHub(options: FakeGitHubOptions = {}): Promise<FakeGitHub> {
  const requests: FakeGitHub['requests'] = [];
  const comments: FakeGitHub['comments'] = [];
  const pulls: FakePull[] = [];
  const failures: Array<{ method: string; status: number; message: string }> = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const raw = Buffer.concat(chunks).toString('utf8');
      const body = raw === '' ? null : (JSON.parse(raw) as unknown);
      const url = new URL(req.url ?? '/', 'http://127.0.0.1');
      const path = url.pathname;
      requests.push({ method: req.method ?? '', path, authorization: req.headers.authorization, body, query: url.searchParams });
      fake.onRequest?.(req.method ?? '', path);
      const match = /^\/repos\/([^/]+)\/([^/]+)\/issues\/(\d+)\/comments$/.exec(path);
      res.setHeader('content-type', 'application/json');
      const failure = failures.findIndex((entry) => entry.method === req.method);
      if (failure >= 0) {
        const { status, message } = failures.splice(failure, 1)[0]!;
        res.statusCode = status;
        res.end(JSON.stringify({ message }));
        return;
      }
      const pullsMatch = /^\/repos\/([^/]+)\/([^/]+)\/pulls$/.exec(path);
      if (pullsMatch !== null) {
        const [, owner, repo] = pullsMatch as unknown as [string, string, string];
        if (req.method === 'GET') {
          const head = url.searchParams.get('head');
          const state = url.searchParams.get('state') ?? 'open';
          const perPage = Number(url.searchParams.get('per_page') ?? 30);
          const found = pulls.filter((pull) => (head === null || pull.head.label === head) && (state === 'all' || pull.state === state));
          res.end(JSON.stringify(found.reverse().slice(0, perPage)));
          return;
        }
        const request = body as { title: string; head: string; base: string; body?: string };
        if (options.headExists !== undefined && !options.headExists(owner, repo, request.head)) {
          res.statusCode = 422;
          res.end(JSON.stringify({ message: 'Validation Failed', errors: [{ resource: 'PullRequest', field: 'head', code: 'invalid' }] }));
          return;
        }
        if (pulls.some((pull) => pull.state === 'open' && pull.head.ref === request.head && pull.base.ref === request.base)) {
          res.statusCode = 422;
          res.end(JSON.stringify({ message: 'Validation Failed', errors: [{ resource: 'PullRequest', code: 'custom', message: `A pull request already exists for ${owner}:${request.head}.` }] }));
          return;
        }
        const number = pulls.length + 1;
        const pull: FakePull = { number, state: 'open', title: request.title, body: request.body ?? null, html_url: `https://github.example/${owner}/${repo}/pull/${number}`, head: { ref: request.head, label: `${owner}:${request.head}` }, base: { ref: request.base } };
        pulls.push(pull);
        res.statusCode = 201;
        res.end(JSON.stringify(pull));
        return;
      }
      if (match === null) {
        res.statusCode = 404;
        res.end(JSON.stringify({ message: 'Not Found' }));
        return;
      }
      if (req.method === 'GET') {
        res.end(JSON.stringify(comments));
        return;
      }
      const id = comments.length + 1;
      const comment = { id, body: (body as { body: string }).body, html_url: `https://github.example/${match[1]}/${match[2]}/issues/${match[3]}#issuecomment-${id}` };
      comments.push(comment);
      res.statusCode = 201;
      res.end(JSON.stringify(comment));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const fake: FakeGitHub = {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests,
    comments,
    pulls,
    onRequest: null,
    failNext: (method, status, message) => {
      failures.push({ method, status, message });
    },
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
  return fake;
}
