import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, statSync, type Dirent } from 'node:fs';
import { basename, join, resolve } from 'node:path';
import { StringDecoder } from 'node:string_decoder';
import { fileURLToPath } from 'node:url';
import { CooError } from '../errors.js';
import { LIMITS } from '../limits.js';
import { killGroup } from '../util/bubblewrap.js';
import { ownedPrefix, removeOrphans } from '../util/owned-folders.js';
import { configFilesListed, credentialHelperSecrets, gitRemoteSecrets } from '../util/credential-files.js';
import { displayUrl, urlSecrets, withoutUserInfo } from '../util/display-url.js';
import { privateSocketFolder } from '../util/private-sockets.js';
import { runGit } from '../util/exec.js';
import { GIT_NO_REDIRECTS, gitEnvironment, remoteGitEnvironment } from '../util/git-env.js';
import { REDIRECT_STATUS_PATTERN } from '../util/redirects.js';
import { MIN_SECRET_CHARS, Scrubber } from '../util/scrub.js';
import { checkGitFiles } from '../ledger/git-files.js';

/** Where a fetch leaves the remote's main: apart from the local one, which moves only after verification. */
export const ORIGIN_REF = 'refs/remotes/origin/main';

/**
 * The remote's head this clone last verified or pushed, moved by coo alone. ORIGIN_REF is git's
 * remote-tracking ref too: a stock `git fetch` in the clone (or a sync killed before it verified)
 * leaves there whatever the remote served, so a rollback is judged against this one instead.
 */
export const VERIFIED_REF = 'refs/coo/remote-verified';

/** What a git command against the remote said; it never throws for git's own failure. */
export interface RemoteGitResult {
  readonly ok: boolean;
  readonly stdout: string;
  readonly stderr: string;
  /** Set when the command was stopped at its time limit: what it was doing and which limit ran out. */
  readonly timedOut: string | null;
  /** Set when a fetch brought more than `maxReceivedBytes` (it was stopped there); what it received was removed. */
  readonly tooLarge?: string;
  /** Set when what a fetch of `wanted` brought is not that commit's history alone and whole (unnamedObjects); what it received was removed. */
  readonly unnamed?: string;
  /** Set when the object a fetch of `wanted` brought is no commit: its type (unnamedObjects); what it received was removed. */
  readonly notACommit?: string;
}

export interface RemoteGitOptions {
  /** The repository the command runs in (`--git-dir`); none for a clone. */
  readonly gitdir?: string;
  readonly env?: NodeJS.ProcessEnv;
  /** The command's time limit (default LIMITS.remoteGitMs). */
  readonly timeoutMs?: number;
  /** The limit's name in messages: the flag that sets it, or the default's name. */
  readonly limitName?: string;
  /**
   * With `gitdir`, for a fetch: the most it may bring. Its objects are received apart (quarantine),
   * watched while it runs and weighed when it ends, and join the ledger's only within the bound;
   * over it, the command is stopped and what it received removed.
   */
  readonly maxReceivedBytes?: number;
  /**
   * What git is handed for this remote, as its caller learned it (RemoteLedger: its secrets, asked
   * once), to scrub git's words of; by default learned here once (handedToGit).
   */
  readonly handed?: () => Scrubber;
  /**
   * Without `gitdir`, for a clone: the folder it makes, weighed as a fetch's quarantine is against
   * `maxReceivedBytes`; over it, the command is stopped, and the caller removes the folder.
   */
  readonly into?: string;
  /**
   * For ls-remote: stdout keeps only the lines that name this ref exactly (exactRef), read as they
   * come. git matches an ls-remote pattern by its tail and lists refs in name order, so a remote may
   * list any number of refs ending in the name (`a/refs/heads/main`) before the ref itself, past what
   * stdout keeps: a main that is there would otherwise read as missing.
   */
  readonly onlyRef?: string;
  /**
   * With `gitdir` and `maxReceivedBytes`, for a fetch of this commit: what it received joins the
   * ledger's objects only when it is that commit's history, whole, and nothing else (unnamedObjects); otherwise it goes.
   */
  readonly wanted?: string;
  /** With `wanted`: the type of an object the ledger held already, or null (what `index-pack --fix-thin` copied in beside what came is no extra). */
  readonly held?: HeldType;
}

/** The name a time limit goes by when the caller did not set it. */
export const DEFAULT_LIMIT_NAME = 'the time limit of one remote git command';

/** How often what a fetch is receiving is weighed. */
const RECEIVED_WATCH_MS = 200;

/** Bytes of every file under `path` (nothing when it is gone). */
function bytesUnder(path: string): number {
  let total = 0;
  let entries: Dirent[];
  try {
    entries = readdirSync(path, { withFileTypes: true });
  } catch {
    return 0;
  }
  for (const entry of entries) {
    const at = join(path, entry.name);
    try {
      total += entry.isDirectory() ? bytesUnder(at) : statSync(at).size;
    } catch {
      // renamed or removed while weighed: the next look finds it under its new name
    }
  }
  return total;
}

/** How a fetch's quarantine is named, as git names its own temporary files beside the objects (`tmp_`); the process that made it follows (util/owned-folders.ts). */
const QUARANTINE = 'tmp_coo-incoming-';

/**
 * The quarantine a fetch receives into, beside the ledger's objects. Those a process killed
 * mid-fetch left (up to all one fetch may bring, which nothing else removes) go first.
 */
function receivingFolder(gitdir: string): string {
  const objects = join(resolve(gitdir), 'objects');
  removeOrphans(objects, QUARANTINE);
  try {
    return mkdtempSync(join(objects, ownedPrefix(QUARANTINE)));
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? 'unknown';
    throw new CooError('IO_ERROR', `cannot make a folder in ${join(gitdir, 'objects')} to receive the remote's objects in (${code}): work through a clone this user may write, on a file system with room`);
  }
}

/**
 * Moves what a fetch received in its quarantine into the ledger's objects: loose objects first,
 * then each pack before its index (git finds a pack by its index, so it never sees half of one).
 */
function admitQuarantine(quarantine: string, objects: string): void {
  for (const entry of readdirSync(quarantine, { withFileTypes: true })) {
    if (!entry.isDirectory() || !/^[0-9a-f]{2}$/.test(entry.name)) continue;
    mkdirSync(join(objects, entry.name), { recursive: true });
    for (const name of readdirSync(join(quarantine, entry.name))) renameSync(join(quarantine, entry.name, name), join(objects, entry.name, name));
  }
  const packs = join(quarantine, 'pack');
  const names = existsSync(packs) ? readdirSync(packs).filter((name) => name.startsWith('pack-') && !name.endsWith('.keep')) : [];
  const last = (name: string): number => (name.endsWith('.idx') ? 1 : 0);
  mkdirSync(join(objects, 'pack'), { recursive: true });
  for (const name of names.sort((x, y) => last(x) - last(y))) renameSync(join(packs, name), join(objects, 'pack', name));
}

