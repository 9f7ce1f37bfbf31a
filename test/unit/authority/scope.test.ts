import { describe, expect, it } from 'vitest';
import { outOfScope, scopeMatcher } from '../../../src/authority/scope.js';

describe('a dispatch scope', () => {
  it('takes a folder as the folder and everything under it, with or without its slash', () => {
    for (const scope of ['src', 'src/']) {
      const inScope = scopeMatcher([scope]);
      expect(['src', 'src/add.js', 'src/deep/er/x.js', 'src/.hidden'].every(inScope), scope).toBe(true);
      expect(['srcx/a.js', 'test/src/a.js', 'README.md'].some(inScope), scope).toBe(false);
    }
  });

  it('keeps globs as globs, dot files included', () => {
    expect(outOfScope(['src/a.js', 'src/.env', 'test/a.test.js', '.github/ci.yml'], ['src/**', 'test/*.test.js'])).toEqual(['.github/ci.yml']);
    expect(outOfScope(['docs/a.md', 'docs/b.txt'], ['docs/*.md'])).toEqual(['docs/b.txt']);
  });
});
