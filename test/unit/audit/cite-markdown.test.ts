import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { marked } from 'marked';
import { describe, expect, it } from 'vitest';
import { inert, renderCitation, type Evidence } from '../../../src/audit/cite.js';
import { readDocument } from '../../../src/schema/documents.js';
import type { AaAnswer } from '../../../src/schema/aa-answer.js';

/**
 * The citation comment cannot be reshaped by the advice it quotes. Hostile answers go through
 * renderCitation and a real CommonMark + GFM renderer (marked, in GFM mode, as GitHub renders
 * comments): the comment keeps its one note, its evidence table and its own code spans, and the
 * model's text becomes no heading, fence, link, image, HTML, table or list of its own, mentions no
 * one and links nowhere.
 */
const RECEIPT = readDocument('aa_receipt.v0', readFileSync(join(import.meta.dirname, '..', '..', 'fixtures', 'legacy-entries', 'aa_receipt.v0--succeeded.yaml')), 'receipt');

/** One hostile text per construct, each in the forms a model could send it. */
const HOSTILE: Record<string, string> = {
  'a lone carriage return opening a heading': 'fine.\r# Approved by the CEO',
  'a lone carriage return opening a fence that swallows the table': 'ok\r```\nall of the evidence below is code',
  'CRLF, LF, vertical tab, form feed, NEL, line and paragraph separators': 'a\r\nb\nc\vd\fe\u0085f\u2028g\u2029# h',
  'a link reference definition for the note': 'x\r[!NOTE]: https://evil.example/note',
  'a link reference definition on its own': '[advisory]: https://evil.example "title"',
  'a setext heading': 'Approved\r===',
  'a thematic break': '\r---',
  'a block quote': '\r> quoted authority',
  'a list': '\r1. first\r- second',
  'indented code': '\r    code block',
  'a table': 'a | b\r--- | ---\r1 | 2',
  'raw HTML': '<img src=x onerror=alert(1)><script>alert(1)</script><details open>',
  'an HTML comment': '<!-- hide the rest',
  'an inline link': '[click here](https://evil.example)',
  'a javascript link': '[x](javascript:alert(1))',
  'an image': '![pixel](https://track.example/p.gif)',
  'an autolink': '<https://evil.example>',
  'a bare URL': 'see https://evil.example/path and HTTP://EVIL.EXAMPLE',
  'a www link': 'see www.evil.example or WWW.Evil.Example',
  'an email': 'mail ceo@evil.example',
  'a mention': 'cc @ceo and @lifeos/owners',
  'an issue reference': 'closes #12, lifeos/calc#3, GH-7',
  'an entity': '&lt;script&gt; &#x3C;b&#x3E; &amp;',
  'emphasis and strikethrough': '**bold** _em_ ~~gone~~',
  'a code span': 'run `rm -rf /`',
  'math': '$x^2$ and $$y$$',
  'a footnote': 'claim[^1]\r[^1]: https://evil.example',
  'a trailing backslash': 'ends with \\',
  'two trailing spaces': 'line  \rbreak',
  'bidirectional and zero-width characters': 'evil\u202Etxt.js\u200b\u0000',
  'a task list': '\r- [x] approved',
};

function answerOf(text: string): AaAnswer {
  return {
    schema_version: 'aa_answer.v0',
    verdict: 'approve',
    summary: text,
    findings: [{ severity: 'high', title: text, detail: text, refs: [text] }],
    recommendations: [text],
    objections: [text],
    confidence: 0.5,
    canary: 'canary-1234',
  };
}

function evidenceOf(text: string): Evidence {
  return {
    messageId: 'msg_01M8NQFJ01J7CG66HWNDDJ8485',
    source: 'coo.hermes',
    target: 'aa.chatgpt',
    question: text,
    repoCommit: 'a'.repeat(40),
    contextFiles: 2,
    receipt: RECEIPT,
    receiptPath: 'messages/2026-11/30/08/msg_01M8NQFJ01J7CG66HWNDDJ8485/receipts/001.yaml',
    receiptSha256: `sha256:${'b'.repeat(64)}`,
    receiptCommit: 'c'.repeat(40),
    receiptSeq: 5,
    signer: 'coo.hermes',
    answer: answerOf(text),
    findings: [],
    genesis: 'd'.repeat(40),
    headSeq: 6,
    cleanToSeq: 6,
    otherRefs: [],
  };
}

/** The tags a citation's own Markdown makes; anything else came from the model's text. */
const OWN_TAGS = new Set(['p', 'strong', 'ul', 'li', 'table', 'thead', 'tbody', 'tr', 'th', 'td', 'code', 'blockquote', 'br']);

function render(markdown: string): string {
  return marked.parse(markdown, { gfm: true, async: false });
}

function textOf(html: string): string {
  return html.replace(/<[^>]*>/g, '').replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&quot;/g, '"').replace(/&#39;/g, "'").replace(/&amp;/g, '&');
}

describe('a citation of a hostile answer, rendered by CommonMark + GFM', () => {
  const plain = render(renderCitation(evidenceOf('A plain answer.')));
  const count = (html: string, pattern: RegExp): number => html.match(pattern)?.length ?? 0;

  it.each(Object.entries(HOSTILE))('keeps its shape against %s', (_name, text) => {
    const html = render(renderCitation(evidenceOf(text)));
    const tags = new Set([...html.matchAll(/<\/?([a-z0-9]+)/gi)].map((match) => match[1]!.toLowerCase()));
    expect([...tags].filter((tag) => !OWN_TAGS.has(tag))).toEqual([]);
    // The same blocks as a plain answer: one note, one table with its seven rows, the same lists and code spans.
    for (const pattern of [/<blockquote>/g, /<table>/g, /<tr>/g, /<ul>/g, /<li>/g, /<code>/g, /<strong>/g, /<p>/g]) {
      expect(count(html, pattern), String(pattern)).toBe(count(plain, pattern));
    }
    const text_ = textOf(html);
    // Nothing GitHub would link or notify: no mention, issue reference, URL or www link left whole.
    expect(text_).not.toMatch(/@[A-Za-z0-9]/);
    expect(text_).not.toMatch(/#\d|\bgh-\d/i);
    expect(text_).not.toMatch(/:\/\//);
    expect(text_).not.toMatch(/www\./i);
    expect([...text_].some((char) => (char >= '\u202a' && char <= '\u202e') || char === '\u0000')).toBe(false);
  });

  it('keeps the text readable: what the model wrote is what the comment shows, on one line', () => {
    const html = render(renderCitation(evidenceOf('Use `a < b` & [docs](x) #1 @ceo')));
    expect(textOf(html).replace(/\u200b/g, '')).toContain('Summary. Use `a < b` & [docs](x) #1 @ceo');
  });

  it('puts every kind of line end on one line, and shows invisible characters by code point', () => {
    expect(inert('a\rb\r\nc\nd\u2028e\u2029f\u0085g\vh\fi\tj')).toBe('a b c d e f g h i j');
    expect(inert('evil\u202Etxt')).toBe('evil\\(U\\+202E\\)txt');
  });
});
