import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { checkedOrigin, checkOriginUnchanged } from '../../../src/remote/git-remote.js';
import { tempDir } from '../../helpers/tmp.js';

/**
 * A runner checks before each fetch or push that git's route through the clone's origin is the one
 * it started with (machines-redteam-30). It reads the route again, two git processes, only when one
 * of the files git reads the config from changed: a runner syncs after every commit any runner pushes.
 */
const saved = { HOME: process.env['HOME'], XDG: process.env['XDG_CONFIG_HOME'], GLOBAL: process.env['GIT_CONFIG_GLOBAL'] };
afterEach(() => {
  for (const [name, value] of [['HOME', saved.HOME], ['XDG_CONFIG_HOME', saved.XDG], ['GIT_CONFIG_GLOBAL', saved.GLOBAL]] as const) {
    if (value === undefined) delete process.env[name];
    else process.env[name] = value;
  }
});

const URL = 'ssh://ledger.example/ledger.git';

function clone(): string {
  const home = tempDir('origin-route-home');
  process.env['HOME'] = home;
  delete process.env['XDG_CONFIG_HOME'];
  delete process.env['GIT_CONFIG_GLOBAL'];
  const gitdir = join(tempDir('origin-route'), 'ledger.git');
  execFileSync('git', ['init', '-q', '--bare', gitdir]);
  execFileSync('git', ['--git-dir', gitdir, 'remote', 'add', 'origin', URL]);
  return gitdir;
}

describe("the route through a runner's origin", () => {
  it('is read again when the clone’s config is rewritten (git remote set-url), and refused when it leads elsewhere', async () => {
    const gitdir = clone();
    const checked = await checkedOrigin(gitdir, URL);
    expect(checked.route).toEqual({ fetch: [URL], push: [URL], through: '' });
    await expect(checkOriginUnchanged(gitdir, URL, checked)).resolves.toBeUndefined();
    execFileSync('git', ['--git-dir', gitdir, 'remote', 'set-url', 'origin', 'ssh://backup.example/ledger.git']);
    await expect(checkOriginUnchanged(gitdir, URL, checked)).rejects.toMatchObject({ code: 'REMOTE_UNVERIFIED' });
  });

  it('is read again when a user-level config that did not exist at start is made (git config --global url.COPY.insteadOf)', async () => {
    const gitdir = clone();
    const checked = await checkedOrigin(gitdir, URL);
    execFileSync('git', ['config', '--global', 'url.ssh://copy.example/.insteadOf', 'ssh://ledger.example/']);
    await expect(checkOriginUnchanged(gitdir, URL, checked)).rejects.toMatchObject({ code: 'REMOTE_UNVERIFIED' });
  });

  it('takes a config file rewritten with the same route (another setting written) and reads no git again until the next change', async () => {
    const gitdir = clone();
    const checked = await checkedOrigin(gitdir, URL);
    const before = checked.stamp;
    execFileSync('git', ['--git-dir', gitdir, 'config', 'core.logAllRefUpdates', 'true']);
    await expect(checkOriginUnchanged(gitdir, URL, checked)).resolves.toBeUndefined();
    expect(checked.stamp).not.toBe(before);
    // With the files as they were last read, the route recorded is what is compared, not git's: a
    // recorded route that no longer matches git passes until a file changes, and is then found.
    const stale = { ...checked, route: { fetch: ['ssh://elsewhere.example/x.git'], push: ['ssh://elsewhere.example/x.git'], through: '' } };
    await expect(checkOriginUnchanged(gitdir, URL, stale)).resolves.toBeUndefined();
    execFileSync('git', ['--git-dir', gitdir, 'config', 'core.logAllRefUpdates', 'false']);
    await expect(checkOriginUnchanged(gitdir, URL, stale)).rejects.toMatchObject({ code: 'REMOTE_UNVERIFIED' });
  });

  it('watches a file an include names, also one empty or not made at start, and an include added after start', async () => {
    const gitdir = clone();
    const home = process.env['HOME']!;
    execFileSync('git', ['config', '--global', 'include.path', '~/.gitconfig.local']);
    const checked = await checkedOrigin(gitdir, URL);
    execFileSync('git', ['config', '--file', join(home, '.gitconfig.local'), 'url.ssh://mirror.example/.insteadOf', 'ssh://ledger.example/']);
    await expect(checkOriginUnchanged(gitdir, URL, checked)).rejects.toMatchObject({ code: 'REMOTE_UNVERIFIED' });

    const other = clone();
    const again = await checkedOrigin(other, URL);
    const added = join(tempDir('origin-route-include'), 'added.cfg');
    execFileSync('git', ['--git-dir', other, 'config', 'include.path', added]);
    // The include alone changes no route: taken, and the file it names watched from now on.
    await expect(checkOriginUnchanged(other, URL, again)).resolves.toBeUndefined();
    execFileSync('git', ['config', '--file', added, 'url.ssh://mirror.example/.insteadOf', 'ssh://ledger.example/']);
    await expect(checkOriginUnchanged(other, URL, again)).rejects.toMatchObject({ code: 'REMOTE_UNVERIFIED' });
  });

  it('stamps an include it may not look at (an includeIf for another folder, under a file) instead of failing, and watches one the environment names (GIT_CONFIG_COUNT)', async () => {
    const gitdir = clone();
    const notFolder = join(tempDir('origin-route-file'), 'a-file');
    writeFileSync(notFolder, 'x');
    execFileSync('git', ['config', '--global', 'includeIf.gitdir:/elsewhere/.path', join(notFolder, 'work.inc')]);
    const checked = await checkedOrigin(gitdir, URL);
    await expect(checkOriginUnchanged(gitdir, URL, checked)).resolves.toBeUndefined();

    const named = join(tempDir('origin-route-env'), 'env.inc');
    const saved = { count: process.env['GIT_CONFIG_COUNT'], key: process.env['GIT_CONFIG_KEY_0'], value: process.env['GIT_CONFIG_VALUE_0'] };
    Object.assign(process.env, { GIT_CONFIG_COUNT: '1', GIT_CONFIG_KEY_0: 'include.path', GIT_CONFIG_VALUE_0: named });
    try {
      const again = await checkedOrigin(gitdir, URL);
      execFileSync('git', ['config', '--file', named, 'url.ssh://mirror.example/.insteadOf', 'ssh://ledger.example/']);
      await expect(checkOriginUnchanged(gitdir, URL, again)).rejects.toMatchObject({ code: 'REMOTE_UNVERIFIED' });
    } finally {
      for (const [name, value] of [['GIT_CONFIG_COUNT', saved.count], ['GIT_CONFIG_KEY_0', saved.key], ['GIT_CONFIG_VALUE_0', saved.value]] as const) {
        if (value === undefined) delete process.env[name];
        else process.env[name] = value;
      }
    }
  });

  it('refuses an upload or receive program or an ssh command set after start, which send git elsewhere with the same URL', async () => {
    for (const [name, value] of [['remote.origin.uploadpack', 'git-upload-pack /srv/mirror.git #'], ['remote.origin.receivepack', 'git-receive-pack /srv/mirror.git #'], ['core.sshCommand', 'ssh -o ProxyCommand="nc mirror.example 22"']] as const) {
      const gitdir = clone();
      const checked = await checkedOrigin(gitdir, URL);
      execFileSync('git', ['--git-dir', gitdir, 'config', name, value]);
      await expect(checkOriginUnchanged(gitdir, URL, checked), name).rejects.toMatchObject({ code: 'REMOTE_UNVERIFIED' });
    }
  });
});
