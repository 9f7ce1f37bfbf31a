import { join } from 'node:path';
import { watch } from 'chokidar';
import { errorClassOf, isCooError } from '../errors.js';
import { readRef } from '../ledger/ref-lock.js';
import { machineMonotonic } from '../util/process.js';
import type { RemoteLedger } from '../remote/publish.js';
import type { Runner, RunnerErrorEvent, RunSummary } from './runner.js';

/** A backstop for file events the watcher coalesces or drops: the head is also checked this often. */
const POLL_MS = 1000;
/** Just past chokidar's 50 ms throttle of repeated change events. */
const TRAILING_MS = 60;
/**
 * The longest a watch's wake waits at once. A timer set further out than 2^31-1 ms (24.8 days: a
 * message's expiry may be 30 days off, its deadline years) fires at once, and the watch would spin;
 * a wake this far off runs a pass that sets the next one.
 */
const MAX_WAKE_MS = 86_400_000;

/** A failure that ends a watch: a history that does not verify (`rejected`), or a runner that may not go on (`usage`: its key revoked). */
function endsWatch(error: unknown): boolean {
  if (!isCooError(error)) return false;
  const kind = errorClassOf(error.code);
  return kind === 'rejected' || kind === 'usage';
}

export interface WatchOptions {
  /**
   * Seconds to the first heartbeat's successor; none when absent. After each heartbeat the interval
   * is the one of the policy it was written under (Runner.heartbeatSeconds): one the CEO changes
   * takes effect at the next beat, as the heartbeat's lifetime does.
   */
  readonly heartbeatSeconds?: number;
  readonly signal?: AbortSignal;
  readonly onIdle?: () => void;
  /**
   * A failure that does not end the watch, reported as the runner's events are (`Runner.errorEvent`): a
   * heartbeat that was not written (a busy lock, a remote that moved under every try), and through a
   * remote a pass that failed for such a reason; each is tried again.
   */
  readonly onError?: (event: RunnerErrorEvent) => void;
}

/**
 * Beats through `runner.heartbeat` now and then again, each time after the interval of the policy the
 * last beat was written under (or `fallbackSeconds` until one is known), one beat at a time. A failure
 * that ends the watch is handed to `fail`; any other is reported (a runner whose beats do not land is
 * soon judged gone by the others) and waits for the next beat. Returns the stop: a beat still in flight
 * then is not waited for, and what it meets (a ledger closed under it) is not said.
 */
function heartbeats(runner: Runner, fallbackSeconds: number, options: WatchOptions, fail: (error: unknown) => void): () => void {
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  const beat = (): void => {
    void runner
      .heartbeat()
      .then(
        () => undefined,
        (error: unknown) => {
          if (stopped) return;
          if (endsWatch(error)) return fail(error);
          const event = runner.errorEvent(error);
          options.onError?.({ ...event, message: `the heartbeat was not written: ${event.message}` });
        },
      )
      .finally(() => {
        if (!stopped) timer = setTimeout(beat, (runner.heartbeatSeconds ?? fallbackSeconds) * 1000);
      });
  };
  beat();
  return () => {
    stopped = true;
    if (timer !== undefined) clearTimeout(timer);
  };
}

/**
 * Runs the runner whenever the ledger's head moves (chokidar on the ref files, so a commit made
 * by `coo consult`, by stock git or by another runner wakes it at once), when a retry comes due,
 * and at start. One run at a time; a change during a run schedules one more. A run that fails as a
 * whole (a ledger rolled back, forked or holding an invalid commit; the runner's own message errors
 * are events, not failures) ends the watch: everything is stopped, then the failure is thrown.
 */
export async function watchLedger(runner: Runner, gitdir: string, options: WatchOptions = {}): Promise<void> {
  const refs = [join(gitdir, 'refs', 'heads', 'main'), join(gitdir, 'packed-refs')];
  const watcher = watch([join(gitdir, 'refs', 'heads'), join(gitdir, 'packed-refs')], { ignoreInitial: true, depth: 1 });
  let running = false;
  let again = false;
  let wake: NodeJS.Timeout | undefined;
  let endBeats: (() => void) | undefined;
  let stopped = false;
  /** The head the last run finished on; a head that moved without an event (coalesced by the file watcher) is caught by the poll. */
  let seen: string | null = null;
  /** What ended the watch, when a failure did. */
  const failure: { failed: boolean; error?: unknown } = { failed: false };
  let stop: () => void = () => undefined;
  const done = new Promise<void>((resolve) => {
    stop = resolve;
  });
  const fail = (error: unknown): void => {
    if (!failure.failed) Object.assign(failure, { failed: true, error });
    stopped = true;
    stop();
  };

  const run = async (): Promise<void> => {
    if (stopped) return;
    if (running) {
      again = true;
      return;
    }
    running = true;
    let summary: RunSummary | undefined;
    try {
      do {
        again = false;
        summary = await runner.runOnce();
        const head = readRef(gitdir);
        if (head !== seen) again = again || seen !== null;
        seen = head;
      } while (again && !stopped);
    } catch (error) {
      fail(error);
      return;
    } finally {
      running = false;
    }
    if (wake !== undefined) clearTimeout(wake);
    const next = summary?.waiting[0];
    if (next !== undefined && !stopped) wake = setTimeout(() => void run(), Math.min(MAX_WAKE_MS, Math.max(0, Date.parse(next) - Date.now()) + 50));
    options.onIdle?.();
  };

  watcher.on('all', (_event, path) => {
    if (!refs.includes(path)) return;
    // A head that moved while a pass runs may hold a kill switch the CEO turned on: it stops the attempt in flight.
    if (running) void runner.checkKillSwitch().catch(() => undefined);
    void run();
    // chokidar drops a second change to the same file within 50 ms of the first (no trailing
    // event); a check just after that window catches a commit that landed inside it.
    setTimeout(() => {
      if (!stopped && readRef(gitdir) !== seen) void run();
    }, TRAILING_MS);
  });
  await new Promise<void>((resolve) => watcher.once('ready', () => resolve()));
  // A heartbeat the ledger refuses (its history is damaged) or the runner's checks refuse (its key
  // revoked) ends the watch; any other failure (a busy lock, say) is reported and waits for the next beat.
  if (options.heartbeatSeconds !== undefined) endBeats = heartbeats(runner, options.heartbeatSeconds, options, fail);
  await run();
  const poll = setInterval(() => {
    if (!running && readRef(gitdir) !== seen) void run();
  }, POLL_MS);
  if (options.signal?.aborted === true) stop();
  options.signal?.addEventListener('abort', stop, { once: true });
  await done;
  stopped = true;
  clearInterval(poll);
  if (wake !== undefined) clearTimeout(wake);
  endBeats?.();
  options.signal?.removeEventListener('abort', stop);
  await watcher.close();
  while (running) await new Promise((resolve) => setTimeout(resolve, 50));
  if (failure.failed) throw failure.error;
}

