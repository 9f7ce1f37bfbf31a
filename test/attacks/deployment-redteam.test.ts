import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { cooBounded, headOf } from '../helpers/damage.js';
import { makeTargetRepo } from '../helpers/lane.js';
import { git, tempDir } from '../helpers/tmp.js';

/**
 * A real deployment over a git remote, attacked by a careless operator and by a remote that lies:
 * no writer or runner builds on, acts on or pays for a history that did not verify from the trust
 * root, and a mistake in how one was started is said (exit 2) before anything is written or claimed.
 */

const dir = tempDir('deployment-redteam-');

/** A ledger made by coo init (the one the remote serves) and the keys that write it. */
function servedLedger(name: string): { place: string; origin: string; keys: string } {
  const place = join(dir, name);
  const keys = join(place, 'keys');
  for (const actor of ['ceo', 'coo.hermes']) expect(cooBounded(['keygen', '--actor', actor, '--out', keys]).status).toBe(0);
  const origin = join(place, 'ledger.git');
  expect(cooBounded(['init', '--ledger', origin, '--ceo-key', join(keys, 'ceo.key'), '--actor', `coo.hermes=${join(keys, 'coo.hermes.pub')}`]).status).toBe(0);
  return { place, origin, keys };
}

describe('a ledger stock git cloned (git clone --bare, --mirror, with a work tree, under another remote name)', () => {
  it('is refused by every writing verb and by coo watch, with --remote and without (exit 2, nothing written); the ledger coo init made stays writable', () => {
    const { place, origin, keys } = servedLedger('stock-clones');
    const repo = join(place, 'repo');
    makeTargetRepo(repo);
    const copies = {
      bare: ['--bare'],
      mirror: ['--mirror'],
      upstream: ['--bare', '--origin', 'upstream'],
    } as const;
    const gitdirs = Object.entries(copies).map(([name, flags]) => {
      const gitdir = join(place, `${name}.git`);
      git(['clone', '-q', ...flags, origin, gitdir]);
      return gitdir;
    });
    git(['clone', '-q', origin, join(place, 'work')]);
    gitdirs.push(join(place, 'work', '.git'));
    const before = headOf(origin);
    for (const gitdir of gitdirs) {
      const said = `is a clone of ${origin} made by git, not by coo clone, so its history was never verified from a trust root you pinned`;
      for (const remote of [[], ['--remote', origin]]) {
        const stop = cooBounded(['kill-switch', 'on', '--ledger', gitdir, '--key', join(keys, 'ceo.key'), '--reason', 'stop everything', ...remote]);
        expect({ gitdir, remote, status: stop.status, stderr: stop.stderr }).toMatchObject({ gitdir, remote, status: 2, stderr: expect.stringContaining(`coo: USAGE: ${gitdir} ${said}`) });
      }
      const watch = cooBounded(['watch', '--once', '--ledger', gitdir, '--key', join(keys, 'coo.hermes.key'), '--repo', repo, '--state-dir', join(place, 'state'), '--isolation', 'none']);
      expect({ gitdir, status: watch.status, stderr: watch.stderr }).toMatchObject({ gitdir, status: 2, stderr: expect.stringContaining(`coo: USAGE: ${gitdir} ${said}: coo watch runs on it neither alone nor through its remote`) });
      expect(headOf(gitdir)).toBe(before);
    }
    expect(headOf(origin)).toBe(before);
    // The ledger the remote serves, made by coo init, is written on its own; and so is one pushed to a backup with git remote add.
    expect(cooBounded(['kill-switch', 'on', '--ledger', origin, '--key', join(keys, 'ceo.key'), '--reason', 'stop everything']).status).toBe(0);
    const backup = join(place, 'backup.git');
    git(['init', '-q', '--bare', backup]);
    git(['--git-dir', origin, 'remote', 'add', 'origin', backup]);
    git(['--git-dir', origin, 'push', '-q', 'origin', 'main']);
    expect(cooBounded(['kill-switch', 'off', '--ledger', origin, '--key', join(keys, 'ceo.key'), '--reason', 'resume']).status).toBe(0);
    expect(headOf(origin)).not.toBe(before);
  });
});
