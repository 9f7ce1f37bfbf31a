import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { isoUtcMillis } from '../../../src/util/time.js';

/** The rule the arithmetic replaces: the text names a real instant when Date reads it back to the same second. */
function byDate(text: string): number {
  const date = new Date(text);
  if (Number.isNaN(date.getTime()) || date.toISOString().slice(0, 19) !== text.slice(0, 19)) return Number.NaN;
  return date.getTime();
}

const digit = fc.integer({ min: 0, max: 9 }).map(String);
const digitsOf = (count: number): fc.Arbitrary<string> => fc.array(digit, { minLength: count, maxLength: count }).map((list) => list.join(''));
const fraction = fc.oneof(fc.constant(''), fc.integer({ min: 1, max: 3 }).chain((count) => digitsOf(count).map((text) => `.${text}`)));
/** Near-valid fields, so both verdicts come up often: months 00-13, days 00-32, hours 00-24, minutes and seconds 00-60. */
const pad = (value: number, width = 2): string => String(value).padStart(width, '0');
const shaped = fc
  .record({
    year: fc.oneof(fc.integer({ min: 0, max: 9999 }), fc.constantFrom(0, 1900, 2000, 2024, 2100, 2400)),
    month: fc.integer({ min: 0, max: 13 }),
    day: fc.integer({ min: 0, max: 32 }),
    hour: fc.integer({ min: 0, max: 24 }),
    minute: fc.integer({ min: 0, max: 60 }),
    second: fc.integer({ min: 0, max: 60 }),
    fraction,
  })
  .map((f) => `${pad(f.year, 4)}-${pad(f.month)}-${pad(f.day)}T${pad(f.hour)}:${pad(f.minute)}:${pad(f.second)}${f.fraction}Z`);
const real = fc
  .tuple(fc.date({ min: new Date('0000-01-01T00:00:00Z'), max: new Date('9999-12-31T23:59:59.999Z'), noInvalidDate: true }), fc.integer({ min: 0, max: 3 }))
  .map(([date, kept]) => date.toISOString().replace(/\.(\d{3})Z$/, (_, ms: string) => (kept === 0 ? 'Z' : `.${ms.slice(0, kept)}Z`)));

describe('isoUtcMillis', () => {
  it('agrees with the Date round trip on verdict and value (property)', () => {
    fc.assert(
      fc.property(fc.oneof(shaped, real), (text) => {
        expect(isoUtcMillis(text)).toStrictEqual(byDate(text));
      }),
      { numRuns: 20_000 },
    );
  });

  it('refuses what is not a real date and time, and anything not of the entry shape', () => {
    for (const text of ['2026-02-29T00:00:00Z', '2100-02-29T00:00:00Z', '2026-04-31T00:00:00Z', '2026-13-01T00:00:00Z', '2026-11-30T24:00:00Z', '2026-11-30T23:60:00Z', '2026-11-30T23:59:60Z', '2026-11-30T23:59:59', '2026-11-30T23:59:59.1234Z', '2026-11-30 23:59:59Z', '+02026-11-30T23:59:59Z']) {
      expect(isoUtcMillis(text), text).toBeNaN();
    }
    expect(isoUtcMillis('2024-02-29T12:00:00Z')).toBe(Date.UTC(2024, 1, 29, 12));
    expect(isoUtcMillis('2000-02-29T00:00:00.5Z')).toBe(Date.UTC(2000, 1, 29) + 500);
    expect(isoUtcMillis('1969-12-31T23:59:59.999Z')).toBe(-1);
  });
});
