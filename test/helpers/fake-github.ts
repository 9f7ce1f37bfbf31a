import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface FakeGitHub {
  readonly url: string;
  readonly requests: Array<{ method: string; path: string; authorization: string | undefined; body: unknown }>;
  readonly comments: Array<{ id: number; body: string; html_url: string }>;
  close(): Promise<void>;
}

/** The two GitHub REST endpoints `coo cite --post` uses, on 127.0.0.1, recording every request. */
export async function startFakeGitHub(): Promise<FakeGitHub> {
  const requests: FakeGitHub['requests'] = [];
  const comments: FakeGitHub['comments'] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const raw = Buffer.concat(chunks).toString('utf8');
      const body = raw === '' ? null : (JSON.parse(raw) as unknown);
      const path = (req.url ?? '').split('?')[0]!;
      requests.push({ method: req.method ?? '', path, authorization: req.headers.authorization, body });
      const match = /^\/repos\/([^/]+)\/([^/]+)\/issues\/(\d+)\/comments$/.exec(path);
      res.setHeader('content-type', 'application/json');
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
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests,
    comments,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
