import { execFile } from 'node:child_process';
import { CooError } from '../errors.js';
import { ownMemory } from '../util/bytes.js';
import type { CommitFacts, FileChange } from './commit-facts.js';
import { LIMITS } from '../limits.js';
import { blobBound, isForgePath, type BlobBound } from './layout.js';
import type { ObjectReader } from './object-store.js';
import { RawTree, type TreeEntry } from './tree-format.js';
import { gitEnvironment } from '../util/git-env.js';

/** Navigation headers of a commit, read leniently: the validator does the strict parse. */
export interface CommitLinks {
  readonly oid: string;
  readonly raw: Buffer;
  readonly tree: string;
  readonly parents: readonly string[];
  readonly seq: number | null;
}

const HEADER = /^(tree|parent) ([0-9a-f]{40})$/;

/**
 * What to do about an object the history names and the ledger lacks: its file never reached the disk
 * before the machine stopped (git, as coo, writes loose objects without a sync), or was removed by
 * hand. Nothing reads or builds on such a head; the entry it held is not in the ledger and cannot
 * be made up here.
 */
export const MISSING_OBJECT_REMEDY = "the ledger's main names history whose files are gone (a machine stopped mid-write, or objects removed by hand): nothing reads or builds on it; put the ledger back from a copy or its remote (coo clone), or move main to the last commit git fsck finds whole (git update-ref refs/heads/main <commit>), then run coo verify";

export async function readCommitLinks(reader: ObjectReader, oid: string): Promise<CommitLinks> {
  const object = await reader.read(oid, LIMITS.commitBytes);
  if (object === null) throw new CooError('NOT_FOUND', `commit ${oid} is missing from the ledger: ${MISSING_OBJECT_REMEDY}`);
  if (object.type !== 'commit') throw new CooError('COMMIT_MALFORMED', `${oid} is a ${object.type}, not a commit`);
  if (object.content === null) throw new CooError('COMMIT_MALFORMED', `commit ${oid} is ${object.size} bytes, over the ${LIMITS.commitBytes}-byte bound on a commit: it was not read; a ledger's commits are a page of headers`);
  const text = object.content.toString('utf8');
  const end = text.indexOf('\n\n');
  let tree = '';
  const parents: string[] = [];
  for (const line of text.slice(0, end < 0 ? text.length : end).split('\n')) {
    const m = HEADER.exec(line);
    if (m === null) continue;
    if (m[1] === 'tree' && tree === '') tree = m[2]!;
    if (m[1] === 'parent') parents.push(m[2]!);
  }
  if (tree === '') throw new CooError('COMMIT_MALFORMED', `commit ${oid} names no tree`);
  const seqMatch = /\nLedger-Seq: ([1-9]\d{0,15})\n?$/.exec(end < 0 ? '' : text.slice(end));
  return { oid, raw: object.content, tree, parents, seq: seqMatch === null ? null : Number(seqMatch[1]) };
}

/**
 * Bounds on the tree cache, counted in trees and in entries: a busy day's folder holds thousands of
 * entries and every append makes a new version of it, so a count of trees alone let the cache grow
 * by hundreds of megabytes over a thousand consults.
 */
const CACHED_TREES = 4096;
const CACHED_ENTRIES = 131_072;

/**
 * Tree reads with a small cache: consecutive commits share almost every subtree. Oldest first out:
 * a replay needs a tree again only for the next commit or two.
 */
export class TreeReader {
  private readonly cache = new Map<string, RawTree>();
  /**
   * The cache's ids, oldest first, from `head` on. Asking the map for its oldest entry instead
   * (entries().next()) walks past every slot deleted since the map last rehashed: measured at
   * 3.2 us an eviction against 0.6 us for this queue.
   */
  private readonly order: string[] = [];
  private head = 0;
  private cachedEntries = 0;
  /**
   * Reads under way, by id: a second caller waits for the first read. In a replay, a commit's diff
   * asks for its parent's folders while the parent's own diff is still reading them (about 5% of a
   * long replay's object reads were such second reads).
   */
  private readonly reading = new Map<string, Promise<RawTree>>();

  constructor(private readonly reader: ObjectReader) {}

  /** The checked raw tree `oid`; `base`, an earlier version of the same folder, saves checking what they share. */
  tree(oid: string, base?: RawTree): Promise<RawTree> {
    const cached = this.cache.get(oid);
    if (cached !== undefined) return Promise.resolve(cached);
    let read = this.reading.get(oid);
    if (read === undefined) {
      read = this.load(oid, base);
      this.reading.set(oid, read);
      const done = (): void => {
        this.reading.delete(oid);
      };
      read.then(done, done);
    }
    return read;
  }

