import { spawn } from 'node:child_process';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface GitHttpServer {
  /** An http:// URL for a repository under the project root. */
  url(path: string): string;
  close(): Promise<void>;
}

/** The CGI variables of one request (RFC 3875), with every request header as HTTP_*. */
function cgiEnv(request: IncomingMessage, projectRoot: string): NodeJS.ProcessEnv {
  const url = new URL(request.url ?? '/', 'http://127.0.0.1');
  const env: NodeJS.ProcessEnv = {
    PATH: process.env['PATH'],
    GIT_PROJECT_ROOT: projectRoot,
    GIT_HTTP_EXPORT_ALL: '1',
    // Pushes are taken from anyone here, as a forge takes them from an authorized user.
    GIT_CONFIG_COUNT: '1',
    GIT_CONFIG_KEY_0: 'http.receivepack',
    GIT_CONFIG_VALUE_0: 'true',
    REMOTE_USER: 'test',
    REMOTE_ADDR: '127.0.0.1',
    GATEWAY_INTERFACE: 'CGI/1.1',
    SERVER_PROTOCOL: 'HTTP/1.1',
    REQUEST_METHOD: request.method ?? 'GET',
    PATH_INFO: decodeURIComponent(url.pathname),
    QUERY_STRING: url.search.replace(/^\?/, ''),
    CONTENT_TYPE: request.headers['content-type'] ?? '',
  };
  if (request.headers['content-length'] !== undefined) env['CONTENT_LENGTH'] = request.headers['content-length'];
  for (const [name, value] of Object.entries(request.headers)) {
    if (typeof value === 'string') env[`HTTP_${name.toUpperCase().replace(/-/g, '_')}`] = value;
  }
  return env;
}

/** Runs `git http-backend` for one request and relays its CGI reply. */
function serve(request: IncomingMessage, response: ServerResponse, projectRoot: string): void {
  const child = spawn('git', ['http-backend'], { env: cgiEnv(request, projectRoot), stdio: ['pipe', 'pipe', 'ignore'] });
  request.pipe(child.stdin);
  child.stdin.on('error', () => undefined);
  let head = Buffer.alloc(0);
  let headerDone = false;
  child.stdout.on('data', (chunk: Buffer) => {
    if (headerDone) {
      response.write(chunk);
      return;
    }
    head = Buffer.concat([head, chunk]);
    const crlf = head.indexOf('\r\n\r\n');
    const lf = head.indexOf('\n\n');
    const end = crlf >= 0 && (lf < 0 || crlf < lf) ? crlf : lf;
    if (end < 0) return;
    headerDone = true;
    const separator = end === crlf ? 4 : 2;
    let status = 200;
    for (const line of head.subarray(0, end).toString('latin1').split(/\r?\n/)) {
      const colon = line.indexOf(':');
      if (colon <= 0) continue;
      const name = line.slice(0, colon).trim();
      const value = line.slice(colon + 1).trim();
      if (name.toLowerCase() === 'status') status = Number.parseInt(value, 10);
      else response.setHeader(name, value);
    }
    response.writeHead(status);
    response.write(head.subarray(end + separator));
  });
  child.on('close', () => {
    if (!headerDone) response.writeHead(502);
    response.end();
  });
}

/**
 * git's smart HTTP on 127.0.0.1: a small node:http server that runs `git http-backend` (CGI) for
 * each request, with receive-pack enabled, serving the repositories under `projectRoot`.
 */
export async function startGitHttp(projectRoot: string): Promise<GitHttpServer> {
  const server = createServer((request, response) => serve(request, response, projectRoot));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: (path) => `http://127.0.0.1:${port}/${path.replace(/^\//, '')}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
