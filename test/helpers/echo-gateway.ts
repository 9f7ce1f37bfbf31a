import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A model gateway on 127.0.0.1 that repeats the key it was given, as a careless or hostile one
 * does ("Incorrect API key provided: <key>"), in front of one of the offline models. The key is
 * the one the client sent (its bearer token), echoed back:
 * - `reject`: every call is answered 401 with the key in the error message;
 * - `echo`: calls pass to the upstream model, and in its reply (a JSON body or an event stream)
 *   the placeholder `@@KEY@@` and the marker `Offline model review.` are rewritten to carry the key.
 */
export interface EchoGateway {
  readonly url: string;
  mode: 'reject' | 'echo';
  /** The keys it was sent. */
  readonly keys: string[];
  close(): Promise<void>;
}

export const KEY_PLACEHOLDER = '@@KEY@@';

export async function startEchoGateway(upstream: string, mode: EchoGateway['mode'] = 'echo'): Promise<EchoGateway> {
  const target = new URL(upstream);
  const keys: string[] = [];
  const gateway: EchoGateway = { url: '', mode, keys, close: async () => undefined };
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const key = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1] ?? (req.headers['api-key'] as string | undefined) ?? '';
      keys.push(key);
      if (gateway.mode === 'reject') {
        res.writeHead(401, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: { message: `Incorrect API key provided: ${key}. You can find your API key at https://platform.openai.com/account/api-keys.`, type: 'invalid_request_error', code: 'invalid_api_key', param: null } }));
        return;
      }
      const forward = request({ host: target.hostname, port: target.port, path: req.url, method: req.method, headers: { ...req.headers, host: target.host } }, (answer) => {
        const headers = { ...answer.headers };
        delete headers['content-length'];
        res.writeHead(answer.statusCode ?? 502, headers);
        // Rewritten as it streams; a placeholder split across two chunks stays as it was, so the upstream keeps it short.
        answer.on('data', (chunk: Buffer) => res.write(chunk.toString('utf8').split(KEY_PLACEHOLDER).join(key).split('Offline model review.').join(`Offline model review. The key you sent is ${key}.`)));
        answer.on('end', () => res.end());
      });
      forward.on('error', () => res.destroy());
      forward.end(Buffer.concat(chunks));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return Object.assign(gateway, {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => {
      server.closeAllConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  });
}
