import { isUtf8 } from 'node:buffer';
import { checkoutFold } from '../lane/raw-tree.js';
import { relativePath } from '../schema/common.js';
import type { ObjectSink } from '../ledger/object-store.js';
import { buildTree, type TreeFile } from './git-tree.js';
import type { IgnoreRules } from './ignore-rules.js';
import { keyOf, shownPath, walkWork, type RefusedWhy, type Tracked, type WalkOptions } from './work-walk.js';
import { gitLinkChanged, type AttemptWorktree } from './worktree.js';

/**
 * What the EA left, as the runner reads it (work-walk.ts) against the base commit: the changed
 * files with the sha256 of the bytes read, and one git tree holding exactly those bytes (blobs
 * written by the runner's own object writer, never through `git add`). The receipt's hashes, the
 * signed commit's blobs and the verification's checkout are built from the same bytes.
 */

export interface ChangedFile {
  readonly path: string;
  readonly status: 'added' | 'modified' | 'deleted' | 'type_changed';
  /** The git mode after the change (`000000` when deleted). */
  readonly mode: string;
  /** sha256 of the new content; null when deleted. */
  readonly sha256: string | null;
}

/** An entry that is not taken as work, named as well as the ledger can (lossy where a name is not UTF-8). */
export interface RefusedEntry {
  readonly path: string;
  /**
   * `folder_kept`: a file or link where the base's folder stays, since it holds a file whose change the ledger cannot name.
   * `checkout_attributes`: a `.gitattributes` of the work by which a stock checkout writes files other than as their blobs (checkout-attributes.ts).
   * `filtered`: a file of the work that a checkout writes through a filter (an LFS pointer).
   * `git_refuses`: a file git's own object checks refuse (git-fsck.ts): not committed, as no remote that checks takes the commit.
   */
  readonly why: RefusedWhy | 'symlink' | 'too_large' | 'unrecordable_name' | 'name_collision' | 'folder_kept' | 'checkout_attributes' | 'filtered' | 'git_refuses';
  /** For `checkout_attributes`: what it changes (which files, by which attributes), or why it is not judged; for `git_refuses`, git's message ids. */
  readonly detail?: string;
}

export interface WorkSnapshot {
  /** The tree of the base with the work applied; null when the work could not be read whole. */
  readonly tree: string | null;
  /** Changes whose paths the ledger can record, applied in `tree`, in byte order of their paths. */
  readonly changes: readonly ChangedFile[];
  /** Entries that are not work: links, special files, `.git` entries, files over the bound, names the ledger cannot record, new names a checkout writes over another. */
  readonly refused: readonly RefusedEntry[];
  /** The walk stopped at its bound: `changes` is not the whole. */
  readonly overflow: boolean;
  /** The work tree's `.git` link was changed, replaced or removed. */
  readonly gitLinkTampered: boolean;
  /** Changed files whose new content holds a secret (SnapshotOptions.holdsSecret), by path: their blobs are not written, and the work has no tree. */
  readonly holdingSecrets: readonly string[];
  /** New paths of the work whose names (a folder's or the file's) hold such a secret: the work has no tree, as a tree object holds its names. */
  readonly namingSecrets: readonly string[];
}

const STATUS_ORDER = (a: { path: Buffer }, b: { path: Buffer }): number => Buffer.compare(a.path, b.path);

/** What the base tracks, for the walk: paths with their blobs, and every folder that holds one. */
export function trackedOf(baseFiles: readonly TreeFile[]): Tracked {
  const oids = new Map<string, { mode: string; oid: string }>();
  const folders = new Set<string>();
  for (const file of baseFiles) {
    const key = keyOf(file.path);
    oids.set(key, { mode: file.mode, oid: file.oid });
    for (let slash = key.indexOf('/'); slash >= 0; slash = key.indexOf('/', slash + 1)) folders.add(key.slice(0, slash));
  }
  return { oids, folders };
}

/** Whether a receipt can name this path (the ledger's own path rule, on UTF-8 bytes). */
function recordable(path: Buffer): boolean {
  return isUtf8(path) && relativePath.safeParse(path.toString('utf8')).success;
}

function typeOf(mode: string): string {
  return mode === '120000' ? 'link' : mode === '160000' ? 'submodule' : 'file';
}

/** The folders a path is in, as latin1 keys (byte for byte), outermost first. */
export function foldersOf(key: string): string[] {
  const folders: string[] = [];
  for (let slash = key.indexOf('/'); slash >= 0; slash = key.indexOf('/', slash + 1)) folders.push(key.slice(0, slash));
  return folders;
}

/** A latin1 key's folders and the key itself as a macOS or Windows checkout writes them, the key last: each name folded once (checkoutFold). */
export function foldsOf(key: string): string[] {
  const folds: string[] = [];
  for (const name of Buffer.from(key, 'latin1').toString('utf8').split('/')) {
    const fold = checkoutFold(name);
    folds.push(folds.length === 0 ? fold : `${folds.at(-1)!}/${fold}`);
  }
  return folds;
}

