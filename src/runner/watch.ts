import { join } from 'node:path';
import { watch } from 'chokidar';
import { errorClassOf, isCooError } from '../errors.js';
import { readRef } from '../ledger/ref-lock.js';
import type { Runner, RunSummary } from './runner.js';

/** A backstop for file events the watcher coalesces or drops: the head is also checked this often. */
const POLL_MS = 1000;
/** Just past chokidar's 50 ms throttle of repeated change events. */
const TRAILING_MS = 60;

export interface WatchOptions {
  /** Seconds between heartbeats; none when absent. */
  readonly heartbeatSeconds?: number;
  readonly signal?: AbortSignal;
  readonly onIdle?: () => void;
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
  let beat: NodeJS.Timeout | undefined;
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
    if (next !== undefined && !stopped) wake = setTimeout(() => void run(), Math.max(0, Date.parse(next) - Date.now()) + 50);
    options.onIdle?.();
  };

  watcher.on('all', (_event, path) => {
    if (!refs.includes(path)) return;
    void run();
    // chokidar drops a second change to the same file within 50 ms of the first (no trailing
    // event); a check just after that window catches a commit that landed inside it.
    setTimeout(() => {
      if (!stopped && readRef(gitdir) !== seen) void run();
    }, TRAILING_MS);
  });
  await new Promise<void>((resolve) => watcher.once('ready', () => resolve()));
  if (options.heartbeatSeconds !== undefined) {
    // A heartbeat the ledger refuses (its history is damaged) ends the watch; any other failure
    // (a busy lock, say) waits for the next beat.
    const heartbeat = (): void =>
      void runner.heartbeat().catch((error: unknown) => {
        if (isCooError(error) && errorClassOf(error.code) === 'rejected') fail(error);
      });
    heartbeat();
    beat = setInterval(heartbeat, options.heartbeatSeconds * 1000);
  }
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
  if (beat !== undefined) clearInterval(beat);
  options.signal?.removeEventListener('abort', stop);
  await watcher.close();
  while (running) await new Promise((resolve) => setTimeout(resolve, 50));
  if (failure.failed) throw failure.error;
}
