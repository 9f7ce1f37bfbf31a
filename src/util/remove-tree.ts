import * as fs from 'node:fs';

/**
 * Removes a folder someone else filled: links are removed, never followed; FIFOs and sockets are
 * unlinked, never opened; a folder its owner made unreadable or unwritable (`chmod 000`) is given
 * back its owner's permissions first, since an agent may leave one to make its worktree stick; and
 * folders nested deeper than a path the system takes whole (an agent can make them one `cd` at a
 * time) are moved up first, since every removal names a path from the top.
 */
export function removeTree(path: string): void {
  try {
    fs.rmSync(path, { recursive: true, force: true });
    return;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code !== 'EACCES' && code !== 'EPERM' && code !== 'ENOTEMPTY' && code !== 'ENAMETOOLONG') throw error;
  }
  openUp(Buffer.from(path));
  fs.rmSync(path, { recursive: true, force: true });
}

const SLASH = Buffer.from('/');

/** The longest path of a folder left where it is: its entries' paths (a name is at most 255 bytes) stay well under PATH_MAX (4096). */
const SHORT_PATH_BYTES = 2048;

/**
 * Gives the owner read, write and search on every folder under `root` (not through links), and
 * moves each folder whose path is longer than SHORT_PATH_BYTES to a fresh name in `root`, so that
 * every path under `root` is short enough to name. One folder at a time, never by recursion: a
 * tree of any depth is gone through without the stack.
 */
function openUp(root: Buffer): void {
  let moved = 0;
  const folders: Buffer[] = [root];
  while (folders.length > 0) {
    const folder = folders.pop()!;
    try {
      fs.chmodSync(folder, 0o700);
    } catch {
      // not ours to open: the removal says so
    }
    let names: Buffer[];
    try {
      // Names as bytes: a name that is not UTF-8 is still found.
      names = fs.readdirSync(folder, { encoding: 'buffer' });
    } catch {
      continue;
    }
    for (const name of names) {
      let path: Buffer = Buffer.concat([folder, SLASH, name]);
      try {
        if (!fs.lstatSync(path).isDirectory()) continue;
      } catch {
        continue;
      }
      if (path.length > SHORT_PATH_BYTES) {
        const up = moveUp(root, path, moved);
        if (up === null) continue;
        moved = up.next;
        path = up.path;
      }
      folders.push(path);
    }
  }
}

/** Moves `path` to the first free `.removing-N` in `root` from `first` on; null when it cannot be moved. */
function moveUp(root: Buffer, path: Buffer, first: number): { readonly path: Buffer; readonly next: number } | null {
  for (let n = first; n < first + 1000; n += 1) {
    const to = Buffer.concat([root, Buffer.from(`/.removing-${n}`)]);
    if (fs.existsSync(to)) continue;
    try {
      fs.renameSync(path, to);
      return { path: to, next: n + 1 };
    } catch {
      return null;
    }
  }
  return null;
}
