import * as fs from 'node:fs';
import { homedir } from 'node:os';
import { dirname, isAbsolute, join, resolve } from 'node:path';
import { CooError } from '../errors.js';
import { readOwnFile } from './bounded-read.js';

/**
 * The folders of every runner on this machine that no sandbox may read: each runner's state folder
 * (the worktrees and sandboxes of its attempts) and the folder of its COO key. A sandbox sees the
 * host read-only; a runner hides its own folders from its own sandboxes, and these rules hide the
 * other runners' too, whatever `--state-dir` or `--key` each was given:
 *
 * - the default state root (`$XDG_STATE_HOME/coo-commons`, else `~/.local/state/coo-commons`), where
 *   every runner's state folder lives unless told otherwise, is hidden whole; a sandbox's own
 *   folders in it are bound back on top;
 * - each runner records its folders, before its first sandbox starts, in a list in that root
 *   (`private-folders`, one JSON string a line), and every sandbox hides each folder listed.
 *
 * A runner started after a sandbox was set up is not hidden from that sandbox: its mounts are fixed.
 */

/**
 * What a runner hides for its COO key: the folder its path names and, when the file is a link
 * (`~/coo/coo.key -> /srv/keys/coo.key`), the folder it really is in; and the key file itself, by
 * both names. Hiding a folder hides what is there under its real name (util/bubblewrap.ts), and a
 * link's target is read under its own: without it a sandbox reads the key there, and an agent writes
 * it out encoded where no scrubber finds it. The file is hidden too for a folder a sandbox is given
 * back: a key kept in the target repository's git folder (`.git/coo.key`, where git never commits
 * it) was in the folder each dispatch's sandbox binds read-only over what it hides, and the agent read it.
 */
export function keyFolders(keyPath: string): string[] {
  let target = keyPath;
  try {
    target = fs.realpathSync(keyPath);
  } catch {
    // not there (yet): its folder as named is what there is to hide
  }
  return [...new Set([dirname(keyPath), dirname(target), resolve(keyPath), resolve(target)])];
}

/** Largest list of runner folders read; one past it is refused rather than read in part. */
const LIST_BYTES = 1024 * 1024;

/** The default state root of this user's runners. */
export function stateRoot(): string {
  return join(process.env['XDG_STATE_HOME'] ?? join(homedir(), '.local', 'state'), 'coo-commons');
}

function listPath(): string {
  return join(stateRoot(), 'private-folders');
}

/** The folders runners on this machine recorded as theirs; a malformed line is skipped, a list that cannot be read is a coded error. */
export function registeredPrivateFolders(): string[] {
  // Anything but a regular file within its bound there (a FIFO every runner's start would wait on, a huge file) is said, never read: no sandbox starts without the list.
  const bytes = readOwnFile(listPath(), { maxBytes: LIST_BYTES, what: 'the list of runner folders every sandbox hides', remedy: 'remove it; each runner records its folders again when it starts', code: 'RUNNER_CONFIG' });
  if (bytes === null) return [];
  const folders = new Set<string>();
  for (const line of bytes.toString('utf8').split('\n')) {
    try {
      const path: unknown = JSON.parse(line);
      if (typeof path === 'string' && isAbsolute(path)) folders.add(resolve(path));
    } catch {
      // a torn or foreign line: skipped
    }
  }
  return [...folders];
}

/**
 * Records `folders` as a runner's own, so that every sandbox on this machine hides them. Called
 * before the runner sets up its first sandbox; a folder already listed is not listed again.
 */
export function registerPrivateFolders(folders: readonly string[]): void {
  const root = stateRoot();
  try {
    fs.mkdirSync(root, { recursive: true, mode: 0o700 });
    const known = new Set(registeredPrivateFolders());
    const lines = [...new Set(folders.map((folder) => resolve(folder)))].filter((folder) => !known.has(folder)).map((folder) => `${JSON.stringify(folder)}\n`);
    if (lines.length > 0) fs.appendFileSync(listPath(), lines.join(''), { mode: 0o600 });
  } catch (error) {
    if (error instanceof CooError) throw error;
    throw new CooError('RUNNER_CONFIG', `cannot record this runner's folders in ${listPath()} (${(error as NodeJS.ErrnoException).code ?? 'EIO'}), which every sandbox on this machine hides: check that ${root} is writable`);
  }
}

/**
 * Makes `dir` and writes a file in it, or throws RUNNER_CONFIG saying `what` it is and `fix`: a path
 * that cannot be a folder (a file in the way), a read-only file system or a full one is found at a
 * runner's start, before anything is claimed, never in the middle of an attempt it would leave
 * claimed and unrun.
 */
export function requireWritableFolder(dir: string, what: string, fix: string): void {
  const probe = join(dir, `.probe-${process.pid}`);
  try {
    makeFolder(dir);
    fs.writeFileSync(probe, 'coo\n');
    fs.rmSync(probe, { force: true });
  } catch (error) {
    throw new CooError('RUNNER_CONFIG', `cannot write in ${dir}, ${what} (${(error as NodeJS.ErrnoException).code ?? 'EIO'}): ${fix}`);
  }
}

