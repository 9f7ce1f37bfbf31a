import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { runGit } from '../../../src/util/exec.js';
import { git } from '../../helpers/tmp.js';

describe('runGit', () => {
  it("names git's own error, not the graft-file hint every git that reads commits prints first here", async () => {
    const repo = mkdtempSync(join(tmpdir(), 'coo-exec-'));
    git(['init', '-q', repo]);
    git(['-C', repo, '-c', 'user.name=t', '-c', 'user.email=t@example.com', 'commit', '-q', '--allow-empty', '-m', 'one']);
    // A branch naming an object the repository does not hold: rev-list reads commits, so git hints about the graft file first.
    writeFileSync(join(repo, '.git', 'refs', 'heads', 'broken'), `${'1234567890'.repeat(4)}\n`);
    const failed = await runGit(['-C', repo, 'rev-list', '-n', '1', '--all']).then(
      () => null,
      (error: unknown) => error as { code: string; message: string },
    );
    expect(failed?.code).toBe('GIT_FAILED');
    expect(failed?.message).toBe(`git -C ${repo}: fatal: bad object refs/heads/broken`);
  });
});
