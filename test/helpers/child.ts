import type { ChildProcess } from 'node:child_process';

/** The exit code of a child process, once it has exited (null when a signal ended it). */
export function exited(child: ChildProcess): Promise<number | null> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve(child.exitCode);
    else child.once('exit', (code) => resolve(code));
  });
}

/** Waits, checking every 25 ms, until `condition` holds; fails after 60 s (a runner and its Oracle starting on a loaded machine take more than 15 s). */
export async function until(condition: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 2400; i += 1) {
    if (condition()) return;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  throw new Error(`timed out waiting for ${what}`);
}
