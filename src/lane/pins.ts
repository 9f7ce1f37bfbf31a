import * as fs from 'node:fs';
import { join } from 'node:path';
import { globMatcher, slowGlob } from '../authority/glob.js';
import { CooError } from '../errors.js';
import { CLI_ARGUMENTS, type ArgumentNames } from '../util/argument-names.js';
import { LIMITS } from '../limits.js';
import { NUL_IN_PATH } from '../schema/common.js';
import { parseRawTree, type RawTreeEntry } from './raw-tree.js';
import { CatFileReader } from '../ledger/object-store.js';
import { listTree as listCommitFiles } from './commit-files.js';
import { runGit } from '../util/exec.js';
import { sha256Ref } from '../util/hash.js';

/** Reading consult context from a target repository's git objects at one commit (never its working tree). */

export interface PinnedFile {
  readonly path: string;
  readonly sha256: string;
  readonly bytes: Buffer;
}

interface TreeItem {
  readonly mode: string;
  readonly type: string;
  readonly oid: string;
  /** The object's size as git reports it without reading it; null for trees and submodules. */
  readonly size: number | null;
  readonly path: string;
  /** Whether the name's bytes are UTF-8, so that `path` is the name the commit holds and not a decoding of it. */
  readonly utf8: boolean;
}

export interface ResolvedCommit {
  readonly commit: string;
  /** The repository's git directory, where its objects are read from. */
  readonly gitdir: string;
}

/** The commit `rev` names in `repo`, and the repository's git directory, from one `git rev-parse`. */
export async function resolveCommit(repo: string, rev: string, names: ArgumentNames = CLI_ARGUMENTS): Promise<ResolvedCommit> {
  if (rev.startsWith('-')) throw new CooError('USAGE', `${names.rev} ${rev} is not a revision`);
  const out = await runGit(['-C', repo, 'rev-parse', '--absolute-git-dir', '--verify', '--quiet', '--end-of-options', `${rev}^{commit}`]).catch(() => {
    throw new CooError('CONTEXT_INVALID', `${rev} is not a commit in ${repo}`);
  });
  const [gitdir, commit] = out.toString('utf8').trim().split('\n');
  if (gitdir === undefined || commit === undefined || !/^[0-9a-f]{40}$/.test(commit)) throw new CooError('CONTEXT_INVALID', `${rev} is not a commit in ${repo}`);
  return { commit, gitdir };
}

async function gitDir(repo: string): Promise<string> {
  return (await runGit(['-C', repo, 'rev-parse', '--absolute-git-dir'])).toString('utf8').trim();
}

/**
 * Every path in the commit's tree, with its mode (symlinks and submodules included, so they can be
 * refused), listed through the checking object reader: a tree object file someone put at another
 * tree's id fails the listing (GIT_FAILED) where `git ls-tree` would list what it holds, and the
 * context pinned would not be the commit's, nor what the runner's check reads.
 */
async function listTree(gitdir: string, commit: string): Promise<TreeItem[]> {
  return (await listCommitFiles(gitdir, commit)).map((file) => ({
    mode: file.mode,
    type: file.mode === '160000' ? 'commit' : 'blob',
    oid: file.oid,
    size: null,
    path: file.path.toString('utf8'),
    utf8: Buffer.from(file.path.toString('utf8')).equals(file.path),
  }));
}

/**
 * The sizes of `items`' objects from git's headers (`cat-file --batch-check`), before any byte is
 * read. Only a refusal rests on them: the bytes are read afterwards through the checking reader,
 * which fails an object not what its id names, and are held to the same bounds again.
 */
async function withSizes(gitdir: string, items: readonly TreeItem[]): Promise<TreeItem[]> {
  if (items.length === 0) return [];
  const out = (await runGit([`--git-dir=${gitdir}`, 'cat-file', '--batch-check'], undefined, items.map((item) => `${item.oid}\n`).join(''))).toString('utf8').split('\n');
  return items.map((item, index) => {
    const match = /^([0-9a-f]{40}) blob (\d+)$/.exec(out[index] ?? '');
    const size = match !== null && match[1] === item.oid ? Number(match[2]) : null;
    return { ...item, size: size !== null && Number.isSafeInteger(size) ? size : null };
  });
}

function tooLarge(path: string, size: number): string {
  return `${path}: ${size} bytes exceeds the ${LIMITS.contextFileBytes}-byte limit for one context file`;
}

/**
 * A pattern picomatch matches to the one path it spells, and to no other: letters, digits, `.`, `_`,
 * `-` and `/` only (no glob, brace, extglob or negation syntax), and no leading `./`, which
 * picomatch drops.
 */
const PLAIN_PATH = /^(?!\.\/)[A-Za-z0-9._/-]+$/;

