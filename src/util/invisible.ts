/**
 * Characters that act rather than read when untrusted text is shown: C0 and C1 controls (a
 * terminal's escape sequences among them), the soft hyphen, zero-width characters, line and
 * paragraph separators, and every bidirectional control (the Arabic letter mark, LRM and RLM, the
 * embeddings, overrides and isolates), the byte order mark, the interlinear annotation marks, and
 * the tag characters (U+E0000 to U+E007F: invisible everywhere, they spell ASCII a model reads but a
 * person never sees). One set for every place that shows
 * such text (the CLI's lines, inert Markdown, pull-request bodies), so no place misses one the
 * others catch: each had its own list, and two of them let U+061C and U+00AD through.
 */
export function invisibleCharacters(): RegExp {
  // eslint-disable-next-line no-control-regex -- control characters are what this finds
  return /[\u0000-\u001f\u007f-\u009f\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff\ufff9-\ufffb\u{e0000}-\u{e007f}]/gu;
}

/** A character as the code point a reader can see: `\u202e`, or `\u{e0041}` past the first plane. */
export function codePointText(char: string): string {
  const point = char.codePointAt(0)!;
  return point > 0xffff ? `\\u{${point.toString(16)}}` : `\\u${point.toString(16).padStart(4, '0')}`;
}

const ACTING = invisibleCharacters();

/**
 * Characters that draw nothing in a file's name: every control, surrogate, format, private-use,
 * unassigned and separator character (a space only at either end, where a reader cannot see it),
 * variation selectors, the combining grapheme joiner, and the fillers and vowels that draw blank.
 * So an emoji's U+FE0F or U+200D, or a Persian name's U+200C, is shown as its code point too.
 */
// eslint-disable-next-line no-misleading-character-class -- the joiners and selectors are what this finds, each on its own (the u flag)
const NOTHING_DRAWN = /[\p{Cc}\p{Cf}\p{Cs}\p{Co}\p{Cn}\p{Zl}\p{Zp}\u00a0\u1680\u2000-\u200a\u202f\u205f\u3000\u034f\u115f\u1160\u17b4\u17b5\u180b-\u180f\u2800\u3164\uffa0\ufe00-\ufe0f\u{e0100}-\u{e01ef}]|^ | $/gu;
/** What a name not in NFC may spell another's with: a combining mark, or a conjoining Hangul letter (jamo). */
const COMPOSING = /[\p{M}\u1100-\u11ff\ua960-\ua97f\ud7b0-\ud7ff]/u;

/**
 * A file's name as one that reads as no other name spelled with other code points that draw alike:
 * each character of NOTHING_DRAWN, and in a name that is not in NFC each character NFC changes (the
 * Kelvin sign, a Greek question mark) and each that composes with another (`cafe\u0301` and `café`,
 * a Korean name a Mac wrote in jamo), as its code point (`\u206a`), which no name the ledger takes
 * spells itself (a relativePath holds no backslash). Letters of other scripts drawn like Latin ones
 * (a Cyrillic `а`) are letters of their own and shown as they are.
 */
export function pathText(path: string): string {
  const composed = path === path.normalize('NFC') ? path : [...path].map((char) => (char.normalize('NFC') !== char || COMPOSING.test(char) ? codePointText(char) : char)).join('');
  return composed.replace(NOTHING_DRAWN, codePointText);
}

/**
 * Text for a terminal, kept to its lines: every character of `invisibleCharacters` but the line
 * break and the tab is shown as `\uNNNN`. For what the CLI writes to stderr, whose errors, notes and
 * runner events carry text from the ledger, a remote or an agent (a message id, a path, a finding's
 * detail): an escape sequence there would act on the operator's terminal.
 */
export function terminalText(text: string): string {
  return text.replace(ACTING, (char) => (char === '\n' || char === '\t' ? char : codePointText(char)));
}

/**
 * Text for one line of a terminal: as terminalText, with each line break and tab shown as its code
 * point too. A refusal is one coded line (`coo: CODE: message`), and a path given with a line end (a
 * `$(cat file)` that kept its newline) split it in two, the line end never seen.
 */
export function oneLineText(text: string): string {
  return text.replace(ACTING, codePointText);
}

/**
 * A value as JSON whose every character of `invisibleCharacters` is a `\uXXXX` escape (a UTF-16
 * unit each, so a tag character is its surrogate pair): the same value to every JSON reader, and
 * inert on the terminal or in the log a script's `--json` goes to. `JSON.stringify` escapes only
 * C0 controls, so a bidirectional override, a zero-width character, a C1 control (U+009B is a
 * terminal's CSI) or a line separator an agent wrote would be printed as it acts. The only line
 * breaks left are those of the indentation `space` asks for.
 */
export function inertJson(value: unknown, space?: number): string {
  return JSON.stringify(value, null, space).replace(ACTING, (char) => (char === '\n' ? char : char.split('').map((unit) => `\\u${unit.charCodeAt(0).toString(16).padStart(4, '0')}`).join('')));
}

/**
 * Every line end a reader of untrusted text may break at: LF, CR and CRLF, and those other renderers,
 * editors and models break at (VT, FF, NEL, and the line and paragraph separators). A quote that marks
 * each line of a text (a cross-check's challenged answer) or puts it on one line (inert Markdown)
 * splits at all of them, or a line after U+2028 stands unmarked.
 */
export function lineEnds(): RegExp {
  return /\r\n|[\n\r\v\f\u0085\u2028\u2029]/g;
}
