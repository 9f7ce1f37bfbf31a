import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import { LIMITS } from '../limits.js';
import { fileType, readBounded } from '../util/bounded-read.js';
import { isDotGitName } from '../lane/raw-tree.js';
import { gitObjectId } from './git-tree.js';
import type { IgnoreRules } from './ignore-rules.js';

/**
 * The runner's own reading of a folder an agent (or code the agent wrote) has had its hands on.
 * Everything there is hostile input: each entry is looked at with lstat and never followed; a
 * FIFO, socket or device is refused without being opened; a regular file is opened without
 * following and without blocking, checked on its descriptor, and read whole up to a bound; a
 * link's target is read, never what it points at. Folders the base commit's rules ignore are not
 * entered. The bytes read are the bytes hashed: git's filters, attributes and configuration play
 * no part.
 */

export type FileMode = '100644' | '100755' | '120000';

export interface WalkedFile {
  readonly path: Buffer;
  readonly mode: FileMode;
  /** The git blob id of the bytes read. */
  readonly oid: string;
  readonly sha256: string;
}

/** Why an entry is not taken as work: what it is, never opened. */
export type RefusedWhy = 'fifo' | 'socket' | 'device' | 'unknown' | 'unreadable' | 'git_entry' | 'submodule_written';

export interface WalkResult {
  /** Every regular file and link the rules do not ignore, in no particular order. */
  readonly files: readonly WalkedFile[];
  readonly refused: ReadonlyArray<{ readonly path: Buffer; readonly why: RefusedWhy }>;
  readonly tooLarge: ReadonlyArray<{ readonly path: Buffer; readonly size: number }>;
  /** Submodule paths of the base found as empty folders: kept as they were. */
  readonly submodules: ReadonlySet<string>;
  /** The walk stopped at the entry or byte bound: what it lists is not the whole. */
  readonly overflow: boolean;
}

/** What the base commit tracks: a tracked path is never ignored, nor a folder that holds one. */
export interface Tracked {
  /** Keys are paths as latin1 strings (byte for byte). */
  readonly oids: ReadonlyMap<string, { readonly mode: string; readonly oid: string }>;
  readonly folders: ReadonlySet<string>;
}

export interface WalkOptions {
  readonly root: string;
  readonly rules: IgnoreRules;
  readonly tracked: Tracked;
  /** Called with every file whose bytes the base does not hold at that path (to write its blob). */
  readonly onNewBlob?: (oid: string, bytes: Buffer) => Promise<void>;
  readonly maxEntries?: number;
  readonly maxFileBytes?: number;
  readonly maxBytes?: number;
}

export const keyOf = (path: Buffer): string => path.toString('latin1');

/** A walked path as the receipt and the blockers name it: the root itself (the empty path) as `.`. */
export const shownPath = (path: Buffer): string => (path.length === 0 ? '.' : path.toString('utf8'));

/** Whether `path` is a folder itself, not a link to one (nor anything else, nor gone): a worktree the agent may have replaced is looked at so before it is read. */
export function isOwnFolder(path: Buffer | string): boolean {
  try {
    return fs.lstatSync(path).isDirectory();
  } catch {
    return false;
  }
}

const SLASH = Buffer.from('/');

function join(folder: Buffer, name: Buffer): Buffer {
  return folder.length === 0 ? name : Buffer.concat([folder, SLASH, name]);
}

function refusedType(stats: fs.Stats): RefusedWhy {
  const type = fileType(stats);
  return type === 'fifo' || type === 'socket' || type === 'device' ? type : 'unknown';
}