/**
 * What a remote sends is kept as the pack it sent (index-pack), never unpacked into loose objects:
 * a ledger stores its objects without compression (core.compression 0, ledger/init.ts), so a pack of
 * a few hundred KiB from a remote that lies (a blob of zeros) would otherwise be written out as
 * hundreds of MiB, before anything is verified. Kept whole, what lands on disk is what was received.
 */
const KEEP_PACKS = ['-c', 'transfer.unpackLimit=1', '-c', 'fetch.unpackLimit=1'];

/**
 * No hook runs: git runs `pre-push`, `reference-transaction` and others from wherever the ledger
 * clone's config points `core.hooksPath`, and whoever may write that folder is not who publishes.
 */
const NO_HOOKS = ['-c', 'core.hooksPath=/dev/null'];

/**
 * Runs stock git against a remote: never a shell, never a prompt (GIT_TERMINAL_PROMPT=0, no
 * terminal: a transport that wants a password fails instead of waiting for one), never after a
 * redirect (GIT_NO_REDIRECTS: the credentials go to the remote's URL alone), and within a time
 * limit. A remote that accepts the connection and never answers would otherwise hold the caller for
 * ever: at the limit the command's whole process group (git, its remote helper, ssh) is killed, and
 * the result says which command and which limit. A failure of this machine's own git or files while
 * what a fetch received is checked or kept rejects (GIT_FAILED, IO_ERROR): it says nothing of the remote.
 */
