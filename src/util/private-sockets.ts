import * as fs from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CooError } from '../errors.js';

/**
 * The one folder that holds the sockets a runner listens on or keeps open for itself: each
 * attempt's consult socket (dispatch/consult-bridge.ts) and the ssh connection it shares with a
 * remote ledger (remote/git-remote.ts). Every sandbox sees the host read-only, the temporary folder
 * included, and a unix socket answers whoever can name it, its mount read-only or not: so each
 * sandbox hides this folder whole (util/bubblewrap.ts) and binds back only the one socket folder of
 * its own attempt. Otherwise an agent would call the consult socket of another attempt running at
 * the same time (a consult of that dispatch, about its worktree, on its budget) or the runner's
 * ssh connection (the remote ledger's account, without its key).
 *
 * One folder per user, made private at first use and made before any sandbox starts, so that one
 * made afterwards never shows in a sandbox already running. One that is not a private folder of
 * this user (a link, another owner, others may enter) is refused: a socket is never put there.
 */
export function privateSocketsDir(): string {
  const uid = process.getuid?.() ?? 0;
  const dir = join(tmpdir(), `coo-sockets-${uid}`);
  try {
    fs.mkdirSync(dir, { mode: 0o700 });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw new CooError('RUNNER_CONFIG', `cannot make ${dir}, the runner's private folder for its sockets (${(error as NodeJS.ErrnoException).code ?? 'EIO'}): set TMPDIR to a folder that exists and this user may write, or unset it`);
  }
  const stats = fs.lstatSync(dir);
  if (!stats.isDirectory() || stats.uid !== uid || (stats.mode & 0o077) !== 0) {
    throw new CooError('RUNNER_CONFIG', `${dir}, the runner's private folder for its sockets, is not a folder only this user may enter (a link, another owner, or open to others): remove it, or set TMPDIR to a private folder`);
  }
  return dir;
}

/** A new private folder of its own inside the sockets' folder, named `prefix` and six random characters. */
export function privateSocketFolder(prefix: string): string {
  return fs.mkdtempSync(join(privateSocketsDir(), prefix));
}
