import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { LIMITS } from '../../src/limits.js';
import { cloneLedger } from '../../src/remote/clone.js';
import { runRemoteGit } from '../../src/remote/git-remote.js';
import { hostLabel, ownerTag, processStartTime } from '../../src/util/process.js';
import { makeServedLedger } from '../helpers/remote-ledger.js';
import { git, tempDir } from '../helpers/tmp.js';

/**
 * What a fetch or a clone receives from a remote, against a remote that sends without end and a
 * runner killed mid-fetch: nothing it received stays on disk past the bound of one fetch, nor past
 * the process that received it.
 */
const dir = tempDir('deployment-redteam-2-');
const DIST_GIT_REMOTE = join(import.meta.dirname, '..', '..', 'dist', 'remote', 'git-remote.js');
const QUARANTINE = 'tmp_coo-incoming-';

/** Waits, a bounded number of turns, for `path` to exist. */
async function appears(path: string): Promise<void> {
  for (let turn = 0; turn < 3000 && !existsSync(path); turn += 1) await new Promise((resolve) => setTimeout(resolve, 10));
  expect(existsSync(path)).toBe(true);
}

/** A pid no process has now: a process that ran and was waited for. */
function deadPid(): number {
  return spawnSync('true').pid!;
}

describe('a runner killed mid-fetch', () => {
  it("leaves its quarantine (what the remote sent so far) behind, and the next fetch into that ledger removes it; a quarantine whose owner may still run (this process, another host's) stays", async () => {
    const place = join(dir, 'killed');
    const served = await makeServedLedger(place);
    const gitdir = join(place, 'clone.git');
    await cloneLedger({ url: served.gitdir, gitdir, trustRoot: { keyId: served.ceoKeyId }, now: new Date() });
    const objects = join(gitdir, 'objects');
    // The remote answers the fetch, then sends nothing more until released.
    const started = join(place, 'started');
    const release = join(place, 'release');
    const ended = join(place, 'ended');
    const stall = join(place, 'stall.sh');
    writeFileSync(stall, `#!/bin/sh\n: > '${started}'\nwhile [ ! -e '${release}' ]; do sleep 0.05; done\n: > '${ended}'\nexit 1\n`);
    chmodSync(stall, 0o755);
    const fetch = `import { runRemoteGit } from ${JSON.stringify(DIST_GIT_REMOTE)};\nawait runRemoteGit(['fetch', '--quiet', '--no-tags', '--upload-pack', ${JSON.stringify(stall)}, ${JSON.stringify(served.gitdir)}, 'refs/heads/main'], { gitdir: ${JSON.stringify(gitdir)}, maxReceivedBytes: ${LIMITS.remoteFetchBytes} });\n`;
    const runner = spawn(process.execPath, ['--input-type=module', '-e', fetch], { stdio: 'ignore' });
    const exited = new Promise((resolve) => runner.once('exit', resolve));
    try {
      await appears(started);
      const left = readdirSync(objects).filter((name) => name.startsWith(QUARANTINE));
      expect(left).toHaveLength(1);
      // What the remote had sent when the runner was killed.
      mkdirSync(join(objects, left[0]!, 'pack'));
      writeFileSync(join(objects, left[0]!, 'pack', 'tmp_pack_partial'), randomBytes(1024 * 1024));
      runner.kill('SIGKILL');
      await exited;
    } finally {
      writeFileSync(release, '');
    }
    await appears(ended);
    expect(readdirSync(objects).filter((name) => name.startsWith(QUARANTINE))).toHaveLength(1);
    // Quarantines of owners that may still run, and one whose pid now names a process started later.
    const mine = `${QUARANTINE}${ownerTag()}.abc123`;
    const elsewhere = `${QUARANTINE}other-host.4242.77.abc123`;
    const reused = `${QUARANTINE}${hostLabel()}.${process.pid}.${Number(processStartTime(process.pid) ?? 0) + 1}.abc123`;
    const gone = `${QUARANTINE}${hostLabel()}.${deadPid()}.-.abc123`;
    for (const name of [mine, elsewhere, reused, gone]) mkdirSync(join(objects, name));
    const fetched = await runRemoteGit(['fetch', '--quiet', '--no-tags', served.gitdir, 'refs/heads/main'], { gitdir, maxReceivedBytes: LIMITS.remoteFetchBytes });
    expect(fetched.ok).toBe(true);
    expect(readdirSync(objects).filter((name) => name.startsWith(QUARANTINE)).sort()).toEqual([mine, elsewhere].sort());
  });
});

describe('coo clone of a remote that sends more than one fetch takes', () => {
  it('is stopped at the bound (a pack of 3 MiB against 1 MiB) as a finding about the remote, and leaves nothing behind', async () => {
    const place = join(dir, 'huge-clone');
    const served = await makeServedLedger(place);
    const blob = spawnSync('git', ['--git-dir', served.gitdir, 'hash-object', '-w', '--stdin'], { input: randomBytes(3 * 1024 * 1024) }).stdout.toString('utf8').trim();
    const tree = git(['--git-dir', served.gitdir, 'mktree'], { input: `100644 blob ${blob}\tnoise.bin\n` }).trim();
    git(['--git-dir', served.gitdir, 'update-ref', 'refs/heads/main', git(['--git-dir', served.gitdir, 'commit-tree', tree, '-p', 'main', '-m', 'noise']).trim()]);
    const gitdir = join(place, 'clone.git');
    await expect(cloneLedger({ url: served.gitdir, gitdir, trustRoot: { keyId: served.ceoKeyId }, now: new Date(), maxFetchBytes: 1024 * 1024 })).rejects.toMatchObject({
      code: 'REMOTE_UNVERIFIED',
      message: `${served.gitdir} sent more for its main than one fetch takes: git clone received more than 1 MiB, the most one fetch takes; what it received was removed; nothing was cloned; a ledger that large is cloned with a higher --max-fetch (MiB)`,
    });
    expect(readdirSync(place).filter((name) => name.includes('clone'))).toEqual([]);
  });

  it('removes what a clone killed before it finished left beside the target, and clones', async () => {
    const place = join(dir, 'killed-clone');
    const served = await makeServedLedger(place);
    const orphan = `.clone.git.clone-${hostLabel()}.${deadPid()}.123.0badf00d`;
    const alive = `.clone.git.clone-${ownerTag()}.0badf00d`;
    for (const name of [orphan, alive]) {
      mkdirSync(join(place, name, 'objects', 'pack'), { recursive: true });
      writeFileSync(join(place, name, 'objects', 'pack', 'tmp_pack_partial'), randomBytes(64 * 1024));
    }
    const cloned = await cloneLedger({ url: served.gitdir, gitdir: join(place, 'clone.git'), trustRoot: { keyId: served.ceoKeyId }, now: new Date() });
    expect(cloned.head).toBe(served.head());
    expect(readdirSync(place).filter((name) => name.includes('clone')).sort()).toEqual([alive, 'clone.git'].sort());
  });
});
