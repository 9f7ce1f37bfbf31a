import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { isCooError } from '../../src/errors.js';
import { readCanonicalYaml } from '../../src/schema/canonical-yaml.js';
import { readStrictYaml, readStrictYamlGeneral, toYaml } from '../../src/schema/strict-yaml.js';
import { loadWithPyYaml } from '../helpers/pyyaml.js';
import { tally } from '../helpers/tally.js';

const RUNS = Number(process.env['COO_PROPERTY_RUNS'] ?? 300);

/** The general strict reader's verdict: a value, or the code of its error. */
function general(text: string): { value: unknown } | { code: string } {
  try {
    return { value: readStrictYamlGeneral(Buffer.from(text), 'x.yaml') };
  } catch (error) {
    if (!isCooError(error)) throw error;
    return { code: error.code };
  }
}

const key = fc.oneof(fc.constantFrom('schema_version', 'message_id', 'a', 'b_c', 'gpt-5.5', 'null', 'true', '1', '__proto__', 'x y', 'k:'), fc.string({ maxLength: 8 }));
const leaf = fc.oneof(
  fc.string({ maxLength: 30 }),
  fc.constantFrom('', 'null', 'true', 'yes', '0', '1.5', '-0', '1e5', '2026-11-30T08:00:00Z', 'a: b', 'x #y', ' lead', 'trail ', 'ünï', 'line\nbreak', 'tab\there', '"q"', "'s'", '\\'),
  fc.integer(),
  fc.double({ noNaN: true, min: -1e9, max: 1e9 }),
  fc.boolean(),
  fc.constant(null),
);
const value = fc.letrec((tie) => ({
  node: fc.oneof({ depthSize: 'small' }, leaf, fc.array(tie('node'), { maxLength: 4 }), fc.dictionary(key, tie('node'), { maxKeys: 4 })),
})).node;

describe('the canonical YAML fast path', () => {
  it('reads what the writer writes, exactly as the general reader does', () => {
    fc.assert(
      fc.property(fc.dictionary(key, value, { maxKeys: 6 }), (doc) => {
        const text = toYaml(doc);
        const fast = readCanonicalYaml(text, 22);
        const slow = general(text);
        if (fast !== null) expect(slow).toEqual({ value: fast.value });
      }),
      { numRuns: RUNS * 3 },
    );
    tally('properties', { property: 'canonical fast path agrees with the general reader on written documents', runs: RUNS * 3 });
  });

  it('never returns a value the general reader would not, for any edit of a written document', () => {
    const docs = readdirSync(join(import.meta.dirname, '..', 'vectors', 'coo_message.v0', 'valid')).map((file) => readFileSync(join(import.meta.dirname, '..', 'vectors', 'coo_message.v0', 'valid', file), 'utf8'));
    const edit = fc.tuple(fc.constantFrom(...docs), fc.nat(), fc.nat({ max: 3 }), fc.string({ maxLength: 4, unit: fc.constantFrom(' ', ':', '-', '#', '"', "'", '\\', '\n', 'a', '1', '[', '{', '&', '*', '!', '|', '>', '\t', '?', ',', '\u00a0', '\u2028') }));
    fc.assert(
      fc.property(edit, ([doc, at, remove, insert]) => {
        const index = at % doc.length;
        const text = doc.slice(0, index) + insert + doc.slice(index + remove);
        const fast = readCanonicalYaml(text, 22);
        if (fast === null) return;
        expect(general(text)).toEqual({ value: fast.value });
      }),
      { numRuns: RUNS * 10 },
    );
    tally('properties', { property: 'canonical fast path never disagrees with the general reader on edited documents', runs: RUNS * 10 });
  });

  it('takes every frozen valid vector on the fast path', () => {
    const root = join(import.meta.dirname, '..', 'vectors');
    for (const kind of readdirSync(root)) {
      for (const file of readdirSync(join(root, kind, 'valid'))) {
        const text = readFileSync(join(root, kind, 'valid', file), 'utf8');
        expect(readCanonicalYaml(text, 22), `${kind}/${file}`).not.toBeNull();
      }
    }
  });

  it.each([
    ['an anchor', 'a: &x 1\n'],
    ['a comment', 'a: 1 # note\n'],
    ['a duplicate key', 'a: 1\na: 2\n'],
    ['a flow map', 'a: {b: 1}\n'],
    ['a block scalar', 'a: |\n  text\n'],
    ['single quotes', "a: 'x'\n"],
    ['a tag', 'a: !!str 1\n'],
    ['a document marker', '---\na: 1\n'],
    ['tabs', 'a:\t1\n'],
    ['a key that is not a string', '1: a\n'],
    ['an empty value', 'a:\nb: 1\n'],
    ['a raw line separator in double quotes', 'a: "x\u2028y"\n'],
    ['a raw C1 control in double quotes', 'a: "x\u0085y"\n'],
  ])('declines %s', (_name, text) => {
    expect(readCanonicalYaml(text, 22)).toBeNull();
  });
});