export function runRemoteGit(args: readonly string[], options: RemoteGitOptions = {}): Promise<RemoteGitResult> {
  const limit = options.timeoutMs ?? LIMITS.remoteGitMs;
  const argv = [...NO_HOOKS, ...GIT_NO_REDIRECTS, ...KEEP_PACKS, ...(options.gitdir === undefined ? [] : ['--git-dir', options.gitdir]), ...args];
  const { gitdir, maxReceivedBytes } = options;
  const quarantine = gitdir === undefined || maxReceivedBytes === undefined ? null : receivingFolder(gitdir);
  const weighed = quarantine ?? (maxReceivedBytes === undefined ? null : (options.into ?? null));
  const apart = quarantine === null ? {} : { GIT_OBJECT_DIRECTORY: quarantine, GIT_ALTERNATE_OBJECT_DIRECTORIES: join(resolve(gitdir!), 'objects') };
  return new Promise((done, fail) => {
    // Its own process group, with no controlling terminal: ssh cannot ask on a tty either.
    const child = spawn('git', argv, {
      env: remoteGitEnvironment({ GIT_TERMINAL_PROMPT: '0', SSH_ASKPASS_REQUIRE: 'never', ...options.env, ...apart }),
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    let stdout = '';
    let stderr = '';
    /** With onlyRef: the line not yet ended, or null while a line too long to name the ref is skipped to its end. */
    let partial: string | null = '';
    const keepLines = (text: string, ended: boolean): void => {
      const ref = options.onlyRef!;
      const pieces = text.split('\n');
      const rest = ended ? null : pieces.pop()!;
      for (const piece of pieces) {
        const line = partial === null ? null : partial + piece;
        partial = '';
        if (line !== null && exactRef(line, ref) !== null && stdout.length < 65_536) stdout += `${line}\n`;
      }
      if (rest === null || partial === null) return;
      partial += rest;
      // An object id, a tab and the ref: a longer line names something else.
      if (partial.length > 128 + ref.length) partial = null;
    };
    let timedOut: string | null = null;
    let tooLarge: string | undefined;
    let unnamed: string | undefined;
    let notACommit: string | undefined;
    const timer = setTimeout(() => {
      timedOut = `git ${args[0] ?? ''} did not finish within ${limit / 1000} s (${options.limitName ?? DEFAULT_LIMIT_NAME}): the remote did not answer in time`;
      if (child.pid !== undefined) killGroup(child.pid);
    }, limit);
    const over = (): boolean => weighed !== null && bytesUnder(weighed) > maxReceivedBytes!;
    const tooMuch = (): string => `git ${args[0] ?? ''} received more than ${maxReceivedBytes! / (1024 * 1024)} MiB, the most one fetch takes; what it received was removed`;
    const watcher =
      weighed === null
        ? undefined
        : setInterval(() => {
            if (tooLarge !== undefined || !over()) return;
            tooLarge = tooMuch();
            if (child.pid !== undefined) killGroup(child.pid);
          }, RECEIVED_WATCH_MS);
    /** What a fetch received joins the ledger's objects only when it ended well within the bound, and the commit it was for names all of it; otherwise it goes. */
    const finish = async (ok: boolean): Promise<boolean> => {
      if (quarantine === null) {
        if (weighed !== null && tooLarge === undefined && over()) tooLarge = tooMuch();
        return ok && tooLarge === undefined;
      }
      try {
        if (tooLarge === undefined && over()) tooLarge = tooMuch();
        if (ok && tooLarge === undefined && options.wanted !== undefined) {
          const amiss = await unnamedObjects({ gitdir: gitdir!, received: quarantine, ...(options.held === undefined ? {} : { held: options.held }) }, options.wanted);
          if (amiss?.kind === 'notACommit') notACommit = amiss.type;
          // A fetch keeps nothing beside the history it was for: tags too are extra here (only a clone drops them).
          else if (amiss !== null) unnamed = amiss.kind === 'unnamed' ? amiss.said : `${amiss.count} tag object(s) beside the history of ${options.wanted.slice(0, 12)}`;
        }
        const admitted = ok && tooLarge === undefined && unnamed === undefined && notACommit === undefined;
        if (admitted) admitQuarantine(quarantine, join(gitdir!, 'objects'));
        return admitted;
      } finally {
        rmSync(quarantine, { recursive: true, force: true });
      }
    };
    const settle = (): void => {
      clearTimeout(timer);
      if (watcher !== undefined) clearInterval(watcher);
    };
    const decoder = new StringDecoder('utf8');
    child.stdout.on('data', (chunk: Buffer) => {
      if (options.onlyRef !== undefined) keepLines(decoder.write(chunk), false);
      else if (stdout.length < 65_536) stdout += chunk.toString('utf8');
    });
    child.stderr.on('data', (chunk: Buffer) => {
      if (stderr.length < 65_536) stderr += chunk.toString('utf8');
    });
    child.on('error', (error) => {
      settle();
      const failed = { ok: false, stdout, stderr: `cannot run git: ${error.message}`, timedOut: null };
      // A quarantine that cannot be removed changes nothing of what is said: git never ran.
      finish(false).then(
        () => done(failed),
        () => done(failed),
      );
    });
    child.on('close', (code) => {
      settle();
      if (options.onlyRef !== undefined) keepLines(decoder.end(), true);
      void finish(code === 0 && timedOut === null).then(
        (ok) => done({ ok, stdout, stderr: stderr === '' ? stderr : (options.handed?.() ?? handedToGit(gitdir, args)).text(stderr), timedOut, ...(tooLarge === undefined ? {} : { tooLarge }), ...(unnamed === undefined ? {} : { unnamed }), ...(notACommit === undefined ? {} : { notACommit }) }),
        // This machine's failure (its git, its disk), never the remote's: said as such, with nothing kept.
        (error: unknown) => fail(error instanceof CooError ? error : new CooError('IO_ERROR', `cannot keep what git received in ${gitdir ?? 'the clone'}: ${error instanceof Error ? error.message : String(error)}; nothing was kept`)),
      );
    });
  });
}

/** What a remote is told it sent amiss (unnamedObjects), what was left undone, and the way on. */
export function receivedAmiss(url: string, head: string, amiss: string, done: string): CooError {
  return new CooError(
    'REMOTE_UNVERIFIED',
    `${url} sent, for its main (${head.slice(0, 12)}), ${amiss}; what it sent was removed; ${done}; its git serves more or less than main's history (an info/grafts or shallow file in it, or a server of its own): have its operator repair it, then run again`,
  );
}

/** The refusal of a remote whose main names another object than a commit (a tag, its ref file written by hand): no ledger's head. `done` says what was left undone. */
export function mainNotACommit(url: string, oid: string, type: string, done: string): CooError {
  return new CooError(
    'REMOTE_UNVERIFIED',
    `the main of ${url} names ${oid.slice(0, 12)}, a ${type} object, not a commit: a branch names a commit, and git writes nothing else there; ${done}; have the remote's operator set its main back to the ledger's head (a clone that verified it names it: git --git-dir CLONE rev-parse ${VERIFIED_REF})`,
  );
}

/** What a fetch or a clone received amiss for the commit it was for (unnamedObjects): an object that is no commit, or objects beside its history (or its history cut short), told in a few words. */
export type ReceivedAmiss =
  | { readonly kind: 'notACommit'; readonly type: string }
  | { readonly kind: 'unnamed'; readonly said: string }
  /** A clone's alone: annotated tags its git fetched beside the history, and nothing else (the clone drops them, dropUnnamed). */
  | { readonly kind: 'tags'; readonly count: number };

/** The type of the object the ledger holds under an id already, or null when it holds none (asked of the clone's open reader). */
export type HeldType = (oid: string) => Promise<string | null>;

/** The 4 bytes a pack index of version 2 and later starts with (`\377tOc`). */
const IDX_MAGIC = 0xff744f63;

/** The ids a pack index (`.idx`, version 2) lists: its 8-byte header, 256 four-byte counts, then the ids, each `bytes` long. */
function idxIds(path: string, bytes: number, into: Set<string>): void {
  let data: Buffer;
  try {
    data = readFileSync(path);
  } catch (error) {
    throw new CooError('IO_ERROR', `cannot read ${path}, the index of a pack git received (${(error as NodeJS.ErrnoException).code ?? 'unknown'}); nothing was kept`);
  }
  const version = data.length >= 8 && data.readUInt32BE(0) === IDX_MAGIC ? data.readUInt32BE(4) : 1;
  if (version !== 2) {
    // This machine's git wrote it (index-pack): version 1 when pack.indexVersion says so.
    throw new CooError('GIT_FAILED', `git wrote ${path} as a pack index of version ${version}, and coo reads version 2 alone: unset pack.indexVersion in git's config for this clone; nothing was kept`);
  }
  const count = data.length >= 8 + 1024 ? data.readUInt32BE(8 + 255 * 4) : -1;
  if (count < 0 || data.length < 8 + 1024 + count * bytes) throw new CooError('GIT_FAILED', `${path}, the index of a pack git received, is cut short; nothing was kept`);
  for (let i = 0, at = 8 + 1024; i < count; i += 1, at += bytes) into.add(data.toString('hex', at, at + bytes));
}

/** Every object id in an objects folder (what a fetch or a clone received): those its packs' indexes list, and its loose objects. */
function receivedIds(objects: string, bytes: number): Set<string> {
  const ids = new Set<string>();
  const list = (path: string): string[] => {
    try {
      return readdirSync(path);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw new CooError('IO_ERROR', `cannot list ${path}, where git received the remote's objects (${(error as NodeJS.ErrnoException).code ?? 'unknown'}); nothing was kept`);
    }
  };
  for (const name of list(join(objects, 'pack'))) if (name.endsWith('.idx')) idxIds(join(objects, 'pack', name), bytes, ids);
  for (const folder of list(objects)) {
    if (!/^[0-9a-f]{2}$/.test(folder)) continue;
    for (const name of list(join(objects, folder))) if (name.length === bytes * 2 - 2 && /^[0-9a-f]+$/.test(name)) ids.add(folder + name);
  }
  return ids;
}

/**
 * git's words when a walk finds objects missing or not what their ids were taken for: what the
 * remote sent, or did not send (a shallow copy's history cut short). Anything else the local git says
 * or suffers (no memory, a kill, no process) is this machine's.
 */
const WALK_FOUND_AMISS = /Could not read|Failed to traverse|missing (blob|tree|commit|tag) object|bad object|bad tree object|unknown revision|expected \w+ type|is a \w+, not a|invalid sha1 pointer|broken link|unable to parse (commit|tree|tag)|not a (commit|tree|blob|tag)\b/i;

/** How a local git that checks what a remote sent ended: its exit, its signal, and its last words (the lines of its standard error's tail). */
interface CheckEnd {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly said: readonly string[];
}

/**
 * Runs a local git that checks what a remote sent: `input` on its standard input, each line of its
 * standard output handed to `line` as it comes (one streamed listing, however long), the tail of its
 * standard error kept for its last words. A git that cannot start is this machine's failure.
 */
function checkingGit(args: readonly string[], env: NodeJS.ProcessEnv, input: string | null, line: (text: string) => void): Promise<CheckEnd> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn('git', args as string[], { env: gitEnvironment({ LC_ALL: 'C', ...env }), stdio: ['pipe', 'pipe', 'pipe'] });
    let partial = '';
    let stderr = '';
    child.stdout.setEncoding('latin1');
    child.stdout.on('data', (chunk: string) => {
      const lines = (partial + chunk).split('\n');
      partial = lines.pop()!;
      for (const text of lines) if (text !== '') line(text);
    });
    child.stderr.on('data', (chunk: Buffer) => {
      // Its last words say why it stopped.
      stderr = (stderr + chunk.toString('utf8')).slice(-16_384);
    });
    // A git that ends before it read all of `input` says why on its way out; the broken pipe is not the story.
    child.stdin.on('error', () => undefined);
    child.stdin.end(input ?? '');
    child.on('error', (error) => reject(new CooError('GIT_FAILED', `cannot run git to check what the remote sent (${error.message}); nothing was kept`)));
    child.on('close', (code, signal) => {
      if (partial !== '') line(partial);
      resolvePromise({ code, signal, said: stderr.split('\n').map((text) => text.trim()).filter((text) => text !== '') });
    });
  });
}

