import { isMainThread } from 'node:worker_threads';

/**
 * What coo makes is never writable by the group or by other users, whatever umask the process was
 * started with: under umask 000 the ledger's git folders and objects (written by git, which takes
 * the process's umask), the runner's state and the operator's outputs were world-writable, and any
 * local user could rewrite the ledger under a runner. Adds group and other write to the umask, once,
 * at the CLI's and the library's entry; git and every other child inherit it. Files written with a
 * mode of their own (keys and secrets 0600) keep it. A worker thread cannot set the umask and shares
 * its process's: nothing to do there.
 */
export function closeUmask(): void {
  if (!isMainThread) return;
  const previous = process.umask(0o022);
  process.umask(previous | 0o022);
}
