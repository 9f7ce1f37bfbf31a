import { copyFileSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { agentScript, dispatchTo, FIX, hostilePlaces, receiptsFor, watchOnce } from '../helpers/hostile-agent.js';
import { requireBubblewrap } from '../helpers/bubblewrap.js';
import { git, tempDir } from '../helpers/tmp.js';

/**
 * A careless operator deploying runners, round 57: one mistake at a time, each judged by what a
 * runner started so does with the queued work and the secrets it holds.
 */

const dir = tempDir('operator-redteam-57-');

/** The text the ledger's history holds, every commit's changes (receipts, their attached stderr). */
function ledgerText(gitdir: string): string {
  return git(['--git-dir', gitdir, 'log', '-p', '--all', '--format=%H']);
}

describe("a COO key kept in the target repository's git folder (.git/coo.key, where git never commits it)", () => {
  const places = hostilePlaces(join(dir, 'places'), 'key');

  it("is hidden from the dispatch's sandbox, which reads that git folder: the agent cannot read it, and the dispatch still runs (before, the agent read the key)", { timeout: 180_000 }, async () => {
    requireBubblewrap('hiding the key from the sandbox');
    for (const where of ['git-folder', 'linked'] as const) {
      const place = await places(where);
      const inGit = join(place.repo, '.git', 'coo.key');
      copyFileSync(place.keyFile, inGit);
      // Given as it lies, or through a link elsewhere that names it there.
      const keyFile = where === 'git-folder' ? inGit : join(place.world.dir, 'coo-key-link');
      if (where === 'linked') symlinkSync(inGit, keyFile);
      const id = (await dispatchTo(place, `key-${where}`)).messageId;
      const agent = agentScript(place.world.dir, `if sum=$(sha256sum < '${inGit}' 2>/dev/null) && [ -s '${inGit}' ]; then echo "KEY READ $sum" >&2; else echo "KEY HIDDEN" >&2; fi; ${FIX}`);
      const run = watchOnce({ ...place, keyFile }, agent, { isolation: 'auto' });
      expect(run.status, run.stderr).toBe(0);
      const receipts = await receiptsFor(place, id);
      expect(receipts.map((receipt) => receipt['status']), run.stderr).toEqual(['succeeded']);
      const history = ledgerText(place.world.gitdir);
      expect(history).toContain('KEY HIDDEN');
      expect(history).not.toContain('KEY READ');
    }
  });
});
