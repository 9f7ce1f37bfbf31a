import * as fs from 'node:fs';
import { join } from 'node:path';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { CooError, isCooError, toFinding, type Finding } from '../errors.js';
import { keyHolders } from '../authority/keys.js';
import { emptyState, type LedgerState } from '../authority/state.js';
import { validateCommit, type CommitVerdict } from '../authority/validate-commit.js';
import { ENTRY_NAMESPACE, GIT_NAMESPACE, signSshsig } from '../crypto/sshsig.js';
import type { PrivateKey } from '../crypto/keys.js';
import { loadCheckpoint, saveCheckpoint } from './checkpoint.js';
import type { CommitFacts } from './commit-facts.js';
import { formatIdent, ledgerMessage, renderCommitPayload, renderSignedCommit } from './commit-format.js';
import { commitsSince, gatherFacts, notAFile, readCommitLinks, tooLarge, TreeReader, type CommitLinks } from './history.js';
import { blobBound, classifyPath, isForgePath, isSigned, sigPath } from './layout.js';
import { CatFileReader, ObjectWriter, hashObject, packLooseObjects, type ObjectReader } from './object-store.js';
import { PendingObjects } from './pending-objects.js';
import { preverify } from './preverify.js';
import { SignaturePool } from './signature-pool.js';
import { MAIN_REF, readRef, withRefLock } from './ref-lock.js';
import { checkGitFiles } from './git-files.js';
import { TreeBuilder } from './tree-builder.js';
import { requireLedgerClosed } from '../util/runner-folders.js';

/** A file to add to the ledger. Entries (`*.yaml` at entry paths) are signed; their `.sig` is added for them. */
export interface NewFile {
  readonly path: string;
  readonly bytes: Buffer;
}

export interface AppendOptions<T> {
  /** The files, or a function of the state at the head (for paths that depend on the sequence number). */
  readonly files: readonly NewFile[] | ((state: LedgerState) => readonly NewFile[]);
  readonly key: PrivateKey;
  readonly summary: string;
  readonly now: Date;
  /** Runs under the lock against the state at the head; a value it returns is returned instead of committing. */
  readonly precheck?: (state: LedgerState) => T | undefined;
}

export interface AppendResult {
  readonly commit: string;
  readonly seq: number;
  readonly paths: readonly string[];
}

/** Replays at least this long verify signatures on worker threads. */
const PARALLEL_FROM = 256;

/**
 * Commits whose objects are read ahead of the one being validated: READ_AHEAD_FIRST at the start,
 * one more with every commit validated, up to REPLAY_WINDOW. Reads of the commits in the window
 * advance together, one folder level per cat-file round trip, so the first commit is ready only
 * when the whole window is; with all 256 at once, the first commit of a 1,001-commit replay waited
 * about 0.2 s for a quarter of the ledger's objects while the signature worker had nothing to do.
 */
const REPLAY_WINDOW = 256;
const READ_AHEAD_FIRST = 16;

/**
 * A replay gives the event loop a turn every this many commits. Once reads run ahead, awaiting an
 * already-read commit resumes on a microtask, so without a turn the loop validated long runs of
 * commits while the reads it had queued sat unsent, git's replies sat unread and the signature
 * worker went without work, and then all three waited for each other (measured: about a quarter of
 * the main thread idle on a 10,000-commit replay; under 5% with a turn every 16 commits).
 */
const YIELD_EVERY = 16;

/**
 * Commits replayed or appended before the state cache is written again. Writing it costs time in
 * proportion to the ledger (tens of megabytes at 100k messages); a later process replays at most
 * this many commits from it.
 */
const CHECKPOINT_EVERY = 512;

/** Every this many commits (by Ledger-Seq) a writer asks git whether to pack (object-store.ts, packLooseObjects). */
export const PACK_CHECK_EVERY = 256;

