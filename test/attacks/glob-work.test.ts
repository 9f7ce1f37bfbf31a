import { spawnSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import picomatch from 'picomatch';
import { describe, expect, it } from 'vitest';
import { globMatcher, MAX_SLOW_GLOB_WILDCARDS, slowGlob } from '../../src/authority/glob.js';
import { scopeMatcher } from '../../src/authority/scope.js';
import { pinFiles, resolveCommit } from '../../src/lane/pins.js';
import { codeOfAsync } from '../helpers/codes.js';
import { dispatchTo, hostilePlaces } from '../helpers/hostile-agent.js';
import { git, tempDir } from '../helpers/tmp.js';

/**
 * A glob whose regex backtracks: picomatch's `*?` said eleven times held `coo mcp` for a minute
 * against one name in a folder, and a scope of `*a*a*a*b` took seconds against a 255-character path
 * in the validator's replay, one of more stars for ever. The matches run in a process of their own,
 * from the build, so that one that backtracks is found hung rather than holding the test's worker;
 * what they match is what picomatch says of shorter names.
 */
const MiB = 1024 * 1024;
const dir = tempDir();
const place = hostilePlaces(dir, 'glob');
const dist = (path: string): string => pathToFileURL(join(import.meta.dirname, '..', '..', 'dist', path)).href;

/** What `body` (an ES module's code, ending in a value) prints as JSON, or hung if it ran past a minute. */
function inOwnProcess(body: string): { hung: boolean; value: unknown } {
  const result = spawnSync(process.execPath, ['--input-type=module', '-e', `process.stdout.write(JSON.stringify(await (async () => { ${body} })()))`], { encoding: 'utf8', timeout: 60_000 });
  if (result.error !== undefined || result.status !== 0) return { hung: true, value: result.stderr };
  return { hung: false, value: JSON.parse(result.stdout) as unknown };
}

describe('a glob that backtracks in a regex', () => {
  it('is matched by a dispatch scope in work linear in the path, as picomatch matches it', () => {
    const scope = ['src/*a*a*a*a*a*a*b'];
    const long = `src/${'a'.repeat(251)}`;
    const paths = [long, `${long.slice(0, -1)}b`, 'src/aaaaaab', 'src/aaaaab/x', `${long.slice(0, -1)}b/deep`];
    const run = inOwnProcess(`const { outOfScope } = await import(${JSON.stringify(dist('authority/scope.js'))}); return outOfScope(${JSON.stringify(paths)}, ${JSON.stringify(scope)});`);
    expect(run).toEqual({ hung: false, value: [long, 'src/aaaaab/x'] });
    // picomatch on short names agrees: six a's before the b are needed, and the scope covers what lies under a match.
    const theirs = (path: string) => picomatch(scope[0]!, { dot: true })(path) || picomatch(`${scope[0]!}/**`, { dot: true })(path);
    for (const path of ['src/aaaaaab', 'src/aaaaab', 'src/aaaaaab/x', 'src/xaxaxaxaxaxab', 'src/.aaaaaab']) expect(scopeMatcher(scope)(path), path).toBe(theirs(path));
  });

  it('pins a consult\'s files by a glob of eleven "*?" beside names in long folders, which it cannot match', async () => {
    const repo = tempDir();
    git(['init', '-q', '-b', 'main', repo]);
    const name = `${'a'.repeat(41)}.md`;
    writeFileSync(join(repo, name), 'context\n');
    // Names in folders, which a glob of one segment cannot match: the regex tries every split of each before it says no.
    for (const folder of ['a', 'b', 'c', 'd']) {
      mkdirSync(join(repo, folder.repeat(44)));
      writeFileSync(join(repo, folder.repeat(44), 'b.md'), 'context\n');
    }
    git(['add', '.'], { cwd: repo });
    git(['commit', '-q', '-m', 'context'], { cwd: repo });
    const run = inOwnProcess(
      `const { pinFiles, resolveCommit } = await import(${JSON.stringify(dist('lane/pins.js'))});` +
        `const files = await pinFiles(${JSON.stringify(repo)}, await resolveCommit(${JSON.stringify(repo)}, 'HEAD'), [${JSON.stringify('*?'.repeat(11))}], { files: 200, bytes: ${MiB} });` +
        'return files.map((file) => file.path);',
    );
    expect(run).toEqual({ hung: false, value: [name] });
  });

  it('refuses a consult\'s files glob outside the plain forms with more wildcards than the bound, and reads one within it', async () => {
    const repo = tempDir();
    git(['init', '-q', '-b', 'main', repo]);
    for (const file of ['abc.md', 'short.md']) writeFileSync(join(repo, file), 'context\n');
    git(['add', '.'], { cwd: repo });
    git(['commit', '-q', '-m', 'context'], { cwd: repo });
    const at = await resolveCommit(repo, 'HEAD');
    // Four wildcards beside a class are picomatch's to read, and its regex would backtrack: refused as written.
    const slow = '[ab]*a*a*a*b';
    expect(slowGlob(slow)).toMatch(/at most 3/);
    expect(await codeOfAsync(() => pinFiles(repo, at, [slow], { files: 200, bytes: MiB }))).toBe('CONTEXT_INVALID');
    expect(slowGlob('[as]*.m?')).toBeNull();
    expect((await pinFiles(repo, at, ['[as]*.m?'], { files: 200, bytes: MiB })).map((file) => file.path)).toEqual(['abc.md', 'short.md']);
  });

  it('refuses a dispatch scope outside the plain forms with more wildcards than the bound, before anything is written', async () => {
    const p = await place('scope');
    const slow = `[sl]*/${'*a'.repeat(MAX_SLOW_GLOB_WILDCARDS + 1)}`;
    const head = () => git(['--git-dir', p.world.gitdir, 'rev-parse', 'refs/heads/main']).trim();
    const before = head();
    expect(await codeOfAsync(() => dispatchTo(p, 'slow-scope', { scope: [slow] }))).toBe('USAGE');
    expect(head()).toBe(before);
    // A plain glob of as many stars is matched without backtracking: taken.
    await expect(dispatchTo(p, 'plain-scope', { scope: [`src/${'*a'.repeat(MAX_SLOW_GLOB_WILDCARDS + 1)}`] })).resolves.toMatchObject({ messageId: expect.any(String) });
  });

  it('refuses a glob of many brace lists, whose alternatives multiply what the regex tries, and reads brace lists of the plain forms as their spellings', () => {
    // 30 lists of `a` or `aa`: picomatch's regex took 40 s against 44 a's and a b, and doubles with about every list more.
    const lists = '{a,aa}'.repeat(30);
    expect(slowGlob(lists)).toMatch(/at most 3/);
    expect(slowGlob(`src/${lists}`)).toMatch(/at most 3/);
    const long = `src/${'a'.repeat(44)}b`;
    for (const [pattern, path, matches] of [
      ['**/__tests__/**/*.{ts,js}', 'a/__tests__/b/c.js', true],
      ['**/__tests__/**/*.{ts,js}', '__tests__/c.ts', true],
      ['**/__tests__/**/*.{ts,js}', '__tests__/c.md', false],
      ['{src,test}/**', 'test/x/y', true],
      ['{src,test}/**', 'lib/x', false],
      ['src/*a*a*a*a{b,c}', long, true],
      ['src/*a*a*a*a{c,d}', long, false],
    ] as const) {
      expect(slowGlob(pattern), pattern).toBeNull();
      expect(globMatcher(pattern)(path), `${pattern} against ${path}`).toBe(matches);
    }
  });

  it('answers for a path git cannot hold, a name with a line break, and a name spelled as the glob, as picomatch does', () => {
    for (const path of ['src/./a', 'src//a', 'src/a/', 'src/a\nb.js', 'src/\nb.js', 'src/c\rd/e.js', 'src/f\u2028g.js']) {
      for (const pattern of ['src/*', 'src/**', 'src/*b.js', '**/*.js']) expect(globMatcher(pattern)(path), `${pattern} against ${JSON.stringify(path)}`).toBe(picomatch(pattern, { dot: true })(path));
    }
    for (const pattern of ['{src,test}', '*.{ts,js}', 'a*', '**']) expect(globMatcher(pattern)(pattern), pattern).toBe(true);
    // A glob that is only `./`: no plain form to read, and no exception.
    expect(slowGlob('./')).toBeNull();
    expect(globMatcher('./')('a')).toBe(picomatch('./', { dot: true })('a'));
  });

  it('refuses as written a repeated extglob over a wildcard, which nests one quantifier in another', () => {
    for (const pattern of ['+(a*)b', 'src/*(a?)b', '+(+(a))']) expect(slowGlob(pattern), pattern).toMatch(/repeats a group/);
    for (const pattern of ['@(a*|b)a', '+(a|aa)', '?(a*)b']) expect(slowGlob(pattern), pattern).toBeNull();
  });
});
