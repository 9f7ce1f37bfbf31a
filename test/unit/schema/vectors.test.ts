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
