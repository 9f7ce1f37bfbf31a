import { describe, expect, it } from 'vitest';
import { wholeLinesOf } from '../../../src/util/bytes.js';

describe('wholeLinesOf', () => {
  it('drops the partial first line of a tail and the partial last line of a head', () => {
    expect(wholeLinesOf('et-key-123\nnext\nlast', 'start')).toBe('next\nlast');
    expect(wholeLinesOf('first\nsecond\nsk-sec', 'end')).toBe('first\nsecond\n');
    expect(wholeLinesOf(Buffer.from('a\nb'), 'end')).toEqual(Buffer.from('a\n'));
    expect(wholeLinesOf(Buffer.from('a\nb'), 'start')).toEqual(Buffer.from('b'));
  });

  it('keeps nothing of a cut text with no line break', () => {
    expect(wholeLinesOf('sk-secret-without-end', 'start')).toBe('');
    expect(wholeLinesOf(Buffer.from('sk-secret'), 'end')).toEqual(Buffer.alloc(0));
  });
});
