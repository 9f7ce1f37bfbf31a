import { isUtf8 } from 'node:buffer';
import { CooError } from '../errors.js';
import { LIMITS } from '../limits.js';

/** Raw git tree objects. A ledger tree holds only directories (40000) and regular files (100644). */

export interface TreeEntry {
  readonly name: string;
  readonly mode: '40000' | '100644';
  readonly oid: string;
}

function fail(reason: string): never {
  throw new CooError('TREE_MALFORMED', `tree: ${reason}`);
}

const SLASH = 0x2f;

/** git's order: byte order of names, with directory names compared as if they ended in "/". */
export function compareEntries(a: TreeEntry, b: TreeEntry): number {
  const left = Buffer.from(a.name, 'utf8');
  const right = Buffer.from(b.name, 'utf8');
  return compareRawRange(left, 0, left.length, a.mode === '40000', right, 0, right.length, b.mode === '40000', false);
}

function checkName(name: string): void {
  if (name === '' || name === '.' || name === '..' || name.toLowerCase() === '.git' || name.includes('/') || name.includes('\0')) {
    fail(`entry name ${JSON.stringify(name)} is not allowed`);
  }
}

const DIR_MODE = Buffer.from('40000', 'latin1');
const FILE_MODE = Buffer.from('100644', 'latin1');

function isMode(raw: Buffer, start: number, end: number, mode: Buffer): boolean {
  if (end - start !== mode.length) return false;
  for (let i = 0; i < mode.length; i += 1) if (raw[start + i] !== mode[i]) return false;
  return true;
}

/** Checks a name's bytes: ASCII names without allocating, any other after decoding. */
function checkNameBytes(raw: Buffer, start: number, end: number): void {
  let ascii = true;
  for (let i = start; i < end; i += 1) {
    const byte = raw[i]!;
    if (byte === SLASH) fail('entry name contains "/"');
    if (byte >= 0x80) ascii = false;
  }
  const length = end - start;
  if (ascii && length > 2 && length !== 4) return;
  const nameBytes = raw.subarray(start, end);
  if (!ascii && !isUtf8(nameBytes)) fail('entry name is not UTF-8');
  checkName(nameBytes.toString('utf8'));
}

/**
 * A ledger tree, checked once and kept raw: allowed modes only, valid names, git order, no
 * duplicates. Entries are read by index; names and ids become strings only when asked for, so a
 * diff of two versions of a large folder allocates for the entries that differ, not for all of them.
 */
export class RawTree {
  private list: TreeEntry[] | null = null;

  private constructor(
    private readonly raw: Buffer,
    /**
     * Per entry: the NUL after its name (its 20-byte id follows). Its name starts after the end
     * of the entry before it and its mode: `40000 ` for a directory, `100644 ` for a file.
     */
    private readonly nameEnds: readonly number[],
    private readonly dirs: readonly boolean[],
  ) {}

  static readonly EMPTY = new RawTree(Buffer.alloc(0), [], []);

  /**
   * Checks and indexes `raw`. With `base` (an earlier version of the same folder), the entries `raw`
   * shares byte for byte with the start of `base` were checked when `base` was and are taken from it
   * as they are: a folder that gains one entry per commit is not checked again in full each time.
   */
  static parse(raw: Buffer, base?: RawTree): RawTree {
    if (raw.length > LIMITS.treeBytes) fail('object too large');
    const shared = base === undefined ? 0 : base.sharedWith(raw);
    const nameEnds: number[] = shared === 0 ? [] : base!.nameEnds.slice(0, shared);
    const dirs: boolean[] = shared === 0 ? [] : base!.dirs.slice(0, shared);
    let offset = shared === 0 ? 0 : base!.end(shared - 1);
    let previousStart = shared === 0 ? -1 : base!.nameStart(shared - 1);
    while (offset < raw.length) {
      const space = raw.indexOf(0x20, offset);
      const nul = space < 0 ? -1 : raw.indexOf(0x00, space + 1);
      if (space < 0 || nul < 0 || nul + 21 > raw.length) fail('truncated entry');
      const dir = isMode(raw, offset, space, DIR_MODE);
      if (!dir && !isMode(raw, offset, space, FILE_MODE)) {
        fail(`mode ${raw.toString('latin1', offset, space)} is not allowed (only directories and regular files)`);
      }
      checkNameBytes(raw, space + 1, nul);
      const count = nameEnds.length;
      if (count > 0 && compareRawRange(raw, previousStart, nameEnds[count - 1]!, dirs[count - 1]!, raw, space + 1, nul, dir, true) >= 0) {
        fail('entries out of order or duplicated');
      }
      previousStart = space + 1;
      nameEnds.push(nul);
      dirs.push(dir);
      offset = nul + 21;
    }
    return new RawTree(raw, nameEnds, dirs);
  }

