import { CooError } from '../errors.js';
import { CatFileReader } from '../ledger/object-store.js';
import { LIMITS } from '../limits.js';
import { parseRawTree } from './raw-tree.js';

/** A path in a commit and what it holds: `100644`, `100755`, `120000` (a link's target) or `160000` (a submodule's commit). */
export interface CommitFile {
  /** Slash-separated, relative, as bytes. */
  readonly path: Buffer;
  readonly mode: string;
  readonly oid: string;
}

/**
 * Every file of a commit (a full id), paths as bytes, from the target's objects, read through the
 * object reader, which takes an object's bytes only when they hash to its id: a tree an agent put at
 * the id of one the runner builds, or any object not what its id names, fails the read (GIT_FAILED)
 * where `git ls-tree` would list what it holds.
 */
export async function listTree(gitdir: string, commit: string): Promise<CommitFile[]> {
  const reader = new CatFileReader(gitdir);
  const read = async (oid: string, type: 'commit' | 'tree'): Promise<Buffer> => {
    const object = await reader.read(oid, type === 'tree' ? LIMITS.treeBytes : LIMITS.commitBytes);
    if (object === null || object.type !== type) throw new CooError('GIT_FAILED', `${oid} is not a ${type} in ${gitdir}`);
    if (object.content === null) throw new CooError('POLICY_LIMIT', `the ${type} ${oid} in ${gitdir} is ${object.size} bytes, over the ${type === 'tree' ? LIMITS.treeBytes : LIMITS.commitBytes}-byte bound coo reads`);
    return object.content;
  };
  // Trees may name one subtree many times: a few kilobytes of objects can list millions of paths, so the listing is bounded as the work an agent leaves is.
  const tooMany = (): CooError => new CooError('POLICY_LIMIT', `commit ${commit} in ${gitdir} lists more than ${LIMITS.workEntries} entries, more than coo lists of a commit`);
  try {
    const root = /^tree ([0-9a-f]{40})\n/.exec((await read(commit, 'commit')).toString('latin1'));
    if (root === null) throw new CooError('GIT_FAILED', `commit ${commit} in ${gitdir} names no tree`);
    const files: CommitFile[] = [];
    // Level by level: one folder's trees are asked for at once.
    let level: Array<{ readonly prefix: Buffer | null; readonly oid: string }> = [{ prefix: null, oid: root[1]! }];
    while (level.length > 0) {
      const trees = await Promise.all(level.map((folder) => read(folder.oid, 'tree')));
      const next: typeof level = [];
      trees.forEach((raw, index) => {
        const { prefix } = level[index]!;
        let entries;
        try {
          entries = parseRawTree(raw);
        } catch (error) {
          throw new CooError('GIT_FAILED', `tree ${level[index]!.oid} in ${gitdir} holds ${(error as Error).message}`);
        }
        if (files.length + next.length + entries.length > LIMITS.workEntries) throw tooMany();
        for (const entry of entries) {
          const path = prefix === null ? entry.name : Buffer.concat([prefix, Buffer.from('/'), entry.name]);
          if (entry.mode === '40000') next.push({ prefix: path, oid: entry.oid });
          else files.push({ path, mode: entry.mode, oid: entry.oid });
        }
      });
      level = next;
    }
    return files;
  } finally {
    reader.close();
  }
}