/** A local git's failure while it checked what a remote sent: this machine's, never taken for the remote's. */
function checkFailed(what: string, end: CheckEnd): CooError {
  const last = end.said.at(-1) ?? 'no output';
  return new CooError('GIT_FAILED', `${what}, checking what the remote sent, ${end.signal === null ? `exited with ${end.code}` : `was stopped by ${end.signal}`} (${last.slice(0, LIMITS.pathChars)}); nothing was kept, and the remote was not judged: run again`);
}

/** What `rev-list --objects` walks from `head` (as its commit), each id handed to `seen` as git lists it; a missing or broken object is said, a failure of this machine's git thrown. */
async function walk(args: readonly string[], env: NodeJS.ProcessEnv, seen: (id: string) => void): Promise<{ readonly amiss: string | null }> {
  const end = await checkingGit(args, env, null, seen);
  if (end.code === 0) return { amiss: null };
  if (end.signal === null && end.said.some((text) => WALK_FOUND_AMISS.test(text))) return { amiss: end.said.find((text) => WALK_FOUND_AMISS.test(text) && /dereferences to/.test(text)) ?? end.said.at(-1) ?? 'no output' };
  throw checkFailed('git rev-list', end);
}

/** Of `ids`, those that are no annotated tag in `gitdir` (one `git cat-file --batch-check`); a failure of this machine's git is thrown. */
async function notTags(gitdir: string, ids: readonly string[]): Promise<string[]> {
  const others: string[] = [];
  const end = await checkingGit(['--git-dir', gitdir, 'cat-file', '--batch-check=%(objectname) %(objecttype)'], {}, ids.map((id) => `${id}\n`).join(''), (text) => {
    if (!text.endsWith(' tag')) others.push(text.split(' ')[0]!);
  });
  if (end.code !== 0) throw checkFailed('git cat-file', end);
  return others;
}

/**
 * What is amiss with what a fetch or a clone received for the commit it was for (`head`), or null
 * when it is that commit's history, whole, and nothing else beside. Whole: a remote that is a
 * shallow copy (its git takes a commit for the first) sends a history that stops there, and the
 * commits git kept without their parents were taken for ones this clone holds (a look for the
 * remote's next head skips its fetch), so even a repaired remote was refused as rewritten, for good.
 * Nothing else: a remote chooses what its pack holds: one without a hook (or with `info/grafts`,
 * which its git walks as parents the commit's bytes do not hold) sends a commit's objects and any
 * others beside, and git keeps them all. Nothing reads them, and they stay: a blob of zeros deflates
 * a thousandfold, and the ledger's `git gc` writes an object no ref names out loose, uncompressed
 * (core.compression 0, ledger/init.ts), so a pack of a few hundred KiB took hundreds of MiB of the
 * clone's disk with each fetch. A commit: a main that names a tag, a tree or a blob is no ledger's head.
 *
 * `received` is the objects folder of what came: a fetch's quarantine beside the ledger's objects
 * (`gitdir`), which may hold objects the ledger held already (`index-pack --fix-thin` copies a thin
 * pack's bases in), asked of `held`; or, without it, a clone's own, where nothing was held before.
 * One git process: what came is read from the packs' indexes here, and `rev-list` walks what `head`
 * names (past what the ledger's refs name), its output streamed. A failure of this machine's git or
 * files is thrown (GIT_FAILED, IO_ERROR), never taken for the remote's.
 */
export async function unnamedObjects(where: { readonly gitdir: string; readonly received?: string; readonly held?: HeldType }, head: string): Promise<ReceivedAmiss | null> {
  const { gitdir, received } = where;
  const own = join(resolve(gitdir), 'objects');
  // A clone from a shallow copy is shallow itself: git walks it as if whole.
  if (received === undefined && existsSync(join(gitdir, 'shallow'))) return { kind: 'unnamed', said: `the history of ${head.slice(0, 12)} cut short (a shallow copy: git took ${readFileSync(join(gitdir, 'shallow'), 'utf8').slice(0, 12)} for its first commit)` };
  const left = receivedIds(received ?? own, head.length / 2);
  let sawHead = false;
  // `^{commit}`: a tree or a blob stops the walk (git says what it is), a tag is walked as the commit it names.
  const args = ['--git-dir', gitdir, 'rev-list', '--objects', '--no-object-names', `${head}^{commit}`, ...(received === undefined ? [] : ['--not', '--all'])];
  const walked = await walk(args, received === undefined ? {} : { GIT_OBJECT_DIRECTORY: received, GIT_ALTERNATE_OBJECT_DIRECTORIES: own }, (id) => {
    if (id === head) sawHead = true;
    left.delete(id);
  });
  const type = walked.amiss === null ? null : /dereferences to (\w+) type/.exec(walked.amiss)?.[1];
  if (type !== null && type !== undefined) return { kind: 'notACommit', type };
  if (walked.amiss !== null) return { kind: 'unnamed', said: `the history of ${head.slice(0, 12)} with objects under it missing (git: ${walked.amiss.slice(0, LIMITS.pathChars)})` };
  if (!sawHead) {
    // The walk went from another commit than `head`: head names one (a tag). A commit the ledger's refs name already is not walked again.
    const before = received === undefined || left.has(head) ? null : ((await where.held?.(head)) ?? null);
    if (before !== 'commit') return { kind: 'notACommit', type: before ?? 'tag' };
  }
  // What the ledger held already (a thin pack's bases, objects a remote sent again) is no one's extra.
  let extra = [...left];
  if (received !== undefined && where.held !== undefined && extra.length > 0) {
    const kept: string[] = [];
    for (let at = 0; at < extra.length; at += 4096) {
      const chunk = extra.slice(at, at + 4096);
      const types = await Promise.all(chunk.map((id) => where.held!(id)));
      chunk.forEach((id, i) => {
        if (types[i] === null) kept.push(id);
      });
    }
    extra = kept;
  }
  // A clone's git asks for the annotated tags of the history it fetches whatever --no-tags says (include-tag, git 2.39):
  // an honest ledger's release tag comes with it, no ref naming it. Tags alone are said apart, for the clone to drop.
  if (received === undefined && extra.length > 0) {
    const others = await notTags(gitdir, extra);
    if (others.length === 0) return { kind: 'tags', count: extra.length };
    extra = others;
  }
  if (extra.length === 0) return null;
  return { kind: 'unnamed', said: `${extra.length} object${extra.length === 1 ? '' : 's'} beside the history of ${head.slice(0, 12)} (${extra[0]!.slice(0, 12)} first), which no reader needs and the ledger would keep for ever` };
}

