import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { schemaFiles } from '../../../src/cli/schemas.js';
import { relativePath, timestamp } from '../../../src/schema/common.js';
import { RELATIVE_PATH_PATTERN, TIMESTAMP_PATTERN } from '../../../src/schema/json-schema.js';

describe('JSON Schema files in schemas/', () => {
  const dir = join(import.meta.dirname, '..', '..', '..', 'schemas');

  it('match the zod source exactly (regenerate with: npm run schemas)', () => {
    const expected = schemaFiles();
    expect(readdirSync(dir).filter((name) => name.endsWith('.json')).sort()).toEqual([...expected.keys()].sort());
    for (const [name, text] of expected) expect(readFileSync(join(dir, name), 'utf8'), name).toBe(text);
  });

  it('are draft 2020-12 and refuse unknown properties on the envelope', () => {
    const schema = JSON.parse(readFileSync(join(dir, 'coo_message.v0.json'), 'utf8')) as Record<string, unknown>;
    expect(schema['$schema']).toBe('https://json-schema.org/draft/2020-12/schema');
    expect(JSON.stringify(schema)).toContain('"additionalProperties":false');
  });
});

describe('the patterns the JSON Schemas add for rules zod checks in code', () => {
  const pathPattern = new RegExp(RELATIVE_PATH_PATTERN, 'u');
  const timePattern = new RegExp(TIMESTAMP_PATTERN, 'u');

  it('accept exactly the relative paths coo accepts', () => {
    const part = fc.oneof(fc.constantFrom('.', '..', '...', '.a', '..a', 'a.', '', 'src', '\\', '\0', 'ü'), fc.string({ maxLength: 4 }));
    const path = fc.oneof(fc.array(part, { minLength: 1, maxLength: 5 }).map((parts) => parts.join('/')), fc.string({ maxLength: 12 }));
    fc.assert(
      fc.property(path, (value) => {
        fc.pre(value.length >= 1 && value.length <= 512);
        expect(pathPattern.test(value), JSON.stringify(value)).toBe(relativePath.safeParse(value).success);
      }),
      { numRuns: 5000 },
    );
  });

  it('accept exactly the timestamps coo accepts, leap days included', () => {
    const two = (max: number) => fc.integer({ min: 0, max }).map((n) => String(n).padStart(2, '0'));
    const stamp = fc
      .tuple(fc.constantFrom(0, 1900, 2000, 2024, 2026, 2028, 2100, 2400, 9999).chain((y) => fc.constantFrom(y, y + 1, y + 4)), two(13), two(32), two(25), two(61), two(61), fc.constantFrom('', '.5', '.123', '.1234'), fc.constantFrom('Z', '', '+00:00'))
      .map(([y, mo, d, h, mi, s, frac, zone]) => `${String(y).padStart(4, '0')}-${mo}-${d}T${h}:${mi}:${s}${frac}${zone}`);
    fc.assert(
      fc.property(stamp, (value) => {
        expect(timePattern.test(value), value).toBe(timestamp.safeParse(value).success);
      }),
      { numRuns: 5000 },
    );
    expect(timePattern.test('2028-02-29T08:00:00Z') && timePattern.test('2000-02-29T08:00:00Z')).toBe(true);
    expect(timePattern.test('2100-02-29T08:00:00Z') || timePattern.test('2026-02-29T08:00:00Z')).toBe(false);
  });
});