/** What a replay reports as it goes. */
export interface ReplayObserver {
  /** The clock of a judge of new commits (the pre-receive hook's): entries dated ahead of it are refused (authority/rules/clock.ts). */
  readonly clock?: Date;
  /** With `clock`: the commits land as their writer wrote them, so claims, approved dispatches and acks of or work under a CEO command not yet taken up dated behind it are refused too (rules/clock.ts checkNotBehind). */
  readonly landing?: boolean;
  readonly onFinding?: (finding: Finding) => void;
  readonly onCommit?: (facts: CommitFacts, verdict: CommitVerdict, next: LedgerState) => void;
  /**
   * Stop after the first commit that does not verify: its findings are reported, nothing past it is
   * judged, and the state returned is the one after it. For a caller that refuses the whole history
   * on any finding (what a remote serves): a main of millions of forged commits, within what one
   * fetch takes, would otherwise be judged to its end, each finding kept, until memory ran out.
   */
  readonly untilInvalid?: boolean;
}

/** One commit's objects, read ahead of its validation; `unreadable` when its tree or files could not be read. */
interface Gathered {
  readonly links: CommitLinks;
  readonly facts: CommitFacts;
  readonly unreadable?: Finding;
}

/**
 * The verdict on a commit whose tree or files could not be read: the validator judges the commit
 * itself (position, signature) with no files, after the finding of the reading. Given no files, the
 * validator always finds something, so the commit is skipped; when that is only that the commit adds
 * nothing (its one finding, with no path), it says no more than the reading's finding and is left out.
 */
function unreadableVerdict(state: LedgerState, facts: CommitFacts, unreadable: Finding): CommitVerdict {
  const verdict = validateCommit(state, facts);
  const only = verdict.findings.length === 1 ? verdict.findings[0]! : null;
  const own = only !== null && only.code === 'PATH_INVALID' && only.path === undefined ? [] : verdict.findings;
  return { ...verdict, findings: [unreadable, ...own] };
}

export interface Snapshot {
  readonly state: LedgerState;
  /** Root tree of the head commit, or null before genesis. */
  readonly tree: string | null;
}

/**
 * A ledger: a bare git repository with one linear, signed `main`. Reads go through one
 * `git cat-file`; writes are atomic loose objects under git's own ref lock; every
 * commit, ours or pushed, passes the one validator.
 */
export class Ledger {
  readonly reader: ObjectReader;
  readonly trees: TreeReader;
  private readonly writer: ObjectWriter;
  private snapshot: Snapshot | null = null;
  private queue: Promise<unknown> = Promise.resolve();
  /**
   * Findings of the invalid commits in the history of the current state (each skipped, never
   * applied), as far as this handle replayed it: from genesis, or from a state cache, which is
   * written only for a history without any.
   */
  private damage: readonly Finding[] = [];
  private replayedSinceCheckpoint = 0;
  private pool: SignaturePool | null = null;
  /** Whether this handle found no path of the ledger every user may write, before its first append. */
  private closedChecked = false;
  /** Set by `publishing`: what an append must get done before the local main moves. */
  private publisher: ((commit: string) => Promise<void>) | null = null;

  private constructor(
    readonly gitdir: string,
    private readonly options: { readonly checkpoints: boolean },
  ) {
    this.reader = new CatFileReader(gitdir);
    this.trees = new TreeReader(this.reader);
    this.writer = new ObjectWriter(gitdir);
  }

  /** Opens an existing ledger. `checkpoints: false` neither reads nor writes the state cache. */
  static open(gitdir: string, options: { checkpoints?: boolean } = {}): Ledger {
    if (!fs.existsSync(join(gitdir, 'HEAD')) || !fs.existsSync(join(gitdir, 'objects'))) {
      // A work tree checked out of the ledger (git clone) is the likeliest path given by mistake: said as one.
      const workTree = fs.existsSync(join(gitdir, '.git')) ? ': it is a git work tree; give the bare repository itself (coo init or coo clone made it)' : '';
      throw new CooError('LEDGER_NOT_FOUND', `${gitdir} is not a ledger (a bare git repository made by "coo init")${workTree}`);
    }
    checkGitFiles(gitdir);
    return new Ledger(gitdir, { checkpoints: options.checkpoints ?? true });
  }