/**
 * Drops from a fresh clone what no ref names (`git repack -a -d`, which keeps what refs/heads/main
 * names and nothing else, the clone's one ref): the annotated tags its git fetched beside main's
 * history. Kept, an unreachable object is written out loose by a later packing, whole under the
 * ledger's core.compression 0, and a few dozen of them under one folder stop git's automatic packing
 * (gc.log: too many unreachable loose objects); a tag's message can be megabytes of zeros.
 */
export async function dropUnnamed(gitdir: string): Promise<void> {
  // No delta search (`--window=0`): what came is kept as it came, so a remote's packs of near-equal blobs cost no
  // time or memory before anything is verified; no server info written (`-n`), as a ledger coo init made has none.
  await runGit(['--git-dir', gitdir, '-c', 'core.hooksPath=/dev/null', '-c', 'repack.writeBitmaps=false', 'repack', '-a', '-d', '-q', '-n', '--window=0']);
}

/** The scrubber of what git is handed for a remote, by the clone and the URLs it was given (handedToGit); a few, the oldest let go. */
const handedScrubbers = new Map<string, Scrubber>();
const HANDED_KEPT = 16;

/**
 * What git says about a remote is quoted in coo's errors and events (gitSaid, refusedAccess, a
 * push's refusal), and a remote may say back the credential git sent it: a hook that prints the
 * request's Authorization header, a forge that names the token it refused. So git's output is
 * scrubbed here, where every git that talks to a remote runs, of what git is handed for it: the
 * credentials of the URLs it was given and of the clone's configuration (its remotes, headers,
 * proxies), and what the credential helpers give for them (util/credential-files.ts), which no
 * environment the writer's CLI reads holds. Learned once per process, the first time git says
 * anything; a helper that does not answer now gives nothing (git asked it already, and fared as it did).
 */
function handedToGit(gitdir: string | undefined, args: readonly string[]): Scrubber {
  const urls = args.filter((arg) => /^[a-z][a-z0-9+.-]*:\/\//i.test(arg));
  const key = JSON.stringify([gitdir ?? null, urls]);
  const known = handedScrubbers.get(key);
  if (known !== undefined) return known;
  const inClone = (helpers: boolean): ReturnType<typeof gitRemoteSecrets> => (gitdir === undefined ? [] : gitRemoteSecrets([gitdir], { helpers }));
  const fromHelpers = (): ReturnType<typeof credentialHelperSecrets> => credentialHelperSecrets(urls.map((url) => ({ url, gitArgs: gitdir === undefined ? [] : ['--git-dir', gitdir], askpass: false })));
  const attempt = <T>(learn: () => T[], otherwise: () => T[]): T[] => {
    try {
      return learn();
    } catch {
      return otherwise();
    }
  };
  const scrubber = new Scrubber([...urlSecrets(urls, 'remote credentials', MIN_SECRET_CHARS), ...attempt(() => inClone(true), () => inClone(false)), ...attempt(fromHelpers, () => [])]);
  if (handedScrubbers.size >= HANDED_KEPT) handedScrubbers.delete(handedScrubbers.keys().next().value!);
  handedScrubbers.set(key, scrubber);
  return scrubber;
}

/** git's last words on a failure, one line, for a message; a time limit that ran out says so. Credentials in a URL are never repeated. */
export function gitSaid(result: RemoteGitResult): string {
  if (result.timedOut !== null) return result.timedOut;
  const lines = result.stderr.split('\n').map((line) => line.trim()).filter((line) => line !== '');
  const fatal = lines.find((line) => line.startsWith('fatal:')) ?? lines[lines.length - 1] ?? 'no output';
  return withoutUserInfo(fatal).slice(0, LIMITS.pathChars);
}

/**
 * How git says that an HTTP remote answered with a redirect (301, 302, 303, 307 or 308), on its first
 * request or a later one: git follows none (GIT_NO_REDIRECTS), and where it pointed is never repeated
 * (its Location may carry credentials of its own).
 */
const REDIRECTED = new RegExp(`The requested URL returned error: ${REDIRECT_STATUS_PATTERN}`, 'i');

/** What a refusal that is a redirect adds: what coo did, and what the operator does. */
const REDIRECT_NOTE = 'a redirect, which coo never follows: the credentials for this URL go to it alone; give the URL the remote moved to, on GitLab the one ending in .git';

/**
 * How git, and the ssh or HTTP transport under it, says that the remote answered and refused this
 * client or holds no repository at the URL's path: ssh took none of its keys, or the server's host
 * key is not the one known here; HTTP answered 401, 403 or 404, or wanted a user name or password
 * and none was given (git may not ask for one), or sent this client elsewhere (REDIRECTED). A
 * network that is down, a server that is not listening and a time limit are no answer, and match
 * none of these.
 */
const REFUSED = [
  REDIRECTED,
  // ssh's own line, naming the methods it tried: an `os error` or a path a hook could not open is no refusal.
  /^(\S+: )?Permission denied \([a-z-]+(,[a-z-]+)*\)\.?$/i,
  /Host key verification failed/i,
  /The requested URL returned error: 40[134]\b/i,
  /Authentication failed for /i,
  /could not read (Username|Password) for /i,
  /repository '[^']*' not found/i,
  /does not appear to be a git repository/i,
  // Refusals of a push to a client that may read: no `!` status line follows them. Each is the whole
  // line the forge writes: a line that only holds the words (a hook's or a proxy's own output, a path) is no refusal.
  /^(remote: )?(ERROR: )?The key you are authenticating with has been marked as read only\.?$/i,
  /^(remote: )?(ERROR: )?Permission to \S+ denied to \S+?\.?$/i,
  /^(remote: )?(ERROR: )?You are not allowed to push code to this project\.?$/i,
  /^(remote: )?Write access to repository not granted\.?$/i,
  /^FATAL: [RWCDM+-]+ \S+ \S+ \S+ DENIED by \S+$/,
];