function checkPattern(pattern: string, names: ArgumentNames): void {
  if (pattern.includes('\0')) throw new CooError('CONTEXT_INVALID', `${names.file} ${JSON.stringify(pattern)} ${NUL_IN_PATH}: remove it`);
  if (pattern.startsWith('/') || pattern.split('/').includes('..') || pattern.includes('\\')) {
    throw new CooError('CONTEXT_INVALID', `${names.file} ${JSON.stringify(pattern)} escapes the repository: give paths relative to its root`);
  }
  const slow = slowGlob(pattern);
  if (slow !== null) throw new CooError('CONTEXT_INVALID', `${names.file} ${JSON.stringify(pattern)} ${slow}`);
}

async function readBlobs(gitdir: string, items: readonly TreeItem[]): Promise<PinnedFile[]> {
  const reader = new CatFileReader(gitdir);
  try {
    return await Promise.all(
      items.map(async (item) => {
        const object = await reader.read(item.oid, LIMITS.contextFileBytes);
        if (object === null) throw new CooError('CONTEXT_INVALID', `${item.path}: object ${item.oid} is missing`);
        if (object.content === null) throw new CooError('CONTEXT_INVALID', tooLarge(item.path, object.size));
        if (object.type !== 'blob') throw new CooError('CONTEXT_INVALID', `${item.path}: object ${item.oid} is a ${object.type}, not a file's bytes`);
        return { path: item.path, sha256: sha256Ref(object.content), bytes: object.content };
      }),
    );
  } finally {
    reader.close();
  }
}

function isRegularFile(item: TreeItem): boolean {
  return item.type === 'blob' && (item.mode === '100644' || item.mode === '100755');
}

/** What a policy lets one envelope pin as context: how many files, and how many bytes in all. */
export interface ContextBounds {
  readonly files: number;
  readonly bytes: number;
}

/** The context bounds of a policy's limits. */
export function contextBounds(limits: { readonly max_context_files: number; readonly max_context_bytes: number }): ContextBounds {
  return { files: limits.max_context_files, bytes: limits.max_context_bytes };
}

/**
 * Refuses context over the policy's bounds from the files' sizes, before any byte is read: the cost
 * of a refusal does not grow with what was named.
 */
export function refuseContextOverBounds(sizes: readonly number[], bounds: ContextBounds): void {
  const over = contextOverBounds(sizes, bounds);
  if (over !== null) throw new CooError('POLICY_LIMIT', `${over}; nothing was read`);
}

/**
 * Why context of these file sizes is over the policy's bounds, or null. Asked when context is
 * pinned, and again by each lane before an attempt is claimed: a policy that lowered its bounds
 * since holds what is queued too.
 */
export function contextOverBounds(sizes: readonly number[], bounds: ContextBounds): string | null {
  if (sizes.length > bounds.files) return `${sizes.length} context files exceed the policy's ${bounds.files}`;
  const total = sizes.reduce((sum, size) => sum + size, 0);
  return total > bounds.bytes ? `${total} bytes of context exceed the policy's ${bounds.bytes}` : null;
}

/**
 * The files matching `patterns` at `commit`, read from git objects, with their hashes, within the
 * policy's `bounds`. Symlinks and submodules are refused.
 */
