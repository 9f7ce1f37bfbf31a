import { createServer, type Server, type ServerResponse } from 'node:http';
import { listenLoopback, readBody } from './loopback-server.js';

/**
 * An offline model for Codex on 127.0.0.1: the streaming Responses API (`POST …/responses`), driven
 * by a script. Each model call takes the next turn: a shell command or a patch (Codex runs it and
 * calls again with the result), a final message, or one of the ways a provider fails. `coo demo`
 * runs the real Codex CLI against it; the contract tests count its calls.
 */

export type ScriptTurn =
  /** A shell command through Codex's `exec_command` tool. */
  | { readonly kind: 'shell'; readonly cmd: string }
  /** An `apply_patch` body (the lines between `*** Begin Patch` and `*** End Patch`). */
  | { readonly kind: 'patch'; readonly patch: string }
  /**
   * A call of an MCP server's tool (the namespace `mcp__<server>`). Codex starts MCP servers beside
   * its first request: until the server's tools are offered, the model has Codex wait a second and
   * asks again, without taking the turn.
   */
  | { readonly kind: 'mcp'; readonly server: string; readonly tool: string; readonly args: Record<string, unknown> }
  /** The final answer: the turn ends. */
  | { readonly kind: 'message'; readonly text: string }
  /** Accept the request and never answer. */
  | { readonly kind: 'hang' }
  /** Stream the items, then close the stream without `response.completed`. */
  | { readonly kind: 'drop'; readonly text: string }
  /** An HTTP error as a provider sends it. */
  | { readonly kind: 'error'; readonly status: number; readonly code: string; readonly message: string };

export interface ModelCall {
  readonly path: string;
  readonly model: string | null;
  /** The `function_call_output` items the call carried, in order: what the tools returned. */
  readonly toolOutputs: readonly string[];
  /** The turn this call was answered with; null when the script had run out. */
  readonly turn: ScriptTurn | null;
}

export interface ScriptedModelServer {
  readonly url: string;
  readonly port: number;
  readonly calls: ModelCall[];
  /** Replaces the script; the next call takes its first turn. */
  setScript(turns: readonly ScriptTurn[]): void;
  close(): Promise<void>;
}

/** A final message of `bytes` bytes: the huge-output turn. */
export function hugeMessage(bytes: number): ScriptTurn {
  return { kind: 'message', text: 'x'.repeat(bytes) };
}

export function sendJsonError(res: ServerResponse, status: number, code: string, message: string): void {
  res.writeHead(status, { 'content-type': 'application/json', 'x-request-id': `req_fake_${status}` });
  res.end(JSON.stringify({ error: { message, type: code, code, param: null } }));
}

function toolOutputsOf(body: Record<string, unknown>): string[] {
  const input = body['input'];
  if (!Array.isArray(input)) return [];
  return input
    .filter((item): item is Record<string, unknown> => item !== null && typeof item === 'object' && (item as { type?: unknown }).type === 'function_call_output')
    .map((item) => (typeof item['output'] === 'string' ? item['output'] : JSON.stringify(item['output'] ?? null)));
}

/** What the model does while an MCP server's tools are not offered yet: Codex waits a second. */
const WAIT_FOR_TOOLS = { kind: 'shell', cmd: 'sleep 1' } as const;

/** The tool names and namespaces a request offers. */
function toolsOf(body: Record<string, unknown>): string[] {
  const tools = body['tools'];
  // A function or namespace has a name; tool search is named by its type.
  return Array.isArray(tools) ? tools.map((tool) => (tool !== null && typeof tool === 'object' ? String((tool as { name?: unknown; type?: unknown }).name ?? (tool as { type?: unknown }).type ?? '') : '')) : [];
}