/**
 * The written paths of the work that a macOS or Windows checkout of the result would write over
 * another path of it (`src/ADD.js` beside `src/add.js`, `é` composed beside `é` decomposed): a file
 * that folds as another file of the result or as one of its folders, or a file in a folder the base
 * does not hold that folds as a file of the result. The verification's checkout holds both; such a
 * checkout holds one file for both, bytes the receipt names at neither. Two folders of one fold are
 * one folder there, each file in it where the receipt names it; names the base holds are not the
 * agent's doing and stay.
 */
function collidingPaths(tracked: Tracked, kept: readonly string[], written: readonly string[]): Set<string> {
  const files = new Map<string, number>();
  const folders = new Set<string>();
  const folded = new Map<string, string[]>();
  for (const key of [...kept, ...written]) {
    const folds = foldsOf(key);
    folded.set(key, folds);
    files.set(folds.at(-1)!, (files.get(folds.at(-1)!) ?? 0) + 1);
    for (const fold of folds.slice(0, -1)) folders.add(fold);
  }
  return new Set(
    written.filter((key) => {
      const folds = folded.get(key)!;
      const own = folds.at(-1)!;
      if (files.get(own)! > 1 || folders.has(own)) return true;
      return foldersOf(key).some((folder, at) => !tracked.folders.has(folder) && files.has(folds[at]!));
    }),
  );
}

export interface SnapshotOptions {
  readonly baseFiles: readonly TreeFile[];
  readonly rules: IgnoreRules;
  /** Where the new blobs and trees are written (the target's objects). */
  readonly objects: ObjectSink;
  readonly limits?: Pick<WalkOptions, 'maxEntries' | 'maxFileBytes' | 'maxBytes'>;
  /** Whether a new blob's bytes hold a secret the runner holds or handed the agent (none is looked for without it). */
  readonly holdsSecret?: (bytes: Buffer) => boolean;
  /** Which of the written files (their blobs already written) git's object checks refuse, themselves or a new folder they are in, by path (latin1 key), with git's message ids (git-fsck.ts). */
  readonly gitRefuses?: (files: readonly TreeFile[], folders: readonly Buffer[]) => Promise<ReadonlyMap<string, string>>;
}

