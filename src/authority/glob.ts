import picomatch from 'picomatch';

/**
 * One glob's matcher, as picomatch reads it with dot files included, in time linear in the pattern
 * times the path. picomatch compiles a glob to a regular expression whose quantifiers backtrack: a
 * pattern such as `*a*a*a*b`, or `*?` said eleven times, takes seconds to a minute against one long
 * name, and a signed scope like it would slow every replay of the history that holds it. The globs
 * people write (names, `*`, `?` and `**` segments, and brace lists of them) are matched here by a
 * wildcard walk that never backtracks more than one star, over paths git can hold with no line break.
 * Anything else (nested lists, ranges, classes, extglobs, negation, quotes, escapes, picomatch's short
 * forms, or another path) is picomatch's, unchanged.
 */
export function globMatcher(pattern: string): (path: string) => boolean {
  const regex = picomatch(pattern, { dot: true });
  const forms = plainForms(pattern);
  if (forms === null) return regex;
  return (path) => {
    // picomatch takes a path spelled as the glob itself, whatever the glob's syntax says.
    if (path === pattern) return true;
    if (!isGitPath(path)) return regex(path);
    const names = path.split('/');
    return forms.some((segments) => matchSegments(segments, names));
  };
}

/** The most wildcards a glob outside the plain forms may hold when it is written: picomatch's regex for one with three backtracks at worst some millions of steps against a 255-unit name, with four some billions. */
export const MAX_SLOW_GLOB_WILDCARDS = 3;

/**
 * Why a glob a writer is handed now would be slow to match, or null. Asked where a glob is written
 * (a consult's files, a dispatch's scope), not where history is replayed: one signed before stays
 * as it was read then. A run of stars, `?`, a class, an extglob and each brace and comma count: a
 * brace list's alternatives multiply what the regex tries, as stars do.
 */
