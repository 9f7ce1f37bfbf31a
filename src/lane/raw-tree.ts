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

/** Code points HFS+ ignores in a name, so that `.g\u200cit` is `.git` there (git's is_hfs_dotgit). */
const HFS_IGNORED = /[\u200c-\u200f\u202a-\u202e\u206a-\u206f\ufeff]/gu;

/**
 * Whether a name is the repository's own `.git` on some system, as git's fsck (hasDotgit) and its
 * checkout (core.protectNTFS, core.protectHFS) judge it: `.git` in any case; on NTFS also followed by
 * spaces and dots, then a `:` stream or a `\\` (a folder there), and its short name `git~1`; on HFS+ with the code points HFS+
 * ignores anywhere in it. Such a name is refused wherever the runner reads or writes a tree: git would
 * not check it out, and where it would, what is under it lands in the checkout's `.git`.
 */
export function isDotGitName(name: Buffer): boolean {
  if (/^(?:\.git|git~1)[ .]*(?:[:\\].*)?$/is.test(name.toString('latin1'))) return true;
  // HFS+: only a name of valid UTF-8 that holds one of the ignored code points is a case not covered above.
  if (!name.some((byte) => byte >= 0x80)) return false;
  const text = name.toString('utf8');
  return !text.includes('\ufffd') && text.replace(HFS_IGNORED, '').toLowerCase() === '.git';
}

/** A name git refuses in a tree (`git fsck`: hasDot, hasDotdot, hasDotgit), and no checkout writes: `.`, `..`, `.git` (isDotGitName). */
function refusedName(name: Buffer): boolean {
  if (name.length === 1) return name[0] === 0x2e;
  if (name.length === 2) return name[0] === 0x2e && name[1] === 0x2e;
  return isDotGitName(name);
}

/** git's order of tree entries (base_name_compare): names compared as bytes, a folder's name as if it ended in "/". */
export function compareTreeNames(a: { readonly name: Buffer; readonly dir: boolean }, b: { readonly name: Buffer; readonly dir: boolean }): number {
  const length = Math.min(a.name.length, b.name.length);
  const common = a.name.compare(b.name, 0, length, 0, length);
  if (common !== 0) return common;
  const nextA = a.name.length > length ? a.name[length]! : a.dir ? SLASH : -1;
  const nextB = b.name.length > length ? b.name[length]! : b.dir ? SLASH : -1;
  return nextA - nextB;
}

/**
 * Parses a raw tree object: `MODE SP NAME NUL` and 20 bytes of object id per entry. A tree git
 * would not write is refused, not read another way than git reads it: entries out of git's order
 * (git's own lookup of a path stops early in them, so `git show COMMIT:PATH` would not find a file
 * listed here), a name twice (a file and a folder of one name among them), or a `.`, `..` or
 * `.git` name.
 */
export function parseRawTree(raw: Buffer): RawTreeEntry[] {
  const entries: RawTreeEntry[] = [];
  const names = new Set<string>();
  let offset = 0;
  while (offset < raw.length) {
    const space = raw.indexOf(0x20, offset);
    const nul = space < 0 ? -1 : raw.indexOf(0x00, space + 1);
    if (space < 0 || nul < 0 || nul + 21 > raw.length) throw new Error('a truncated tree entry');
    const mode = canonicalMode(raw.toString('latin1', offset, space));
    const name = raw.subarray(space + 1, nul);
    if (mode === null || name.length === 0 || name.includes(SLASH)) throw new Error(`a tree entry of mode ${JSON.stringify(raw.toString('latin1', offset, space))} named ${JSON.stringify(name.toString('utf8'))}`);
    if (refusedName(name)) throw new Error(`a tree entry named ${JSON.stringify(name.toString('utf8'))}, which git refuses in a tree`);
    const entry = { mode, name: Buffer.from(name), oid: raw.toString('hex', nul + 1, nul + 21) };
    const key = name.toString('latin1');
    if (names.has(key)) throw new Error(`two tree entries named ${JSON.stringify(name.toString('utf8'))}`);
    names.add(key);
    const previous = entries[entries.length - 1];
    if (previous !== undefined && compareTreeNames({ name: previous.name, dir: previous.mode === '40000' }, { name, dir: mode === '40000' }) >= 0) throw new Error(`tree entries out of git's order (${JSON.stringify(previous.name.toString('utf8'))} before ${JSON.stringify(name.toString('utf8'))})`);
    entries.push(entry);
    offset = nul + 21;
  }
  return entries;
}
