import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A scripted model behind the Anthropic Messages API on 127.0.0.1, for the real Claude Code as an
 * MCP client. Each request holds the conversation; the script reads the tool calls made so far and
 * their results, and answers with the next tool call or a final text, streamed as Claude Code expects.
 */

export interface MessagesTurn {
  readonly tools: readonly string[];
  readonly calls: ReadonlyArray<{ readonly name: string; readonly input: unknown; readonly output: string | null }>;
}

export type MessagesReply = { readonly tool: string; readonly input: Record<string, unknown> } | { readonly text: string };

export interface MessagesModel {
  readonly url: string;
  readonly requests: MessagesTurn[];
  close(): Promise<void>;
}

type Block = Record<string, unknown>;

function turnOf(body: Record<string, unknown>): MessagesTurn {
  const tools = ((body['tools'] as Array<{ name?: string }> | undefined) ?? []).map((tool) => tool.name ?? '');
  const messages = (body['messages'] as Array<{ content: unknown }> | undefined) ?? [];
  const blocks = messages.flatMap((message) => (Array.isArray(message.content) ? (message.content as Block[]) : []));
  const results = new Map<string, string>();
  for (const block of blocks) {
    if (block['type'] === 'tool_result') results.set(String(block['tool_use_id']), typeof block['content'] === 'string' ? block['content'] : JSON.stringify(block['content']));
  }
  const calls = blocks.filter((block) => block['type'] === 'tool_use').map((block) => ({ name: String(block['name']), input: block['input'], output: results.get(String(block['id'])) ?? null }));
  return { tools, calls };
}

let uses = 0;

/** Starts the model; `script` answers turns whose tools include `requiredTool`, anything else gets a short text. */
export async function startMessagesModel(requiredTool: string, script: (turn: MessagesTurn) => MessagesReply): Promise<MessagesModel> {
  const requests: MessagesTurn[] = [];
  const http = createServer((req: IncomingMessage, res: ServerResponse) => {
    let raw = '';
    req.on('data', (chunk: Buffer) => (raw += chunk.toString('utf8')));
    req.on('end', () => {
      const body = JSON.parse(raw || '{}') as Record<string, unknown>;
      const turn = turnOf(body);
      requests.push(turn);
      const reply: MessagesReply = turn.tools.includes(requiredTool) ? script(turn) : { text: 'ok' };
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const event = (type: string, data: Record<string, unknown>): void => void res.write(`event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`);
      event('message_start', { message: { id: `msg_${requests.length}`, type: 'message', role: 'assistant', model: body['model'], content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: 1, output_tokens: 1 } } });
      if ('tool' in reply) {
        uses += 1;
        event('content_block_start', { index: 0, content_block: { type: 'tool_use', id: `toolu_${uses}`, name: reply.tool, input: {} } });
        event('content_block_delta', { index: 0, delta: { type: 'input_json_delta', partial_json: JSON.stringify(reply.input) } });
      } else {
        event('content_block_start', { index: 0, content_block: { type: 'text', text: '' } });
        event('content_block_delta', { index: 0, delta: { type: 'text_delta', text: reply.text } });
      }
      event('content_block_stop', { index: 0 });
      event('message_delta', { delta: { stop_reason: 'tool' in reply ? 'tool_use' : 'end_turn', stop_sequence: null }, usage: { output_tokens: 1 } });
      event('message_stop', {});
      res.end();
    });
  });
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  const { port } = http.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, requests, close: () => new Promise((resolve) => http.close(() => resolve())) };
}