/** What the remote said when it refused this client (see REFUSED), one line without credentials; null when it did not answer. */
export function refusedAccess(result: RemoteGitResult): string | null {
  if (result.ok || result.timedOut !== null) return null;
  const line = result.stderr
    .split('\n')
    .map((text) => text.trim())
    .find((text) => REFUSED.some((pattern) => pattern.test(text)));
  if (line === undefined) return null;
  const said = withoutUserInfo(line).slice(0, LIMITS.pathChars);
  return REDIRECTED.test(line) ? `${said} (${REDIRECT_NOTE})` : said;
}

/**
 * The cause of a REMOTE_UNREACHABLE when the remote answered and refused this client (a wrong key
 * or token, a host key not known here, no repository at the path). In flight it is the remote cut
 * off like any other: receipts wait in the journal. At start it is a mistake in the runner's
 * configuration, said before anything is claimed (runner/startup.ts).
 */
export class AccessRefused extends Error {
  constructor(readonly said: string) {
    super(said);
    this.name = 'AccessRefused';
  }
}

/**
 * REMOTE_UNREACHABLE for a git command against the remote that failed: `message` is given what git
 * said, its refusal when the remote answered and refused this client (then also the cause).
 */
export function unreachable(result: RemoteGitResult, message: (said: string) => string): CooError {
  const refused = refusedAccess(result);
  return new CooError('REMOTE_UNREACHABLE', message(refused ?? gitSaid(result)), refused === null ? {} : { cause: new AccessRefused(refused) });
}

/**
 * The remote's main, by its exact name: `git ls-remote origin refs/heads/main` also lists every ref
 * whose name ends in `/refs/heads/main` (a branch `a/refs/heads/main` on a forge), so only the line
 * naming `refs/heads/main` itself counts. Null when the remote has no main.
 */
export function exactRef(lsRemote: string, ref: string): string | null {
  for (const line of lsRemote.split('\n')) {
    const [oid, name] = line.split('\t');
    if (name === ref && oid !== undefined && /^[0-9a-f]{40,64}$/.test(oid)) return oid;
  }
  return null;
}

/** The fetch refspec `coo clone` gives a clone's origin (remote/clone.ts): main alone, never `refs/heads/*`. */
export const CLONE_FETCH_REFSPEC = `+refs/heads/main:${ORIGIN_REF}`;

/**
 * A runner (coo watch, coo mcp --run) on a clone of a remote works through that remote: on the
 * clone alone its claims would land on a copy no runner working through the remote sees, and both
 * would pay for the same attempt. A start-up mistake, said before anything is claimed. A clone is
 * any ledger made from a remote (clonedFrom); a ledger made by `coo init` that an operator also
 * pushes to a backup remote (`git remote add`, whose refspec fetches every branch beside the local
 * ones) is not one, and runs on its own.
 */
export function requireRemoteOfClone(gitdir: string, remote: string | undefined, verb: string, why = 'where its claims would be seen by no other runner; nothing was claimed'): void {
  if (remote !== undefined) return;
  // git is asked about the ledger before it is opened: the files git reads first are looked at before it runs.
  checkGitFiles(gitdir);
  const origin = clonedFrom(gitdir);
  if (origin === null) return;
  const url = displayUrl(origin.url);
  if (!origin.verified) throw stockClone(gitdir, url, verb);
  throw new CooError('USAGE', `${gitdir} is a clone of ${url}: ${verb} works through its remote (--remote ${url}), never on the clone alone, ${why}`);
}

/** The refusal of a ledger stock git cloned: no history coo did not verify from a pinned trust root is built on. */
function stockClone(gitdir: string, url: string, verb: string): CooError {
  return new CooError(
    'USAGE',
    `${gitdir} is a clone of ${url} made by git, not by coo clone, so its history was never verified from a trust root you pinned: ${verb} runs on it neither alone nor through its remote; make a clone with "coo clone ${url} DIR --trust-root KEY" and give it --remote ${url}; nothing was written or claimed`,
  );
}

/** The remote a ledger was made from: its URL, and whether coo verified what came from it (coo clone made it, or it published through it). */
export interface ClonedFrom {
  readonly url: string;
  readonly verified: boolean;
}

/**
 * The remote a ledger was made from, or null when it was made here. A ledger made from a remote is
 * what `coo clone` made (its origin fetches main alone), what has published through a remote (it
 * holds VERIFIED_REF), and what stock git's clone made in every form: `--bare` records its remote
 * with no fetch refspec at all, `--mirror` one that fetches into the ledger's own branches, and a
 * clone with a work tree has its main track the remote. `git remote add` records a refspec that
 * fetches beside the local branches (or, with `--mirror=push`, a push mirror): a place a ledger made
 * here is copied to, not one it came from. Only the ledger's own config counts.
 */
export function clonedFrom(gitdir: string): ClonedFrom | null {
  const listed = spawnSync('git', ['--git-dir', gitdir, 'config', '--local', '-z', '--list'], { encoding: 'utf8', env: gitEnvironment() });
  const config = new Map<string, string[]>();
  if (listed.status === 0) {
    for (const entry of (listed.stdout ?? '').split('\0')) {
      const cut = entry.indexOf('\n');
      if (cut <= 0) continue;
      const key = entry.slice(0, cut).toLowerCase();
      config.set(key, [...(config.get(key) ?? []), entry.slice(cut + 1)]);
    }
  }
  const last = (key: string): string => config.get(key)?.at(-1) ?? '';
  const remotes = [...config.keys()].flatMap((key) => /^remote\.(.+)\.url$/.exec(key)?.[1] ?? []).filter((name) => last(`remote.${name}.url`) !== '');
  // origin first: the name coo clone and git clone give the remote.
  remotes.sort((a, b) => Number(b === 'origin') - Number(a === 'origin'));
  const published = spawnSync('git', ['--git-dir', gitdir, 'rev-parse', '--verify', '--quiet', VERIFIED_REF], { encoding: 'utf8', env: gitEnvironment() }).status === 0;
  for (const name of remotes) {
    const fetches = config.get(`remote.${name}.fetch`) ?? [];
    const url = last(`remote.${name}.url`);
    if ((name === 'origin' && published) || fetches.includes(CLONE_FETCH_REFSPEC)) return { url, verified: true };
    const stock = (fetches.length === 0 && last(`remote.${name}.mirror`).toLowerCase() !== 'true') || fetches.some(fetchesIntoBranches) || last('branch.main.remote').toLowerCase() === name;
    if (stock) return { url, verified: false };
  }
  return null;
}

