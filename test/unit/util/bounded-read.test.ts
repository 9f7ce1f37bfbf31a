import { execFileSync } from 'node:child_process';
import { symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { readBounded } from '../../../src/util/bounded-read.js';
import { tempDir } from '../../helpers/tmp.js';

const dir = tempDir('bounded-read');

describe('reading a file someone else may have made hostile', () => {
  it('reads a regular file whole, with its mode', () => {
    writeFileSync(join(dir, 'plain'), 'hello\n', { mode: 0o755 });
    const read = readBounded(join(dir, 'plain'), { maxBytes: 100 });
    expect(read.kind === 'file' && read.bytes.toString()).toBe('hello\n');
    expect(read.kind === 'file' && (read.mode & 0o100) !== 0).toBe(true);
  });

  it('refuses a FIFO nobody writes without blocking, and a link without following it', () => {
    execFileSync('mkfifo', [join(dir, 'fifo')]);
    expect(readBounded(join(dir, 'fifo'), { maxBytes: 100 })).toEqual({ kind: 'not_regular', type: 'fifo' });
    symlinkSync('/dev/zero', join(dir, 'zero'));
    expect(readBounded(join(dir, 'zero'), { maxBytes: 100 })).toEqual({ kind: 'not_regular', type: 'symlink' });
    // An operator's own file may be a link; what it names is still checked.
    expect(readBounded(join(dir, 'zero'), { maxBytes: 100, follow: true })).toEqual({ kind: 'not_regular', type: 'device' });
  });

  it('refuses a file over the bound rather than cutting it, a sparse one included', () => {
    writeFileSync(join(dir, 'big'), Buffer.alloc(101));
    expect(readBounded(join(dir, 'big'), { maxBytes: 100 })).toEqual({ kind: 'too_large', size: 101 });
    execFileSync('truncate', ['-s', '1G', join(dir, 'sparse')]);
    expect(readBounded(join(dir, 'sparse'), { maxBytes: 1024 }).kind).toBe('too_large');
    expect(readBounded(join(dir, 'missing'), { maxBytes: 1 })).toEqual({ kind: 'unreadable', code: 'ENOENT' });
  });
});
