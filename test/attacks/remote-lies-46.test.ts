import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadPrivateKey } from '../../src/cli/common.js';
import { enqueueConsult } from '../../src/consult/enqueue.js';
import { Ledger } from '../../src/ledger/ledger.js';
import { RemoteLedger } from '../../src/remote/publish.js';
import { makeServedLedger, makeWriter, removeHook } from '../helpers/remote-ledger.js';
import { git, tempDir } from '../helpers/tmp.js';

/**
 * A remote that lies without a hook to stop it (a forge), round 46: what it lists beside its main.
 */

const dir = tempDir('coo-attack-remote-lies-46-');
const closers: Array<() => Promise<void> | void> = [];

afterAll(async () => {
  for (const close of closers.reverse()) await close();
});

/** Refs a hookless remote takes from anyone who may push a branch: each name ends in refs/heads/main, and git's ls-remote matches a pattern by its tail. */
function tailNamedRefs(gitdir: string, count: number, at: string): void {
  const lines = Array.from({ length: count }, (_, i) => `create refs/heads/a${String(i).padStart(5, '0')}/refs/heads/main ${at}\n`).join('');
  git(['--git-dir', gitdir, 'update-ref', '--stdin'], { input: lines });
}

describe('a hookless remote that lists many refs whose names end in refs/heads/main before its main', { timeout: 180_000 }, () => {
  it("a writer and a runner's look still find the remote's main by its exact name: the write is published on it, never refused as a main that was deleted", async () => {
    const caseDir = join(dir, 'tail-refs');
    const served = await makeServedLedger(caseDir);
    removeHook(served);
    const writer = await makeWriter(caseDir, 'coo', served, served.gitdir);
    const head = served.head();
    // About 110 KB of ls-remote output, every line of it before refs/heads/main's own (git lists refs in name order).
    tailNamedRefs(served.gitdir, 1500, head);
    const listed = git(['ls-remote', served.gitdir, 'refs/heads/main']);
    expect(listed.length).toBeGreaterThan(100_000);
    expect(listed.trimEnd().split('\n').at(-1)).toBe(`${head}\trefs/heads/main`);

    const ledger = Ledger.open(writer.gitdir);
    closers.push(() => ledger.close());
    const remote = new RemoteLedger(ledger, { remote: served.gitdir });
    expect(await remote.remoteHead()).toBe(head);
    const key = loadPrivateKey(served.keys.coo);
    const published = await remote.write((on) => enqueueConsult({ ledger: on, key, now: new Date(), target: 'aa.chatgpt', repo: served.target, patterns: ['README.md'], question: 'Is add() correct for NaN?', maxRuntimeSeconds: 60 }));
    expect(published.commit).toMatch(/^[0-9a-f]{40}$/);
    expect(served.head()).toBe(published.commit);
    expect(git(['--git-dir', served.gitdir, 'rev-parse', 'refs/heads/main^']).trim()).toBe(head);
    expect(await remote.remoteHead()).toBe(published.commit);
  });
});
