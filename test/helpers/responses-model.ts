import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A scripted model behind the OpenAI Responses API on 127.0.0.1, for the real Codex CLI as the COO
 * agent. Each request's `input` holds the conversation so far; the script reads it and answers with
 * the next item: a tool call (an MCP tool is a function call in the `mcp__<server>` namespace) or a
 * final message. Codex starts MCP servers beside the first request, so until the server's namespace
 * is among the request's tools the script asks Codex to run `sleep 1` and looks again.
 */

export type ResponseItem = Record<string, unknown>;

export interface Turn {
  /** The request's tools: names of functions and namespaces. */
  readonly tools: readonly string[];
  /** The function calls made so far and their outputs, oldest first. */
  readonly calls: ReadonlyArray<{ readonly name: string; readonly namespace: string | null; readonly args: string; readonly output: string | null }>;
}

export interface ScriptedModel {
  readonly url: string;
  readonly requests: Turn[];
  close(): Promise<void>;
}

function read(req: IncomingMessage): Promise<string> {
  return new Promise((resolve) => {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString('utf8')));
    req.on('end', () => resolve(body));
  });
}

function turnOf(body: Record<string, unknown>): Turn {
  const tools = ((body['tools'] as Array<{ name?: string }> | undefined) ?? []).map((tool) => tool.name ?? '');
  const input = (body['input'] as ResponseItem[] | undefined) ?? [];
  const outputs = new Map<string, string>();
  for (const item of input) {
    if (item['type'] === 'function_call_output') outputs.set(String(item['call_id']), typeof item['output'] === 'string' ? item['output'] : JSON.stringify(item['output']));
  }
  const calls = input
    .filter((item) => item['type'] === 'function_call')
    .map((item) => ({ name: String(item['name']), namespace: typeof item['namespace'] === 'string' ? item['namespace'] : null, args: String(item['arguments']), output: outputs.get(String(item['call_id'])) ?? null }));
  return { tools, calls };
}

let callCount = 0;

/** A call of a tool of an MCP server, as the model emits it. */
export function mcpCall(server: string, tool: string, args: Record<string, unknown>): ResponseItem {
  callCount += 1;
  return { type: 'function_call', namespace: `mcp__${server}`, name: tool, arguments: JSON.stringify(args), call_id: `call_${callCount}` };
}

export function finalMessage(text: string): ResponseItem {
  return { type: 'message', role: 'assistant', content: [{ type: 'output_text', text }] };
}

function shellCall(cmd: string): ResponseItem {
  callCount += 1;
  return { type: 'function_call', name: 'exec_command', arguments: JSON.stringify({ cmd }), call_id: `call_${callCount}` };
}

/** Starts the model; `script` gives the next item for a turn in which the MCP server's tools are there. */
export async function startScriptedModel(server: string, script: (turn: Turn) => ResponseItem | Promise<ResponseItem>): Promise<ScriptedModel> {
  const requests: Turn[] = [];
  const http = createServer((req: IncomingMessage, res: ServerResponse) => {
    void (async () => {
      const body = JSON.parse((await read(req)) || '{}') as Record<string, unknown>;
      const turn = turnOf(body);
      requests.push(turn);
      const waiting = turn.calls.filter((call) => call.name === 'exec_command').length;
      const item = turn.tools.includes(`mcp__${server}`) ? await script(turn) : waiting < 60 ? shellCall('sleep 1') : finalMessage(`the ${server} MCP server never started`);
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(`data: ${JSON.stringify({ type: 'response.output_item.done', item })}\n\n`);
      res.write(`data: ${JSON.stringify({ type: 'response.completed', response: { id: `resp_${requests.length}` } })}\n\n`);
      res.end();
    })();
  });
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  const { port } = http.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/v1`,
    requests,
    close: () => new Promise((resolve) => http.close(() => resolve())),
  };
}
