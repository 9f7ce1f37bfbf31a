import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** What every scripted model server shares: reading a request body, and listening on 127.0.0.1 only. */

export function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
  });
}

export interface Listening {
  readonly url: string;
  readonly port: number;
  /** Ends the responses held open (`hanging`), every connection, then the server. */
  close(): Promise<void>;
}

/** Starts `server` on 127.0.0.1 (`port` 0: any free port); nothing but this machine reaches it. */
export async function listenLoopback(server: Server, port: number, hanging: ReadonlySet<ServerResponse>): Promise<Listening> {
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  const address = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${address.port}`,
    port: address.port,
    close() {
      for (const res of hanging) res.destroy();
      server.closeAllConnections();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}