  private async load(oid: string, base: RawTree | undefined): Promise<RawTree> {
    const object = await this.reader.read(oid, LIMITS.treeBytes);
    if (object === null) throw new CooError('NOT_FOUND', `tree ${oid} is missing from the ledger: ${MISSING_OBJECT_REMEDY}`);
    if (object.type !== 'tree') throw new CooError('TREE_MALFORMED', `${oid} is a ${object.type}, not a tree`);
    if (object.content === null) throw new CooError('TREE_MALFORMED', `tree ${oid} is ${object.size} bytes, over the ${LIMITS.treeBytes}-byte bound on a folder: it was not read`);
    const tree = RawTree.parse(ownMemory(object.content), base);
    this.cache.set(oid, tree);
    this.order.push(oid);
    this.cachedEntries += tree.count;
    while (this.cache.size > 1 && (this.cache.size > CACHED_TREES || this.cachedEntries > CACHED_ENTRIES)) {
      const oldest = this.order[this.head]!;
      this.head += 1;
      this.cachedEntries -= this.cache.get(oldest)!.count;
      this.cache.delete(oldest);
    }
    if (this.head >= 1024 && this.head * 2 >= this.order.length) {
      this.order.splice(0, this.head);
      this.head = 0;
    }
    return tree;
  }

  async entries(oid: string): Promise<TreeEntry[]> {
    return (await this.tree(oid)).entries();
  }

  /** The blob id at `path` in tree `root`, or null. */
  async lookup(root: string, path: string): Promise<string | null> {
    let tree = root;
    const parts = path.split('/');
    for (let i = 0; i < parts.length; i += 1) {
      const entry = (await this.entries(tree)).find((item) => item.name === parts[i]);
      if (entry === undefined) return null;
      const last = i === parts.length - 1;
      if (last) return entry.mode === '100644' ? entry.oid : null;
      if (entry.mode !== '40000') return null;
      tree = entry.oid;
    }
    return null;
  }

  /** Names in the directory at `path`, or an empty list. */
  async list(root: string, path: string): Promise<TreeEntry[]> {
    let tree = root;
    if (path !== '') {
      for (const part of path.split('/')) {
        const entry = (await this.entries(tree)).find((item) => item.name === part);
        if (entry === undefined || entry.mode !== '40000') return [];
        tree = entry.oid;
      }
    }
    return this.entries(tree);
  }

  /**
   * Every file that differs between two trees, descending only into subtrees that differ. Both
   * trees are in git's order (RawTree refuses any other), so one merge walk pairs their entries,
   * comparing raw names and ids: only entries that differ become strings. The walk starts after the
   * entries the two trees share at their start (in an append-only ledger, nearly all of them).
   */
  async diff(before: string | null, after: string, prefix = ''): Promise<Array<FileChange & { oid: string }>> {
    const changes: Array<FileChange & { oid: string }> = [];
    await this.diffInto(before, after, prefix, changes);
    return changes;
  }

  /**
   * diff's walk, appending to `changes` in the same order a recursive concatenation would. A tree
   * already in the cache is taken without an asynchronous call: a replay meets every folder's
   * previous version there, and each call of an async function allocates its own frame and promise.
   */
  private async diffInto(before: string | null, after: string, prefix: string, changes: Array<FileChange & { oid: string }>): Promise<void> {
    const old = before === null ? RawTree.EMPTY : (this.cache.get(before) ?? (await this.tree(before).catch((error: unknown) => inFolder(error, prefix))));
    const now = this.cache.get(after) ?? (await this.tree(after, before === null ? undefined : old).catch((error: unknown) => inFolder(error, prefix)));
    const shared = old.sharedPrefix(now);
    let gone: number[] | null = null;
    let i = shared;
    for (let j = shared; j < now.count; j += 1) {
      while (i < old.count && old.compare(i, now, j) < 0) (gone ??= []).push(i++);
      const paired = i < old.count && old.compare(i, now, j) === 0;
      if (paired && old.sameObject(i, now, j)) {
        i += 1;
        continue;
      }
      const path = prefix === '' ? now.name(j) : `${prefix}/${now.name(j)}`;
      if (now.isDir(j)) await this.diffInto(paired ? old.oid(i) : null, now.oid(j), path, changes);
      else changes.push({ path, status: paired ? 'modified' : 'added', mode: '100644', oid: now.oid(j) });
      if (paired) i += 1;
    }
    while (i < old.count) (gone ??= []).push(i++);
    for (const index of gone ?? []) {
      const path = prefix === '' ? old.name(index) : `${prefix}/${old.name(index)}`;
      if (old.isDir(index)) await this.removedInto(old.oid(index), path, changes);
      else changes.push({ path, status: 'deleted', mode: '100644', oid: old.oid(index) });
    }
  }

  private async removedInto(tree: string, prefix: string, out: Array<FileChange & { oid: string }>): Promise<void> {
    for (const entry of await this.entries(tree)) {
      const path = `${prefix}/${entry.name}`;
      if (entry.mode === '40000') await this.removedInto(entry.oid, path, out);
      else out.push({ path, status: 'deleted', mode: entry.mode, oid: entry.oid });
    }
  }
}

/** Names the folder whose tree could not be read, when nothing more precise is named. */
function inFolder(error: unknown, prefix: string): never {
  if (error instanceof CooError && error.where === undefined && prefix !== '') throw new CooError(error.code, error.message, { where: prefix, cause: error });
  throw error;
}

