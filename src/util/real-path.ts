import * as fs from 'node:fs';
import { resolve } from 'node:path';

/** `path` with every link in it followed, or resolved as given when it is not there (yet). */
export function realPathOr(path: string): string {
  try {
    return fs.realpathSync(path);
  } catch {
    return resolve(path);
  }
}