  get count(): number {
    return this.nameEnds.length;
  }

  /** Where entry `i`'s name starts: after the entry before it and this one's mode and space. */
  private nameStart(i: number): number {
    return (i === 0 ? 0 : this.end(i - 1)) + (this.dirs[i] ? 6 : 7);
  }

  /** Where entry `i` ends: after its name's NUL and its 20-byte id. */
  private end(i: number): number {
    return this.nameEnds[i]! + 21;
  }

  /**
   * How many entries at the start of this tree `raw` repeats byte for byte. Found by halving: when
   * the bytes of the first k entries are equal, so are those of the first k - 1.
   */
  private sharedWith(raw: Buffer): number {
    let low = 0;
    let high = this.count;
    while (low < high) {
      const k = (low + high + 1) >> 1;
      const end = this.end(k - 1);
      if (end <= raw.length && raw.compare(this.raw, 0, end, 0, end) === 0) low = k;
      else high = k - 1;
    }
    return low;
  }

  /** How many entries at the start of this tree and of `other` are the same (names, kinds and ids). */
  sharedPrefix(other: RawTree): number {
    return this.sharedWith(other.raw);
  }

  isDir(i: number): boolean {
    return this.dirs[i]!;
  }

  name(i: number): string {
    return this.raw.toString('utf8', this.nameStart(i), this.nameEnds[i]);
  }

  oid(i: number): string {
    const at = this.nameEnds[i]! + 1;
    return this.raw.toString('hex', at, at + 20);
  }

  entry(i: number): TreeEntry {
    return { name: this.name(i), mode: this.dirs[i] ? '40000' : '100644', oid: this.oid(i) };
  }

  /** git's order of entry `i` here against entry `j` of `other`: negative, zero (same name and kind) or positive. */
  compare(i: number, other: RawTree, j: number): number {
    return compareRawRange(this.raw, this.nameStart(i), this.nameEnds[i]!, this.dirs[i]!, other.raw, other.nameStart(j), other.nameEnds[j]!, other.dirs[j]!, false);
  }

  /** Whether entry `i` here and entry `j` of `other` name the same object (same id; compare first for name and kind). */
  sameObject(i: number, other: RawTree, j: number): boolean {
    const at = this.nameEnds[i]! + 1;
    const otherAt = other.nameEnds[j]! + 1;
    return this.raw.compare(other.raw, otherAt, otherAt + 20, at, at + 20) === 0;
  }

  /** Every entry as an object (made once, on the first call). */
  entries(): TreeEntry[] {
    if (this.list === null) {
      const list: TreeEntry[] = [];
      for (let i = 0; i < this.count; i += 1) list.push(this.entry(i));
      this.list = list;
    }
    return this.list;
  }
}

/**
 * git's order of two raw names, a directory's name read as if it ended in "/". With `strict`, equal
 * names compare as equal even when one is a directory and the other a file: a tree may not hold both.
 */
function compareRawRange(a: Buffer, aStart: number, aEnd: number, aDir: boolean, b: Buffer, bStart: number, bEnd: number, bDir: boolean, strict: boolean): number {
  const aLength = aEnd - aStart;
  const bLength = bEnd - bStart;
  const length = Math.min(aLength, bLength);
  for (let i = 0; i < length; i += 1) {
    const difference = a[aStart + i]! - b[bStart + i]!;
    if (difference !== 0) return difference;
  }
  if (strict && aLength === bLength) return 0;
  const nextA = aLength > length ? a[aStart + length]! : aDir ? SLASH : -1;
  const nextB = bLength > length ? b[bStart + length]! : bDir ? SLASH : -1;
  return nextA - nextB;
}

/** Parses a tree strictly: allowed modes only, valid names, git order, no duplicates. */
export function parseTree(raw: Buffer): TreeEntry[] {
  return RawTree.parse(raw).entries();
}

export function renderTree(entries: readonly TreeEntry[]): Buffer {
  const sorted = [...entries].sort(compareEntries);
  const parts: Buffer[] = [];
  for (const entry of sorted) {
    checkName(entry.name);
    parts.push(Buffer.from(`${entry.mode} ${entry.name}\0`, 'utf8'), Buffer.from(entry.oid, 'hex'));
  }
  return Buffer.concat(parts);
}