export async function pinFiles(repo: string, at: ResolvedCommit, patterns: readonly string[], bounds: ContextBounds, names: ArgumentNames = CLI_ARGUMENTS): Promise<PinnedFile[]> {
  if (patterns.length > LIMITS.contextPatterns) throw new CooError('CONTEXT_INVALID', `${patterns.length} ${names.file} patterns exceed the ${LIMITS.contextPatterns}-pattern limit`);
  for (const pattern of patterns) checkPattern(pattern, names);
  const { commit } = at;
  const items = await listTree(at.gitdir, commit);
  const byPath = new Map(items.map((item) => [item.path, item]));
  const matchers = patterns.map((pattern) => ({ pattern, match: globMatcher(pattern) }));
  // Keyed by path: a path two patterns match is pinned once, and finding it costs no pass over the files chosen so far.
  const chosen = new Map<string, TreeItem>();
  for (const { pattern, match } of matchers) {
    // A plain path is looked up, not tested against every file: naming many files costs no pass over the commit for each.
    const hits = PLAIN_PATH.test(pattern) ? [byPath.get(pattern)].filter((item): item is TreeItem => item !== undefined && match(item.path)) : items.filter((item) => match(item.path));
    if (hits.length === 0) throw new CooError('CONTEXT_INVALID', `${names.file} ${JSON.stringify(pattern)} matches nothing at ${commit.slice(0, 12)}`);
    for (const hit of hits) {
      // A name that is not UTF-8 decodes to another name (U+FFFD for each bad byte): the pin would name a path the commit does not hold.
      if (!hit.utf8) throw new CooError('CONTEXT_INVALID', `${JSON.stringify(hit.path)} at ${commit.slice(0, 12)} is not a UTF-8 name: it cannot be pinned by the name the commit holds`);
      if (!isRegularFile(hit)) throw new CooError('CONTEXT_INVALID', `${hit.path} is a ${hit.mode === '120000' ? 'symbolic link' : hit.type} at ${commit.slice(0, 12)}: only regular files can be pinned`);
      if (!chosen.has(hit.path)) chosen.set(hit.path, hit);
    }
  }
  if (chosen.size > LIMITS.contextFiles) throw new CooError('CONTEXT_INVALID', `${chosen.size} files exceed the ${LIMITS.contextFiles}-file limit`);
  // Refused from git's size, before any byte is read: the cost of a refusal does not grow with the file.
  const sized = await withSizes(at.gitdir, [...chosen.values()]);
  for (const item of sized) {
    if (item.size === null) throw new CooError('CONTEXT_INVALID', `${item.path}: git reports no size for object ${item.oid}`);
    if (item.size > LIMITS.contextFileBytes) throw new CooError('CONTEXT_INVALID', tooLarge(item.path, item.size));
  }
  refuseContextOverBounds(sized.map((item) => item.size ?? 0), bounds);
  const files = await readBlobs(at.gitdir, sized.sort((a, b) => (a.path < b.path ? -1 : 1)));
  // The bytes read, not the headers, are what is pinned: they are held to the bounds too.
  refuseContextOverBounds(files.map((file) => file.bytes.length), bounds);
  return files;
}

/** A tree read while checking pins: its id, and its entries by name (the name's bytes as latin1). */
interface FolderTree {
  readonly oid: string;
  readonly entries: ReadonlyMap<string, RawTreeEntry>;
}

export type PinCheck = { readonly ok: true; readonly files: readonly PinnedFile[] } | { readonly ok: false; readonly detail: string };

/**
 * A target repository the runner checks pins against, with one long-lived `git cat-file`: after the
 * first consult, checking a pin starts no process.
 */
export class PinnedRepo {
  private reader: CatFileReader | null = null;
  /** The git directory the reader reads, and its inode when it was opened. */
  private opened: { readonly gitdir: string; readonly ino: number } | null = null;

  constructor(private readonly repo: string) {}

  /**
   * The reader of the repository at `repo` now: one whose git directory was removed, moved or put
   * back as another since it was opened (the operator tidying up while a watch runs) is closed and
   * opened again, never read as if it were still there.
   */
  private async open(): Promise<CatFileReader> {
    if (this.opened !== null && fs.statSync(this.opened.gitdir, { throwIfNoEntry: false })?.ino !== this.opened.ino) this.close();
    if (this.reader === null) {
      const gitdir = await gitDir(this.repo);
      this.reader = new CatFileReader(gitdir);
      this.opened = { gitdir, ino: fs.statSync(gitdir).ino };
    }
    return this.reader;
  }

  /**
   * Why this repository cannot serve `commit` now, or null when it holds it (or holds an object of
   * another kind by that id, which no fetch mends): it is gone or no
   * repository (removed or renamed after the runner started), or it lacks the commit (a clone made
   * before the commit was pushed, never fetched since). Either is the runner's lack, not the work's.
   */
  async lacks(commit: string): Promise<string | null> {
    let reader: CatFileReader;
    try {
      reader = await this.open();
    } catch {
      return `--repo ${this.repo} is no longer a git repository (removed or renamed while the runner ran?): put it back, or start the runner with --repo naming where it is now`;
    }
    try {
      // An object of another kind by that id (a tree, a blob, an annotated tag) is no lack of the runner's: no fetch makes it
      // a commit, so the message is not held, and its lane's pin check receipts it stale_context.
      if ((await reader.read(commit, 0)) !== null) return null;
    } catch {
      this.close();
      return `--repo ${this.repo} cannot be read as a git repository now: put it right, or start the runner with --repo naming a clone that can`;
    }
    return `--repo ${this.repo} does not hold commit ${commit} (a clone made before it was pushed, never fetched since?): run git -C ${this.repo} fetch${fs.existsSync(join(this.opened!.gitdir, 'shallow')) ? ' --unshallow' : ''}, and this runner looks again on its next pass`;
  }

  /**
   * The object's bytes when it has the type asked for and is within `limit`: an object over the
   * limit is refused from the size in git's reply, its bytes never kept.
   */
  private async readWithin(oid: string, type: string, limit: number): Promise<{ content: Buffer } | { missing: true } | { tooLarge: number }> {
    const object = await (await this.open()).read(oid, limit);
    if (object === null || object.type !== type) return { missing: true };
    if (object.content === null) return { tooLarge: object.size };
    return { content: object.content };
  }

