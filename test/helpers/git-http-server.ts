import { serveGitHttp } from './git-http.js';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface GitHttpServer {
  /** The base URL: a repository `NAME.git` under the project root is at `${url}/NAME.git`. */
  readonly url: string;
  /** Every request, with the Authorization header git sent (undefined when none). */
  readonly requests: Array<{ method: string; path: string; authorization: string | undefined }>;
  close(): Promise<void>;
}

/**
 * Git's smart HTTP protocol on 127.0.0.1 (stock `git http-backend` as a CGI program), behind
 * Basic authentication as GitHub asks for a push: user `x-access-token`, the token as password.
 * A request without them gets 401 and a challenge, so git asks its credential helper.
 */
export async function startGitHttpServer(options: { readonly projectRoot: string; readonly token: string }): Promise<GitHttpServer> {
  const requests: GitHttpServer['requests'] = [];
  const expected = `Basic ${Buffer.from(`x-access-token:${options.token}`).toString('base64')}`;
  const server: Server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    requests.push({ method: req.method ?? '', path: url.pathname, authorization: req.headers.authorization });
    if (req.headers.authorization !== expected) {
      req.resume();
      res.writeHead(401, { 'www-authenticate': 'Basic realm="test"', 'content-type': 'text/plain' });
      res.end('authentication required\n');
      return;
    }
    serveGitHttp(req, res, options.projectRoot);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
