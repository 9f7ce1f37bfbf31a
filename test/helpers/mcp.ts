import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { serverScrubber } from '../../src/mcp/results.js';
import { createCooMcpServer, type CooMcpOptions } from '../../src/mcp/server.js';
import type { World } from './lane.js';

export interface McpSession {
  readonly client: Client;
  /** A tool call's result; a tool error comes back as a result with isError, never a throw. */
  call(name: string, args?: Record<string, unknown>): Promise<CallToolResult>;
  close(): Promise<void>;
}

/** `coo mcp`'s server for a world, connected in process to the SDK's own client; `overrides` replace its options (another ledger handle, a runner's problems). */
export async function connectMcp(world: World, log: string[] = [], overrides: Partial<CooMcpOptions> = {}): Promise<McpSession> {
  const server = await createCooMcpServer({
    ledger: world.ledger,
    key: world.actors.coo,
    repo: world.target,
    auditDir: null,
    clock: () => new Date(),
    scrubber: serverScrubber({ key: world.actors.coo, env: {}, places: [{ name: 'ledger', path: world.gitdir }, { name: 'repo', path: world.target }, { name: 'test-folder', path: world.dir }] }),
    version: '0.1.0',
    log: (line) => log.push(line),
    ...overrides,
  });
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  const client = new Client({ name: 'coo-test', version: '0.0.0' });
  await Promise.all([server.connect(serverSide), client.connect(clientSide)]);
  return {
    client,
    call: async (name, args = {}) => (await client.callTool({ name, arguments: args })) as CallToolResult,
    close: async () => {
      await client.close();
      await server.close();
    },
  };
}

/** The text of a result's first content item. */
export function textOf(result: CallToolResult): string {
  const first = result.content[0];
  return first !== undefined && first.type === 'text' ? first.text : '';
}

export function structured<T = Record<string, unknown>>(result: CallToolResult): T {
  if (result.isError === true) throw new Error(`tool error: ${textOf(result)}`);
  return result.structuredContent as T;
}
