import type { Intent } from '../schema/common.js';
import type { Runner, RunnerEvent } from '../runner/runner.js';
import { markInterrupted } from './outcome.js';

/**
 * Ctrl-C (or SIGTERM) on a running runner: the first signal stops it (no new attempt starts, the
 * processes of the attempt in flight are killed and that attempt is receipted `interrupted`), and
 * one line says what became of it; a second signal ends the process at once.
 *
 * SIGHUP (the terminal it ran in closed: an ssh session dropped, a window shut) stops it the same
 * way. Left to its default it ended the runner at once, receipting nothing, and left the attempt's
 * Oracle or executor running on, in a process group of its own, outside any runner: still paying and
 * writing, until the next start found and ended it.
 */
export const STOP_SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;

/**
 * Calls `onFirst` on the first of STOP_SIGNALS to come, whichever it is; that signal takes the
 * listeners of all three away, so a second signal, of any kind, ends the process at once (its
 * default action). With one listener per signal, only the same signal again did: Ctrl-C then
 * SIGTERM ran the handler a second time and the process waited on, for as long as a call in hand
 * took (a remote's git, up to LIMITS.remoteGitMs). Returns what takes the listeners away unused.
 */
export function onStopSignal(onFirst: (signal: NodeJS.Signals) => void): () => void {
  const dispose = (): void => {
    for (const signal of STOP_SIGNALS) process.off(signal, handler);
  };
  const handler = (signal: NodeJS.Signals): void => {
    dispose();
    onFirst(signal);
  };
  for (const signal of STOP_SIGNALS) process.on(signal, handler);
  return dispose;
}

export interface StopOnSignal {
  /** The signal that stopped the runner, or null. */
  readonly signal: () => NodeJS.Signals | null;
  /** Feed every runner event: receipts of attempts cut short are remembered for the closing line. */
  readonly observe: (event: RunnerEvent) => void;
  /**
   * The closing lines: one per attempt the stop cut short, or one saying none was in flight. An
   * attempt cut short also makes the verb's exit 130, for coo watch and coo mcp --run alike.
   */
  readonly closing: (intentOf: (messageId: string) => Intent | undefined) => string[];
  readonly dispose: () => void;
}

export function stopOnSignal(runner: Pick<Runner, 'interrupt'>, onStop: (signal: NodeJS.Signals) => void): StopOnSignal {
  let stopped: NodeJS.Signals | null = null;
  const cut: Array<Extract<RunnerEvent, { type: 'receipt' }>> = [];
  const dispose = onStopSignal((signal) => {
    stopped = signal;
    runner.interrupt(signal);
    onStop(signal);
  });
  return {
    signal: () => stopped,
    observe: (event) => {
      if (stopped !== null && event.type === 'receipt' && event.blockers.includes('interrupted')) cut.push(event);
    },
    closing: (intentOf) => {
      if (stopped === null) return [];
      if (cut.length === 0) return [`stopped by ${stopped}; no attempt was in flight`];
      markInterrupted();
      return cut.map((event) => {
        const what = `stopped by ${stopped}: ${event.messageId} attempt ${event.attempt} was cut short, its processes ended, and it is receipted failed (interrupted)`;
        if (intentOf(event.messageId) === 'ea_dispatch') return `${what}; a dispatch runs again only when the CEO approves it (coo approve ${event.messageId} --ceo-key CEO.key --reason ...)`;
        if (event.retryAt === null) return `${what}; the policy allows it no further attempt`;
        return `${what}; the next coo watch runs attempt ${event.attempt + 1} from ${event.retryAt}`;
      });
    },
    dispose,
  };
}