/** Reads the worktree, writes the blobs and trees of the work, and lists what changed against the base. */
export async function snapshotWork(worktree: AttemptWorktree, options: SnapshotOptions): Promise<WorkSnapshot> {
  const tracked = trackedOf(options.baseFiles);
  const secretBlobs = new Set<string>();
  const walk = await walkWork({
    root: worktree.path,
    rules: options.rules,
    tracked,
    onNewBlob: async (oid, bytes) => {
      // Never written to the target's objects: an object the branch never carries stays there all the same, where the
      // sandbox of every later agent of the repository (another actor's too) reads it. Such work is not committed.
      if (options.holdsSecret?.(bytes) === true) {
        secretBlobs.add(oid);
        return;
      }
      await options.objects.write('blob', bytes);
    },
    ...options.limits,
  });
  const gitLinkTampered = gitLinkChanged(worktree.path, worktree.gitLink);
  const refused: RefusedEntry[] = [
    ...walk.refused.map((entry) => ({ path: shownPath(entry.path), why: entry.why })),
    ...walk.tooLarge.map((entry) => ({ path: shownPath(entry.path), why: 'too_large' as const })),
  ];
  const seen = new Map(walk.files.map((file) => [keyOf(file.path), file]));
  const changed: Array<{ path: Buffer; change: Omit<ChangedFile, 'path'> }> = [];
  for (const file of walk.files) {
    const before = tracked.oids.get(keyOf(file.path));
    if (before !== undefined && before.oid === file.oid && before.mode === file.mode) continue;
    const status = before === undefined ? 'added' : typeOf(before.mode) !== typeOf(file.mode) ? 'type_changed' : 'modified';
    changed.push({ path: file.path, change: { status, mode: file.mode, sha256: file.sha256 } });
  }
  // A file under the bound's reach that was not read is not deleted: it was refused or not reached, itself or
  // a folder it is in (one the runner could not open or look at: its files are not known to be gone).
  const unread = new Set([...walk.refused, ...walk.tooLarge].map((entry) => keyOf(entry.path)));
  const unopened = new Set(walk.refused.filter((entry) => entry.why === 'unreadable').map((entry) => keyOf(entry.path)));
  const underUnread = (key: string): boolean => {
    // The worktree itself could not be opened (made unreadable, replaced): none of its files is known to be gone.
    if (unopened.has('')) return true;
    for (let slash = key.indexOf('/'); slash >= 0; slash = key.indexOf('/', slash + 1)) if (unopened.has(key.slice(0, slash))) return true;
    return false;
  };
  for (const file of options.baseFiles) {
    const key = keyOf(file.path);
    if (seen.has(key) || walk.submodules.has(key) || unread.has(key) || underUnread(key)) continue;
    changed.push({ path: file.path, change: { status: 'deleted', mode: '000000', sha256: null } });
  }
  changed.sort(STATUS_ORDER);
  const gone = new Set(changed.filter((entry) => entry.change.status === 'deleted').map((entry) => keyOf(entry.path)));
  const colliding = collidingPaths(
    tracked,
    options.baseFiles.map((file) => keyOf(file.path)).filter((key) => !gone.has(key)),
    walk.files.filter((file) => recordable(file.path)).map((file) => keyOf(file.path)).filter((key) => !tracked.oids.has(key)),
  );
  const changes: ChangedFile[] = [];
  const applied = new Set<string>();
  for (const { path, change } of changed) {
    if (!recordable(path)) {
      refused.push({ path: path.toString('utf8'), why: 'unrecordable_name' });
      continue;
    }
    if (colliding.has(keyOf(path))) {
      refused.push({ path: path.toString('utf8'), why: 'name_collision' });
      continue;
    }
    applied.add(keyOf(path));
    changes.push({ path: path.toString('utf8'), ...change });
    if (change.mode === '120000') refused.push({ path: path.toString('utf8'), why: 'symlink' });
  }
  // A base file whose change the ledger cannot name stays in the tree as the base has it, and so do its folders: a
  // file or link of the work at one of them put a file and a folder of one name in one tree, a COO-signed commit
  // that no checkout reads (git's fsck: duplicateEntries), and the attempt ended in a runner error naming no change.
  const keptFolders = new Set(options.baseFiles.filter((file) => !applied.has(keyOf(file.path))).flatMap((file) => foldersOf(keyOf(file.path))));
  for (let at = changes.length - 1; at >= 0; at -= 1) {
    const change = changes[at]!;
    const key = keyOf(Buffer.from(change.path, 'utf8'));
    if (change.status === 'deleted' || !keptFolders.has(key)) continue;
    changes.splice(at, 1);
    applied.delete(key);
    refused.push({ path: change.path, why: 'folder_kept' });
  }
  const oids = new Map(walk.files.map((file) => [keyOf(file.path), file.oid]));
  const holdingSecrets = changes.filter((change) => secretBlobs.has(oids.get(keyOf(Buffer.from(change.path, 'utf8'))) ?? '')).map((change) => change.path);
  // A tree object holds the names of its entries: the tree of work named after a secret, written to the target's objects,
  // stays there with no branch carrying it, where the sandbox of every later agent of the repository reads it.
  const namingSecrets = changes.filter((change) => change.status === 'added' && options.holdsSecret?.(Buffer.from(change.path, 'utf8')) === true).map((change) => change.path);
  if (walk.overflow || walk.tooLarge.length > 0 || holdingSecrets.length > 0 || namingSecrets.length > 0) return { tree: null, changes, refused, overflow: walk.overflow, gitLinkTampered, holdingSecrets, namingSecrets };
  // A file git's own checks refuse (a `.gitmodules` whose URL reads as an option) is not committed: a COO-signed commit
  // that `git fsck` calls broken, which a forge refuses on push and a checking clone on fetch, landed on the branch.
  const written = changes.filter((change) => change.status !== 'deleted').map((change) => Buffer.from(change.path, 'utf8'));
  // The folders they are in that the base does not hold are judged too: a folder named `.gitmodules` is no blob there (gitmodulesBlob).
  const newFolders = [...new Set(written.flatMap((path) => foldersOf(keyOf(path))).filter((key) => !tracked.folders.has(key)))].map((key) => Buffer.from(key, 'latin1'));
  const gitRefused = options.gitRefuses === undefined ? new Map<string, string>() : await options.gitRefuses(written.map((path) => seen.get(keyOf(path))!), newFolders);
  for (let at = changes.length - 1; at >= 0; at -= 1) {
    const change = changes[at]!;
    const detail = gitRefused.get(keyOf(Buffer.from(change.path, 'utf8')));
    if (change.status === 'deleted' || detail === undefined) continue;
    changes.splice(at, 1);
    applied.delete(keyOf(Buffer.from(change.path, 'utf8')));
    refused.push({ path: change.path, why: 'git_refuses', detail });
  }
  // The base with the recordable changes applied: a change the ledger cannot name is not committed.
  const files: TreeFile[] = options.baseFiles.filter((file) => !applied.has(keyOf(file.path)));
  for (const file of walk.files) if (applied.has(keyOf(file.path))) files.push({ path: file.path, mode: file.mode, oid: file.oid });
  const tree = buildTree(files);
  for (const object of tree.objects) await options.objects.write('tree', object.content);
  return { tree: tree.oid, changes, refused, overflow: false, gitLinkTampered, holdingSecrets, namingSecrets };
}