/** Characters YAML 1.1 resolvers look for: digits, signs, radix letters, `_`, `:`, dates, the boolean and null words. */
const hazard = fc.oneof(
  fc.string({ maxLength: 12, unit: fc.constantFrom('0', '1', '7', '9', '_', '.', ':', '-', '+', 'e', 'E', 'x', 'o', 'b', 'T', 't', 'Z', ' ', '~', '=', '<', 'y', 'n', 'N', 'f', 'O') }),
  fc.constantFrom('on', 'On', 'ON', 'off', 'Off', 'yes', 'Yes', 'no', 'NO', 'y', 'Y', 'n', 'N', 'true', 'False', '~', '=', '<<', 'null', 'Null', '', '1:20', '-1:20:30.5', '0755', '0o17', '0x1F', '0b1_0', '1_000', '.5', '1.', '.inf', '-.INF', '.NaN', '1e5', '1e+5', '12:30'),
  fc
    .tuple(fc.integer({ min: 0, max: 9999 }), fc.integer({ min: 1, max: 12 }), fc.integer({ min: 1, max: 31 }), fc.constantFrom('', 'T08:00:00Z', 't8:00:00', ' 08:00:00.5 +01:00', 'T08:00:00.123Z'))
    .map(([y, m, d, time]) => `${String(y).padStart(4, '0')}-${m}-${String(d).padStart(2, '0')}${time}`),
);
const anyString = fc.oneof(hazard, fc.string({ maxLength: 24 }), fc.string({ maxLength: 12, unit: 'binary' }));

describe('strings through a YAML 1.1 reader (PyYAML)', () => {
  it('round-trips any string value and key equal through coo and PyYAML', () => {
    // One python process per run, each run a batch of written documents.
    fc.assert(
      fc.property(fc.array(fc.tuple(anyString, anyString), { minLength: 1, maxLength: 40 }), (pairs) => {
        const docs = pairs.map(([name, text]) => ({ value: text, list: [text], map: { [name === '__proto__' ? 'k' : name]: text } }));
        const texts = docs.map((doc) => toYaml(doc));
        const loaded = loadWithPyYaml(texts);
        docs.forEach((doc, index) => {
          expect(readStrictYaml(Buffer.from(texts[index]!), 'x.yaml')).toEqual(doc);
          // A new entry is held to what the writer does: what it wrote passes.
          expect(readStrictYaml(Buffer.from(texts[index]!), 'x.yaml', { sameInYaml11: true })).toEqual(doc);
          expect(loaded[index], texts[index]).toEqual({ value: doc });
        });
      }),
      { numRuns: Math.max(10, Math.round(RUNS / 10)) },
    );
    tally('properties', { property: 'any string value round-trips equal through coo and PyYAML', runs: Math.max(10, Math.round(RUNS / 10)) * 40 });
  });
});
