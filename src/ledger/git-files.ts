import * as fs from 'node:fs';
import { join } from 'node:path';
import { CooError } from '../errors.js';
import { LIMITS } from '../limits.js';
import { fileType } from '../util/bounded-read.js';

/**
 * The files of a ledger's git folder that git itself reads on every command (or on every walk of the
 * history), before coo reads anything. git opens them as they are: a FIFO there makes every git command,
 * and so every coo command, wait forever, and a device or a huge file makes it read without end. They are
 * looked at (never opened) when the ledger is opened; each that is there must be a regular file within a bound.
 */
const READ_BY_GIT = ['HEAD', 'config', 'packed-refs', 'shallow', 'commondir', 'info/grafts', 'objects/info/alternates'];

/**
 * Indexes git reads on a walk of the history or a read of an object (`gc --auto` writes them), and
 * every file of the pack folder: they grow with the ledger, so only their kind is looked at.
 */
const INDEXES_READ_BY_GIT = ['objects/info/commit-graph', 'objects/info/commit-graphs/commit-graph-chain', 'objects/pack/multi-pack-index'];

export function checkGitFiles(gitdir: string): void {
  for (const name of READ_BY_GIT) lookAt(gitdir, name, LIMITS.packedRefsBytes);
  for (const name of INDEXES_READ_BY_GIT) lookAt(gitdir, name, null);
  let packs: string[] = [];
  try {
    packs = fs.readdirSync(join(gitdir, 'objects', 'pack'));
  } catch {
    // no pack folder: nothing to look at
  }
  for (const name of packs) lookAt(gitdir, `objects/pack/${name}`, null);
}

/** One file git reads as it is: a regular file (within `maxBytes`, when given) or nothing. */
function lookAt(gitdir: string, name: string, maxBytes: number | null): void {
  const path = join(gitdir, name);
  let stats: fs.Stats;
  try {
    // A link is followed (to a regular file it is harmless to git); looking never blocks, even at a FIFO.
    stats = fs.statSync(path);
  } catch {
    return;
  }
  const problem = !stats.isFile() ? `is a ${fileType(stats)}, not a regular file` : maxBytes !== null && stats.size > maxBytes ? `is ${stats.size} bytes, over the ${maxBytes}-byte bound` : null;
  if (problem !== null) {
    throw new CooError('GIT_FAILED', `the ledger's ${name} ${path} ${problem}, which git would wait on or read without end: put back the file git wrote there (restore the ledger's git folder from a copy or the remote), then run coo verify`);
  }
}