/** A fetch refspec that writes the ledger's own branches (`+refs/*:refs/*`, `refs/heads/*:refs/heads/*`): a mirror of the remote. */
function fetchesIntoBranches(refspec: string): boolean {
  const destination = refspec.replace(/^\+/, '').split(':')[1] ?? '';
  return destination === 'refs/*' || destination.startsWith('refs/heads/');
}

/** A URL as git records it: a local path made absolute, no trailing slash. */
function normalized(url: string): string {
  const trimmed = url.replace(/\/+$/, '');
  return /^[a-z][a-z0-9+.-]*:\/\//i.test(trimmed) || /^[^/]+@[^/]+:/.test(trimmed) ? trimmed : resolve(trimmed);
}

/** The folder a remote's URL names on this machine (a path, or a file:// URL), or null for a remote elsewhere. */
function localPath(url: string): string | null {
  if (/^file:\/\//i.test(url)) {
    try {
      return fileURLToPath(url);
    } catch {
      return null;
    }
  }
  return /^[a-z][a-z0-9+.-]*:\/\//i.test(url) || /^[^/]+@[^/]+:/.test(url) || isSshUrl(url) ? null : resolve(url);
}

/**
 * A remote ledger on this machine is a bare repository (coo init makes one): git refuses every push
 * to the checked-out branch of a repository with a work tree, so each claim and receipt sent there
 * would be refused, pass after pass. Said once, before anything is cloned, written or claimed.
 */
export function requireBareRemote(url: string, what: string): void {
  const path = localPath(url);
  if (path === null || !existsSync(path)) return;
  const bare = existsSync(join(path, '.git')) ? 'false' : (spawnSync('git', ['--git-dir', path, 'rev-parse', '--is-bare-repository'], { encoding: 'utf8', env: gitEnvironment() }).stdout ?? '').trim();
  if (bare !== 'false') return;
  throw new CooError(
    'USAGE',
    `${displayUrl(url)} is a repository with a work tree, not a bare ledger: git refuses every push to its checked-out main, so ${what} could write nothing there; give the bare ledger coo init made (git init --bare and push main to it to move one), and clone that with coo clone; nothing was written or claimed`,
  );
}

/** The URLs of the clone's origin in git's config (every scope, in order): git fetches from the first URL and pushes to each push URL, or to each URL when it has none. */
async function originUrls(gitdir: string): Promise<{ readonly urls: string[]; readonly pushUrls: string[] }> {
  const listed = (await runGit(['--git-dir', gitdir, 'config', '-z', '--get-regexp', String.raw`^remote\.origin\.(url|pushurl)$`]).catch(() => Buffer.from(''))).toString('utf8');
  const urls: string[] = [];
  const pushUrls: string[] = [];
  for (const entry of listed.split('\0')) {
    const cut = entry.indexOf('\n');
    if (cut <= 0) continue;
    const list = entry.slice(0, cut).toLowerCase() === 'remote.origin.url' ? urls : pushUrls;
    const value = entry.slice(cut + 1).trim();
    // An empty value clears the list before it, as git reads it.
    if (value === '') list.length = 0;
    else list.push(value);
  }
  return { urls, pushUrls };
}

/**
 * What makes git's fetch or push through the clone's origin reach anything but `url`: the origin
 * names another URL (its first, which git fetches from), more URLs beside it (git pushes to each),
 * or a push URL elsewhere (remote.origin.pushurl). Null when the origin is `url` alone; undefined when there is no origin.
 */
async function originElsewhere(gitdir: string, url: string): Promise<string | null | undefined> {
  const { urls, pushUrls } = await originUrls(gitdir);
  if (urls.length === 0) return undefined;
  const other = (value: string): boolean => normalized(value) !== normalized(url);
  if (urls.length > 1 && urls.some(other)) return `names ${urls.length} URLs (${urls.map(displayUrl).join(', ')}): git fetches from the first and pushes to each`;
  if (other(urls[0]!)) return `names ${displayUrl(urls[0]!)}`;
  const away = pushUrls.find(other);
  return away === undefined ? null : `pushes to ${displayUrl(away)} (remote.origin.pushurl)`;
}

/**
 * Checks that `url` is the clone's origin (what `coo clone` recorded), and the only place git
 * fetches from or pushes to through it: a write goes to the remote this clone verified, never to
 * another one named by mistake, and never through a copy stock git made, whose history nothing
 * verified from a pinned trust root.
 */
export async function checkOrigin(gitdir: string, url: string): Promise<void> {
  const from = clonedFrom(gitdir);
  if (from?.verified === false) throw stockClone(gitdir, displayUrl(from.url), 'a write or a runner');
  const elsewhere = await originElsewhere(gitdir, url);
  if (elsewhere === undefined) {
    throw new CooError('USAGE', `${gitdir} has no origin: --remote works through a clone of the remote (coo clone ${displayUrl(url)} DIR)`);
  }
  if (elsewhere !== null) {
    throw new CooError('USAGE', `--remote ${displayUrl(url)} is not the origin of ${gitdir}, which ${elsewhere}; give that URL, or clone ${displayUrl(url)} with coo clone (an origin is one URL, fetched from and pushed to)`);
  }
  requireBareRemote(url, 'a write through it');
}

/**
 * Where git fetches from and pushes to through the clone's origin: its URLs after git's URL rewrites
 * (`url.<base>.insteadOf`, `pushInsteadOf`), and the settings beside them that send it elsewhere
 * (the programs it asks the other side to run, `remote.origin.uploadpack` and `receivepack`; a
 * helper, `remote.origin.vcs`; the ssh command, `core.sshCommand`), as git lists them.
 */
export interface OriginRoute {
  readonly fetch: readonly string[];
  readonly push: readonly string[];
  readonly through: string;
}

/** The route through the clone's origin as it was checked, and the config files it was read from with their stamp then. */
export interface CheckedOrigin {
  readonly route: OriginRoute;
  /** Both move on when a later check reads the same route from files that changed (another setting written). */
  files: readonly string[];
  stamp: string;
}

/** The clone's origin route now, as git reads it from every scope of its config; empty lists when there is no origin. */
export async function originRoute(gitdir: string): Promise<OriginRoute> {
  const read = (args: readonly string[]): Promise<string> =>
    runGit(['--git-dir', gitdir, ...args]).then(
      (out) => out.toString('utf8'),
      () => '',
    );
  const urls = (push: boolean): Promise<string[]> => read(['remote', 'get-url', ...(push ? ['--push'] : []), '--all', 'origin']).then((out) => out.split('\n').filter((line) => line !== ''));
  const [fetch, push, through] = await Promise.all([urls(false), urls(true), read(['config', '-z', '--get-regexp', String.raw`^(remote\.origin\.(uploadpack|receivepack|vcs)|core\.sshcommand)$`])]);
  return { fetch, push, through };
}

