import { PassThrough } from 'node:stream';
import { LIMITS } from '../../src/limits.js';
import { serverScrubber } from '../../src/mcp/results.js';
import { createCooMcpServer, serveStdio } from '../../src/mcp/server.js';
import { GuardedStdioTransport, loadWireSchemas } from '../../src/mcp/stdio.js';
import type { World } from './lane.js';

/**
 * A raw MCP client: JSON-RPC lines written as bytes, answers read off a stdio server's stdout, no
 * SDK in between, so a test sends what no SDK would.
 */

export interface Answer {
  readonly id: string | number | null;
  readonly result?: { readonly isError?: boolean; readonly structuredContent?: Record<string, unknown>; readonly content?: ReadonlyArray<{ text?: string }> } & Record<string, unknown>;
  readonly error?: { readonly code: number; readonly message: string };
}

export const INITIALIZE = { id: 0, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '0' } } };
export const line = (message: Record<string, unknown>): string => `${JSON.stringify({ jsonrpc: '2.0', ...message })}\n`;
export const call = (id: number, name: string, args: unknown, extra: Record<string, unknown> = {}): string => line({ id, method: 'tools/call', params: { name, arguments: args, ...extra } });

/** Lines in, every answer out: a raw client of a stdio server, however it is run. */
export function answersOf(stdout: NodeJS.ReadableStream) {
  const answers: Answer[] = [];
  let buffered = '';
  stdout.on('data', (chunk: Buffer) => {
    buffered += chunk.toString('utf8');
    const parts = buffered.split('\n');
    buffered = parts.pop()!;
    answers.push(...parts.map((text) => JSON.parse(text) as Answer));
  });
  /** The first answer under `id` after `from`, waiting a bounded number of turns for it. */
  const answer = async (id: string | number | null, from: number): Promise<Answer> => {
    for (let turn = 0; turn < 2000; turn += 1) {
      const found = answers.slice(from).find((candidate) => candidate.id === id);
      if (found !== undefined) return found;
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    throw new Error(`no answer under ${String(id)} among ${JSON.stringify(answers.slice(from).slice(-3))}`);
  };
  return { answers, answer };
}

/** `coo mcp`'s server on its own stdio transport, as the CLI wires them, in this process; initialized unless `initialize` is false. */
export async function rawSession(w: World, options: { initialize?: boolean } = {}) {
  const stdin = new PassThrough();
  const stdout = new PassThrough();
  const stdio = new GuardedStdioTransport(stdin, stdout, await loadWireSchemas(), LIMITS.mcpMessageBytes);
  const server = await createCooMcpServer({ ledger: w.ledger, key: w.actors.coo, repo: w.target, auditDir: null, clock: () => new Date(), scrubber: serverScrubber({ key: w.actors.coo, env: {}, places: [] }), version: '0.1.0', inputEnded: stdio.inputEnded });
  const { answers, answer } = answersOf(stdout);
  await serveStdio(server, stdio);
  const ask = async (text: string, id: string | number | null): Promise<Answer> => {
    const from = answers.length;
    stdin.write(text);
    return answer(id, from);
  };
  if (options.initialize !== false) {
    await ask(line(INITIALIZE), 0);
    stdin.write(line({ method: 'notifications/initialized' }));
  }
  return { stdin, answers, answer, ask, close: () => server.close() };
}

/** The code of a refusal, `-32602 MCP_MESSAGE_INVALID`, or what was answered. */
export function refusal(answer: Answer): string {
  if (answer.error !== undefined) return `${answer.error.code} ${answer.error.message.split(':')[0]}`;
  return answer.result?.isError === true ? `tool error ${answer.result.content?.[0]?.text?.split(':')[0]}` : 'answered';
}
