import { describe, expect, it } from 'vitest';
import { Scrubber } from '../../src/util/scrub.js';

/**
 * "No secret ever enters the ledger", attacked a third time: a key's base64 split at any point, a key
 * encoded three deep, the credentials git and ssh are handed by programs and helpers or a remote's
 * URL carries, and the other roads into what is signed.
 */
const KEY = 'sk-proj-Red/Team+3rd0123456789abcdefSECRET';
const scrub = new Scrubber([{ name: 'OPENAI_API_KEY', value: KEY }]);
const BASE64 = Buffer.from(KEY).toString('base64');
const HEX = Buffer.from(KEY).toString('hex');

/** Every run of 8 characters of `whole` that `text` still holds. */
const pieces = (text: string, whole: string): string[] => Array.from({ length: whole.length - 7 }, (_, at) => whole.slice(at, at + 8)).filter((piece) => text.includes(piece));
/** `text` cut at the given points, joined by `join`. */
const splitAt = (text: string, points: readonly number[], join: (at: number) => string): string => points.reduce((out, point, index) => out + text.slice(index === 0 ? 0 : points[index - 1], point) + join(index), '') + text.slice(points.at(-1));

describe('a key in base64 or hex split at any point', () => {
  const cases: Record<string, string> = {
    'base64 split by spaces into groups of 4': BASE64.match(/.{1,4}/g)!.join(' '),
    'base64 split by single spaces at uneven points': splitAt(BASE64, [3, 10, 11, 25, 31, 50], () => ' '),
    'base64 split by newlines at uneven points (short lines)': splitAt(BASE64, [5, 9, 20, 33, 40], () => '\n'),
    'base64 split by tabs, spaces and CRLF mixed': splitAt(BASE64, [7, 14, 22, 29, 41], (at) => ['\t', '  ', '\r\n', ' \n ', ' '][at]!),
    'base64 in a JSON string split by escaped newlines and spaces': JSON.stringify(splitAt(BASE64, [6, 13, 27, 44], (at) => (at % 2 === 0 ? '\n' : ' '))).slice(1, -1),
    'hex split by spaces into bytes, as xxd or od print it': HEX.match(/.{2}/g)!.join(' '),
    'hex split by colons': HEX.match(/.{2}/g)!.join(':'),
  };
  for (const [name, form] of Object.entries(cases)) {
    it(`is found as ${name}`, () => {
      const cleaned = scrub.text(`blob: ${form} end`);
      expect(cleaned).toContain('[removed: OPENAI_API_KEY');
      const joined = cleaned.replace(/\s|\\n|\\r|\\t|:/g, '');
      expect(pieces(joined, BASE64.slice(4, -4))).toEqual([]);
      expect(pieces(joined.toLowerCase(), HEX)).toEqual([]);
      expect(scrub.bytes(Buffer.from(`blob: ${form} end`)).toString('utf8')).toBe(cleaned);
    });
  }

  it('leaves ordinary words and numbers separated by spaces as they were', () => {
    const text = 'the quick brown fox jumps over the lazy dog 0123 4567 89ab cdef c2st LXBy';
    expect(scrub.text(text)).toBe(text);
  });
});

const percentAll = (text: string): string => [...Buffer.from(text)].map((byte) => `%${byte.toString(16).padStart(2, '0')}`).join('');
const unicodeAll = (text: string): string => [...text].map((char) => `\\u${char.charCodeAt(0).toString(16).padStart(4, '0')}`).join('');
const b64 = (text: string): string => Buffer.from(text).toString('base64');
const hex = (text: string): string => Buffer.from(text).toString('hex');

describe('a key encoded up to three deep', () => {
  const cases: Record<string, string> = {
    'base64 of a JSON string with \\u escapes of its percent-encoding': b64(`{"key": "${unicodeAll(percentAll(KEY))}"}`),
    'base64 of a JSON document holding its \\u escapes': b64(JSON.stringify({ k: unicodeAll(KEY) }).replace(/\\\\/g, '\\')),
    'base64 of its hex': b64(hex(KEY)),
    'base64 of its base64': b64(b64(KEY)),
    'hex of its base64': hex(b64(KEY)),
    'base64 of its percent-encoding, wrapped at 76 columns': b64(percentAll(KEY)).match(/.{1,76}/g)!.join('\n'),
    'base64 of base64 of its hex': b64(b64(hex(KEY))),
    'base64url of its HTML references': Buffer.from([...KEY].map((char) => `&#${char.charCodeAt(0)};`).join('')).toString('base64url'),
  };
  for (const [name, form] of Object.entries(cases)) {
    it(`is found as ${name}`, () => {
      for (const text of [`value=${form}`, `{"out":${JSON.stringify(`x ${form}\n`)}}`]) {
        const cleaned = scrub.text(text);
        expect(cleaned, text).toContain('[removed: OPENAI_API_KEY');
        expect(cleaned, text).not.toContain(form.slice(8, 24));
        expect(scrub.bytes(Buffer.from(text)).toString('utf8')).toBe(cleaned);
      }
    });
  }

  it('leaves base64 and hex that hold no secret as they were: a commit id, a digest, an encoded ordinary text', () => {
    const text = `commit 0123456789abcdef0123456789abcdef01234567 sha256-${Buffer.alloc(32, 7).toString('base64')} ${b64('hello world, nothing here at all')}`;
    expect(scrub.text(text)).toBe(text);
    const bytes = Buffer.from(text);
    expect(scrub.bytes(bytes)).toBe(bytes);
  });
});