/** Walks `root` level by level (one ignore question per level), never entering the root's `.git` link. */
export async function walkWork(options: WalkOptions): Promise<WalkResult> {
  const maxEntries = options.maxEntries ?? LIMITS.workEntries;
  const maxFileBytes = options.maxFileBytes ?? LIMITS.workFileBytes;
  const maxBytes = options.maxBytes ?? LIMITS.workBytes;
  const root = Buffer.from(options.root);
  const absolute = (path: Buffer): Buffer => (path.length === 0 ? root : Buffer.concat([root, SLASH, path]));
  const files: WalkedFile[] = [];
  const refused: Array<{ path: Buffer; why: RefusedWhy }> = [];
  const tooLarge: Array<{ path: Buffer; size: number }> = [];
  const submodules = new Set<string>();
  let entries = 0;
  let bytes = 0;
  let level: Buffer[] = [Buffer.alloc(0)];
  while (level.length > 0) {
    const found: Array<{ path: Buffer; stats: fs.Stats }> = [];
    for (const folder of level) {
      // Read one entry at a time, so a folder of millions of names stops at the bound, not in memory.
      let dir: fs.Dir;
      // The root too is looked at before it is opened: a worktree the agent replaced by a link had the walk
      // read whatever folder the link names as the work, and one replaced by a file is no folder of work.
      if (folder.length === 0 && !isOwnFolder(root)) {
        refused.push({ path: folder, why: 'unreadable' });
        continue;
      }
      try {
        dir = fs.opendirSync(absolute(folder), { encoding: 'buffer' as BufferEncoding });
      } catch {
        refused.push({ path: folder, why: 'unreadable' });
        continue;
      }
      const names = (function* (): Generator<Buffer> {
        try {
          for (let entry = dir.readSync(); entry !== null; entry = dir.readSync()) yield entry.name as unknown as Buffer;
        } finally {
          dir.closeSync();
        }
      })();
      for (const name of names) {
        const path = join(folder, name);
        if (folder.length === 0 && name.equals(Buffer.from('.git'))) continue;
        entries += 1;
        // Leaving the loop closes the folder (the generator's finally).
        if (entries > maxEntries) return { files, refused, tooLarge, submodules, overflow: true };
        if (isDotGitName(name)) {
          refused.push({ path, why: 'git_entry' });
          continue;
        }
        let stats: fs.Stats;
        try {
          stats = fs.lstatSync(absolute(path));
        } catch {
          refused.push({ path, why: 'unreadable' });
          continue;
        }
        found.push({ path, stats });
      }
    }
    // Only what the base does not track can be ignored: ask about those, all at once.
    const ask = found.filter((entry) => !options.tracked.oids.has(keyOf(entry.path)) && !options.tracked.folders.has(keyOf(entry.path)));
    const verdicts = await options.rules.ignored(ask.map((entry) => ({ path: entry.path, dir: entry.stats.isDirectory() })));
    const ignored = new Set(ask.filter((_, index) => verdicts[index] === true).map((entry) => keyOf(entry.path)));
    const next: Buffer[] = [];
    for (const { path, stats } of found) {
      const key = keyOf(path);
      if (ignored.has(key)) continue;
      if (stats.isDirectory()) {
        if (options.tracked.oids.get(key)?.mode === '160000') {
          // A submodule's folder: kept empty as checked out; anything in it is not this repository's work.
          let inside: Buffer[];
          try {
            inside = fs.readdirSync(absolute(path), { encoding: 'buffer' });
          } catch {
            refused.push({ path, why: 'unreadable' });
            continue;
          }
          if (inside.length === 0) submodules.add(key);
          else refused.push({ path, why: 'submodule_written' });
          continue;
        }
        next.push(path);
        continue;
      }
      if (stats.isSymbolicLink()) {
        let target: Buffer;
        try {
          target = fs.readlinkSync(absolute(path), { encoding: 'buffer' });
        } catch {
          refused.push({ path, why: 'unreadable' });
          continue;
        }
        await take(path, '120000', target);
        continue;
      }
      if (!stats.isFile()) {
        refused.push({ path, why: refusedType(stats) });
        continue;
      }
      const read = readBounded(absolute(path), { maxBytes: Math.min(maxFileBytes, maxBytes - bytes) });
      if (read.kind === 'too_large') {
        // Over the file bound it is one file too large; under it, the walk's byte bound ran out.
        if (read.size <= maxFileBytes) return { files, refused, tooLarge, submodules, overflow: true };
        tooLarge.push({ path, size: read.size });
        continue;
      }
      if (read.kind === 'unreadable') {
        refused.push({ path, why: 'unreadable' });
        continue;
      }
      if (read.kind === 'not_regular') {
        // Replaced between the look and the open: refused as what it is now.
        refused.push({ path, why: read.type === 'fifo' || read.type === 'socket' || read.type === 'device' ? read.type : 'unknown' });
        continue;
      }
      bytes += read.bytes.length;
      // git records one bit of the mode: executable by its owner or not.
      await take(path, (read.mode & 0o100) !== 0 ? '100755' : '100644', read.bytes);
    }
    level = next;
  }
  return { files, refused, tooLarge, submodules, overflow: false };

  async function take(path: Buffer, mode: FileMode, content: Buffer): Promise<void> {
    const oid = gitObjectId('blob', content);
    files.push({ path, mode, oid, sha256: `sha256:${createHash('sha256').update(content).digest('hex')}` });
    if (options.onNewBlob !== undefined && options.tracked.oids.get(keyOf(path))?.oid !== oid) await options.onNewBlob(oid, content);
  }
}