/**
 * Refuses `dir` when the file system it is on runs no program: mounted noexec, as a hardened /tmp
 * is. Asked of the kernel for a probe file there, which access(2) says is not executable on such a
 * mount whatever its mode. A folder that cannot be written is left to requireWritableFolder.
 */
export function requireExecutableFolder(dir: string, what: string, fix: string): void {
  const probe = join(dir, `.probe-exec-${process.pid}`);
  try {
    fs.writeFileSync(probe, '#!/bin/sh\n', { mode: 0o700 });
  } catch {
    return;
  }
  try {
    fs.accessSync(probe, fs.constants.X_OK);
  } catch (error) {
    throw new CooError('RUNNER_CONFIG', `${dir}, ${what}, is on a file system that runs no program (mounted noexec? ${(error as NodeJS.ErrnoException).code ?? 'EACCES'} for a program made there): ${fix}`);
  } finally {
    fs.rmSync(probe, { force: true });
  }
}

/**
 * Refuses `dir` when the file system it is on has less than `bytes` free for this user. A state
 * folder whose file system has room for the probe file and not for a sandbox let the runner start,
 * claim a message, and stop (exit 1) at the sandbox's first write, the message left claimed with no
 * receipt, and the line said to remove the sandbox rather than to make room.
 */
export function requireRoom(dir: string, what: string, bytes: number, fix: string): void {
  let free: number;
  try {
    const stats = fs.statfsSync(dir);
    free = stats.bavail * stats.bsize;
  } catch {
    // A file system that does not say how much room it has is judged by the writes themselves.
    return;
  }
  if (free >= bytes) return;
  throw new CooError('RUNNER_CONFIG', `${dir}, ${what}, is on a file system with ${mebibytes(free)} free, less than the ${mebibytes(bytes)} one attempt needs there: ${fix}`);
}

function mebibytes(bytes: number): string {
  return bytes < 1024 * 1024 ? `${Math.floor(bytes / 1024)} KiB` : `${(bytes / (1024 * 1024)).toFixed(1)} MiB`;
}

/**
 * `mkdir -p`, one level at a time: node's recursive mkdir says ENOENT where a parent is on a
 * read-only file system (not EROFS), and never returns under /proc.
 */
function makeFolder(dir: string): void {
  try {
    fs.mkdirSync(dir, { mode: 0o700 });
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'EEXIST') return;
    if (code !== 'ENOENT' || dirname(dir) === dir) throw error;
    makeFolder(dirname(dir));
    try {
      fs.mkdirSync(dir, { mode: 0o700 });
    } catch (again) {
      // Another runner starting at the same moment made it first.
      if ((again as NodeJS.ErrnoException).code !== 'EEXIST') throw again;
    }
  }
}

/**
 * The runner's state folder is this user's alone: it holds each attempt's worktree and sandbox, the
 * journal of paid receipts and the results kept for a restart. One another local user made first
 * (in /tmp, say), or may write in, or reached through a link another user owns, would let that user
 * read the work or swap a folder inside for a link: refused, with RUNNER_CONFIG saying what to
 * remove. A folder of this user's own group that the group may write is left alone (user private
 * groups make them so).
 */
export function requireOwnFolder(dir: string, what: string): void {
  const uid = process.getuid?.();
  if (uid === undefined) return;
  const refuse = (why: string): never => {
    throw new CooError('RUNNER_CONFIG', `${dir}, ${what}, ${why}: another user could read its work or put links in it; remove it (or give a folder of your own), and start again`);
  };
  let link: fs.Stats;
  let folder: fs.Stats;
  try {
    link = fs.lstatSync(dir);
    folder = fs.statSync(dir);
  } catch {
    return; // requireWritableFolder said why it cannot be used
  }
  if (link.isSymbolicLink() && link.uid !== uid && link.uid !== 0) refuse(`is a link another user owns (uid ${link.uid})`);
  if (folder.uid !== uid) refuse(`belongs to another user (uid ${folder.uid})`);
  if ((folder.mode & 0o002) !== 0) refuse('may be written by every user');
}

/** Most entries of a ledger's git folder looked at for one others may write (a ledger of a few hundred thousand objects is looked at whole). */
const LEDGER_WALK_ENTRIES = 1_000_000;

/**
 * A ledger coo commits to may be written by no other user: one made under umask 000 (or opened up
 * by hand) lets any local user rewrite its main, an object in place, its config (a
 * `core.fsmonitor` or `core.hooksPath` runs their command as whoever runs git there) or its hooks
 * under the writer. Refused, naming the first such path and saying how to close it: RUNNER_CONFIG
 * at a runner's start, the `code` given for every other writer (Ledger.append), so a verb or a
 * server never commits where the runner beside it refuses to. Group write is left alone: a ledger
 * shared by a group (core.sharedRepository group) is made so; one shared as 0666 or 0777 is not.
 *
 * What git reads through a link is judged where the link leads: the ledger's folder itself given as
 * a link, a link inside it (`objects` or `hooks` kept elsewhere), and the object folders
 * `objects/info/alternates` names. Everything but the objects is looked at first, so the walk's
 * bound (a ledger of a few hundred thousand loose objects is looked at whole) never leaves the
 * config, hooks or refs unseen.
 */
