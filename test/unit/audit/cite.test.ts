import { describe, expect, it } from 'vitest';
import { inert } from '../../../src/audit/cite.js';

describe('citing untrusted model text', () => {
  it.each([
    ['HTML', '<img src=x onerror=alert(1)>', '&lt;img src=x onerror=alert(1)&gt;'],
    ['an image', '![pixel](https://track.example/p.gif)', '!\\[pixel]\\(https://track.example/p.gif)'],
    ['a link', '[click](https://evil.example)', '[click]\\(https://evil.example)'],
    ['a mention', 'cc @ceo please approve', 'cc @\u200bceo please approve'],
    ['new lines that would break a list', 'one\n\n# heading', 'one # heading'],
    ['code spans', 'run `rm -rf /`', "run 'rm -rf /'"],
  ])('renders %s inert', (_name, input, output) => {
    expect(inert(input)).toBe(output);
  });
});