function itemsFor(turn: ScriptTurn, n: number): Array<Record<string, unknown>> {
  switch (turn.kind) {
    case 'shell':
      return [{ type: 'function_call', id: `fc_${n}`, name: 'exec_command', call_id: `call_${n}`, arguments: JSON.stringify({ cmd: turn.cmd }) }];
    case 'patch': {
      const cmd = `apply_patch <<'PATCH'\n*** Begin Patch\n${turn.patch.replace(/\n?$/, '\n')}*** End Patch\nPATCH`;
      return [{ type: 'function_call', id: `fc_${n}`, name: 'exec_command', call_id: `call_${n}`, arguments: JSON.stringify({ cmd }) }];
    }
    case 'mcp':
      return [{ type: 'function_call', id: `fc_${n}`, namespace: `mcp__${turn.server}`, name: turn.tool, call_id: `call_${n}`, arguments: JSON.stringify(turn.args) }];
    case 'message':
    case 'drop':
      return [{ type: 'message', id: `msg_${n}`, role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: turn.text, annotations: [] }] }];
    case 'hang':
    case 'error':
      return [];
  }
}

export interface ScriptedServerOptions {
  readonly port?: number;
  /**
   * Every session plays the script from its first turn: a call's turn is the number of tool results
   * it carries (Codex sends a turn's whole input each call). Without it, calls take turns in order
   * across sessions, as the contract tests count them.
   */
  readonly perSession?: boolean;
}

export async function startScriptedResponsesServer(initial: readonly ScriptTurn[] = [], options: ScriptedServerOptions = {}): Promise<ScriptedModelServer> {
  const { port = 0, perSession = false } = options;
  let script: readonly ScriptTurn[] = initial;
  let next = 0;
  const calls: ModelCall[] = [];
  const hanging = new Set<ServerResponse>();

  const server: Server = createServer((req, res) => {
    void (async () => {
      const url = new URL(req.url ?? '/', 'http://127.0.0.1');
      if (req.method !== 'POST' || !url.pathname.endsWith('/responses')) {
        sendJsonError(res, 404, 'not_found', `no route ${req.method} ${url.pathname}`);
        return;
      }
      let body: Record<string, unknown>;
      try {
        body = JSON.parse(await readBody(req)) as Record<string, unknown>;
      } catch {
        sendJsonError(res, 400, 'invalid_request_error', 'body is not JSON');
        return;
      }
      const toolOutputs = toolOutputsOf(body);
      const scripted = script[perSession ? toolOutputs.length : next] ?? null;
      // An MCP call waits (a second at a time, at most a minute) until the request offers the server's
      // tools: outright, or behind Codex's tool search (models that have it get MCP tools that way).
      const offered = scripted?.kind !== 'mcp' || toolsOf(body).includes(`mcp__${scripted.server}`) || toolsOf(body).includes('tool_search');
      const waits = calls.filter((call) => call.turn?.kind === 'shell' && call.turn.cmd === WAIT_FOR_TOOLS.cmd).length;
      const turn = offered || waits >= 60 ? scripted : WAIT_FOR_TOOLS;
      if (turn === scripted) next += 1;
      const n = calls.push({ path: url.pathname, model: typeof body['model'] === 'string' ? body['model'] : null, toolOutputs, turn });
      if (turn === null) {
        sendJsonError(res, 500, 'server_error', 'the script has no more turns');
        return;
      }
      if (turn.kind === 'hang') {
        hanging.add(res);
        res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
        return;
      }
      if (turn.kind === 'error') {
        sendJsonError(res, turn.status, turn.code, turn.message);
        return;
      }
      const id = `resp_fake_${n}`;
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', 'x-request-id': `req_fake_${n}` });
      const event = (data: Record<string, unknown>): void => {
        res.write(`event: ${String(data['type'])}\ndata: ${JSON.stringify(data)}\n\n`);
      };
      event({ type: 'response.created', response: { id, status: 'in_progress', output: [] } });
      for (const item of itemsFor(turn, n)) event({ type: 'response.output_item.done', item });
      if (turn.kind === 'drop') {
        res.destroy();
        return;
      }
      event({
        type: 'response.completed',
        response: { id, status: 'completed', usage: { input_tokens: 200, input_tokens_details: { cached_tokens: 0 }, output_tokens: 20, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 220 } },
      });
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
