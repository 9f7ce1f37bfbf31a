import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The package root: where policy/, ledger/ and dist/ live, from src/ or from dist/. */
export function packageRoot(): string {
  return resolve(dirname(fileURLToPath(import.meta.url)), '..');
}

export function readAsset(relative: string): Buffer {
  return readFileSync(join(packageRoot(), relative));
}

/** The built CLI entry point hooks and child processes run. */
export function cliEntryPoint(): string {
  return join(packageRoot(), 'dist', 'cli', 'main.js');
}
