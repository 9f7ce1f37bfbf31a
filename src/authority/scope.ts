import { globMatcher } from './glob.js';

/**
 * A dispatch's scope: which paths the work may change. Each entry is a glob relative to the
 * repository root (picomatch's reading, dot files included: glob.ts), and it also covers everything under the folder
 * it names, as git's pathspecs do: `src` (or `src/`) is `src` and `src/**`. Pure. The runner judges
 * an attempt's changes by it, and the validator a consult the agent asks about its files.
 */

/** One matcher for a scope list. */
export function scopeMatcher(scope: readonly string[]): (path: string) => boolean {
  const matchers = scope.flatMap((entry) => {
    const pattern = entry.replace(/\/+$/, '');
    return [globMatcher(pattern), globMatcher(`${pattern}/**`)];
  });
  return (path) => matchers.some((match) => match(path));
}

/** The changed paths outside the scope, in their order. */
export function outOfScope(paths: readonly string[], scope: readonly string[]): string[] {
  const inScope = scopeMatcher(scope);
  return paths.filter((path) => !inScope(path));
}
