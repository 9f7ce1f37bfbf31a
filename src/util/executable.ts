import * as fs from 'node:fs';
import { delimiter, isAbsolute, join, resolve } from 'node:path';

/** Is `path` a regular file this process may execute? */
export function isExecutableFile(path: string): boolean {
  try {
    fs.accessSync(path, fs.constants.X_OK);
    return fs.statSync(path).isFile();
  } catch {
    return false;
  }
}

/** Is `path` a regular file this process may read? */
export function isReadableFile(path: string): boolean {
  try {
    fs.accessSync(path, fs.constants.R_OK);
    return fs.statSync(path).isFile();
  } catch {
    return false;
  }
}

/**
 * The absolute path a command's program names, as a shell would find it: one with a slash is
 * taken against `cwd`, a bare name is looked up in `pathList` (an empty entry is `cwd`). Null
 * when no executable file is there.
 */
export function findExecutable(program: string, pathList: string, cwd = process.cwd()): string | null {
  if (program === '') return null;
  if (program.includes('/')) {
    const full = isAbsolute(program) ? program : resolve(cwd, program);
    return isExecutableFile(full) ? full : null;
  }
  for (const dir of pathList.split(delimiter)) {
    const full = join(dir === '' ? cwd : resolve(cwd, dir), program);
    if (isExecutableFile(full)) return full;
  }
  return null;
}
