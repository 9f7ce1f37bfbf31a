import type { Command } from 'commander';
import { runConsultRelay } from '../mcp/consult-relay.js';

export function consultRelayVerb(program: Command): void {
  program
    // A dispatch attempt's executor starts it, named in its own MCP configuration; it is not a verb for people, so help does not list it.
    .command('consult-relay', { hidden: true })
    .description("the consult tool of a dispatch attempt's agent: an MCP server on stdio that forwards each call to the runner's socket")
    .requiredOption('--socket <path>', "the runner's socket for this attempt")
    .action(async (opts: { socket: string }) => {
      await runConsultRelay(opts.socket, program.version() ?? '0.0.0');
    });
}
