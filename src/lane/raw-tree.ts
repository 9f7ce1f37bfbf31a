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

/** Code points HFS+ ignores in a name, so that `.g\u200cit` is `.git` there (git's next_hfs_char). */
const HFS_IGNORED = new Set([0x200c, 0x200d, 0x200e, 0x200f, 0x202a, 0x202b, 0x202c, 0x202d, 0x202e, 0x206a, 0x206b, 0x206c, 0x206d, 0x206e, 0x206f, 0xfeff]);

const CONTINUATION = (byte: number | undefined): boolean => byte !== undefined && (byte & 0xc0) === 0x80;

/**
 * The code point at `at` and where the next one starts, as git reads UTF-8 (pick_one_utf8_char); null at
 * the name's end and where git reads no code point: a byte of no sequence, an overlong form, a surrogate,
 * U+FFFE or U+FFFF, one past U+10FFFF.
 */
function codePointAt(name: Buffer, at: number): { point: number; next: number } | null {
  const a = name[at];
  if (a === undefined || a === 0) return null;
  if (a < 0x80) return { point: a, next: at + 1 };
  const b = name[at + 1];
  if ((a & 0xe0) === 0xc0) return CONTINUATION(b) && (a & 0xfe) !== 0xc0 ? { point: ((a & 0x1f) << 6) | (b! & 0x3f), next: at + 2 } : null;
  const c = name[at + 2];
  if ((a & 0xf0) === 0xe0) {
    if (!CONTINUATION(b) || !CONTINUATION(c) || (a === 0xe0 && (b! & 0xe0) === 0x80) || (a === 0xed && (b! & 0xe0) === 0xa0) || (a === 0xef && b === 0xbf && (c! & 0xfe) === 0xbe)) return null;
    return { point: ((a & 0x0f) << 12) | ((b! & 0x3f) << 6) | (c! & 0x3f), next: at + 3 };
  }
  const d = name[at + 3];
  if ((a & 0xf8) === 0xf0) {
    if (!CONTINUATION(b) || !CONTINUATION(c) || !CONTINUATION(d) || (a === 0xf0 && (b! & 0xf0) === 0x80) || (a === 0xf4 && b! > 0x8f) || a > 0xf4) return null;
    return { point: ((a & 0x07) << 18) | ((b! & 0x3f) << 12) | ((c! & 0x3f) << 6) | (d! & 0x3f), next: at + 4 };
  }
  return null;
}

/**
 * git's is_hfs_dotgit, step for step: `.git` in any case with the code points HFS+ ignores anywhere in
 * it, then the name's end, or bytes git reads as no code point: git ends the name there (`.git\xff` is
 * hasDotgit to fsck, and a clone that checks what it fetches refuses it).
 */
function isHfsDotGit(name: Buffer): boolean {
  let at = 0;
  const next = (): number => {
    for (;;) {
      const one = codePointAt(name, at);
      if (one === null) return 0;
      at = one.next;
      if (!HFS_IGNORED.has(one.point)) return one.point;
    }
  };
  for (const wanted of '.git') {
    const point = next();
    if (point > 0x7f || String.fromCharCode(point).toLowerCase() !== wanted) return false;
  }
  const after = next();
  return after === 0 || after === SLASH;
}

/**
 * Whether a name is the repository's own `.git` on some system, as git's fsck (hasDotgit) and its
 * checkout (core.protectNTFS, core.protectHFS) judge it: `.git` in any case; on NTFS also followed by
 * spaces and dots, then a `:` stream or a `\\` (a folder there), and its short name `git~1`; on HFS+ with the code points HFS+
 * ignores anywhere in it (isHfsDotGit). Such a name is refused wherever the runner reads or writes a tree: git would
 * not check it out, and where it would, what is under it lands in the checkout's `.git`.
 */
export function isDotGitName(name: Buffer): boolean {
  if (/^(?:\.git|git~1)[ .]*(?:[:\\].*)?$/is.test(name.toString('latin1'))) return true;
  // HFS+: a name of ASCII alone is a case covered above.
  return name.some((byte) => byte >= 0x80) && isHfsDotGit(name);
}

/**
 * A name as a checkout on a system that does not tell some names apart writes it: macOS (case, Unicode
 * normalisation, the code points HFS+ ignores) and Windows (case, trailing dots and spaces). Two names of
 * one fold are one file there: whichever git writes last is what such a checkout holds at both. Case is
 * Unicode's full case folding, as APFS folds it (`ß` as `ss`, `ς` and `ſ` and `µ` as `σ`, `s`, `μ`),
 * code point by code point (`toLowerCase` of a whole name lowercases a final `Σ` as `ς`); a dotless `ı`
 * stays apart from `i`, as only Turkic folding, which none of these systems uses, joins them.
 */
export function checkoutFold(name: string): string {
  return [...name.normalize('NFC')]
    .filter((char) => !HFS_IGNORED.has(char.codePointAt(0)!))
    .map((char) => (char === '\u0131' ? char : char.toLowerCase().toUpperCase().toLowerCase()))
    .join('')
    .normalize('NFC')
    .replace(/[. ]+$/, '');
}

/** A name git refuses in a tree (`git fsck`: hasDot, hasDotdot, hasDotgit), and no checkout writes: `.`, `..`, `.git` (isDotGitName). */
export function refusedName(name: Buffer): boolean {
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
