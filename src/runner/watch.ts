import { join } from 'node:path';
import { watch } from 'chokidar';
import type { Runner, RunSummary } from './runner.js';

export interface WatchOptions {
  /** Seconds between heartbeats; none when absent. */
  readonly heartbeatSeconds?: number;
  readonly signal?: AbortSignal;
  readonly onIdle?: () => void;
}

/**
 * Runs the runner whenever the ledger's head moves (chokidar on the ref files, so a commit made
 * by `coo consult`, by stock git or by another runner wakes it at once), when a retry comes due,
 * and at start. One run at a time; a change during a run schedules one more.
 */
export async function watchLedger(runner: Runner, gitdir: string, options: WatchOptions = {}): Promise<void> {
  const refs = [join(gitdir, 'refs', 'heads', 'main'), join(gitdir, 'packed-refs')];
  const watcher = watch([join(gitdir, 'refs', 'heads'), join(gitdir, 'packed-refs')], { ignoreInitial: true, depth: 1 });
  let running = false;
  let again = false;
  let wake: NodeJS.Timeout | undefined;
  let beat: NodeJS.Timeout | undefined;
  let stopped = false;

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
      } while (again && !stopped);
    } finally {
      running = false;
    }
    if (wake !== undefined) clearTimeout(wake);
    const next = summary?.waiting[0];
    if (next !== undefined && !stopped) wake = setTimeout(() => void run(), Math.max(0, Date.parse(next) - Date.now()) + 50);
    options.onIdle?.();
  };

  watcher.on('all', (_event, path) => {
    if (refs.includes(path)) void run();
  });
  await new Promise<void>((resolve) => watcher.once('ready', () => resolve()));
  if (options.heartbeatSeconds !== undefined) {
    const heartbeat = (): void => void runner.heartbeat().catch(() => undefined);
    heartbeat();
    beat = setInterval(heartbeat, options.heartbeatSeconds * 1000);
  }
  await run();
  await new Promise<void>((resolve) => {
    if (options.signal?.aborted === true) resolve();
    options.signal?.addEventListener('abort', () => resolve(), { once: true });
  });
  stopped = true;
  if (wake !== undefined) clearTimeout(wake);
  if (beat !== undefined) clearInterval(beat);
  await watcher.close();
  while (running) await new Promise((resolve) => setTimeout(resolve, 50));
}
