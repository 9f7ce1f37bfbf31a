import { execFile } from 'node:child_process';
import * as fs from 'node:fs';
import { join, resolve } from 'node:path';
import { CooError } from '../errors.js';
import { ObjectWriter } from '../ledger/object-store.js';
import { LIMITS } from '../limits.js';
import { isolatedGitEnvironment } from '../util/git-env.js';
import type { TreeFile } from './git-tree.js';
import { keyOf } from './work-walk.js';
import { compareTreeNames } from '../lane/raw-tree.js';

/**
 * What git's own object checks (`git fsck`, which a forge runs on every push and a clone with
 * `transfer.fsckObjects` on what it fetches) refuse of the files of the work: a `.gitmodules` in any
 * folder whose submodule URL, path or name reads as an option or climbs out (`url = --upload-pack=...`),
 * one that is a link, a `.gitattributes` with a line of 2048 bytes or more. A commit holding such a
 * file is one git itself calls broken: a branch no such remote takes. git judges, by its own names
 * (`.GITMODULES`, `gitmod~1`) and rules, in the runner's folder: a private repository that borrows the
 * target's objects (where the work's blobs were written) and holds trees of the files under their own
 * names, which `git fsck --no-full` checks with nothing else of the target's.
 */

/** The last part of a path: the name a tree holds it by. */
const nameOf = (path: Buffer): Buffer => path.subarray(path.lastIndexOf(0x2f) + 1);

/** One entry of a tree judged: a file as it is, or a folder as a tree of its own; and the keys of the work's files it stands for. */
interface Entry {
  readonly name: Buffer;
  readonly mode: string;
  /** A file's blob; a folder's tree is made for it (fsck). */
  readonly oid: string | null;
  readonly keys: readonly string[];
  /** The index of a folder among the folders judged. */
  readonly folder?: number;
}

/** A tree object holding `entries` under their names (no two of one name), in git's order. */
function treeOf(entries: ReadonlyArray<{ readonly name: Buffer; readonly mode: string; readonly oid: string }>): Buffer {
  const sorted = entries.map((entry) => ({ ...entry, dir: entry.mode === '40000' })).sort(compareTreeNames);
  return Buffer.concat(sorted.flatMap((entry) => [Buffer.from(`${entry.mode} `, 'latin1'), entry.name, Buffer.from([0]), Buffer.from(entry.oid, 'hex')]));
}

/**
 * By path (latin1 key), the message ids of what git's object checks refuse of `files` (the work's
 * written files, their blobs in the target's objects at `gitdir`) and of `folders` (the new folders they
 * are in: a folder named `.gitmodules` is refused too, and so every file in it), judged in `folder`, the
 * runner's own. The entries go into as few trees as their names allow (one per repeat of a name); a tree
 * git refuses is judged again entry by entry, so a refusal names its own files only.
 */
export async function fsckRefusals(gitdir: string, folder: string, files: readonly TreeFile[], folders: readonly Buffer[] = []): Promise<Map<string, string>> {
  const refusals = new Map<string, string>();
  const add = (key: string, id: string): void => {
    const ids = refusals.get(key);
    if (ids === undefined) refusals.set(key, id);
    else if (!ids.split(', ').includes(id)) refusals.set(key, `${ids}, ${id}`);
  };
  if (files.length === 0) return refusals;
  const entries: Entry[] = files.map((file) => ({ name: nameOf(file.path), mode: file.mode, oid: file.oid, keys: [keyOf(file.path)] }));
  // The files in each folder, at any depth: each file's folders looked up once.
  const within = new Map<string, string[]>(folders.map((path) => [keyOf(path), []]));
  for (const file of files) {
    const key = keyOf(file.path);
    for (let slash = key.indexOf('/'); slash >= 0; slash = key.indexOf('/', slash + 1)) within.get(key.slice(0, slash))?.push(key);
  }
  for (const [at, path] of folders.entries()) entries.push({ name: nameOf(path), mode: '40000', oid: null, keys: within.get(keyOf(path)) ?? [], folder: at });
  const layers: Entry[][] = [];
  const repeats = new Map<string, number>();
  for (const entry of entries) {
    const name = entry.name.toString('latin1');
    const at = repeats.get(name) ?? 0;
    repeats.set(name, at + 1);
    (layers[at] ??= []).push(entry);
  }
  const first = await fsck(gitdir, join(folder, 'together'), layers, files[0]!.oid);
  for (const [key, id] of first.refused) add(key, id);
  const again = layers.filter((_, at) => first.trees.has(at)).flat();
  if (again.length > 0) {
    const alone = await fsck(gitdir, join(folder, 'alone'), again.map((entry) => [entry]), files[0]!.oid);
    for (const [key, id] of alone.refused) add(key, id);
    for (const [at, id] of alone.trees) for (const key of again[at]!.keys) add(key, id);
  }
  return refusals;
}

