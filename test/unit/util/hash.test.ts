import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { canonicalJson } from '../../../src/util/hash.js';

/** The same record with its keys inserted in reverse order, at every level. */
function reversed(value: unknown): unknown {
  if (value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) return value.map(reversed);
  return Object.fromEntries(Object.entries(value).reverse().map(([key, item]) => [key, reversed(item)]));
}

describe('canonical JSON', () => {
  it('sorts keys at every level and leaves out undefined members', () => {
    expect(canonicalJson({ b: 1, a: { d: [3, { z: null, y: 'x' }], c: undefined } })).toBe('{"a":{"d":[3,{"y":"x","z":null}]},"b":1}');
  });

  it('is JSON that reads back to the same value, whatever the key order (property)', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        const text = canonicalJson(value);
        expect(JSON.parse(text)).toEqual(JSON.parse(JSON.stringify(value)));
        expect(canonicalJson(reversed(value))).toBe(text);
      }),
      { numRuns: 500 },
    );
  });
});