/**
 * Gathers what the validator needs about one commit: raw bytes, changes against `parentTree`, the
 * blobs it added, and the new version of any forge file it replaced (the one kind of file that may change).
 * Each blob is read within its place's bound (layout.ts blobBound): one over it is refused from its
 * size, unread, and a path the layout has no place for is not read at all (the validator refuses it).
 */
export async function gatherFacts(reader: ObjectReader, trees: TreeReader, links: CommitLinks, parentTree: string | null): Promise<CommitFacts> {
  const changes = await trees.diff(parentTree, links.tree);
  const blobs = new Map<string, Buffer>();
  await Promise.all(
    changes
      .filter((change) => change.status === 'added' || (change.status === 'modified' && isForgePath(change.path)))
      .map(async (change) => {
        const bound = blobBound(change.path);
        if (bound === null) return;
        const object = await reader.read(change.oid, bound.bytes);
        if (object === null) throw new CooError('NOT_FOUND', `blob ${change.oid} (${change.path}) is missing`);
        if (object.type !== 'blob') throw notAFile(change.path, object.type);
        if (object.content === null) throw tooLarge(change.path, object.size, bound);
        blobs.set(change.path, object.content);
      }),
  );
  return { oid: links.oid, raw: links.raw, changes: changes.map(({ path, status, mode }) => ({ path, status, mode })), blobs };
}

/** The refusal of a ledger file over its place's bound, read from its size alone. */
export function tooLarge(path: string, size: number, bound: BlobBound): CooError {
  return new CooError(bound.code, `${path} is ${size} bytes, over the ${bound.bytes}-byte bound on ${bound.what}: it was not read, and no commit holding it is accepted`, { where: path });
}

/** The refusal of a file entry of a tree that names another kind of object (a commit, a tree) than a file's. */
export function notAFile(path: string, type: string): CooError {
  return new CooError('TREE_MALFORMED', `${path} names a ${type} object where a file belongs: only files`, { where: path });
}

/** How far `commitsSince` follows parent lines itself before asking git. */
const SHORT_RANGE = 64;

/** The first-parent chain from `head` down to (not including) `stop`, oldest first, or null when `stop` is not within SHORT_RANGE. */
async function firstParentsUntil(reader: ObjectReader, head: string, stop: string): Promise<string[] | null> {
  const chain: string[] = [];
  let current = head;
  while (current !== stop) {
    if (chain.length === SHORT_RANGE) return null;
    chain.push(current);
    const parent = (await readCommitLinks(reader, current)).parents[0];
    if (parent === undefined) return null;
    current = parent;
  }
  return chain.reverse();
}

/** Whether `ancestor` is reachable from `descendant`, as git decides it (sequence numbers are claims, not facts). */
export async function isAncestor(gitdir: string, ancestor: string, descendant: string): Promise<boolean> {
  if (ancestor === descendant) return true;
  return new Promise((resolve) => {
    execFile('git', ['--git-dir', gitdir, 'merge-base', '--is-ancestor', ancestor, descendant], { env: gitEnvironment() }, (error) => resolve(error === null));
  });
}

/**
 * Whether `ancestor` is reachable from `descendant`, as isAncestor decides it, asked first of the open
 * object reader: a short line of first parents from `descendant` that reaches `ancestor` proves it
 * without starting a process (a runner asks this after every fetch); anything else goes to git.
 */
export async function descendsFrom(reader: ObjectReader, ancestor: string, descendant: string): Promise<boolean> {
  if (ancestor === descendant) return true;
  if ((await firstParentsUntil(reader, descendant, ancestor).catch(() => null)) !== null) return true;
  return isAncestor(reader.gitdir, ancestor, descendant);
}

/**
 * The commits after `stop` up to `head`, oldest first, following first parents. Returns null when
 * `head` does not descend from `stop` (a rollback or a fork). Descent is decided by git, not by the
 * commits' own Ledger-Seq claims, which a forged commit could set to anything. A short range (the
 * usual case: a runner catching up on a few new entries) is found by following the commits' parent
 * lines through the open object reader, which starts no process; a long one, or one that does not
 * reach `stop` that way, goes to `git merge-base` and one `git rev-list`, so a long history is not
 * walked one object read at a time.
 */
export async function commitsSince(reader: ObjectReader, head: string, stop: string | null): Promise<string[] | null> {
  if (stop !== null) {
    const near = await firstParentsUntil(reader, head, stop).catch(() => null);
    if (near !== null) return near;
  }
  if (stop !== null && !(await isAncestor(reader.gitdir, stop, head))) return null;
  // A ledger's head is a commit: git would list the history of a tag written where main belongs, and the tag's own bytes, signed by no one, would pass as the head.
  await readCommitLinks(reader, head);
  const out = await new Promise<string>((resolve, reject) => {
    execFile('git', ['--git-dir', reader.gitdir, 'rev-list', '--first-parent', '--reverse', head, ...(stop === null ? [] : [`^${stop}`])], { env: gitEnvironment(), maxBuffer: 256 * 1024 * 1024 }, (error, stdout) => {
      if (error !== null) reject(new CooError('GIT_FAILED', `git rev-list ${head}: ${error.message.split('\n')[0]}`));
      else resolve(stdout);
    });
  });
  return out.split('\n').filter((line) => line !== '');
}