/**
 * One `git fsck --no-full` of a private repository in `folder` borrowing the target's objects, holding
 * a tree of each group of `groups` (a folder as a tree of its own holding `blob`, under a name that is its
 * index): the refusals of blobs and of folders, by the key of each file they stand for, and of the groups'
 * trees, by the group's index (each with git's message id).
 */
async function fsck(gitdir: string, folder: string, groups: ReadonlyArray<readonly Entry[]>, blob: string): Promise<{ readonly refused: Array<[string, string]>; readonly trees: Map<number, string> }> {
  const scratch = join(folder, 'git');
  for (const sub of ['objects/info', 'refs']) fs.mkdirSync(join(scratch, sub), { recursive: true, mode: 0o700 });
  fs.writeFileSync(join(scratch, 'HEAD'), 'ref: refs/heads/main\n');
  fs.writeFileSync(join(scratch, 'objects', 'info', 'alternates'), `${resolve(gitdir, 'objects')}\n`);
  const writer = new ObjectWriter(scratch, -1);
  const groupOf = new Map<string, number>();
  // What an object git refuses stands for: a blob, every file with those bytes; a folder's tree, the files in it.
  const standsFor = new Map<string, string[]>();
  const note = (oid: string, keys: readonly string[]): void => {
    const known = standsFor.get(oid);
    if (known === undefined) standsFor.set(oid, [...keys]);
    else known.push(...keys);
  };
  for (const [at, group] of groups.entries()) {
    const written = [];
    for (const entry of group) {
      const oid = entry.oid ?? (await writer.write('tree', treeOf([{ name: Buffer.from(String(entry.folder)), mode: '100644', oid: blob }])));
      note(oid, entry.keys);
      written.push({ name: entry.name, mode: entry.mode, oid });
    }
    groupOf.set(await writer.write('tree', treeOf(written)), at);
  }
  // git's checks as git ships them: no setting of the operator's environment (GIT_CONFIG_COUNT's or
  // GIT_CONFIG_PARAMETERS' `fsck.<id>=ignore`, an `fsck.skipList`) or object folder (GIT_OBJECT_DIRECTORY,
  // set where coo runs under a git hook) turns one off or has git judge other objects.
  const env = isolatedGitEnvironment({ GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: '/dev/null', HOME: folder, LC_ALL: 'C', GIT_TERMINAL_PROMPT: '0' });
  const { code, stderr } = await new Promise<{ code: number | null; stderr: string }>((done) => {
    execFile('git', [`--git-dir=${scratch}`, 'fsck', '--no-full', '--no-dangling', '--no-progress', '--no-reflogs'], { env, encoding: 'utf8', maxBuffer: 16 * 1024 * 1024 }, (error, _stdout, errors) =>
      // Killed, or its words past the bound (ERR_CHILD_PROCESS_STDIO_MAXBUFFER, the rest cut off): no code.
      done({ code: error === null ? 0 : typeof error.code === 'number' ? error.code : null, stderr: errors }),
    );
  });
  const refused: Array<[string, string]> = [];
  const trees = new Map<number, string>();
  const unread: string[] = [];
  for (const line of stderr.split('\n')) {
    const found = /^error in (?:blob|tree) ([0-9a-f]{40}): ([A-Za-z]+):/.exec(line);
    if (found === null) {
      // git stopped, or said something of an object of the work it named no check for. Other errors
      // (the target's own alternates naming a folder gone) say nothing of these objects.
      if (line.startsWith('fatal') || (line.startsWith('error') && [...line.matchAll(/[0-9a-f]{40}/g)].some(([oid]) => groupOf.has(oid) || standsFor.has(oid)))) unread.push(line);
      continue;
    }
    const group = groupOf.get(found[1]!);
    if (group !== undefined) trees.set(group, trees.has(group) ? `${trees.get(group)!}, ${found[2]!}` : found[2]!);
    else for (const key of standsFor.get(found[1]!) ?? []) refused.push([key, found[2]!]);
  }
  // Only a whole answer is read: git exited by itself with 0 (nothing refused) or 1 (objects refused), said
  // nothing of its own failing, and refused something only by a file of the work. Else (killed, words cut off
  // at the bound, where a refusal after it would be lost; any other failure) nothing is known of the work's files.
  if (code === null || (code !== 0 && code !== 1) || unread.length > 0 || (code === 1 && refused.length === 0 && trees.size === 0)) {
    const said = unread[0] ?? (code === null ? 'killed, or its output past 16 MiB' : `exit ${code}`);
    throw new CooError('GIT_FAILED', `git fsck of the work's files: ${said.slice(0, LIMITS.pathChars)}`);
  }
  return { refused, trees };
}
