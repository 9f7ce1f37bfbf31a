import { AsyncLocalStorage } from 'node:async_hooks';
import { realpathSync } from 'node:fs';
import { resolve } from 'node:path';
import { AHEAD_OF_JUDGE, BEHIND_JUDGE } from '../authority/rules/clock.js';
import { CooError } from '../errors.js';
import { descendsFrom, isAncestor } from '../ledger/history.js';
import type { AppendOptions, AppendResult, Ledger } from '../ledger/ledger.js';
import { MAIN_REF, readRef, withRefLock } from '../ledger/ref-lock.js';
import { checkFetchBytes, checkTimeLimitMs, LIMITS } from '../limits.js';
import { displayUrl, urlSecrets } from '../util/display-url.js';
import { credentialHelperSecrets, gitRemoteSecrets } from '../util/credential-files.js';
import { ambiguousDestination } from '../util/push-destination.js';
import { MIN_SECRET_CHARS, Scrubber, type Secret } from '../util/scrub.js';
import { runGit } from '../util/exec.js';
import { checkOriginUnchanged, DEFAULT_LIMIT_NAME, checkedOrigin, exactRef, gitSaid, mainNotACommit, ORIGIN_REF, receivedAmiss, refusedAccess, runRemoteGit, shareSshConnection, unreachable, VERIFIED_REF, type CheckedOrigin, type HeldType, type RemoteGitResult, type SharedSshConnection } from './git-remote.js';

/** Tries of one write before it gives up with REMOTE_CONFLICT. */
export const DEFAULT_MAX_TRIES = 8;

export interface RemoteLedgerOptions {
  /** The remote's URL: the origin of the clone (checked). */
  readonly remote: string;
  /** Tries of one write, the first included (default 8). */
  readonly maxTries?: number;
  /** The wait before the try after the `conflicts`-th conflict, in ms (default: random, up to 25 ms x 2^conflicts, at most 1 s). */
  readonly backoffMs?: (conflicts: number) => number;
  /** Share one ssh connection among this handle's git commands until `close` (a long-lived client such as a runner; see shareSshConnection). */
  readonly shareConnection?: boolean;
  /** The time limit of each git command against the remote, in ms (default LIMITS.remoteGitMs). */
  readonly timeoutMs?: number;
  /** The limit's name in messages (the flag that set it). */
  readonly limitName?: string;
  /** The most one fetch of the remote's main may bring, in bytes (default LIMITS.remoteFetchBytes). */
  readonly maxFetchBytes?: number;
  /** How long a write waits for the clone's lock held by another process, in ms (default LIMITS.lockWaitMs). */
  readonly lockWaitMs?: number;
}

/** How a write reached the remote. */
export interface PublishReport {
  /** The remote's URL as shown to people and machines: without credentials (util/display-url.ts). */
  readonly url: string;
  /** Writes built and pushed, the last included. */
  readonly tries: number;
  /** Pushes refused because someone else advanced the remote's main first. */
  readonly conflicts: number;
}

export interface Published<R> {
  /** What the write returned on its last try: an existing message when the idempotency rules found one on the new head. */
  readonly result: R;
  /** The commit the remote now has, or null when the write wrote nothing. */
  readonly commit: string | null;
  readonly report: PublishReport;
}

export interface SyncResult {
  /** The remote's main, verified, and now the local main. */
  readonly head: string;
  /** Commits that arrived and were replayed through the validator. */
  readonly arrived: number;
}

/** What a look at the remote's main found: its head, no main at all, or no answer. */
type MainLook = { readonly kind: 'head'; readonly head: string } | { readonly kind: 'missing' } | { readonly kind: 'unreachable'; readonly result: RemoteGitResult };

/** A push the remote did not take, and what a fetch found after it. */
interface Refused {
  readonly pushed: RemoteGitResult;
  readonly fetched: MainLook;
  readonly remoteHead: string | null;
}

