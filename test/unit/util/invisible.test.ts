import { describe, expect, it } from 'vitest';
import { inert } from '../../../src/audit/inert-markdown.js';
import { printable } from '../../../src/cli/show.js';
import { codeSpan } from '../../../src/dispatch/pull-request-body.js';
import { pathText, terminalText } from '../../../src/util/invisible.js';

/**
 * Every place that shows untrusted text shows the same characters as code points instead of
 * letting them act: `coo inbox` and `coo show` lines, inert Markdown, pull-request bodies. The CLI
 * and the pull-request body let the Arabic letter mark (a bidirectional control) and the soft
 * hyphen through.
 */

const ACTING = ['\u001b', '\u0007', '\u009b', '\u00ad', '\u061c', '\u180e', '\u200b', '\u200e', '\u202e', '\u2066', '\u2069', '\ufeff', '\ufff9', '\u{e0001}', '\u{e0041}', '\u{e007f}'];

describe('the characters that act rather than read are one set, shown as code points everywhere', () => {
  for (const [name, show] of [
    ['printable (coo inbox, coo show)', (text: string) => printable(text, Number.POSITIVE_INFINITY)],
    ['inert Markdown (coo cite)', inert],
    ['a pull-request code span', (text: string) => codeSpan(text)],
    ['terminalText (every line the CLI writes to stderr)', terminalText],
  ] as const) {
    it(`${name} lets none of them through`, () => {
      for (const char of ACTING) {
        const shown = show(`ship${char}it`);
        expect([char.codePointAt(0)!.toString(16), [...shown].some((c) => ACTING.includes(c))]).toEqual([char.codePointAt(0)!.toString(16), false]);
        expect(shown.toLowerCase()).toContain(char.codePointAt(0)!.toString(16).padStart(4, '0'));
      }
    });
  }
});

it('terminalText keeps the lines and tabs of a multi-line error', () => {
  expect(terminalText('first\tline\nsecond \u001b[2J line\n')).toBe('first\tline\nsecond \\u001b[2J line\n');
});

it('shows a tag character, which spells ASCII no person sees, as one whole code point', () => {
  // "ignore" written in tag characters: invisible in a terminal, a browser and a pull request alike.
  const hidden = [...'ignore'].map((char) => String.fromCodePoint(0xe0000 + char.charCodeAt(0))).join('');
  expect(terminalText(`ok${hidden}`)).toBe('ok\\u{e0069}\\u{e0067}\\u{e006e}\\u{e006f}\\u{e0072}\\u{e0065}');
  expect(printable(`ok${hidden}`, Number.POSITIVE_INFINITY)).toBe(terminalText(`ok${hidden}`));
  expect(inert(`ok${hidden}`).replace(/\\/g, '')).toBe('ok(U+E0069)(U+E0067)(U+E006E)(U+E006F)(U+E0072)(U+E0065)');
});

describe('a file name reads as no other name', () => {
  it('shows each character that draws nothing, or draws as another name does, as its code point, and an ordinary name as it is', () => {
    const alike = ['a.js', 'a\u206a.js', 'a\ufe0f.js', 'a\u034f.js', 'a\u{1d173}.js', 'a\u00a0.js', 'a\u3164.js', 'a\u{e0100}.js', 'a\u2003.js', ' a.js', 'a.js ', 'a\ud800.js'];
    const shown = alike.map(pathText);
    expect(new Set(shown).size).toBe(alike.length);
    expect(shown).toEqual(['a.js', 'a\\u206a.js', 'a\\ufe0f.js', 'a\\u034f.js', 'a\\u{1d173}.js', 'a\\u00a0.js', 'a\\u3164.js', 'a\\u{e0100}.js', 'a\\u2003.js', '\\u0020a.js', 'a.js\\u0020', 'a\\ud800.js']);
    for (const name of ['src/my file.md', 'docs/café.md', 'नमस्ते/पाठ.md', 'src/日本語.ts', 'a-b_c.d/e+f@g.js']) expect(pathText(name)).toBe(name);
  });

  it('shows the combining marks of a name that is not in NFC, so the two spellings of one word read apart', () => {
    const composed = 'docs/caf\u00e9.md';
    const decomposed = 'docs/cafe\u0301.md';
    expect(pathText(composed)).toBe(composed);
    expect(pathText(decomposed)).toBe('docs/cafe\\u0301.md');
    // NFC changes the Kelvin sign and the Greek question mark into K and ;, and composes a Korean name a Mac wrote in jamo.
    const pairs = [['\u212a.txt', 'K.txt'], ['a\u037eb', 'a;b'], ['\u0958.txt', '\u0915\u093c.txt'], ['\u1112\u1161\u11ab.txt', '\ud55c.txt'], ['a\u2800b', 'ab'], ['my cafe\u0301.md', 'my caf\u00e9.md']];
    for (const [odd, plain] of pairs) {
      expect(pathText(plain!)).toBe(plain);
      expect(pathText(odd!)).not.toBe(pathText(plain!));
      expect(pathText(odd!)).toMatch(/\\u[0-9a-f]{4}/);
    }
    expect(pathText('my cafe\u0301.md')).toBe('my cafe\\u0301.md');
  });
});
