import { chmodSync, mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { buildTree, gitObjectId } from '../../../src/dispatch/git-tree.js';
import { listTree } from '../../../src/lane/commit-files.js';
import { git, gitEnv, tempDir } from '../../helpers/tmp.js';

describe('git trees built from a flat list of files', () => {
  it('gives the tree id stock git writes, for executables, links, nested folders, names that sort around "/" and names that are not UTF-8', async () => {
    const repo = join(tempDir('git-tree'), 'repo');
    mkdirSync(join(repo, 'a', 'b'), { recursive: true });
    git(['init', '-q', '-b', 'main', repo]);
    writeFileSync(join(repo, 'a', 'b', 'deep.txt'), 'deep\n');
    writeFileSync(join(repo, 'a-b'), 'dash\n');
    writeFileSync(join(repo, 'a.b'), 'dot\n');
    writeFileSync(join(repo, 'a0'), 'zero\n');
    writeFileSync(join(repo, 'run.sh'), '#!/bin/sh\n');
    chmodSync(join(repo, 'run.sh'), 0o755);
    symlinkSync('a/b/deep.txt', join(repo, 'link'));
    writeFileSync(Buffer.concat([Buffer.from(`${repo}/`), Buffer.from([0x6e, 0xe9, 0xff])]), 'latin\n');
    git(['add', '-A'], { cwd: repo });
    git(['commit', '-q', '-m', 'tree'], { cwd: repo, env: gitEnv() });
    const files = await listTree(join(repo, '.git'), git(['rev-parse', 'HEAD'], { cwd: repo }).trim());
    expect(files.map((file) => file.mode).sort()).toEqual(['100644', '100644', '100644', '100644', '100644', '100755', '120000']);
    const built = buildTree([...files].reverse());
    expect(built.oid).toBe(git(['rev-parse', 'HEAD^{tree}'], { cwd: repo }).trim());
    // Every tree it returns is one git has, by the same id.
    for (const object of built.objects) expect(git(['cat-file', '-t', object.oid], { cwd: repo }).trim()).toBe('tree');
    expect(gitObjectId('blob', Buffer.from('deep\n'))).toBe(git(['rev-parse', 'HEAD:a/b/deep.txt'], { cwd: repo }).trim());
  });
});