/** The files git reads the clone's config from, also those not made yet (configFilesListed). */
async function configFiles(gitdir: string): Promise<string[]> {
  const listed = (await runGit(['--git-dir', gitdir, 'config', '--list', '--show-origin', '-z']).catch(() => Buffer.from(''))).toString('utf8');
  return configFilesListed(listed, gitdir);
}

/** Each file's inode, size and change times, or its absence: git rewrites a config file by renaming a new one over it. */
function configStamp(files: readonly string[]): string {
  return files
    .map((file) => {
      // A file this user may not look at (an includeIf for another folder, under a private one) is stamped by why, never a throw.
      try {
        const stat = statSync(file, { bigint: true, throwIfNoEntry: false });
        return stat === undefined ? '-' : `${stat.ino}:${stat.size}:${stat.mtimeNs}:${stat.ctimeNs}`;
      } catch (error) {
        return `!${(error as NodeJS.ErrnoException).code ?? 'EIO'}`;
      }
    })
    .join('|');
}

/**
 * Checks that `url` is the clone's origin (checkOrigin) and records git's route through it, with the
 * stamp of the files it was read from taken before either read: a file changed while they ran (a
 * `set-url` between the check and the route) is read again, never recorded as what was checked.
 */
export async function checkedOrigin(gitdir: string, url: string): Promise<CheckedOrigin> {
  for (let tries = 1; ; tries += 1) {
    const files = await configFiles(gitdir);
    const stamp = configStamp(files);
    await checkOrigin(gitdir, url);
    const route = await originRoute(gitdir);
    if (configStamp(files) === stamp) return { route, files, stamp };
    if (tries === 3) throw new CooError('USAGE', `git's config for ${gitdir} kept changing while its origin was checked: start again once nothing writes it`);
  }
}

/**
 * Checks, before each fetch or push after the first, that git still fetches from and pushes to
 * where it did when `url` was checked as the clone's origin (`checked`). git reads the origin from
 * the config on every command, so an operator who points it at another copy of the ledger (a backup,
 * a mirror) while a runner works (with `git remote set-url`, a push URL, a URL rewrite) would have
 * the runner claim and pay there, where the runners of `url` never look, and they would pay again.
 * The route is read again (four git processes) only when a config file changed: a runner syncs after
 * every commit any runner pushes, and its git processes are most of its own CPU (bench/RESULTS.md).
 */
export async function checkOriginUnchanged(gitdir: string, url: string, checked: CheckedOrigin): Promise<void> {
  if (configStamp(checked.files) === checked.stamp) return;
  const files = await configFiles(gitdir);
  const stamp = configStamp(files);
  const now = await originRoute(gitdir);
  const same = (a: readonly string[], b: readonly string[]): boolean => a.length === b.length && a.every((value, i) => value === b[i]);
  if (same(now.fetch, checked.route.fetch) && same(now.push, checked.route.push) && now.through === checked.route.through) {
    checked.files = files;
    checked.stamp = stamp;
    return;
  }
  const shown = (list: readonly string[]): string => (list.length === 0 ? 'nowhere' : list.map(displayUrl).join(', '));
  throw new CooError(
    'REMOTE_UNVERIFIED',
    `the origin of ${gitdir} now fetches from ${shown(now.fetch)} and pushes to ${shown(now.push)}, not only ${displayUrl(url)} it was started with: a claim or receipt sent through it could land where the runners of ${displayUrl(url)} never read it; nothing was acted on; set it back (git --git-dir ${gitdir} remote set-url origin ${displayUrl(url)}, with no push URL, URL rewrite or other upload, receive or ssh program than at start) and start again`,
  );
}

/** One ssh connection that a long-lived client's git commands share (OpenSSH's connection multiplexing). */
export interface SharedSshConnection {
  /** The environment that makes git's ssh use the shared connection. */
  readonly env: NodeJS.ProcessEnv;
  /** Ends the shared connection and removes its socket's folder. */
  close(): void;
}

/** The longest path a unix socket can be bound at on Linux (sun_path's 108 bytes, less its final NUL). */
const UNIX_SOCKET_PATH_MAX = 107;

/** An ssh:// URL or git's scp-like `[user@]host:path`. */
function isSshUrl(url: string): boolean {
  return /^(ssh|git\+ssh|ssh\+git):\/\//i.test(url) || (!/^[a-z][a-z0-9+.-]*:\/\//i.test(url) && /^[^/:]+:/.test(url));
}

/**
 * Shares one ssh connection among the git commands a long-lived client (a runner polling its
 * remote every few seconds) runs against an ssh remote: each ls-remote, fetch and push then opens a
 * channel on it instead of a new login (key exchange, authentication and a new session process on
 * the server each time). Only for OpenSSH as git would run it (GIT_SSH_COMMAND, else core.sshCommand,
 * else ssh; not GIT_SSH), and not for other transports: then null, and git connects as usual. The
 * socket lives in a private folder of this process, which no sandbox sees (util/private-sockets.ts);
 * the connection ends at `close`, or by itself after 30 s without use if the process dies first.
 */
export function shareSshConnection(gitdir: string, url: string): SharedSshConnection | null {
  if (!isSshUrl(url) || (process.env['GIT_SSH'] ?? '') !== '') return null;
  const configured = spawnSync('git', ['--git-dir', gitdir, 'config', '--get', 'core.sshCommand'], { encoding: 'utf8', env: gitEnvironment() }).stdout?.trim() ?? '';
  const command = process.env['GIT_SSH_COMMAND'] || configured || 'ssh';
  if (basename(command.trim().split(/\s+/)[0] ?? '') !== 'ssh') return null;
  const dir = privateSocketFolder('ssh-');
  // One URL, one server: the master's socket takes a one-letter name. ssh binds it first under that
  // name and a 17-character suffix, and a unix socket's path holds at most 107 bytes; a temporary
  // folder too deep for that (or one a quote would break out of) gets no shared connection.
  const socket = join(dir, 'm');
  if (dir.includes("'") || Buffer.byteLength(socket) + 17 > UNIX_SOCKET_PATH_MAX) {
    rmSync(dir, { recursive: true, force: true });
    return null;
  }
  return {
    env: { GIT_SSH_COMMAND: `${command} -o ControlMaster=auto -o 'ControlPath=${socket}' -o ControlPersist=30` },
    close: () => {
      for (const name of readdirSync(dir)) spawnSync('ssh', ['-o', `ControlPath=${join(dir, name)}`, '-O', 'exit', 'shared'], { stdio: 'ignore', timeout: 5_000 });
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
