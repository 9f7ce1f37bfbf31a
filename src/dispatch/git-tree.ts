import { createHash } from 'node:crypto';
import { compareTreeNames } from '../lane/raw-tree.js';

/**
 * Git trees of a target repository built from a flat list of paths, byte for byte: names are
 * bytes (a repository may hold names that are not UTF-8), entries are in git's order, and every
 * object id is computed here. Pure: the shell writes the objects it returns.
 */

/** A path in a tree and what it holds: `100644`, `100755`, `120000` (a link's target) or `160000` (a submodule's commit). */
export interface TreeFile {
  /** Slash-separated, relative, as bytes. */
  readonly path: Buffer;
  readonly mode: string;
  readonly oid: string;
}

export interface BuiltTree {
  readonly oid: string;
  /** Every tree object, children before their parents. */
  readonly objects: ReadonlyArray<{ readonly oid: string; readonly content: Buffer }>;
}

/** A git object id (SHA-1 over the header and the content), as git computes it. */
export function gitObjectId(type: 'blob' | 'tree' | 'commit', content: Buffer): string {
  return createHash('sha1').update(`${type} ${content.length}\0`).update(content).digest('hex');
}

interface Folder {
  readonly files: Map<string, { name: Buffer; mode: string; oid: string }>;
  readonly folders: Map<string, { name: Buffer; folder: Folder }>;
}

const SLASH = 0x2f;

function newFolder(): Folder {
  return { files: new Map(), folders: new Map() };
}

function splitPath(path: Buffer): Buffer[] {
  const parts: Buffer[] = [];
  let start = 0;
  for (let i = 0; i <= path.length; i += 1) {
    if (i === path.length || path[i] === SLASH) {
      parts.push(path.subarray(start, i));
      start = i + 1;
    }
  }
  return parts;
}

/** Builds the trees of `files` (no two on one path; a path is never both a file and a folder). */
export function buildTree(files: readonly TreeFile[]): BuiltTree {
  const root = newFolder();
  for (const file of files) {
    const parts = splitPath(file.path);
    let folder = root;
    for (const part of parts.slice(0, -1)) {
      const key = part.toString('latin1');
      let next = folder.folders.get(key);
      if (next === undefined) {
        next = { name: part, folder: newFolder() };
        folder.folders.set(key, next);
      }
      folder = next.folder;
    }
    const name = parts[parts.length - 1]!;
    folder.files.set(name.toString('latin1'), { name, mode: file.mode, oid: file.oid });
  }
  const objects: Array<{ oid: string; content: Buffer }> = [];
  const render = (folder: Folder): string => {
    const entries = [
      ...[...folder.files.values()].map((file) => ({ name: file.name, dir: false, mode: file.mode, oid: file.oid })),
      ...[...folder.folders.values()].map((sub) => ({ name: sub.name, dir: true, mode: '40000', oid: render(sub.folder) })),
    ].sort(compareTreeNames);
    const content = Buffer.concat(entries.flatMap((entry) => [Buffer.from(`${entry.mode} `, 'latin1'), entry.name, Buffer.from([0]), Buffer.from(entry.oid, 'hex')]));
    const oid = gitObjectId('tree', content);
    objects.push({ oid, content });
    return oid;
  };
  const oid = render(root);
  return { oid, objects };
}

export { parseRawTree, type RawTreeEntry } from '../lane/raw-tree.js';
