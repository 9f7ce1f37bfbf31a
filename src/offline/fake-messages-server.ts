import { createServer, type Server, type ServerResponse } from 'node:http';
import { listenLoopback, readBody } from './loopback-server.js';
import { sendJsonError } from './fake-responses-server.js';

/**
 * An offline model for Claude Code on 127.0.0.1: the Anthropic Messages API with streaming
 * (`POST /v1/messages`), driven by a script. Each call that offers tools takes the next turn: a
 * tool use (Claude Code runs it and calls again with the result), a final message, or a failure.
 * Calls without tools (Claude Code's own side requests) get a short text and take no turn.
 */

export type MessagesTurn =
  /** A tool use: `Bash` with `{ command }`, `Write` with `{ file_path, content }`, `Edit`, `Read`. */
  | { readonly kind: 'tool'; readonly name: string; readonly input: Record<string, unknown> }
  | { readonly kind: 'message'; readonly text: string }
  | { readonly kind: 'hang' }
  /** Start the message, then close the stream without `message_stop`. */
  | { readonly kind: 'drop'; readonly text: string }
  | { readonly kind: 'error'; readonly status: number; readonly code: string; readonly message: string };

export interface MessagesCall {
  readonly path: string;
  readonly model: string | null;
  readonly withTools: boolean;
  /** The `tool_result` contents the call carried, in order. */
  readonly toolResults: readonly string[];
  readonly turn: MessagesTurn | null;
}

export interface ScriptedMessagesServer {
  readonly url: string;
  readonly port: number;
  readonly calls: MessagesCall[];
  setScript(turns: readonly MessagesTurn[]): void;
  close(): Promise<void>;
}

function toolResultsOf(body: Record<string, unknown>): string[] {
  const messages = body['messages'];
  if (!Array.isArray(messages)) return [];
  const out: string[] = [];
  for (const message of messages) {
    const content = (message as { content?: unknown }).content;
    if (!Array.isArray(content)) continue;
    for (const block of content as Array<Record<string, unknown>>) {
      if (block['type'] !== 'tool_result') continue;
      const value = block['content'];
      out.push(typeof value === 'string' ? value : JSON.stringify(value ?? null));
    }
  }
  return out;
}

/** Claude Code's error body: `{ type: "error", error: { type, message } }`. */
function sendAnthropicError(res: ServerResponse, status: number, code: string, message: string): void {
  res.writeHead(status, { 'content-type': 'application/json', 'request-id': `req_fake_${status}` });
  res.end(JSON.stringify({ type: 'error', error: { type: code, message } }));
}

export async function startScriptedMessagesServer(initial: readonly MessagesTurn[] = [], port = 0): Promise<ScriptedMessagesServer> {
  let script: readonly MessagesTurn[] = initial;
  let next = 0;
  const calls: MessagesCall[] = [];
  const hanging = new Set<ServerResponse>();

  const server: Server = createServer((req, res) => {
    void (async () => {
      const url = new URL(req.url ?? '/', 'http://127.0.0.1');
      if (req.method !== 'POST' || url.pathname !== '/v1/messages') {
        if (req.method === 'POST' && url.pathname === '/v1/messages/count_tokens') {
          res.writeHead(200, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ input_tokens: 100 }));
          return;
        }
        sendJsonError(res, 404, 'not_found', `no route ${req.method} ${url.pathname}`);
        return;
      }
      let body: Record<string, unknown>;
      try {
        body = JSON.parse(await readBody(req)) as Record<string, unknown>;
      } catch {
        sendAnthropicError(res, 400, 'invalid_request_error', 'body is not JSON');
        return;
      }
      const withTools = Array.isArray(body['tools']) && body['tools'].length > 0;
      const turn: MessagesTurn | null = withTools ? (script[next] ?? null) : { kind: 'message', text: 'ok' };
      if (withTools) next += 1;
      const n = calls.push({ path: url.pathname, model: typeof body['model'] === 'string' ? body['model'] : null, withTools, toolResults: toolResultsOf(body), turn });
      if (turn === null) {
        sendAnthropicError(res, 500, 'api_error', 'the script has no more turns');
        return;
      }
      if (turn.kind === 'error') {
        sendAnthropicError(res, turn.status, turn.code, turn.message);
        return;
      }
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', 'request-id': `req_fake_${n}` });
      if (turn.kind === 'hang') {
        hanging.add(res);
        return;
      }
      const event = (data: Record<string, unknown>): void => {
        res.write(`event: ${String(data['type'])}\ndata: ${JSON.stringify(data)}\n\n`);
      };
      event({ type: 'message_start', message: { id: `msg_fake_${n}`, type: 'message', role: 'assistant', model: body['model'] ?? 'fake', content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: 200, output_tokens: 1 } } });
      if (turn.kind === 'tool') {
        event({ type: 'content_block_start', index: 0, content_block: { type: 'tool_use', id: `toolu_fake_${n}`, name: turn.name, input: {} } });
        event({ type: 'content_block_delta', index: 0, delta: { type: 'input_json_delta', partial_json: JSON.stringify(turn.input) } });
      } else {
        event({ type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } });
        event({ type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: turn.text } });
      }
      if (turn.kind === 'drop') {
        res.destroy();
        return;
      }
      event({ type: 'content_block_stop', index: 0 });
      event({ type: 'message_delta', delta: { stop_reason: turn.kind === 'tool' ? 'tool_use' : 'end_turn', stop_sequence: null }, usage: { output_tokens: 20 } });
      event({ type: 'message_stop' });
      res.end();
    })();
  });
  const listening = await listenLoopback(server, port, hanging);
  return {
    ...listening,
    calls,
    setScript(turns) {
      script = turns;
      next = 0;
    },
  };
}