export function slowGlob(pattern: string): string | null {
  if (plainForms(pattern) !== null) return null;
  // A repeated extglob over a wildcard nests one quantifier in another: `+(a*)b` backtracks exponentially, however few its units.
  if (/[+*]\([^)]*[*?(]/.test(pattern)) return 'repeats a group that holds a wildcard ("+(...*...)", "*(...?...)"): such a glob can take minutes against one long name; spell the repetition with "*" or "**"';
  const wildcards = (pattern.match(/\*+|[?([{,]/g) ?? []).length;
  if (wildcards <= MAX_SLOW_GLOB_WILDCARDS) return null;
  return `holds ${wildcards} wildcards, brace lists and classes beside nested braces, classes, extglobs, quotes or a run of three stars, where at most ${MAX_SLOW_GLOB_WILDCARDS} are taken: such a glob can take minutes against one long name; split it into globs of names, "*", "?", "**" segments and brace lists of them`;
}

/** The most plain globs one brace-listed glob is read as. */
const MAX_FORMS = 64;

/**
 * The plain globs a glob is the union of: itself, or, for brace lists of names and wildcards
 * (`*.{ts,js}`, `{src,test}/**`, not nested, not a range, within a segment), each spelling of it;
 * null if any is not plain.
 */
function plainForms(given: string): (string | null)[][] | null {
  // picomatch drops a leading `./`, however often it is said, before it reads a brace list.
  const pattern = given.replace(/^(?:\.\/)+/, '');
  if (pattern === '') return null;
  if (!pattern.includes('{') && !pattern.includes('}')) {
    const segments = plainSegments(pattern, true);
    return segments === null ? null : [segments];
  }
  // Nested lists are picomatch's.
  if (/\{[^}]*\{/.test(pattern)) return null;
  let spellings = [pattern];
  for (;;) {
    const group = /\{([^{}/]*)\}/.exec(spellings[0]!);
    if (group === null) break;
    const alternatives = group[1]!.split(',');
    // A list of one is no list to picomatch, `..` makes a range, and `**` reads otherwise inside one. A
    // star at either edge of the list or of an alternative takes picomatch's reading of the stars beside
    // it (`**{a,b}` crosses folders; `{a*,b}/**` matches `ax` alone, though `a*\/**` does not).
    const [before, after] = [spellings[0]![group.index - 1], spellings[0]![group.index + group[0].length]];
    if (alternatives.length < 2 || group[1]!.includes('..') || group[1]!.includes('**') || before === '*' || after === '*' || alternatives.some((alternative) => alternative.startsWith('*') || alternative.endsWith('*'))) return null;
    if (spellings.length * alternatives.length > MAX_FORMS) return null;
    spellings = spellings.flatMap((spelling) => {
      const at = spelling.indexOf(group[0]!);
      return alternatives.map((alternative) => spelling.slice(0, at) + alternative + spelling.slice(at + group[0]!.length));
    });
  }
  const forms: (string | null)[][] = [];
  for (const spelling of spellings) {
    // picomatch reads a brace-listed glob by its parser, never by a short form.
    const segments = plainSegments(spelling, false);
    if (segments === null) return null;
    forms.push(segments);
  }
  return forms;
}

/** Characters that make a glob more than names, `*`, `?` and `**` to picomatch (the quotes it takes away). */
const SYNTAX = /[\\[\]{}()!+@|"']/;

/**
 * The glob's segments, with a globstar segment as null, or null if it is not a plain glob, or if
 * picomatch reads it by one of its short forms (`*.*`, `**\/*`, `*.ts`: few wildcards, which its
 * regex matches without backtracking, and each with a reading of its own).
 */
function plainSegments(pattern: string, shortForms: boolean): (string | null)[] | null {
  if (SYNTAX.test(pattern)) return null;
  if (shortForms && picomatch.makeRe(pattern, { dot: true }).source !== picomatch.makeRe(pattern, { dot: true, fastpaths: false }).source) return null;
  const segments = pattern.split('/');
  if (segments.some((segment) => segment === '')) return null;
  const tokens: (string | null)[] = [];
  for (const segment of segments) {
    if (segment === '**') {
      // Two globstars in a row match what one does.
      if (tokens.length === 0 || tokens.at(-1) !== null) tokens.push(null);
      continue;
    }
    // Within a segment, two stars side by side are one star; three or more picomatch reads otherwise (`***..` is `*.` and any one character).
    if (segment.includes('***')) return null;
    tokens.push(segment.replaceAll('**', '*'));
  }
  // A globstar that ends the glob after a segment ending in a star matches one folder or more, not
  // none: picomatch's `*\/**` is not `*`, though `a/**` is `a`.
  const before = tokens.at(-2);
  if (tokens.length > 1 && tokens.at(-1) === null && typeof before === 'string' && before.endsWith('*')) tokens.splice(-1, 1, '*', null);
  return tokens;
}

/**
 * A path the walk reads as picomatch's regex does: no empty, `.` or `..` segment, and no line
 * terminator, which its `**` (a regex `.`) never crosses and its `(?=.)` never starts a segment at.
 */
function isGitPath(path: string): boolean {
  return !/[\n\r\u2028\u2029]/.test(path) && path.split('/').every((segment) => segment !== '' && segment !== '.' && segment !== '..');
}

/**
 * A wildcard walk over units: a star is remembered, and a mismatch after it resumes one unit further
 * from the star rather than trying every split again. `?` is one UTF-16 unit, as picomatch's regex reads it.
 */
function walk<P, S>(pattern: readonly P[], subject: readonly S[] | string, isStar: (token: P) => boolean, one: (token: P, index: number) => boolean): boolean {
  let p = 0;
  let s = 0;
  let star = -1;
  let resume = 0;
  while (s < subject.length) {
    if (p < pattern.length && isStar(pattern[p]!)) {
      star = p++;
      resume = s;
    } else if (p < pattern.length && one(pattern[p]!, s)) {
      p++;
      s++;
    } else if (star >= 0) {
      p = star + 1;
      s = ++resume;
    } else {
      return false;
    }
  }
  while (p < pattern.length && isStar(pattern[p]!)) p++;
  return p === pattern.length;
}

function matchSegment(segment: string, name: string): boolean {
  return walk(
    segment.split(''),
    name,
    (unit) => unit === '*',
    (unit, index) => unit === '?' || unit === name[index],
  );
}

function matchSegments(tokens: readonly (string | null)[], names: readonly string[]): boolean {
  return walk(
    tokens,
    names,
    (token) => token === null,
    (token, index) => matchSegment(token!, names[index]!),
  );
}