export function requireLedgerClosed(gitdir: string, code: 'RUNNER_CONFIG' | 'USAGE' = 'RUNNER_CONFIG'): void {
  let seen = 0;
  const walked = new Set<string>();
  // `via`: the link (or alternates file) the walk went through to reach this part of what git reads.
  const refuse = (path: string, via: string | undefined): never => {
    const close = via === undefined ? `chmod -R o-w ${gitdir}` : `let only its owner write ${path}, or take ${via} away`;
    throw new CooError(
      code,
      `${via === undefined ? path : `${path} (reached through ${via})`}, in the ledger ${gitdir}, may be written by every user: any local user could rewrite the ledger under coo; close it (${close}; a ledger shared with a group keeps git config core.sharedRepository group, not 0666 or 0777), and start again`,
    );
  };
  const walk = (path: string, via: string | undefined): void => {
    if (seen >= LEDGER_WALK_ENTRIES) return;
    seen += 1;
    let stats: fs.Stats;
    try {
      stats = fs.lstatSync(path);
    } catch {
      return; // gone meanwhile: what the runner needs is checked where it is used
    }
    if (stats.isSymbolicLink()) {
      let target: string;
      try {
        target = fs.realpathSync(path);
      } catch {
        return; // a dangling link: git reads nothing through it
      }
      return walk(target, via ?? path);
    }
    // Folders and files are what git reads; a device (a hook linked to /dev/null, to turn it off) holds nothing to rewrite.
    if (!stats.isDirectory() && !stats.isFile()) return;
    if ((stats.mode & 0o002) !== 0) refuse(path, via);
    if (!stats.isDirectory() || walked.has(path)) return;
    walked.add(path);
    let names: string[];
    try {
      names = fs.readdirSync(path);
    } catch {
      return;
    }
    // The objects last: their number is what the bound is for.
    names.sort((x, y) => Number(x === 'objects') - Number(y === 'objects'));
    for (const name of names) walk(join(path, name), via);
  };
  const given = resolve(gitdir);
  let root: string;
  try {
    root = fs.realpathSync(given);
  } catch {
    return; // no ledger there: the verb's own open says so
  }
  // Named as reached through the link only when the ledger's own name is one (a folder above it that is a link, as macOS's /var, is not the ledger's).
  let named: string | undefined;
  try {
    named = fs.lstatSync(given).isSymbolicLink() ? given : undefined;
  } catch {
    named = undefined;
  }
  walk(named === undefined ? given : root, named);
  for (const { folder, via } of borrowedObjectFolders(join(root, 'objects'))) if (!walked.has(folder)) walk(folder, via);
}

/**
 * The object folders git borrows from for `objects` (its `info/alternates`, and theirs in turn, five deep as git
 * follows them; a relative line read from the objects folder that names it, where its links lead), each once with
 * the alternates file that named it. Only those `take` accepts are listed and followed further.
 */
export function borrowedObjectFolders(objects: string, take: (folder: string) => boolean = () => true): Array<{ readonly folder: string; readonly via: string }> {
  const found: Array<{ readonly folder: string; readonly via: string }> = [];
  const seen = new Set<string>();
  let next = [objects];
  for (let depth = 0; depth < 5 && next.length > 0; depth += 1) {
    const deeper: string[] = [];
    for (const from of next) {
      for (const folder of alternateObjectFolders(from)) {
        if (seen.has(folder) || !take(folder)) continue;
        seen.add(folder);
        found.push({ folder, via: join(from, 'info', 'alternates') });
        deeper.push(folder);
      }
    }
    next = deeper;
  }
  return found;
}

/**
 * The object folders an objects folder's `info/alternates` names, where their links lead (absolute,
 * or relative to the objects folder itself; a line git reads quoted, C-style, unquoted).
 */
function alternateObjectFolders(objects: string): string[] {
  let text: string;
  let real: string;
  try {
    real = fs.realpathSync(objects);
    text = fs.readFileSync(join(real, 'info', 'alternates'), 'utf8');
  } catch {
    return [];
  }
  const folders: string[] = [];
  for (const raw of text.split('\n')) {
    let line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    if (line.startsWith('"') && line.endsWith('"') && line.length >= 2) {
      line = line.slice(1, -1).replace(/\\([\\"abfnrtv]|[0-7]{3})/g, (_, c: string) => (/^[0-7]{3}$/.test(c) ? String.fromCharCode(parseInt(c, 8)) : ({ a: '\x07', b: '\b', f: '\f', n: '\n', r: '\r', t: '\t', v: '\v' } as Record<string, string>)[c] ?? c));
    }
    try {
      folders.push(fs.realpathSync(resolve(real, line)));
    } catch {
      // A folder that is not there: git reads nothing from it.
    }
  }
  return folders;
}
