import { join } from 'node:path';
import { expect } from 'vitest';
import { coo } from './cli.js';
import { git } from './tmp.js';

/** Each 8-character piece of `whole` that `text` holds: none when no part of a secret got through. */
export const pieces = (text: string, whole: string): string[] => Array.from({ length: whole.length - 7 }, (_, at) => whole.slice(at, at + 8)).filter((piece) => text.includes(piece));

/** What the ledger's objects hold, every byte of them. */
export const ledgerOf = (gitdir: string): string => git(['--git-dir', gitdir, 'cat-file', '--batch-all-objects', '--batch']);

/**
 * A ledger made in `dir`, and a CEO command of each secret in `secrets` run with `env` (which holds them): each is
 * refused (USAGE, exit 2) naming no part of it, and nothing is written; then a command of `honest` text, the words
 * beside such secrets, is written.
 */
export function expectRefusedInCommands(dir: string, secrets: Record<string, string>, env: NodeJS.ProcessEnv, honest: string): void {
  const keys = join(dir, 'keys');
  const ledger = join(dir, 'ledger.git');
  for (const actor of ['ceo', 'coo.hermes']) expect(coo(['keygen', '--actor', actor, '--out', keys]).status).toBe(0);
  expect(coo(['init', '--ledger', ledger, '--ceo-key', join(keys, 'ceo.key'), '--actor', `coo.hermes=${join(keys, 'coo.hermes.pub')}`]).status).toBe(0);
  const head = (): string => git(['--git-dir', ledger, 'rev-parse', 'main']).trim();
  const before = head();
  for (const [name, value] of Object.entries(secrets)) {
    const result = coo(['command', '--ledger', ledger, '--ceo-key', join(keys, 'ceo.key'), '--text', `Rotate ${value} today.`], { env });
    expect([result.status, result.stderr.split(':').slice(0, 2).join(':')], name).toEqual([2, 'coo: USAGE']);
    expect(pieces(result.stderr, value), name).toEqual([]);
  }
  expect(head()).toBe(before);
  expect(coo(['command', '--ledger', ledger, '--ceo-key', join(keys, 'ceo.key'), '--text', honest], { env }).status).toBe(0);
}
