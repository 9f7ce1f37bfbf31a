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

export function checkGitFiles(gitdir: string): void {
  for (const name of READ_BY_GIT) {
    const path = join(gitdir, name);
    let stats: fs.Stats;
    try {
      // A link is followed (to a regular file it is harmless to git); looking never blocks, even at a FIFO.
      stats = fs.statSync(path);
    } catch {
      continue;
    }
    const problem = !stats.isFile() ? `is a ${fileType(stats)}, not a regular file` : stats.size > LIMITS.packedRefsBytes ? `is ${stats.size} bytes, over the ${LIMITS.packedRefsBytes}-byte bound` : null;
    if (problem !== null) {
      throw new CooError('GIT_FAILED', `the ledger's ${name} ${path} ${problem}, which git would wait on or read without end: put back the file git wrote there (restore the ledger's git folder from a copy or the remote), then run coo verify`);
    }
  }
}
