import { findBwrap } from '../../src/util/bubblewrap.js';

/**
 * The bubblewrap a test needs, or a failure that says so: without it no lane runs unless
 * `--isolation none` is chosen, and a test of what the sandbox enforces has nothing to check.
 */
export function requireBubblewrap(what: string): string {
  const bwrap = findBwrap();
  if (bwrap === null) throw new Error(`${what} needs bubblewrap, which is not installed: apt-get install bubblewrap (.ci/run installs it)`);
  return bwrap;
}
