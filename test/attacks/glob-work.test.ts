import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import picomatch from 'picomatch';
import { describe, expect, it } from 'vitest';
import { globMatcher, MAX_SLOW_GLOB_WILDCARDS, slowGlob } from '../../src/authority/glob.js';
import { outOfScope, scopeMatcher } from '../../src/authority/scope.js';
import { pinFiles, resolveCommit } from '../../src/lane/pins.js';
import { codeOfAsync } from '../helpers/codes.js';
import { dispatchTo, hostilePlaces } from '../helpers/hostile-agent.js';
import { git, tempDir } from '../helpers/tmp.js';

/**
 * A glob whose regex backtracks: picomatch's `*?` said eleven times held `coo mcp` for a minute
 * against one 42-character name, and a scope of `*a*a*a*b` took seconds against a 255-character
 * path in the validator's replay. These run in the test's time limit only if the match does not
 * backtrack; what they match is what picomatch says of shorter names.
 */
const MiB = 1024 * 1024;
const dir = tempDir();
const place = hostilePlaces(dir, 'glob');

describe('a glob that backtracks in a regex', () => {
  it('is matched by a dispatch scope in linear work, as picomatch matches it', () => {
    const scope = ['src/*a*a*a*a*a*a*b'];
    const long = `src/${'a'.repeat(251)}`;
    expect(outOfScope([long, `${long.slice(0, -1)}b`, 'src/aaaaaab', 'src/aaaaab/x', `${long.slice(0, -1)}b/deep`], scope)).toEqual([long, 'src/aaaaab/x']);
    // picomatch on short names agrees: six a's before the b are needed, and the scope covers what lies under a match.
    const theirs = (path: string) => picomatch(scope[0]!, { dot: true })(path) || picomatch(`${scope[0]!}/**`, { dot: true })(path);
    for (const path of ['src/aaaaaab', 'src/aaaaab', 'src/aaaaaab/x', 'src/xaxaxaxaxaxab', 'src/.aaaaaab']) expect(scopeMatcher(scope)(path), path).toBe(theirs(path));
  });

  it('pins a consult\'s files by a glob of eleven "*?" against a long name, and refuses a slow glob outside the plain forms before reading the commit', async () => {
    const repo = tempDir();
    git(['init', '-q', '-b', 'main', repo]);
    const name = `${'a'.repeat(41)}.md`;
    writeFileSync(join(repo, name), 'context\n');
    writeFileSync(join(repo, 'short.md'), 'context\n');
    // Names in folders, which a glob of one segment cannot match: the regex tries every split of each before it says no.
    for (const folder of ['a', 'b', 'c']) {
      mkdirSync(join(repo, folder.repeat(36)));
      writeFileSync(join(repo, folder.repeat(36), 'b.md'), 'context\n');
    }
    git(['add', '.'], { cwd: repo });
    git(['commit', '-q', '-m', 'context'], { cwd: repo });
    const at = await resolveCommit(repo, 'HEAD');
    const pinned = await pinFiles(repo, at, ['*?'.repeat(11)], { files: 200, bytes: MiB });
    expect(pinned.map((file) => file.path)).toEqual([name]);
    // Four wildcards beside a brace list are picomatch's to read, and its regex would backtrack: refused as written.
    const slow = '{a,b}*a*a*a*b';
    expect(slowGlob(slow)).toMatch(/at most 3/);
    expect(await codeOfAsync(() => pinFiles(repo, at, [slow], { files: 200, bytes: MiB }))).toBe('CONTEXT_INVALID');
    // As many beside a brace list as the bound takes are still read.
    expect(slowGlob('{a,short}*.m?')).toBeNull();
    expect((await pinFiles(repo, at, ['{a,short}*.m?'], { files: 200, bytes: MiB })).map((file) => file.path)).toEqual([name, 'short.md']);
  });

  it('refuses a dispatch scope outside the plain forms with more wildcards than the bound, before anything is written', async () => {
    const p = await place('scope');
    const slow = `{src,lib}/${'*a'.repeat(MAX_SLOW_GLOB_WILDCARDS + 1)}`;
    const head = () => git(['--git-dir', p.world.gitdir, 'rev-parse', 'refs/heads/main']).trim();
    const before = head();
    expect(await codeOfAsync(() => dispatchTo(p, 'slow-scope', { scope: [slow] }))).toBe('USAGE');
    expect(head()).toBe(before);
    // A plain glob of as many stars is matched without backtracking: taken.
    await expect(dispatchTo(p, 'plain-scope', { scope: [`src/${'*a'.repeat(MAX_SLOW_GLOB_WILDCARDS + 1)}`] })).resolves.toMatchObject({ messageId: expect.any(String) });
  });

  it('answers for a path git cannot hold as picomatch does', () => {
    for (const path of ['src/./a', 'src//a', 'src/a/']) expect(globMatcher('src/*')(path), path).toBe(picomatch('src/*', { dot: true })(path));
  });
});
