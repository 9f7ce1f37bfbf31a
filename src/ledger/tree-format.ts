import { CooError } from '../errors.js';
import { LIMITS } from '../limits.js';

/** Raw git tree objects. A ledger tree holds only directories (40000) and regular files (100644). */

export interface TreeEntry {
  readonly name: string;
  readonly mode: '40000' | '100644';
  readonly oid: string;
}

/** An entry of any git tree (a target repository's): executables, symlinks and submodules included. */
export interface AnyTreeEntry {
  readonly name: string;
  readonly mode: string;
  readonly oid: string;
}

/** Reads any well-formed tree, without the ledger's restrictions on modes and names. */
export function parseAnyTree(raw: Buffer): AnyTreeEntry[] {
  const entries: AnyTreeEntry[] = [];
  let offset = 0;
  while (offset < raw.length) {
    const space = raw.indexOf(0x20, offset);
    const nul = raw.indexOf(0x00, space + 1);
    if (space < 0 || nul < 0 || nul + 21 > raw.length) fail('truncated entry');
    entries.push({ mode: raw.toString('latin1', offset, space), name: raw.subarray(space + 1, nul).toString('utf8'), oid: raw.toString('hex', nul + 1, nul + 21) });
    offset = nul + 21;
  }
  return entries;
}

function fail(reason: string): never {
  throw new CooError('TREE_MALFORMED', `tree: ${reason}`);
}

const SLASH = 0x2f;

/** Compares raw names in git's order without allocating: byte order, a directory's name read as if it ended in "/". */
function compareRaw(a: Buffer, aDir: boolean, b: Buffer, bDir: boolean): number {
  const length = Math.min(a.length, b.length);
  for (let i = 0; i < length; i += 1) {
    if (a[i] !== b[i]) return a[i]! - b[i]!;
  }
  const nextA = a.length > length ? a[length]! : aDir ? SLASH : -1;
  const nextB = b.length > length ? b[length]! : bDir ? SLASH : -1;
  return nextA - nextB;
}

/** git's order: byte order of names, with directory names compared as if they ended in "/". */
export function compareEntries(a: TreeEntry, b: TreeEntry): number {
  return compareRaw(Buffer.from(a.name, 'utf8'), a.mode === '40000', Buffer.from(b.name, 'utf8'), b.mode === '40000');
}

function checkName(name: string): void {
  if (name === '' || name === '.' || name === '..' || name.toLowerCase() === '.git' || name.includes('/') || name.includes('\0')) {
    fail(`entry name ${JSON.stringify(name)} is not allowed`);
  }
}

/** Parses a tree strictly: allowed modes only, valid names, git order, no duplicates. */
export function parseTree(raw: Buffer): TreeEntry[] {
  if (raw.length > LIMITS.treeBytes) fail('object too large');
  const entries: TreeEntry[] = [];
  let previous: { bytes: Buffer; dir: boolean } | null = null;
  let offset = 0;
  while (offset < raw.length) {
    const space = raw.indexOf(0x20, offset);
    const nul = raw.indexOf(0x00, space + 1);
    if (space < 0 || nul < 0 || nul + 21 > raw.length) fail('truncated entry');
    const mode = raw.toString('latin1', offset, space);
    if (mode !== '40000' && mode !== '100644') fail(`mode ${mode} is not allowed (only directories and regular files)`);
    const nameBytes = raw.subarray(space + 1, nul);
    const name = nameBytes.toString('utf8');
    if (name.includes('\uFFFD') && !Buffer.from(name, 'utf8').equals(nameBytes)) fail('entry name is not UTF-8');
    checkName(name);
    if (previous !== null && (compareRaw(previous.bytes, previous.dir, nameBytes, mode === '40000') >= 0 || previous.bytes.equals(nameBytes))) {
      fail('entries out of order or duplicated');
    }
    previous = { bytes: nameBytes, dir: mode === '40000' };
    entries.push({ name, mode, oid: raw.toString('hex', nul + 1, nul + 21) });
    offset = nul + 21;
  }
  return entries;
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
