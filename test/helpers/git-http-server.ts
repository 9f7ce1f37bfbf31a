import { spawn } from 'node:child_process';
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
    const cgi = spawn('git', ['http-backend'], {
      env: {
        PATH: process.env['PATH'],
        GIT_CONFIG_NOSYSTEM: '1',
        GIT_CONFIG_GLOBAL: '/dev/null',
        GIT_PROJECT_ROOT: options.projectRoot,
        GIT_HTTP_EXPORT_ALL: '1',
        REMOTE_USER: 'x-access-token',
        REMOTE_ADDR: '127.0.0.1',
        REQUEST_METHOD: req.method ?? 'GET',
        PATH_INFO: url.pathname,
        QUERY_STRING: url.search.slice(1),
        CONTENT_TYPE: req.headers['content-type'] ?? '',
        ...(req.headers['content-encoding'] === undefined ? {} : { HTTP_CONTENT_ENCODING: req.headers['content-encoding'] }),
        ...(req.headers['git-protocol'] === undefined ? {} : { GIT_PROTOCOL: String(req.headers['git-protocol']) }),
      },
      stdio: ['pipe', 'pipe', 'inherit'],
    });
    req.pipe(cgi.stdin);
    let head = Buffer.alloc(0);
    let headersDone = false;
    cgi.stdout.on('data', (chunk: Buffer) => {
      if (headersDone) {
        res.write(chunk);
        return;
      }
      head = Buffer.concat([head, chunk]);
      const end = head.indexOf('\r\n\r\n');
      if (end < 0) return;
      headersDone = true;
      let status = 200;
      for (const line of head.subarray(0, end).toString('latin1').split('\r\n')) {
        const colon = line.indexOf(':');
        const name = line.slice(0, colon).trim();
        const value = line.slice(colon + 1).trim();
        if (name.toLowerCase() === 'status') status = Number(value.split(' ')[0]);
        else res.setHeader(name, value);
      }
      res.writeHead(status);
      res.write(head.subarray(end + 4));
    });
    cgi.on('close', () => res.end());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
