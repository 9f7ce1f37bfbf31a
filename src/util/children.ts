import { killGroup } from './bubblewrap.js';

/**
 * The process groups a lane started and has not yet seen end (Oracle, an executor, a verification
 * command), so that stopping the runner (Ctrl-C) ends them too: each leads a detached group that
 * would otherwise outlive the runner and keep paying for an attempt no one will receipt.
 */
const groups = new Set<number>();

/** How many times the lane's processes were stopped: a start that began before a stop is never begun again after it. */
let stops = 0;

export function stopCount(): number {
  return stops;
}

/** Tracks a started group; the returned function forgets it once it ended. */
export function trackGroup(pid: number | undefined): () => void {
  if (pid === undefined) return () => undefined;
  groups.add(pid);
  return () => void groups.delete(pid);
}

/** Kills every tracked group; returns how many there were. */
export function stopGroups(): number {
  const count = groups.size;
  stops += 1;
  for (const pid of groups) killGroup(pid);
  groups.clear();
  return count;
}
