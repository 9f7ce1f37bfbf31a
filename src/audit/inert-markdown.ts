import { invisibleCharacters, lineEnds } from '../util/invisible.js';

/**
 * Untrusted text (an advisory agent's answer, an agent's narrative) inside Markdown that GitHub
 * renders: it must read as what it says and do nothing. Pure.
 *
 * Every CommonMark and GFM construct starts at a line end, with indentation, or with an ASCII
 * punctuation character (headings, fences, block quotes, lists, tables, thematic breaks, HTML,
 * link reference definitions, links, images, autolinks, emphasis, code spans, entities,
 * strikethrough, footnotes, math). So the text is put on one line, and every ASCII punctuation
 * character is backslash-escaped, which CommonMark defines as that character, literal (spec 2.4).
 * What GitHub recognises in the rendered text instead (mentions, issue references, bare URLs and
 * emails) is broken with a zero-width space, since escapes are gone by then.
 */

/** Every line end CommonMark knows (LF, CR, CRLF) and those other renderers and editors break at. */
const LINE_ENDS = lineEnds();

/** Controls, zero-width and bidirectional characters: shown as their code point instead of acting. */
const INVISIBLE = invisibleCharacters();

/** ASCII punctuation: the characters CommonMark lets a backslash make literal. */
const PUNCTUATION = /[!-/:-@[-`{-~]/g;

const ZWSP = '\u200b';

/** Model text as one line of literal Markdown text: no construct of any kind, nothing that links, mentions or notifies. */
export function inert(text: string): string {
  return text
    .replace(LINE_ENDS, ' ')
    .replace(/\t/g, ' ')
    .replace(INVISIBLE, (char) => `(U+${char.codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')})`)
    .replace(/ {2,}/g, ' ')
    .trim()
    .replace(PUNCTUATION, (char) => `\\${char}`)
    .replace(/\\([@#])/g, `\\$1${ZWSP}`)
    .replace(/\\:(?=\\\/\\\/)/g, `\\:${ZWSP}`)
    .replace(/(www)(?=\\\.)/gi, `$1${ZWSP}`)
    .replace(/\b(gh)(?=\\-\d)/gi, `$1${ZWSP}`);
}

/**
 * Text from a signed entry whose schema allows only a small alphabet (codes, model names), as a
 * code span: anything outside that alphabet is shown as `?`, so the span can never be closed early.
 */
export function literalCode(text: string): string {
  const value = text.replace(/[^A-Za-z0-9_.:/@+-]/g, '?');
  return `\`${value === '' ? '?' : value}\``;
}
