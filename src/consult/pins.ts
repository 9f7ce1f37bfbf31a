import picomatch from 'picomatch';
import { CooError } from '../errors.js';
import { LIMITS } from '../limits.js';
import { CatFileReader } from '../ledger/object-store.js';
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
  readonly path: string;
}

export async function resolveCommit(repo: string, rev: string): Promise<string> {
  if (rev.startsWith('-')) throw new CooError('USAGE', `--rev ${rev} is not a revision`);
  const out = await runGit(['-C', repo, 'rev-parse', '--verify', '--quiet', '--end-of-options', `${rev}^{commit}`]).catch(() => {
    throw new CooError('CONTEXT_INVALID', `${rev} is not a commit in ${repo}`);
  });
  return out.toString('utf8').trim();
}

async function gitDir(repo: string): Promise<string> {
  return (await runGit(['-C', repo, 'rev-parse', '--absolute-git-dir'])).toString('utf8').trim();
}

/** Every path in the commit's tree, with its mode (symlinks and submodules included, so they can be refused). */
async function listTree(repo: string, commit: string): Promise<TreeItem[]> {
  const out = await runGit(['-C', repo, 'ls-tree', '-r', '-z', '--full-tree', commit]);
  return out
    .toString('utf8')
    .split('\0')
    .filter((line) => line !== '')
    .map((line) => {
      const tab = line.indexOf('\t');
      const [mode, type, oid] = line.slice(0, tab).split(' ');
      return { mode: mode ?? '', type: type ?? '', oid: oid ?? '', path: line.slice(tab + 1) };
    });
}

function checkPattern(pattern: string): void {
  if (pattern.startsWith('/') || pattern.split('/').includes('..') || pattern.includes('\\') || pattern.includes('\0')) {
    throw new CooError('CONTEXT_INVALID', `--file ${JSON.stringify(pattern)} escapes the repository: give paths relative to its root`);
  }
}

async function readBlobs(repo: string, items: readonly TreeItem[]): Promise<PinnedFile[]> {
  const reader = new CatFileReader(await gitDir(repo));
  try {
    return await Promise.all(
      items.map(async (item) => {
        const object = await reader.read(item.oid);
        if (object === null) throw new CooError('CONTEXT_INVALID', `${item.path}: object ${item.oid} is missing`);
        if (object.content.length > LIMITS.contextFileBytes) {
          throw new CooError('CONTEXT_INVALID', `${item.path}: ${object.content.length} bytes exceeds the ${LIMITS.contextFileBytes}-byte limit for one context file`);
        }
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

/** The files matching `patterns` at `commit`, read from git objects, with their hashes. Symlinks and submodules are refused. */
export async function pinFiles(repo: string, commit: string, patterns: readonly string[]): Promise<PinnedFile[]> {
  patterns.forEach(checkPattern);
  const items = await listTree(repo, commit);
  const matchers = patterns.map((pattern) => ({ pattern, match: picomatch(pattern, { dot: true }) }));
  const chosen: TreeItem[] = [];
  for (const { pattern, match } of matchers) {
    const hits = items.filter((item) => match(item.path));
    if (hits.length === 0) throw new CooError('CONTEXT_INVALID', `--file ${JSON.stringify(pattern)} matches nothing at ${commit.slice(0, 12)}`);
    for (const hit of hits) {
      if (!isRegularFile(hit)) throw new CooError('CONTEXT_INVALID', `${hit.path} is a ${hit.mode === '120000' ? 'symbolic link' : hit.type} at ${commit.slice(0, 12)}: only regular files can be pinned`);
      if (!chosen.some((item) => item.path === hit.path)) chosen.push(hit);
    }
  }
  if (chosen.length > LIMITS.contextFiles) throw new CooError('CONTEXT_INVALID', `${chosen.length} files exceed the ${LIMITS.contextFiles}-file limit`);
  return readBlobs(repo, chosen.sort((a, b) => (a.path < b.path ? -1 : 1)));
}

export type PinCheck = { readonly ok: true; readonly files: readonly PinnedFile[] } | { readonly ok: false; readonly detail: string };

/**
 * Re-reads pinned files at the pinned commit and compares hashes: the runner's check that the
 * context has not moved between enqueue and execution. Any difference fails closed.
 */
export async function checkPins(repo: string, commit: string, pinned: ReadonlyArray<{ path: string; sha256: string }>): Promise<PinCheck> {
  let items: TreeItem[];
  try {
    const exists = await runGit(['-C', repo, 'cat-file', '-t', commit]).then((out) => out.toString('utf8').trim());
    if (exists !== 'commit') return { ok: false, detail: `${commit} is not a commit in ${repo}` };
    items = await listTree(repo, commit);
  } catch {
    return { ok: false, detail: `pinned commit ${commit} is gone from ${repo}` };
  }
  const byPath = new Map(items.map((item) => [item.path, item]));
  const wanted: TreeItem[] = [];
  for (const pin of pinned) {
    const item = byPath.get(pin.path);
    if (item === undefined) return { ok: false, detail: `${pin.path} is not in ${commit.slice(0, 12)}` };
    if (!isRegularFile(item)) return { ok: false, detail: `${pin.path} is not a regular file at ${commit.slice(0, 12)}` };
    wanted.push(item);
  }
  let files: PinnedFile[];
  try {
    files = await readBlobs(repo, wanted);
  } catch (error) {
    return { ok: false, detail: error instanceof Error ? error.message : String(error) };
  }
  for (const [index, file] of files.entries()) {
    if (file.sha256 !== pinned[index]!.sha256) return { ok: false, detail: `${file.path} has ${file.sha256}, pinned ${pinned[index]!.sha256}` };
  }
  return { ok: true, files };
}