  /** Wraps a directory that `coo init` is about to fill. */
  static forInit(gitdir: string): Ledger {
    return new Ledger(gitdir, { checkpoints: true });
  }

  close(): void {
    this.reader.close();
    this.pool?.close();
    this.pool = null;
  }

  head(): string | null {
    return readRef(this.gitdir, MAIN_REF);
  }

  /** The findings of the invalid commits in the history of the state last read (see `intactState`). */
  get findings(): readonly Finding[] {
    return this.damage;
  }

  /** Serializes every state operation of this handle: the fold extends shared maps in place. */
  private exclusive<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.queue.then(fn, fn);
    this.queue = run.catch(() => undefined);
    return run;
  }

  /** The state at the current head. */
  state(): Promise<LedgerState> {
    return this.exclusive(async () => (await this.snapshotAt(this.head())).state);
  }

  /** The state at `head` (which must be the current head or descend from what this handle has seen). */
  stateAt(head: string | null): Promise<LedgerState> {
    return this.exclusive(async () => (await this.snapshotAt(head)).state);
  }

  /**
   * The state at `head`, as stateAt, when every commit up to it verifies; otherwise the findings of
   * the first commit on the way that does not, judged no further (ReplayObserver.untilInvalid). For
   * what a remote serves, refused on any finding.
   */
  verifiedStateAt(head: string): Promise<{ readonly state: LedgerState; readonly findings: readonly Finding[] }> {
    return this.exclusive(async () => {
      const invalid: Finding[] = [];
      const { state } = await this.snapshotAt(head, invalid);
      return { state, findings: invalid.length > 0 ? invalid : [...this.damage] };
    });
  }

  /**
   * The state at the current head, to act on: refused, with the first finding, when the history
   * holds an invalid commit. Such a commit's files never take effect, but the head and the files
   * read at it are not what the ledger's rules allow: the runner acts on nothing and no writer
   * builds on it until someone has looked (`coo verify`).
   */
  intactState(): Promise<LedgerState> {
    return this.exclusive(async () => {
      const { state } = await this.snapshotAt(this.head());
      this.refuseDamaged();
      return state;
    });
  }

  private refuseDamaged(): void {
    const first = this.damage[0];
    if (first === undefined) return;
    const more = this.damage.length > 1 ? ` (${this.damage.length - 1} more finding(s))` : '';
    throw new CooError(
      first.code,
      `the ledger's history holds an invalid commit${first.commit === undefined ? '' : ` ${first.commit}`} (${first.message})${more}: nothing acts on it or builds on it; run coo verify`,
      { findings: this.damage, ...(first.path === undefined ? {} : { where: first.path }) },
    );
  }

  /** With `invalid`, the replay stops at the first commit that does not verify, whose findings go there (ReplayObserver.untilInvalid). */
  private async snapshotAt(head: string | null, invalid?: Finding[]): Promise<Snapshot> {
    if (head === null) return { state: emptyState(), tree: null };
    if (this.snapshot?.state.head === head) return this.snapshot;
    let base = this.snapshot;
    let damage = this.damage;
    let commits = base === null ? null : await commitsSince(this.reader, head, base.state.head);
    if (commits === null && this.options.checkpoints) {
      const saved = loadCheckpoint(this.gitdir);
      if (saved !== null && saved.state.head !== null) {
        base = saved;
        damage = [];
        commits = await this.rangeToReplay(head, saved.state.head, saved.state.seq);
      }
    }
    if (commits === null || base === null) {
      base = { state: emptyState(), tree: null };
      damage = [];
      commits = await this.rangeToReplay(head, null, 0);
      if (commits === null) throw new CooError('INTERNAL', `cannot walk the history of ${head}`);
    }
    this.snapshot = null;
    const found = [...damage];
    const next = await this.replay(base, commits, invalid === undefined ? { onFinding: (finding) => found.push(finding) } : { untilInvalid: true, onFinding: (finding) => invalid.push(finding) });
    // Cut short, it is the state at no head to build on (the fold extended the base's maps in place): the next read replays anew.
    if (invalid !== undefined && invalid.length > 0) return next;
    this.snapshot = next;
    this.damage = found;
    this.replayedSinceCheckpoint += commits.length;
    if (this.options.checkpoints && this.replayedSinceCheckpoint >= CHECKPOINT_EVERY) this.checkpoint();
    return next;
  }

  /**
   * The commits after `stop` up to `head`, oldest first (commitsSince: null when `head` does not
   * descend from `stop`), found while the reader and, for a long range, the signature workers start.
   * `fromSeq` is the Ledger-Seq at `stop`.
   */
  async rangeToReplay(head: string, stop: string | null, fromSeq: number): Promise<string[] | null> {
    // Both settle before either's failure is passed on: the caller closes the reader then.
    const [commits, prepared] = await Promise.allSettled([commitsSince(this.reader, head, stop), this.prepareForReplay(head, fromSeq)]);
    if (commits.status === 'rejected') throw commits.reason;
    if (prepared.status === 'rejected') throw prepared.reason;
    return commits.value;
  }

  /**
   * Starts the object reader and, when the head's Ledger-Seq says the replay will be long, the
   * signature workers, while git lists the history: both take tens of milliseconds to start. The
   * sequence number is the commit's own claim, used only to decide this; the replay decides the rest.
   */
  private async prepareForReplay(head: string, fromSeq: number): Promise<void> {
    if (this.pool !== null) return;
    const links = await readCommitLinks(this.reader, head).catch(() => null);
    if (this.pool === null && links?.seq != null && links.seq - fromSeq >= PARALLEL_FROM) this.pool = new SignaturePool();
  }

  /**
   * Folds commits into a state. Invalid commits are reported and skipped: their files never take
   * effect. Reads run ahead of validation (a window of commits in flight), so the object reads of
   * many commits share the cat-file pipe while each commit is judged in order.
   */
  async replay(base: Snapshot, commits: readonly string[], observer: ReplayObserver = {}): Promise<Snapshot> {
    let { state, tree } = base;
    if (this.pool === null && commits.length >= PARALLEL_FROM) this.pool = new SignaturePool();
    const pending = new Map<number, Promise<Gathered>>();
    const linksOf = new Map<number, Promise<CommitLinks>>();
    const links = (index: number): Promise<CommitLinks> => {
      let promise = linksOf.get(index);
      if (promise === undefined) {
        promise = readCommitLinks(this.reader, commits[index]!);
        linksOf.set(index, promise);
      }
      return promise;
    };
    const prefetch = (index: number): void => {
      const gathered = (async (): Promise<Gathered> => {
        const own = await links(index);
        const parentTree = index === 0 ? base.tree : (await links(index - 1)).tree;
        try {
          const facts = await gatherFacts(this.reader, this.trees, own, parentTree);
          return { links: own, facts: this.pool === null ? facts : await preverify(this.pool, facts) };
        } catch (error) {
          // A tree or file of this commit that cannot be read as a ledger's (a symlink, an
          // executable, a missing object): a finding of this commit, not the end of the replay.
          if (!isCooError(error)) throw error;
          return { links: own, facts: { oid: own.oid, raw: own.raw, changes: [], blobs: new Map() }, unreadable: toFinding(error, own.oid) };
        }
      })();
      gathered.catch(() => undefined);
      pending.set(index, gathered);
    };
    let next = 0;
    try {
      for (let index = 0; index < commits.length; index += 1) {
        for (; next < Math.min(commits.length, index + Math.min(REPLAY_WINDOW, READ_AHEAD_FIRST + index)); next += 1) prefetch(next);
        if (index % YIELD_EVERY === YIELD_EVERY - 1) await nextTurn();
        const { links: own, facts, unreadable } = await pending.get(index)!;
        pending.delete(index);
        linksOf.delete(index - 2);
        const verdict = unreadable === undefined ? validateCommit(state, facts, observer.clock ?? null, observer.clock !== undefined && observer.landing === true) : unreadableVerdict(state, facts, unreadable);
        for (const finding of verdict.findings) observer.onFinding?.(finding);
        state = verdict.advance();
        tree = own.tree;
        observer.onCommit?.(facts, verdict, state);
        if (observer.untilInvalid === true && verdict.findings.length > 0) {
          await Promise.allSettled(pending.values());
          break;
        }
      }
    } catch (error) {
      // Reads of the commits ahead are still under way: let them end before the caller closes
      // the reader, or one of them would start a new git cat-file that nothing ever closes.
      await Promise.allSettled(pending.values());
      throw error;
    }
    return { state, tree };
  }

  /**
   * Writes the state cache now, if at least `minCommits` commits came since the last one (the runner
   * calls this when idle). Writing costs time and memory in proportion to the ledger.
   */
  checkpoint(minCommits = 1): void {
    if (this.snapshot === null || this.snapshot.tree === null || !this.options.checkpoints || this.damage.length > 0) return;
    if (this.replayedSinceCheckpoint < minCommits) return;
    try {
      saveCheckpoint(this.gitdir, this.snapshot.state, this.snapshot.tree);
      this.replayedSinceCheckpoint = 0;
    } catch {
      // A cache: a full disk or a read-only ledger costs a longer replay next time, nothing else.
    }
  }

  /**
   * Runs `fn` with its append published by `publish` before anything moves here: `publish` gets the
   * new commit, signed and validated against the state at the head, its objects written, while the
   * ref lock is held. When `publish` throws, the append writes nothing: the local main and this
   * handle's state stay at the head it was built on, so a write refused elsewhere costs no replay.
   * One append per call (a remote takes a write as one commit).
   */
  async publishing<T>(publish: (commit: string) => Promise<void>, fn: () => Promise<T>): Promise<T> {
    if (this.publisher !== null) throw new CooError('INTERNAL', 'a publishing write is already under way on this ledger handle');
    let used = false;
    this.publisher = async (commit) => {
      if (used) throw new CooError('INTERNAL', 'a published write appends one commit; this one tried a second');
      used = true;
      await publish(commit);
    };
    try {
      return await fn();
    } finally {
      this.publisher = null;
    }
  }

  /**
   * Reads a file at the head (or at `commit`): null when it is not there or the layout has no place
   * for it; a file over its place's bound (blobBound) is refused from its size, unread.
   */
  async readFile(path: string, commit?: string): Promise<Buffer | null> {
    const at = commit ?? this.head();
    if (at === null) return null;
    const links = await readCommitLinks(this.reader, at);
    const oid = await this.trees.lookup(links.tree, path);
    const bound = blobBound(path);
    if (oid === null || bound === null) return null;
    const object = await this.reader.read(oid, bound.bytes);
    if (object === null) return null;
    if (object.type !== 'blob') throw notAFile(path, object.type);
    if (object.content === null) throw tooLarge(path, object.size, bound);
    return object.content;
  }

  /**
   * Every writer, not the runner alone (whose start checks it first, as RUNNER_CONFIG): a ledger
   * every user may write is refused (USAGE) before this handle's first write, walked once per
   * handle. A writer through a remote asks before it runs git in the clone (RemoteLedger.write).
   */
  requireClosed(code: 'RUNNER_CONFIG' | 'USAGE' = 'USAGE'): void {
    if (this.closedChecked) return;
    requireLedgerClosed(this.gitdir, code);
    this.closedChecked = true;
  }

  /**
   * Signs and appends files as one commit: under git's ref lock, against the state at the head,
   * through the same validator every other path uses. A rejected commit writes nothing and leaves
   * the ref where it was.
   */
  async append<T = never>(options: AppendOptions<T>): Promise<AppendResult | { skipped: T }> {
    return this.exclusive(async () => {
      this.requireClosed();
      let accepted: { verdict: ReturnType<typeof validateCommit>; tree: string; result: AppendResult } | null = null;
      const outcome = await withRefLock<AppendResult | { skipped: T }>(this.gitdir, async (current) => {
        const snapshot = await this.snapshotAt(current);
        this.refuseDamaged();
        const state = snapshot.state;
        const skipped = options.precheck?.(state);
        if (skipped !== undefined) return { next: null, result: { skipped } };
        const built = await this.build(snapshot, current, options);
        // Judged as new against the writer's own clock (`now`): an entry it dated ahead of it is refused.
        const verdict = validateCommit(state, built.facts, options.now);
        if (verdict.findings.length > 0) {
          const first = verdict.findings[0]!;
          const more = verdict.findings.length > 1 ? ` (${verdict.findings.length - 1} more finding(s))` : '';
          throw new CooError(first.code, `rejected: ${first.message}${more}`, { findings: verdict.findings, ...(first.path === undefined ? {} : { where: first.path }) });
        }
        await built.objects.flush(this.writer);
        if (this.publisher !== null) await this.publisher(built.facts.oid);
        const result: AppendResult = { commit: built.facts.oid, seq: state.seq + 1, paths: [...built.facts.blobs.keys()] };
        accepted = { verdict, tree: built.tree, result };
        return { next: built.facts.oid, result };
      });
      if (accepted === null) return outcome as { skipped: T };
      const { verdict, tree, result } = accepted as { verdict: ReturnType<typeof validateCommit>; tree: string; result: AppendResult };
      this.snapshot = { state: verdict.advance(), tree };
      this.replayedSinceCheckpoint += 1;
      if (this.replayedSinceCheckpoint >= CHECKPOINT_EVERY) this.checkpoint();
      if (result.seq % PACK_CHECK_EVERY === 0) packLooseObjects(this.gitdir);
      return result;
    });
  }

  private async build(snapshot: Snapshot, parent: string | null, options: AppendOptions<unknown>): Promise<{ facts: CommitFacts; objects: PendingObjects; tree: string }> {
    const objects = new PendingObjects();
    const builder = new TreeBuilder(this.trees, snapshot.tree);
    const blobs = new Map<string, Buffer>();
    const statuses = new Map<string, 'added' | 'modified' | 'unchanged'>();
    const add = async (path: string, bytes: Buffer): Promise<void> => {
      if (blobs.has(path)) throw new CooError('USAGE', `${path} is given twice`);
      blobs.set(path, bytes);
      statuses.set(path, await builder.add(path, await objects.write('blob', bytes), { replace: isForgePath(path) }));
    };
    const files = typeof options.files === 'function' ? options.files(snapshot.state) : options.files;
    for (const file of files) {
      await add(file.path, file.bytes);
      const info = classifyPath(file.path);
      if (info !== null && isSigned(info)) {
        await add(sigPath(file.path), Buffer.from(signSshsig(options.key, file.bytes, ENTRY_NAMESPACE), 'utf8'));
      }
    }
    const tree = await builder.write(objects);
    const holder = keyHolders(snapshot.state).get(options.key.publicKey.keyId);
    const name = holder?.actor ?? (options.key.comment.trim() === '' ? 'unknown' : options.key.comment.trim());
    const ident = formatIdent(name, options.key.publicKey.keyId, Math.floor(options.now.getTime() / 1000));
    const fields = {
      tree,
      parents: parent === null ? [] : [parent],
      author: ident,
      committer: ident,
      message: ledgerMessage(options.summary, snapshot.state.seq + 1),
    };
    const signature = signSshsig(options.key, renderCommitPayload(fields), GIT_NAMESPACE);
    const raw = renderSignedCommit(fields, signature);
    const oid = await objects.write('commit', raw);
    if (oid !== hashObject('commit', raw)) throw new CooError('INTERNAL', 'commit id mismatch');
    // The changes a diff of the trees finds, so the validator judges here what a replay will judge.
    const changes = [...statuses].flatMap(([path, status]) => (status === 'unchanged' ? [] : [{ path, status, mode: '100644' }]));
    return { facts: { oid, raw, changes, blobs }, objects, tree };
  }
}
