import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { PrivateKey } from '../../src/crypto/keys.js';
import { formatPublicKeyLine } from '../../src/crypto/keys.js';
import { git } from './tmp.js';

/** A small target repository for dispatch tests: a function, its test script, a CI file out of scope. Returns the base commit. */
export function makeTargetRepo(path: string): string {
  mkdirSync(join(path, 'src'), { recursive: true });
  mkdirSync(join(path, '.github'), { recursive: true });
  git(['init', '-q', '-b', 'main', path]);
  writeFileSync(join(path, 'src', 'add.js'), 'export const add = (a, b) => a - b;\n');
  writeFileSync(join(path, 'test.sh'), 'grep -q "a + b" src/add.js\n');
  writeFileSync(join(path, '.github', 'ci.yml'), 'on: push\n');
  writeFileSync(join(path, '.gitignore'), 'build/\n');
  git(['add', '-A'], { cwd: path });
  git(['commit', '-q', '-m', 'base'], { cwd: path });
  return git(['rev-parse', 'HEAD'], { cwd: path }).trim();
}

/** An allowed-signers file (git's SSH format) that trusts `key` for commits. */
export function writeAllowedSigners(path: string, principal: string, key: PrivateKey): string {
  writeFileSync(path, `${principal} namespaces="git" ${formatPublicKeyLine(key.publicKey)}\n`);
  return path;
}