export interface RemoteWatchOptions extends WatchOptions {
  /** The remote the runner works through: where it looks for a moved main. */
  readonly remote: Pick<RemoteLedger, 'remoteHead'>;
  /** Seconds between looks at the remote's main while things move (default 2). */
  readonly pollSeconds?: number;
  /** The longest wait between looks, idle or failing (default 30 s). */
  readonly maxPollSeconds?: number;
}

/**
 * Runs the runner against a remote: it looks at the remote's main with `git ls-remote` every poll
 * interval and runs a pass (which fetches, verifies and adopts it first) when main moved, when a
 * retry or a lease comes due, and while cut off (each pass tries the remote again). The interval
 * grows by half while idle and doubles on errors, up to the maximum; anything that moves sets it
 * back, and a pass only a due time woke on a main that did not move leaves it growing. A history that does not verify (or any `rejected` failure) ends the watch, as a damaged
 * local ledger does; a pass that fails for a passing reason is reported and retried.
 */
export async function watchRemote(runner: Runner, options: RemoteWatchOptions): Promise<void> {
  const interval = Math.max(0.05, options.pollSeconds ?? 2) * 1000;
  const max = Math.max(interval, (options.maxPollSeconds ?? 30) * 1000);
  let stopped = options.signal?.aborted === true;
  let failure: { error: unknown } | null = null;
  let sleeping: { timer: NodeJS.Timeout; resolve: () => void } | null = null;
  const sleep = (ms: number): Promise<void> =>
    new Promise((resolve) => {
      sleeping = { timer: setTimeout(resolve, ms), resolve };
    });
  const stop = (): void => {
    stopped = true;
    if (sleeping !== null) {
      clearTimeout(sleeping.timer);
      sleeping.resolve();
    }
  };
  options.signal?.addEventListener('abort', stop, { once: true });
  let endBeats: (() => void) | undefined;
  // One heartbeat in flight at a time: a slow remote must not stack them up in front of the passes.
  if (options.heartbeatSeconds !== undefined) {
    endBeats = heartbeats(runner, options.heartbeatSeconds, options, (error) => {
      failure ??= { error };
      stop();
    });
  }
  let delay = interval;
  let seen: string | null = null;
  /**
   * When the runner asked to be woken: by the wall clock (a retry's time, an expiry), and as far off on
   * the monotonic clock as it was when the pass ended (a lease, a look again at a model server: waits
   * the runner measures there). Either wakes it: a wall clock set back an hour (NTP, a restored virtual
   * machine) does not hold a lapsed lease's takeover or a look for an hour, nor one set forward a retry
   * its wall clock now reads as due.
   */
  let due: { readonly wall: number; readonly monotonic: number } | null = null;
  const dueIn = (): number => (due === null ? Number.POSITIVE_INFINITY : Math.min(due.wall - Date.now(), due.monotonic - machineMonotonic()));
  try {
    while (!stopped) {
      const head = await options.remote.remoteHead();
      const moved = head === null || head !== seen || runner.cutOffAt !== null || dueIn() <= 0;
      if (moved) {
        const seenBefore = seen;
        try {
          const summary = await runner.runOnce();
          if (runner.cutOffAt === null) seen = head;
          const next = summary.waiting[0];
          due = next === undefined ? null : { wall: Date.parse(next), monotonic: machineMonotonic() + Date.parse(next) - Date.now() };
          // A pass only a due time woke, on a main that did not move, that wrote nothing (a look again at a model server that still does not answer), is idle:
          // it does not set the back-off back. One that did work (a retry, a takeover, an expiry receipted) did, as a moved main does.
          delay = runner.cutOffAt !== null ? Math.min(max, delay * 2) : head !== seenBefore || summary.receipts > 0 ? interval : Math.min(max, delay * 1.5);
          options.onIdle?.();
        } catch (error) {
          if (!isCooError(error) || endsWatch(error)) throw error;
          options.onError?.(runner.errorEvent(error));
          delay = Math.min(max, delay * 2);
        }
      } else {
        delay = Math.min(max, delay * 1.5);
      }
      const wait = due === null ? delay : Math.max(0, Math.min(delay, dueIn() + 50));
      if (!stopped) await sleep(wait);
    }
  } catch (error) {
    failure ??= { error };
  } finally {
    endBeats?.();
    options.signal?.removeEventListener('abort', stop);
  }
  if (failure !== null) throw (failure as { error: unknown }).error;
}
