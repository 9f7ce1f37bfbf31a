import * as fs from 'node:fs';
import { CooError } from '../errors.js';
import type { ObjectReader } from '../ledger/object-store.js';
import { refusedName } from '../lane/raw-tree.js';
import type { TreeFile } from './git-tree.js';

/**
 * Writes a commit's files into a folder from git's objects, byte for byte: no smudge or clean
 * filter, no line-ending conversion, no `ident`, whatever `.gitattributes` or configuration say.
 * What is written is what the commit holds, so the agent starts from the base's bytes and the
 * verification runs on the signed commit's bytes. Links are made as links and submodules as empty
 * folders, as git checks them out.
 */

const SLASH = 0x2f;
const BATCH = 512;

/** Reads the blobs of `oids` in order (one `git cat-file` for them all). */
export async function readBlobs(reader: ObjectReader, oids: readonly string[]): Promise<Buffer[]> {
  return Promise.all(
    oids.map(async (oid) => {
      const object = await reader.read(oid);
      if (object === null || object.type !== 'blob') throw new CooError('GIT_FAILED', `blob ${oid} is missing from the repository`);
      return object.content;
    }),
  );
}

function unsafeComponent(part: Buffer): boolean {
  return part.length === 0 || refusedName(part);
}

/**
 * Writes `files` (a commit's `ls-tree -r`) under `dest`, an existing empty folder. A path with an
 * empty, `.`, `..` or `.git` component, or one that would pass through a link or a file written
 * before, is refused: folders are made one level at a time and only where none was.
 */
export async function materialize(reader: ObjectReader, files: readonly TreeFile[], dest: string): Promise<void> {
  const root = Buffer.from(dest);
  const made = new Set<string>(['']);
  const folderFor = (parts: readonly Buffer[]): void => {
    let prefix: Buffer = Buffer.alloc(0);
    for (const part of parts) {
      prefix = prefix.length === 0 ? part : Buffer.concat([prefix, Buffer.from([SLASH]), part]);
      const key = prefix.toString('latin1');
      if (made.has(key)) continue;
      try {
        fs.mkdirSync(Buffer.concat([root, Buffer.from([SLASH]), prefix]));
      } catch (error) {
        throw new CooError('GIT_FAILED', `the tree names ${JSON.stringify(prefix.toString('utf8'))} twice: ${(error as NodeJS.ErrnoException).code ?? 'EEXIST'}`);
      }
      made.add(key);
    }
  };
  // A few hundred blobs at a time: one round trip to git each, and memory bounded by the batch.
  for (let first = 0; first < files.length; first += BATCH) {
    const batch = files.slice(first, first + BATCH);
    const blobs = batch.filter((file) => file.mode !== '160000');
    const contents = await readBlobs(reader, blobs.map((file) => file.oid));
    const byPath = new Map(blobs.map((file, index) => [file.path.toString('latin1'), contents[index]!]));
    for (const file of batch) write(file, byPath.get(file.path.toString('latin1')));
  }

  function write(file: TreeFile, content: Buffer | undefined): void {
    const parts: Buffer[] = [];
    let start = 0;
    for (let i = 0; i <= file.path.length; i += 1) {
      if (i === file.path.length || file.path[i] === SLASH) {
        parts.push(file.path.subarray(start, i));
        start = i + 1;
      }
    }
    if (parts.some(unsafeComponent)) throw new CooError('GIT_FAILED', `the tree holds a path git would not check out: ${JSON.stringify(file.path.toString('utf8'))}`);
    folderFor(parts.slice(0, -1));
    const path = Buffer.concat([root, Buffer.from([SLASH]), file.path]);
    if (file.mode === '160000' || content === undefined) {
      folderFor(parts);
      return;
    }
    if (file.mode === '120000') {
      fs.symlinkSync(content, path);
      return;
    }
    // wx: never through something already there.
    fs.writeFileSync(path, content, { flag: 'wx', mode: file.mode === '100755' ? 0o755 : 0o644 });
  }
}
