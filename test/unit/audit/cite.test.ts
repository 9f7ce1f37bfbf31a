import { describe, expect, it } from 'vitest';
import { inert } from '../../../src/audit/cite.js';

describe('citing untrusted model text', () => {
  it.each([
    ['HTML', '<img src=x onerror=alert(1)>', '\\<img src\\=x onerror\\=alert\\(1\\)\\>'],
    ['an image', '![pixel](https://track.example/p.gif)', '\\!\\[pixel\\]\\(https\\:\u200b\\/\\/track\\.example\\/p\\.gif\\)'],
    ['a link', '[click](https://evil.example)', '\\[click\\]\\(https\\:\u200b\\/\\/evil\\.example\\)'],
    ['a mention', 'cc @ceo please approve', 'cc \\@\u200bceo please approve'],
    ['new lines that would break a list', 'one\n\n# heading', 'one \\#\u200b heading'],
    ['a lone carriage return', 'one\r# heading', 'one \\#\u200b heading'],
    ['code spans', 'run `rm -rf /`', 'run \\`rm \\-rf \\/\\`'],
  ])('renders %s inert', (_name, input, output) => {
    expect(inert(input)).toBe(output);
  });
});
