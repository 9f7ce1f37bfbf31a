import { describe, expect } from 'vitest';
import { attack } from '../helpers/attack-kit.js';
import { agentScript, codesOf, dispatchTo, hostilePlaces, receiptsFor, watchOnce } from '../helpers/hostile-agent.js';
import { git, tempDir } from '../helpers/tmp.js';

/**
 * A hostile execution agent that carries the provider key it was handed out in the names of the
 * files it leaves, rather than in what it prints: the receipt lists the names of the work, and the
 * receipt is signed into the ledger for good, so no name holding a secret may reach it.
 */

const dir = tempDir('work-names');

describe('a hostile agent that names its work after a secret', () => {
  const place = hostilePlaces(dir, 'names');
  const KEY = 'sk-proj-HostileNameKey0123456789abcdef';

  /** Whether the key, as written or in base64url, is anywhere in the ledger's objects after the attempt. */
  async function leaked(name: string, action: string): Promise<string> {
    const where = await place(name);
    const { messageId } = await dispatchTo(where, name);
    const watch = watchOnce(where, agentScript(where.world.dir, action), { env: { OPENAI_API_KEY: KEY } });
    if (watch.hung) return 'hung';
    const [receipt] = await receiptsFor(where, messageId);
    if (receipt === undefined) return `no receipt (exit ${watch.status})`;
    const ledger = git(['--git-dir', where.world.gitdir, 'cat-file', '--batch-all-objects', '--batch']);
    if ([KEY, Buffer.from(KEY).toString('base64url')].some((form) => ledger.includes(form))) return 'accepted';
    // Nor does the work land on a branch under that name: the attempt fails and says why.
    const landed = git(['for-each-ref', '--format=%(objectname)', 'refs/heads/coo/'], { cwd: where.repo }).trim().split('\n').filter((head) => head !== '' && head !== where.base);
    if (landed.length > 0) return 'landed on its branch';
    expect(receipt['status']).toBe('failed');
    expect(codesOf(receipt)).toContain('scope_violation');
    expect(JSON.stringify(receipt)).toContain('[removed: OPENAI_API_KEY');
    return 'refused';
  }

  attack('a hostile agent: a file in its scope named after the provider key it was handed', 'runner', 'refused', () =>
    leaked('plain', "printf 'export const add = (a, b) => a + b;\\n' > src/add.js\nprintf 'x\\n' > \"src/$OPENAI_API_KEY.js\""),
  );

  attack('a hostile agent: a file outside its scope named after the provider key in base64url', 'runner', 'refused', () =>
    leaked('outside', "printf 'export const add = (a, b) => a + b;\\n' > src/add.js\nmkdir -p docs && printf 'x\\n' > \"docs/$(printf %s \"$OPENAI_API_KEY\" | base64 -w0 | tr '+/' '-_' | tr -d =).md\""),
  );
});
