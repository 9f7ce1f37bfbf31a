/** A raw git tree object parsed byte for byte: names as bytes, modes as git itself reads them. Pure. */

const SLASH = 0x2f;

/** One entry of a raw tree object: its mode as git's ls-tree prints it (a regular file's as 100644 or 100755), its name as bytes. */
export interface RawTreeEntry {
  readonly mode: string;
  readonly name: Buffer;
  readonly oid: string;
}

/** git's canonical mode of a raw tree entry's (a file's group and other bits dropped, as git itself reads it). */
function canonicalMode(raw: string): string | null {
  if (!/^[0-7]{5,6}$/.test(raw)) return null;
  const mode = Number.parseInt(raw, 8);
  switch (mode & 0o170000) {
    case 0o040000:
      return '40000';
    case 0o100000:
      return (mode & 0o100) !== 0 ? '100755' : '100644';
    case 0o120000:
      return '120000';
    case 0o160000:
      return '160000';
    default:
      return null;
  }
}

/** Parses a raw tree object: `MODE SP NAME NUL` and 20 bytes of object id per entry. */
export function parseRawTree(raw: Buffer): RawTreeEntry[] {
  const entries: RawTreeEntry[] = [];
  let offset = 0;
  while (offset < raw.length) {
    const space = raw.indexOf(0x20, offset);
    const nul = space < 0 ? -1 : raw.indexOf(0x00, space + 1);
    if (space < 0 || nul < 0 || nul + 21 > raw.length) throw new Error('a truncated tree entry');
    const mode = canonicalMode(raw.toString('latin1', offset, space));
    const name = raw.subarray(space + 1, nul);
    if (mode === null || name.length === 0 || name.includes(SLASH)) throw new Error(`a tree entry of mode ${JSON.stringify(raw.toString('latin1', offset, space))} named ${JSON.stringify(name.toString('utf8'))}`);
    entries.push({ mode, name: Buffer.from(name), oid: raw.toString('hex', nul + 1, nul + 21) });
    offset = nul + 21;
  }
  return entries;
}
