import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { isDotGitName, parseRawTree } from '../../src/lane/raw-tree.js';
import { git, gitEnv, tempDir } from '../helpers/tmp.js';

/**
 * A name git reads as `.git` because it reads UTF-8 its own way: on HFS+ (is_hfs_dotgit) bytes that are
 * no code point to git (0xff, an overlong form, a surrogate, U+FFFE) end the name there, so `.git\xff`
 * is hasDotgit to `git fsck` and to a clone that checks what it fetches.
 */

const dir = tempDir('dotgit-names-not-utf8');
const bytes = (...parts: Array<string | number[]>): Buffer => Buffer.concat(parts.map((part) => (typeof part === 'string' ? Buffer.from(part, 'utf8') : Buffer.from(part))));

/** A raw tree object holding one entry of mode 100644 named `name`. */
const rawTree = (name: Buffer, oid: string): Buffer => Buffer.concat([Buffer.from('100644 '), name, Buffer.from([0]), Buffer.from(oid, 'hex')]);

describe("the runner's rule for a name that is a repository's .git, on names that are not UTF-8 as git reads it", () => {
  it("says of each name what git's fsck says of a tree entry so named (hasDotgit)", () => {
    const repo = join(dir, 'fsck');
    mkdirSync(repo, { recursive: true });
    git(['init', '-q', '--bare', repo]);
    const blob = git(['--git-dir', repo, 'hash-object', '-w', '--stdin'], { input: 'x\n' }).trim();
    const names = [
      bytes('.git', [0xff]),
      bytes('.GIT', [0xc3]),
      bytes('.g\u200cit', [0xff]),
      bytes('.git\u200c', [0xfe], 'x'),
      bytes('.git', [0xef, 0xbf, 0xbe]),
      bytes('.git', [0xed, 0xa0, 0x80]),
      bytes('.git', [0xc0, 0xae]),
      bytes('.git', [0xf4, 0x90, 0x80, 0x80]),
      bytes('.git', [0xe2, 0x80]),
      bytes('.git', [0xff], 'abc'),
      bytes('.gi\u200dt'),
      // Not .git to git: the bytes git cannot read come before `.git` is whole, or what follows is a code point.
      bytes([0xff], '.git'),
      bytes('.g', [0xff], 'it'),
      bytes('.git\ufffd'),
      bytes('.git\u00e9'),
      bytes('.git\u{1f600}'),
      bytes('.git\u200b'),
      bytes('.gitignore'),
      bytes('.github'),
    ];
    const trees = names.map((name) => execFileSync('git', ['--git-dir', repo, 'mktree'], { input: Buffer.concat([Buffer.from(`100644 blob ${blob}\t`), name, Buffer.from('\n')]), env: gitEnv() }).toString('utf8').trim());
    const fsck = spawnSync('git', ['--git-dir', repo, 'fsck', '--no-dangling'], { encoding: 'utf8' });
    const flagged = `${fsck.stdout}${fsck.stderr}`.split('\n').filter((line) => /hasDotgit/.test(line));
    const verdicts = trees.map((tree) => flagged.some((line) => line.includes(tree)));
    expect(names.map((name) => isDotGitName(name))).toEqual(verdicts);
    expect(verdicts.filter(Boolean).length).toBe(11);
    // A tree the runner reads refuses such an entry as git's fsck does.
    expect(() => parseRawTree(rawTree(names[0]!, blob))).toThrow();
  });
});
