import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { useKit } from '../helpers/attack-kit.js';
import { coo, json } from '../helpers/cli.js';
import { tempDir } from '../helpers/tmp.js';

const dir = tempDir('coo-clone-');
const kit = useKit(dir);

describe('coo clone', () => {
  it('clones a ledger whose whole history verifies from the pinned trust root, ready for coo verify and coo show', () => {
    const target = join(dir, 'local.git');
    const result = coo(['clone', kit().world.gitdir, target, '--trust-root', kit().keys.ceo.key.publicKey.keyId, '--json']);
    expect(result.stderr).toBe('');
    expect(result.status).toBe(0);
    expect(json(result)).toMatchObject({ ok: true, head: kit().head() });
    expect(existsSync(join(target, 'hooks', 'pre-receive'))).toBe(true);
    expect(coo(['verify', '--ledger', target, '--no-checkpoint']).status).toBe(0);
  });

  it('refuses a ledger whose first trust root does not name the pinned key, and leaves nothing behind', () => {
    const target = join(dir, 'wrong-root.git');
    const result = coo(['clone', kit().world.gitdir, target, '--trust-root', kit().keys.intruder.key.publicKey.keyId]);
    expect(result.status).toBe(3);
    expect(result.stderr).toMatch(/^coo: TRUST_ROOT_MISMATCH: /);
    expect(existsSync(target)).toBe(false);
  });

  it('refuses a remote whose history holds a commit the hook would have declined (a forge with no hook), and leaves nothing behind', async () => {
    const target = join(dir, 'forged.git');
    await kit().bypass({ 'notes/forged.yaml': 'x: 1\n' }, { key: kit().keys.intruder.file }, () => {
      const result = coo(['clone', kit().world.gitdir, target, '--trust-root', kit().keys.ceo.key.publicKey.keyId]);
      expect(result.status).toBe(3);
      expect(result.stderr).toMatch(/^coo: [A-Z_]+: the history of .* does not verify/);
      expect(result.stderr.trim().split('\n')).toHaveLength(1);
      expect(existsSync(target)).toBe(false);
    });
  });

  it('asks for a trust root, and refuses a target that is not empty', () => {
    expect(coo(['clone', kit().world.gitdir, join(dir, 'no-root.git')]).status).toBe(2);
    const result = coo(['clone', kit().world.gitdir, kit().world.gitdir, '--trust-root', kit().keys.ceo.key.publicKey.keyId]);
    expect(result.status).toBe(2);
    expect(result.stderr).toMatch(/^coo: LEDGER_EXISTS: /);
  });
});