  /**
   * The entry at `path` under `tree`. `folders` holds the trees the previous path went through, one
   * a level: the trees this path shares with it are not read and parsed again, so checking many
   * files of one large folder reads that folder once, and no more trees are held than one path is deep.
   */
  private async find(tree: string, path: string, folders: FolderTree[]): Promise<{ mode: string; oid: string } | null> {
    let current = tree;
    const parts = path.split('/');
    for (let i = 0; i < parts.length; i += 1) {
      let folder = folders[i];
      if (folder?.oid !== current) {
        const object = await this.readWithin(current, 'tree', LIMITS.treeBytes);
        if (!('content' in object)) return null;
        // The same parser the listing at enqueue uses: both read a tree as git does (a 100664 file is a regular one).
        const entries = new Map(parseRawTree(object.content).map((entry) => [entry.name.toString('latin1'), entry]));
        folder = { oid: current, entries };
        folders.length = i;
        folders.push(folder);
      }
      const entry = folder.entries.get(Buffer.from(parts[i]!).toString('latin1'));
      if (entry === undefined) return null;
      if (i === parts.length - 1) return entry;
      if (entry.mode !== '40000') return null;
      current = entry.oid;
    }
    return null;
  }

  /**
   * Re-reads pinned files at the pinned commit and compares hashes: the check that the context has
   * not moved between enqueue and execution. Any difference fails closed.
   */
  async check(commit: string, pinned: ReadonlyArray<{ path: string; sha256: string }>): Promise<PinCheck> {
    try {
      await this.open();
    } catch (error) {
      return { ok: false, detail: `${this.repo} is not readable as a git repository: ${error instanceof Error ? error.message : String(error)}` };
    }
    try {
      return await this.checkOpen(commit, pinned);
    } catch (error) {
      // An object not what its id names (or a git that failed) fails this check, and the reader that
      // saw it is closed: the next check starts its own, never inheriting this one's failure.
      this.close();
      return { ok: false, detail: `the context at ${commit.slice(0, 12)} cannot be read from ${this.repo}: ${error instanceof Error ? error.message : String(error)}` };
    }
  }

  private async checkOpen(commit: string, pinned: ReadonlyArray<{ path: string; sha256: string }>): Promise<PinCheck> {
    const object = await this.readWithin(commit, 'commit', LIMITS.commitBytes);
    if (!('content' in object)) return { ok: false, detail: `pinned commit ${commit} is gone from ${this.repo}` };
    const tree = /^tree ([0-9a-f]{40})$/m.exec(object.content.toString('utf8'))?.[1];
    if (tree === undefined) return { ok: false, detail: `${commit} names no tree` };
    const files: PinnedFile[] = new Array<PinnedFile>(pinned.length);
    const folders: FolderTree[] = [];
    // Looked up in path order, so the pins of one folder come together and it is read once (find),
    // whatever order the envelope lists them in; the files are answered in the envelope's order.
    const order = pinned.map((_, index) => index).sort((a, b) => (pinned[a]!.path < pinned[b]!.path ? -1 : pinned[a]!.path > pinned[b]!.path ? 1 : 0));
    for (const index of order) {
      const pin = pinned[index]!;
      const entry = await this.find(tree, pin.path, folders);
      if (entry === null) return { ok: false, detail: `${pin.path} is not in ${commit.slice(0, 12)}` };
      if (entry.mode !== '100644' && entry.mode !== '100755') return { ok: false, detail: `${pin.path} is not a regular file at ${commit.slice(0, 12)}` };
      const blob = await this.readWithin(entry.oid, 'blob', LIMITS.contextFileBytes);
      if ('missing' in blob) return { ok: false, detail: `${pin.path}: object ${entry.oid} is missing` };
      if ('tooLarge' in blob) return { ok: false, detail: tooLarge(pin.path, blob.tooLarge) };
      const sha256 = sha256Ref(blob.content);
      if (sha256 !== pin.sha256) return { ok: false, detail: `${pin.path} has ${sha256}, pinned ${pin.sha256}` };
      files[index] = { path: pin.path, sha256, bytes: blob.content };
    }
    return { ok: true, files };
  }

  close(): void {
    this.reader?.close();
    this.reader = null;
    this.opened = null;
  }
}

/** One-off pin check (opens and closes its own reader). */
export async function checkPins(repo: string, commit: string, pinned: ReadonlyArray<{ path: string; sha256: string }>): Promise<PinCheck> {
  const pinnedRepo = new PinnedRepo(repo);
  try {
    return await pinnedRepo.check(commit, pinned);
  } finally {
    pinnedRepo.close();
  }
}
