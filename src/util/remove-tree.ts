import * as fs from 'node:fs';

/**
 * Removes a folder someone else filled: links are removed, never followed; FIFOs and sockets are
 * unlinked, never opened; a folder its owner made unreadable or unwritable (`chmod 000`) is given
 * back its owner's permissions first, since an agent may leave one to make its worktree stick.
 */
export function removeTree(path: string): void {
  try {
    fs.rmSync(path, { recursive: true, force: true });
    return;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code !== 'EACCES' && code !== 'EPERM' && code !== 'ENOTEMPTY') throw error;
  }
  openUp(Buffer.from(path));
  fs.rmSync(path, { recursive: true, force: true });
}

/** Gives the owner read, write and search on every folder under `path` (not through links). */
function openUp(path: Buffer): void {
  let stats: fs.Stats;
  try {
    stats = fs.lstatSync(path);
  } catch {
    return;
  }
  if (!stats.isDirectory()) return;
  try {
    fs.chmodSync(path, 0o700);
  } catch {
    return;
  }
  let names: Buffer[];
  try {
    // Names as bytes: a name that is not UTF-8 is still found.
    names = fs.readdirSync(path, { encoding: 'buffer' });
  } catch {
    return;
  }
  for (const name of names) openUp(Buffer.concat([path, Buffer.from('/'), name]));
}