/** Full jitter: a random wait, up to twice as long after every conflict. */
function defaultBackoff(conflicts: number): number {
  return Math.random() * Math.min(1_000, 25 * 2 ** conflicts);
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** The lock that keeps a second publisher on the same clone out while a write is being published. */
const PUBLISH_LOCK = 'coo/publish';

/** The last turn taken by this process's publishers on each clone (by its real path): the next one waits for it to settle. */
const turns = new Map<string, Promise<unknown>>();
/** The clones whose turn the current async context holds: a write inside its own turn is refused, not queued behind itself. */
const inTurn = new AsyncLocalStorage<readonly string[]>();

function cloneKey(gitdir: string): string {
  try {
    return realpathSync(gitdir);
  } catch {
    return resolve(gitdir);
  }
}

/**
 * A local working ledger (made by `coo clone`) that publishes through its origin. The remote's
 * fast-forward-only update is the compare-and-swap: a write is validated and signed on the local
 * main at the remote's verified head, then pushed, never forced, before the local main moves. When
 * the push is refused because someone else wrote first, what arrived is fetched
 * and verified, and the same write runs again on the new head (a function of the state, so the
 * idempotency and claim rules judge it anew), with bounded, jittered retries. Nothing is reported
 * written until the remote has it, and nothing unpublished stays on the local main.
 */
export class RemoteLedger {
  /** The remote's URL as shown: user info (credentials) removed. */
  readonly url: string;
  /** The URL as given: checked against the clone's origin, never printed. */
  private readonly remoteUrl: string;
  private readonly timeoutMs: number | undefined;
  private readonly limitName: string;
  private readonly maxTries: number;
  private readonly maxFetchBytes: number;
  private readonly lockWaitMs: number;
  private readonly backoffMs: (conflicts: number) => number;
  /** The origin checked, and where git fetched from and pushed to through it then. */
  private origin: Promise<CheckedOrigin> | null = null;
  private readonly shared: SharedSshConnection | null;

  /**
   * The secrets this remote's git is handed, for the runner's scrubber: the credentials its URL
   * carries (user info, a token in its query), whether or not the clone's origin spells them, and
   * what git's credential helpers and GIT_ASKPASS give for it (util/credential-files.ts), asked once
   * here as its first fetch would ask them. Throws RUNNER_CONFIG when a helper does not answer.
   */
  secrets(): Secret[] {
    this.learned ??= [...this.inUrl(), ...credentialHelperSecrets([{ url: this.remoteUrl, gitArgs: ['--git-dir', this.ledger.gitdir], askpass: true }])];
    return this.learned;
  }

  private learned: Secret[] | null = null;
  private handed: Scrubber | null = null;

  private inUrl(): Secret[] {
    return urlSecrets([this.remoteUrl], 'remote credentials', MIN_SECRET_CHARS);
  }

  /**
   * What git's words about this remote are scrubbed of (git-remote.ts runRemoteGit): its secrets, asked
   * once (a runner asked them at its start), and the clone's configured ones; a helper that does not
   * answer leaves the URL's. Learned the first time git says anything, not on a runner's quiet looks.
   */
  private handedScrubber(): Scrubber {
    if (this.handed === null) {
      let asked: Secret[];
      try {
        asked = this.secrets();
      } catch {
        asked = this.inUrl();
      }
      let configured: Secret[];
      try {
        configured = gitRemoteSecrets([this.gitdir], { helpers: false });
      } catch {
        configured = [];
      }
      this.handed = new Scrubber([...asked, ...configured]);
    }
    return this.handed;
  }

  constructor(
    readonly ledger: Ledger,
    options: RemoteLedgerOptions,
  ) {
    this.remoteUrl = options.remote;
    this.url = displayUrl(options.remote);
    this.timeoutMs = checkTimeLimitMs(options.timeoutMs, 'RemoteLedger');
    this.limitName = options.limitName ?? DEFAULT_LIMIT_NAME;
    this.maxTries = options.maxTries ?? DEFAULT_MAX_TRIES;
    this.maxFetchBytes = checkFetchBytes(options.maxFetchBytes, 'RemoteLedger') ?? LIMITS.remoteFetchBytes;
    this.lockWaitMs = options.lockWaitMs ?? LIMITS.lockWaitMs;
    if (!Number.isSafeInteger(this.maxTries) || this.maxTries < 1) throw new CooError('USAGE', `maxTries must be a positive integer, got ${this.maxTries}`);
    if (!Number.isSafeInteger(this.lockWaitMs) || this.lockWaitMs < 0) throw new CooError('USAGE', `lockWaitMs must be a whole number of ms, got ${this.lockWaitMs}`);
    // Checked first: the shared connection makes its socket folder.
    this.shared = options.shareConnection === true ? shareSshConnection(ledger.gitdir, options.remote) : null;
    this.backoffMs = options.backoffMs ?? defaultBackoff;
  }

  private get gitdir(): string {
    return this.ledger.gitdir;
  }

  /** Ends the shared ssh connection, if any. */
  close(): void {
    this.shared?.close();
  }

  /**
   * The remote's main as `git ls-remote` sees it now: its commit, an empty string when the remote
   * answers but has no main (a pass then finds out why), or null when it cannot be reached.
   */
  async remoteHead(): Promise<string | null> {
    const looked = await this.lookMain();
    return looked.kind === 'head' ? looked.head : looked.kind === 'missing' ? '' : null;
  }

  /** Every git that talks to the remote, after the origin's route is found unchanged (a few stat calls while no config file changed). */
  private async git(args: readonly string[], received: { maxReceivedBytes?: number; onlyRef?: string; wanted?: string; held?: HeldType } = {}): Promise<RemoteGitResult> {
    await this.checkOrigin();
    return runRemoteGit(args, { gitdir: this.gitdir, ...(this.shared === null ? {} : { env: this.shared.env }), ...(this.timeoutMs === undefined ? {} : { timeoutMs: this.timeoutMs }), limitName: this.limitName, handed: () => this.handedScrubber(), ...received });
  }

  /** The origin is checked in full once; each fetch or push after that finds git's route through it unchanged (git-remote.ts checkOriginUnchanged). */
  private async checkOrigin(): Promise<void> {
    if (this.origin === null) {
      this.origin = checkedOrigin(this.gitdir, this.remoteUrl);
      await this.origin;
      return;
    }
    await checkOriginUnchanged(this.gitdir, this.remoteUrl, await this.origin);
  }

  /** The remote's main by its exact name (git-remote.ts, exactRef). */
  private async lookMain(): Promise<MainLook> {
    const looked = await this.git(['ls-remote', '--quiet', 'origin', MAIN_REF], { onlyRef: MAIN_REF });
    if (!looked.ok) return { kind: 'unreachable', result: looked };
    const head = exactRef(looked.stdout, MAIN_REF);
    return head === null ? { kind: 'missing' } : { kind: 'head', head };
  }

  /**
   * Brings the remote's main into ORIGIN_REF, by its exact name: a fetch of `refs/heads/main`
   * would take a branch named `refs/heads/main` (that is, `refs/heads/refs/heads/main`) when main
   * itself is gone, so the commit is looked up by name with ls-remote and fetched by its id (and
   * not fetched at all when this clone has it already). A remote whose main moved between the two
   * (an older server refuses an id it no longer advertises) is looked at again. A refusal of what
   * the remote sent says `done`: what was left undone (after a push whose answer was lost, that
   * whether the remote took the write is unknown).
   */
  private async fetchMain(done = 'nothing was acted on'): Promise<MainLook> {
    for (let tries = 1; ; tries += 1) {
      const looked = await this.lookMain();
      if (looked.kind !== 'head') return looked;
      if (!(await this.hasCommit(looked.head))) {
        // No maintenance: git would start it in the quarantine, where it can do nothing.
        const fetched = await this.git(['fetch', '--quiet', '--no-tags', '--no-auto-maintenance', 'origin', looked.head], { maxReceivedBytes: this.maxFetchBytes, wanted: looked.head, held: this.heldType });
        // A remote that sends more than any fetch takes (a huge pack, objects main does not need) is a finding about it, not a network failure.
        if (fetched.tooLarge !== undefined) {
          throw new CooError('REMOTE_UNVERIFIED', `${this.url} sent more for its main (${looked.head.slice(0, 12)}) than one fetch takes: ${fetched.tooLarge}; ${done}; run coo verify on a fresh clone (a ledger that grew that much is fetched by coo watch or coo clone with a higher --max-fetch, in MiB)`);
        }
        if (fetched.unnamed !== undefined) throw receivedAmiss(this.url, looked.head, fetched.unnamed, done);
        // Checked in the quarantine, before anything was kept (unnamedObjects): a main written to name a tag would otherwise reach the replay as a malformed commit, and its objects stay.
        if (fetched.notACommit !== undefined) throw mainNotACommit(this.url, looked.head, fetched.notACommit, done);
        if (!fetched.ok) {
          const again = tries < 3 && fetched.timedOut === null ? await this.lookMain() : looked;
          if (again.kind === 'head' && again.head !== looked.head) continue;
          return again.kind === 'missing' ? again : { kind: 'unreachable', result: fetched };
        }
      }
      await withRefLock(this.gitdir, async () => ({ next: looked.head, result: undefined }), { ref: ORIGIN_REF });
      return looked;
    }
  }

  private async hasCommit(oid: string): Promise<boolean> {
    if (readRef(this.gitdir, ORIGIN_REF) === oid || this.ledger.head() === oid) return true;
    return (await this.heldType(oid)) === 'commit';
  }

  /**
   * The type of the object the clone holds under `oid`, or null when it holds none: asked of its
   * open object reader (the type from git's header, no bytes kept), not of a new git process each
   * look. The reader's own failure is thrown, never taken for an object the clone lacks.
   */
  private readonly heldType = async (oid: string): Promise<string | null> => (await this.ledger.reader.read(oid, 0))?.type ?? null;

  /** The error for a remote that answers without a main: a finding about the remote, not a network failure. */
  private mainMissing(): CooError {
    return new CooError(
      'REMOTE_MAIN_MISSING',
      `${this.url} answers but has no main (refs/heads/main): it was deleted or never made there; nothing was written; restore it from a verified clone (git push ORIGIN ${VERIFIED_REF}:${MAIN_REF} from one: the head it last verified there), never by writing on top of something else`,
    );
  }

  /** Fetches the remote's main, verifies what arrived from the local verified state, and moves the local main to it. */
  async sync(): Promise<SyncResult> {
    await this.checkOrigin();
    return this.exclusive(async () => this.adopt(await this.fetch()));
  }

  /** `Ledger.append`, published: see `write`. */
  append<T = never>(options: AppendOptions<T>): Promise<Published<AppendResult | { skipped: T }>> {
    return this.write((ledger) => ledger.append(options));
  }

  /**
   * Runs `write` against the local ledger at the remote's verified head and publishes what it
   * appended: its commit is pushed before the local main moves (Ledger.publishing), so a write the
   * remote refused leaves nothing here, and one it took is the local main's next commit. `write`
   * may run more than once (once per try): it must be a function of the ledger's state, as every
   * writer built on `Ledger.append` is. A write that appends nothing (an existing message, a
   * skipped precheck) publishes nothing.
   */
  async write<R>(write: (ledger: Ledger) => Promise<R>): Promise<Published<R>> {
    // A clone others may write could hold their command (core.sshCommand) for the git below to run.
    this.ledger.requireClosed();
    await this.checkOrigin();
    return this.exclusive(async () => {
      let conflicts = 0;
      let previous = await this.fetch();
      for (let tries = 1; ; tries += 1) {
        const { head: base } = await this.adopt(previous);
        const report = (): PublishReport => ({ url: this.url, tries, conflicts });
        let written: string | null = null;
        let refused: Refused | null = null;
        let result: R;
        try {
          result = await this.ledger.publishing(async (commit) => {
            written = commit;
            const pushed = await this.git(['push', '--porcelain', '--quiet', 'origin', `${commit}:${MAIN_REF}`]);
            // The remote has it from here on, before the local main moves: a clone killed now still judges a remote without it a rollback.
            if (pushed.ok) return this.markVerified(commit);
            // The wait comes before the fetch, so a writer that lost rebuilds on the newest head it can see.
            await sleep(this.backoffMs(conflicts + 1));
            previous = readRef(this.gitdir, ORIGIN_REF);
            const fetched = await this.fetchMain(
              refusedPush(pushed) ? 'nothing was written (the local ledger is as it was)' : 'whether the remote took the write pushed before is unknown (an idempotent write run again returns what landed); the local ledger is as it was',
            );
            const remoteHead = fetched.kind === 'head' ? fetched.head : null;
            // The remote took the push and its answer was lost on the way back (others may have written on top since).
            if (remoteHead !== null && (remoteHead === commit || (await isAncestor(this.gitdir, commit, remoteHead)))) return this.markVerified(commit);
            refused = { pushed, fetched, remoteHead };
            throw new CooError('REMOTE_CONFLICT', 'not published');
          }, () => write(this.ledger));
        } catch (error) {
          if (refused === null) throw error;
          const { pushed, fetched, remoteHead } = refused as Refused;
          if (fetched.kind === 'missing') throw this.mainMissing();
          if (fetched.kind === 'unreachable') {
            const rejected = refusedPush(pushed);
            throw unreachable(
              rejected ? fetched.result : pushed,
              (said) => `cannot reach ${this.url} to publish: ${said}; ${rejected ? 'nothing was written' : 'whether the remote took the write is unknown (an idempotent write run again returns what landed)'}; the local ledger is as it was`,
            );
          }
          const ambiguous = ambiguousDestination(pushed);
          if (ambiguous !== null) {
            // git matches a push's destination against every ref the remote shows, by the rules it reads a short name by:
            // another ref there that ends in the name (a branch named refs/heads/main) refuses every push to main, before anything is sent.
            throw new CooError(
              'REMOTE_REJECTED',
              `${this.url} holds another ref that git takes for ${MAIN_REF} beside its main (a branch or tag named ${MAIN_REF}, or refs/${MAIN_REF}), so no push to its main can name it (git: ${ambiguous}); nothing was written (the local ledger is as it was); delete that ref on the remote (git ls-remote ORIGIN ${MAIN_REF} lists it beside main), which no coo command reads`,
            );
          }
          if (remoteHead === base && !refusedPush(pushed) && refusedAccess(pushed) === null) {
            // No answer to the push (a connection cut, a server error, a time limit), and a main that did not move: a fault on the way, never a refusal.
            throw unreachable(
              pushed,
              (said) => `the push to ${this.url} got no answer: ${said}; its main had not moved when looked at after, and whether the remote takes the write later is unknown (an idempotent write run again returns what landed); the local ledger is as it was`,
            );
          }
          if (remoteHead === base) {
            // This writer's clock took the entry and the server's refused it: every entry this clock dates is refused there alike.
            if (hookSaid(pushed).some((line) => line.startsWith('CLOCK_SKEW') && line.includes(AHEAD_OF_JUDGE))) {
              throw new CooError(
                'CLOCK_AHEAD',
                `${this.url} refused the write: ${refusal(pushed)}; this machine's clock runs ahead of the remote's by more than the ${LIMITS.clockSkewSeconds} s allowed between machines (or the remote's runs behind), so everything it dates is refused there; nothing was written (the local ledger is as it was); set the wrong clock right (NTP), then run again`,
              );
            }
            if (hookSaid(pushed).some((line) => line.startsWith('CLOCK_SKEW') && line.includes(BEHIND_JUDGE))) {
              throw new CooError(
                'CLOCK_BEHIND',
                `${this.url} refused the write: ${refusal(pushed)}; this machine's clock runs behind the remote's by more than the ${LIMITS.clockSkewSeconds} s allowed between machines (or the remote's runs ahead), so every claim (and approved dispatch) it dates is refused there; nothing was written, claimed or paid (the local ledger is as it was); set the wrong clock right (NTP), then run again`,
              );
            }
            throw new CooError('REMOTE_REJECTED', `${this.url} refused the write: ${refusal(pushed)}; nothing was written (the local ledger is as it was)`);
          }
          conflicts += 1;
          if (tries >= this.maxTries) {
            await this.adopt(previous);
            throw new CooError('REMOTE_CONFLICT', `${this.url} moved under ${tries} tries in a row (other writers published first each time); nothing was written; the local ledger is at the remote's head; try again`);
          }
          continue;
        }
        if (written === null) return { result, commit: null, report: report() };
        await this.trackPushed(written);
        return { result, commit: written, report: report() };
      }
    });
  }

  /**
   * One publisher per clone at a time: a write sits on the local main until the push settles. The
   * writers of this process on this clone (a runner's passes and its heartbeat) wait for each other
   * in turn, for as long as the one before takes; only when its turn comes does a writer take the
   * clone's lock, which it waits for up to `lockWaitMs` against other processes (a `coo` command on
   * the same clone). `fn` must not publish on the same clone itself: it would wait for its own turn,
   * so such a call fails at once (INTERNAL) rather than hang.
   */
  private exclusive<T>(fn: () => Promise<T>): Promise<T> {
    const clone = cloneKey(this.gitdir);
    const held = inTurn.getStore() ?? [];
    if (held.includes(clone)) {
      return Promise.reject(new CooError('INTERNAL', `a write on ${this.url} started another write on the same clone inside its own turn; it would wait for itself; nothing more was written`));
    }
    const turn = (turns.get(clone) ?? Promise.resolve()).then(() =>
      withRefLock(this.gitdir, async () => ({ next: null, result: await inTurn.run([...held, clone], fn) }), { ref: PUBLISH_LOCK, waitMs: this.lockWaitMs }),
    );
    turns.set(clone, turn.catch(() => undefined));
    return turn;
  }

  /** Fetches the remote's main into ORIGIN_REF; returns what ORIGIN_REF held before (the remote's head last verified). */
  private async fetch(): Promise<string | null> {
    const previous = readRef(this.gitdir, ORIGIN_REF);
    const fetched = await this.fetchMain();
    if (fetched.kind === 'missing') throw this.mainMissing();
    if (fetched.kind === 'unreachable') throw unreachable(fetched.result, (said) => `cannot fetch from ${this.url}: ${said}; nothing was written (the local ledger is as it was)`);
    return previous;
  }

  /**
   * Verifies the fetched main from the local verified state and moves the local main to it: the
   * fetched main must descend from the local one, and every commit that arrived must pass the
   * validator. Otherwise nothing moves, nothing is acted on, and ORIGIN_REF goes back to
   * `previous`, the remote's head last verified.
   */
  private async adopt(previous: string | null): Promise<SyncResult> {
    try {
      return await this.verifyFetched(previous);
    } catch (error) {
      if (previous !== null) await withRefLock(this.gitdir, async () => ({ next: previous, result: undefined }), { ref: ORIGIN_REF });
      throw error;
    }
  }

  private async verifyFetched(previous: string | null): Promise<SyncResult> {
    await this.ledger.intactState();
    const local = this.ledger.head();
    const remote = readRef(this.gitdir, ORIGIN_REF);
    if (remote === null) throw new CooError('REMOTE_UNVERIFIED', `${this.url} has no main to verify; nothing was written`);
    // The remote's head this clone last verified must still be in its main, whatever ORIGIN_REF says
    // now (a stock git fetch moves it too); a clone made before VERIFIED_REF existed has only ORIGIN_REF.
    const verified = readRef(this.gitdir, VERIFIED_REF) ?? previous;
    // A clone with no history of its own has nothing a pinned trust root verified: a main it adopted would be trusted from its own first commit.
    if (local === null && verified === null) {
      throw new CooError('REMOTE_UNVERIFIED', `${this.gitdir} holds no history verified from a trust root you pinned, so nothing ${this.url} serves is adopted; nothing was acted on; make the clone with coo clone URL DIR --trust-root KEY`);
    }
    if (verified !== null && !(await descendsFrom(this.ledger.reader, verified, remote))) {
      if (await isAncestor(this.gitdir, remote, verified)) {
        // The commits the remote dropped (a claim, a paid call's receipt) may be nowhere else: the advice restores them, never a fresh clone that drops them.
        throw new CooError(
          'REMOTE_UNVERIFIED',
          `the main of ${this.url} went back from ${verified.slice(0, 12)}, which this clone verified, to ${remote.slice(0, 12)}: its history was rolled back; nothing was acted on; the commits it dropped may be in no other clone: restore them from this one (git --git-dir ${this.gitdir} push origin ${verified}:${MAIN_REF}, a fast-forward to the head it verified there), never by making a fresh clone or writing on top of the older head`,
        );
      }
      throw await this.rewritten(remote, verified);
    }
    if (remote === local) {
      await this.markVerified(remote);
      return { head: remote, arrived: 0 };
    }
    if (local !== null && !(await descendsFrom(this.ledger.reader, local, remote))) {
      if (await isAncestor(this.gitdir, remote, local)) {
        throw new CooError(
          'REMOTE_UNPUBLISHED',
          `the local main of ${this.gitdir} holds commits ${this.url} does not have (written without --remote, or by a writer stopped before it published); nothing was written: publish them with "git --git-dir ${this.gitdir} push origin main", or drop them with "git --git-dir ${this.gitdir} update-ref refs/heads/main ${ORIGIN_REF}"`,
        );
      }
      throw await this.rewritten(remote, local);
    }
    const before = (await this.ledger.state()).seq;
    // Judged up to its first invalid commit: whatever comes after it is refused with it.
    const { state, findings } = await this.ledger.verifiedStateAt(remote);
    if (findings.length > 0) {
      const first = findings[0]!;
      throw new CooError(
        'REMOTE_UNVERIFIED',
        `what ${this.url} holds does not verify (${findings.length} finding(s), first ${first.code} at ${first.commit?.slice(0, 12) ?? 'the history'}: ${first.message}); nothing was acted on; run coo verify on a fresh clone`,
        { findings },
      );
    }
    await withRefLock(this.gitdir, async (current) => {
      if (current !== local) throw new CooError('LEDGER_CONFLICT', `the local main of ${this.gitdir} moved while the remote's was verified; try again`);
      return { next: remote, result: undefined };
    });
    await this.markVerified(remote);
    return { head: remote, arrived: state.seq - before };
  }

  /** The error for a remote main that does not descend from `verified`, a head this clone verified: the same ledger's history rewritten, or (no first commit shared) another ledger. */
  private async rewritten(remote: string, verified: string): Promise<CooError> {
    const roots = async (commit: string): Promise<string[]> =>
      (await runGit(['--git-dir', this.gitdir, 'rev-list', '--max-parents=0', commit]).catch(() => Buffer.alloc(0))).toString('utf8').split('\n').filter((line) => line !== '');
    const [theirs, ours] = await Promise.all([roots(remote), roots(verified)]);
    if (theirs.length > 0 && ours.length > 0 && !theirs.some((root) => ours.includes(root))) {
      return new CooError('REMOTE_UNVERIFIED', `${this.url} serves another ledger: its main (${remote.slice(0, 12)}) shares no first commit with the head this clone verified (${verified.slice(0, 12)}); nothing was acted on; check the remote this clone names (git --git-dir ${this.gitdir} remote get-url origin)`);
    }
    // What this clone verified past the last commit the two share may be on no remote at all (a forge that showed its clients two histories): it is named, so it is kept.
    const base = (await runGit(['--git-dir', this.gitdir, 'merge-base', remote, verified]).catch(() => Buffer.alloc(0))).toString('utf8').trim();
    const ahead = /^[0-9a-f]{40,64}$/.test(base) ? Number((await runGit(['--git-dir', this.gitdir, 'rev-list', '--count', `${base}..${verified}`]).catch(() => Buffer.from('0'))).toString('utf8').trim()) : 0;
    const kept =
      ahead > 0
        ? `; the ${ahead === 1 ? 'commit' : `${ahead} commits`} this clone verified after the last one they share (${base.slice(0, 12)}) ${ahead === 1 ? 'is' : 'are'} not in that main and may be in no other clone (a runner's claims and the receipts of calls it paid for among them): keep this clone, which holds them (git --git-dir ${this.gitdir} log ${base}..${verified})`
        : '';
    return new CooError(
      'REMOTE_UNVERIFIED',
      `the main of ${this.url} (${remote.slice(0, 12)}) does not descend from the head this clone verified (${verified.slice(0, 12)}): its history was rewritten, or the remote showed its clients different histories; nothing was acted on${kept}; run coo verify on a fresh clone to see what the remote holds`,
    );
  }

  /** Records `head` as the remote's head this clone verified (VERIFIED_REF). */
  private async markVerified(head: string): Promise<void> {
    if (readRef(this.gitdir, VERIFIED_REF) === head) return;
    await withRefLock(this.gitdir, async () => ({ next: head, result: undefined }), { ref: VERIFIED_REF });
  }

  /** Records the pushed head as the remote's (git does too, when the fetch refspec names it), and as verified: this clone built it. */
  private async trackPushed(head: string): Promise<void> {
    await withRefLock(this.gitdir, async () => ({ next: head, result: undefined }), { ref: ORIGIN_REF });
    await this.markVerified(head);
  }
}

/** Whether the remote answered the push with a refusal of the ref (git's porcelain `!` status line: a hook, a protected branch, not a fast-forward). */
function refusedPush(pushed: { stdout: string }): boolean {
  return pushed.stdout.split('\n').some((line) => line.startsWith('!'));
}

/** What the remote said on refusing a push (its `remote:` lines), each trimmed. */
function hookSaid(pushed: { stderr: string }): string[] {
  return pushed.stderr.split('\n').map((line) => /^remote:\s+(\S.*)$/.exec(line.trim())?.[1]?.trim()).filter((line): line is string => line !== undefined);
}

/** The remote's reason for refusing a push: the ledger hook's first finding, else the first thing the remote said, with git's status line. */
function refusal(pushed: { stdout: string; stderr: string }): string {
  const said = hookSaid(pushed);
  const first = said.find((line) => /^[A-Z_]+ \[/.test(line)) ?? said[0];
  const status = pushed.stdout.split('\n').find((line) => line.startsWith('!'));
  const reason = status === undefined ? gitSaid({ ok: false, stdout: pushed.stdout, stderr: pushed.stderr, timedOut: null }) : status.split('\t').slice(2).join(' ').trim() || status;
  return (first === undefined ? reason : `${first} (${reason})`).slice(0, LIMITS.pathChars);
}
