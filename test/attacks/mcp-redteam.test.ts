import { describe, expect, it } from 'vitest';
import { sendCommand } from '../../src/inbox/ceo-messages.js';
import { serverScrubber } from '../../src/mcp/results.js';
import { connectMcp, textOf } from '../helpers/mcp.js';
import { worlds, type World } from '../helpers/lane.js';
import { git, tempDir } from '../helpers/tmp.js';

/**
 * `coo mcp` attacked through what its client asks it to sign: the server holds secrets (the COO key,
 * the provider keys of its environment, a remote's credentials) and every write tool signs what the
 * client sent into the ledger, for good.
 */
const fresh = worlds(tempDir('mcp-redteam-'));
const KEY = 'sk-proj-McpRedTeam0123456789abcdefSECRET';

/** Every object of the ledger (blobs, trees, commits) as text. */
function ledgerText(w: World): string {
  return git(['--git-dir', w.gitdir, 'cat-file', '--batch-all-objects', '--batch']);
}

function serverFor(w: World) {
  return connectMcp(w, [], { scrubber: serverScrubber({ key: w.actors.coo, env: { OPENAI_API_KEY: KEY }, places: [{ name: 'ledger', path: w.gitdir }, { name: 'repo', path: w.target }] }) });
}

describe('a write tool asked to sign a secret the server holds', () => {
  it('refuses a consult, a dispatch and an ack whose free text holds it, as written or with a zero-width character inside, and writes nothing', async () => {
    const w = await fresh();
    const command = (await sendCommand({ ledger: w.ledger, key: w.actors.ceo, now: new Date(), text: 'Ship it.' })).messageId;
    const mcp = await serverFor(w);
    try {
      const before = (await w.ledger.state()).seq;
      const escaped = `${KEY.slice(0, 4)}\u200b${KEY.slice(4)}`;
      const calls: Array<[string, Record<string, unknown>]> = [
        ['consult', { to: 'aa.chatgpt', files: ['src/add.ts'], prompt: `Is this key valid? ${KEY}` }],
        ['consult', { to: 'aa.chatgpt', files: ['src/add.ts'], prompt: `Is this key valid? ${escaped}` }],
        ['dispatch', { to: 'ea.codex', task: `Use ${KEY} to call the API.`, scope: ['src/**'], accept: ['it works'], verify: ['true'] }],
        ['ack', { message_id: command, note: `done with ${KEY}` }],
      ];
      for (const [tool, args] of calls) {
        const result = await mcp.call(tool, args);
        expect([tool, result.isError, textOf(result).split(':')[0]]).toEqual([tool, true, 'USAGE']);
        expect(textOf(result)).not.toContain(KEY);
      }
      expect((await w.ledger.state()).seq).toBe(before);
      expect(ledgerText(w)).not.toContain(KEY.slice(8));
      // The same calls without the secret are written.
      expect((await mcp.call('ack', { message_id: command, note: 'done' })).isError).not.toBe(true);
    } finally {
      await mcp.close();
    }
  });
});
