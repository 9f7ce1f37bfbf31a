import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { ownerGone, ownerTag } from './process.js';
import { removeTree } from './remove-tree.js';

/**
 * Temporary folders named for the process that made them: `<prefix><host>.<pid>.<start>.<random>`.
 * A process killed before it removed its own (a runner killed mid-fetch, a clone stopped with
 * SIGKILL) left it for good, up to all a fetch may bring; the next process that makes one there
 * removes those whose owner is gone (`removeOrphans`), and never one whose owner may still run.
 */

/** The start of a new folder's name under `prefix`; the caller adds the random part (mkdtemp). */
export function ownedPrefix(prefix: string): string {
  return `${prefix}${ownerTag()}.`;
}

/** Removes the folders in `dir` named under `prefix` whose owner is gone; returns their names. Nothing in the way is an error. */
export function removeOrphans(dir: string, prefix: string): string[] {
  let names: string[];
  try {
    names = readdirSync(dir).filter((name) => name.startsWith(prefix));
  } catch {
    return [];
  }
  const removed: string[] = [];
  for (const name of names) {
    const owned = /^(.+)\.[A-Za-z0-9]+$/.exec(name.slice(prefix.length));
    if (owned === null || !ownerGone(owned[1]!)) continue;
    try {
      removeTree(join(dir, name));
      removed.push(name);
    } catch {
      // another process removed it first, or it cannot be removed: the next one tries again
    }
  }
  return removed;
}
