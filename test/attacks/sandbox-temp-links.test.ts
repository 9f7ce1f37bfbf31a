import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { bwrapArgs } from '../../src/util/bubblewrap.js';
import { requireBubblewrap } from '../helpers/bubblewrap.js';
import { outsideTempDir, tempDir } from '../helpers/tmp.js';

/**
 * The shared temporary folders every sandbox gets empty (/tmp, /var/tmp, TMPDIR), when one of them or a path the
 * sandbox is given is a link: a mount follows the link, so under an emptied folder its target is gone and
 * bubblewrap stops before the command. A TMPDIR (or a /tmp) that links elsewhere, or a worktree named through a
 * link into /tmp, must still give a sandbox that stands.
 */

const outside = outsideTempDir('sandbox-temp-links-');
const inTmp = tempDir('sandbox-temp-links-');

/** Runs `check` in a sandbox laid out for `layout`'s worktree, with TMPDIR as given; bubblewrap's exit and what it said. */
function inSandbox(worktree: string, check: string, tmpdirValue?: string): { status: number | null; stderr: string } {
  const bwrap = requireBubblewrap('a sandbox test');
  const previous = process.env['TMPDIR'];
  if (tmpdirValue !== undefined) process.env['TMPDIR'] = tmpdirValue;
  try {
    const argv = [...bwrapArgs(bwrap, { writable: [worktree], hide: [], chdir: worktree, ownPids: true }), '/bin/sh', '-c', check];
    const run = spawnSync(argv[0]!, argv.slice(1), { encoding: 'utf8' });
    return { status: run.status, stderr: run.stderr };
  } finally {
    if (previous === undefined) delete process.env['TMPDIR'];
    else process.env['TMPDIR'] = previous;
  }
}

describe('a sandbox whose temporary folder or worktree is a link', () => {
  it("stands when the runner's TMPDIR is a link to a folder (as /tmp -> /private/tmp is), and that folder is emptied in it", () => {
    const target = join(outside, 'real-tmp');
    mkdirSync(target);
    writeFileSync(join(target, 'neighbour'), 'not yours');
    const link = join(outside, 'tmp-link');
    symlinkSync(target, link);
    const worktree = join(outside, 'worktree');
    mkdirSync(worktree);
    const run = inSandbox(worktree, `touch written && ! test -e '${join(target, 'neighbour')}'`, link);
    expect(run.stderr).toBe('');
    expect(run.status).toBe(0);
    expect(existsSync(join(worktree, 'written'))).toBe(true);
  });

  it('stands when the worktree is named through a link into /tmp, and writes land in the real folder', () => {
    const real = join(inTmp, 'worktree');
    mkdirSync(real);
    writeFileSync(join(real, 'given'), 'yours');
    const link = join(outside, 'worktree-link');
    symlinkSync(real, link);
    const run = inSandbox(link, 'cat given > copied');
    expect(run.stderr).toBe('');
    expect(run.status).toBe(0);
    expect(readFileSync(join(real, 'copied'), 'utf8')).toBe('yours');
  });
});

describe('a command in a shared temporary folder', () => {
  // Straight in /tmp (not in TMPDIR, which a test run may set elsewhere), as an operator's wrapper often is.
  const tool = mkdtempSync('/tmp/coo-rv16-tool-');
  afterAll(() => rmSync(tool, { recursive: true, force: true }));

  it('a wrapper script that runs node on a module beside it runs in the sandbox, and what lies in /tmp beside its folder stays hidden', () => {
    const bwrap = requireBubblewrap('a sandbox test');
    writeFileSync(join(tool, 'main.mjs'), "import { readFileSync } from 'node:fs';\nprocess.stdout.write(readFileSync(new URL('./data.txt', import.meta.url), 'utf8'));\n");
    writeFileSync(join(tool, 'data.txt'), 'beside');
    const script = join(tool, 'run.sh');
    writeFileSync(script, `#!/bin/sh\nexec '${process.execPath}' "$(dirname "$0")/main.mjs"\n`);
    chmodSync(script, 0o755);
    const neighbour = `${tool}-neighbour`;
    writeFileSync(neighbour, 'not yours');
    try {
      const worktree = join(outside, 'tool-worktree');
      mkdirSync(worktree);
      const argv = [...bwrapArgs(bwrap, { writable: [worktree], hide: [], keep: [script], chdir: worktree, ownPids: true }), '/bin/sh', '-c', `test ! -e '${neighbour}' && '${script}'`];
      const run = spawnSync(argv[0]!, argv.slice(1), { encoding: 'utf8' });
      expect(run.stderr).toBe('');
      expect(run.stdout).toBe('beside');
      expect(run.status).toBe(0);
    } finally {
      rmSync(neighbour, { force: true });
    }
  });
});
