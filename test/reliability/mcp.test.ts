import { describe, expect, it } from 'vitest';
import { Ledger } from '../../src/ledger/ledger.js';
import { worlds } from '../helpers/lane.js';
import { connectMcp, structured, textOf } from '../helpers/mcp.js';
import { tally } from '../helpers/tally.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * An agent (or two) calling the same tool at once: two `coo mcp` servers on one ledger, each with
 * its own ledger handle as two processes have, take the same consult many times over. The first
 * message is looked up and the correlation chosen under the ledger's lock, so every call gets it.
 */
const fresh = worlds(tempDir('coo-mcp-races-'));
const CALLS = process.env['COO_RELIABILITY'] === 'full' ? 36 : 18;
const ASK = { to: 'aa.chatgpt', files: ['src/add.ts', 'README.md'], prompt: 'Is add() correct for NaN?', max_runtime_seconds: 60 };

describe('coo mcp under concurrent calls', () => {
  it(`${CALLS} identical consults sent at once to two servers on one ledger all return the one message, and none is refused`, async () => {
    const w = await fresh();
    const other = Ledger.open(w.gitdir);
    const servers = [await connectMcp(w), await connectMcp(w, [], { ledger: other })];
    try {
      const results = await Promise.all(Array.from({ length: CALLS }, (_, index) => servers[index % 2]!.call('consult', ASK)));
      const refused = results.filter((result) => result.isError === true).map(textOf);
      expect(refused).toEqual([]);
      const ids = new Set(results.map((result) => structured(result)['message_id']));
      expect(ids.size).toBe(1);
      const messages = [...(await w.ledger.state()).messages.values()];
      expect(messages).toHaveLength(1);
      expect(results.filter((result) => structured(result)['existing'] === false)).toHaveLength(1);
      tally('load', { test: 'identical MCP consults at once', calls: CALLS, messages: messages.length, refused: refused.length });
    } finally {
      for (const server of servers) await server.close();
      other.close();
    }
  }, 300_000);
});
