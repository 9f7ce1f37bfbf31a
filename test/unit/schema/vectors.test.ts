import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { DOCUMENT_KINDS, readDocument, type DocumentKind } from '../../../src/schema/documents.js';
import { codeOf } from '../../helpers/codes.js';

/** test/vectors/<kind>/{valid,invalid}/: frozen documents; an invalid one's name starts with the code it must give. */
const root = join(import.meta.dirname, '..', '..', 'vectors');

describe('frozen schema vectors', () => {
  it('has valid and invalid vectors for every document kind', () => {
    for (const kind of DOCUMENT_KINDS) {
      expect(readdirSync(join(root, kind, 'valid')).length, kind).toBeGreaterThan(0);
      expect(readdirSync(join(root, kind, 'invalid')).length, kind).toBeGreaterThan(0);
    }
  });

  for (const kind of DOCUMENT_KINDS) {
    describe(kind, () => {
      for (const file of readdirSync(join(root, kind, 'valid'))) {
        it(`accepts ${file}`, () => {
          expect(() => readDocument(kind as DocumentKind, readFileSync(join(root, kind, 'valid', file)), file)).not.toThrow();
        });
      }
      for (const file of readdirSync(join(root, kind, 'invalid'))) {
        const expected = file.split('--')[0]!;
        it(`refuses ${file} with ${expected}`, () => {
          expect(codeOf(() => readDocument(kind as DocumentKind, readFileSync(join(root, kind, 'invalid', file)), file))).toBe(expected);
        });
      }
    });
  }
});

/** test/fixtures/legacy-entries/<kind>--<file>: valid vectors as the writer wrote them before it quoted YAML 1.1 hazards. */
describe('entries written before the writer quoted', () => {
  const legacy = join(import.meta.dirname, '..', '..', 'fixtures', 'legacy-entries');
  const files = readdirSync(legacy);

  it('keeps a corpus with plain timestamps and a plain on', () => {
    expect(files.length).toBeGreaterThan(10);
    expect(readFileSync(join(legacy, 'kill_switch.v0--on.yaml'), 'utf8')).toMatch(/^state: on$/m);
    expect(readFileSync(join(legacy, 'kill_switch.v0--on.yaml'), 'utf8')).toMatch(/^created_at: 2026-11-30T08:00:00Z$/m);
  });

  for (const name of files) {
    const [kind, file] = name.split('--') as [DocumentKind, string];
    it(`reads ${name} unchanged: the value of the quoted vector it became`, () => {
      const old = readDocument(kind, readFileSync(join(legacy, name)), name);
      expect(old).toEqual(readDocument(kind, readFileSync(join(root, kind, 'valid', file)), file));
    });
  }
});
