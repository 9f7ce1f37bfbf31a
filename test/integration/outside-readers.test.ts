import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { readStrictYaml } from '../../src/schema/strict-yaml.js';
import { coo } from '../helpers/cli.js';
import { alignTimestamps, loadWithPyYaml, pyYamlVersion } from '../helpers/pyyaml.js';
import { git, tempDir } from '../helpers/tmp.js';

/**
 * YAML 1.1 readers (PyYAML, Go's yaml.v2) read a plain `2026-11-30T08:00:00Z` as a datetime and a
 * plain `on` as a boolean. What coo writes must read to the same value in PyYAML as in coo's own
 * YAML 1.2 reader, or an auditor's schema check fails on entries that are valid.
 */
const dir = tempDir();
const demo = join(dir, 'demo');
const ledger = join(demo, 'ledger.git');
const vectors = join(import.meta.dirname, '..', 'vectors');

beforeAll(() => {
  pyYamlVersion();
  expect(coo(['demo', '--dir', demo]).status).toBe(0);
  // Both kill-switch states too, the words YAML 1.1 reads as booleans.
  for (const state of ['on', 'off']) {
    expect(coo(['kill-switch', state, '--reason', `readers ${state}`, '--ledger', ledger, '--key', join(demo, 'keys', 'ceo.key')]).status).toBe(0);
  }
});

describe('documents read by PyYAML (YAML 1.1)', () => {
  it('reads every YAML entry of a demo ledger to exactly the value coo reads, with no timestamp or boolean of its own', () => {
    const paths = git(['--git-dir', ledger, 'ls-tree', '-r', '--name-only', 'main']).split('\n').filter((path) => path.endsWith('.yaml'));
    expect(paths.some((path) => path.startsWith('control/kill-switch/'))).toBe(true);
    expect(paths.length).toBeGreaterThan(10);
    const texts = paths.map((path) => git(['--git-dir', ledger, 'show', `main:${path}`]));
    const loaded = loadWithPyYaml(texts);
    texts.forEach((text, index) => {
      expect(loaded[index], paths[index]).toEqual({ value: readStrictYaml(Buffer.from(text), paths[index]!) });
    });
  });

  it('reads every valid vector to the value coo reads (timestamps compared as strings)', () => {
    const files = readdirSync(vectors).flatMap((kind) => readdirSync(join(vectors, kind, 'valid')).map((file) => join(kind, 'valid', file)));
    const texts = files.map((file) => readFileSync(join(vectors, file), 'utf8'));
    const loaded = loadWithPyYaml(texts);
    texts.forEach((text, index) => {
      const py = loaded[index]!;
      expect(py, files[index]).toHaveProperty('value');
      const value = (py as { value: unknown }).value;
      expect(alignTimestamps(readStrictYaml(Buffer.from(text), files[index]!), value), files[index]).toEqual(value);
    });
  });
});
