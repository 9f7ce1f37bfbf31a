import { createServer, request, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A loopback proxy that holds every request until it is opened, then passes it on: it keeps an
 * advisory agent's model answering only when a test says so (a consult still running while the
 * agent's tool call times out).
 */
export interface Gate {
  readonly url: string;
  /** Requests that arrived, held or passed. */
  readonly arrived: () => number;
  open(): void;
  close(): Promise<void>;
}

export async function startGate(upstream: string): Promise<Gate> {
  let opened: () => void = () => undefined;
  const isOpen = new Promise<void>((resolve) => (opened = resolve));
  let arrived = 0;
  const target = new URL(upstream);
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    arrived += 1;
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      void isOpen.then(() => {
        const forward = request({ host: target.hostname, port: target.port, path: req.url, method: req.method, headers: req.headers }, (answer) => {
          res.writeHead(answer.statusCode ?? 502, answer.headers);
          answer.pipe(res);
        });
        forward.on('error', () => res.destroy());
        forward.end(Buffer.concat(chunks));
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    arrived: () => arrived,
    open: () => opened(),
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
