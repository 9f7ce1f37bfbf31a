import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CooError } from './errors.js';

let root: string | null = null;

/**
 * The package root: where policy/, ledger/ and dist/ live. Found by walking up from this module to
 * the nearest package.json, so it holds from src/, from dist/ and from the bundled CLI in dist/cli/.
 */
export function packageRoot(): string {
  if (root === null) {
    let dir = dirname(fileURLToPath(import.meta.url));
    while (!existsSync(join(dir, 'package.json')) && dirname(dir) !== dir) dir = dirname(dir);
    root = dir;
  }
  return root;
}

/** One of coo's own files (policy/, ledger/ templates); a missing one means an incomplete installation. */
export function readAsset(relative: string): Buffer {
  const path = join(packageRoot(), relative);
  try {
    return readFileSync(path);
  } catch (error) {
    throw new CooError('NOT_FOUND', `coo's own file ${path} cannot be read (${(error as NodeJS.ErrnoException).code ?? (error as Error).message}): the installation is incomplete; reinstall coo-commons`, { cause: error });
  }
}

/** The built CLI entry point hooks and child processes run. */
export function cliEntryPoint(): string {
  return join(packageRoot(), 'dist', 'cli', 'main.js');
}
