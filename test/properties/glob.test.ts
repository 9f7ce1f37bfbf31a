import fc from 'fast-check';
import picomatch from 'picomatch';
import { describe, expect, it } from 'vitest';
import { globMatcher } from '../../src/authority/glob.js';

const RUNS = Number(process.env['COO_PROPERTY_RUNS'] ?? 300);

/** Units a name is made of: plain letters, picomatch's regex characters, a dot, a space, two-unit characters. */
const unit = fc.constantFrom('a', 'b', '.', '-', '$', '^', '#', '~', ',', ' ', 'é', '😀', '%', '&', ';', '=', '<', '>', '\n', '\r', '\u2028', '\t');
const name = fc
  .array(unit, { minLength: 1, maxLength: 5 })
  .map((units) => units.join(''))
  .filter((segment) => segment !== '.' && segment !== '..');
/** A path git can hold. */
const gitPath = fc.array(name, { minLength: 1, maxLength: 4 }).map((segments) => segments.join('/'));
/** A path git cannot hold: an empty, `.` or `..` segment, a slash at either end. */
const oddPath = fc.tuple(gitPath, fc.constantFrom('/', '//', '/./', '/../', '/.', '/..')).map(([path, odd]) => (odd.length % 2 === 0 ? path + odd : odd + path));
/** Globs of segments made of `units`, or `**` segments, with picomatch's leading `./` now and then. */
function globs(units: fc.Arbitrary<string>): fc.Arbitrary<string> {
  const segment = fc.oneof(fc.array(units, { minLength: 1, maxLength: 5 }).map((parts) => parts.join('')), fc.constant('**'));
  return fc.tuple(fc.constantFrom('', '', './', '././'), fc.array(segment, { minLength: 1, maxLength: 4 })).map(([lead, segments]) => lead + segments.join('/'));
}
/** The plain forms, matched without picomatch's regex. */
const plainGlob = globs(fc.oneof(unit, fc.constantFrom('*', '*', '?', '**', '***')));
/** Brace lists of the plain forms, read as the union of their spellings. */
const braceList = fc.array(fc.array(fc.oneof(unit, fc.constantFrom('*', '?', '**', '')), { minLength: 0, maxLength: 3 }).map((parts) => parts.join('')), { minLength: 1, maxLength: 3 }).map((alternatives) => `{${alternatives.join(',')}}`);
const bracedGlob = globs(fc.oneof(unit, unit, fc.constantFrom('*', '?', '**'), braceList, braceList));
/** Any glob: brace lists, classes, extglobs, negation, quotes and escapes are picomatch's. */
const anyGlob = globs(fc.oneof(unit, fc.constantFrom('*', '*', '?', '**', '[a]', '{a,b}', '@(a)', '!', '"', '\\*')));
const paths = fc.array(fc.oneof(gitPath, gitPath, oddPath), { minLength: 1, maxLength: 8 });

describe('a glob matcher', () => {
  for (const [kind, glob] of [['a plain glob', plainGlob], ['a glob of brace lists', bracedGlob], ['any glob', anyGlob]] as const) {
    it(`matches ${kind} to every path as picomatch does with dot files included`, () => {
      fc.assert(
        fc.property(glob, paths, (pattern, subjects) => {
          const ours = globMatcher(pattern);
          const theirs = picomatch(pattern, { dot: true });
          for (const path of subjects) expect(ours(path), `${JSON.stringify(pattern)} against ${JSON.stringify(path)}`).toBe(theirs(path));
        }),
        { numRuns: RUNS * 10 },
      );
    });
  }
});
