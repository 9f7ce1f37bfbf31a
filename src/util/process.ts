import { hostname } from 'node:os';

/** Whether a process with this pid exists on this host (EPERM: it exists, owned by someone else). */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** This host's name, reduced to the characters ids and lock files allow. */
export function hostLabel(): string {
  return hostname().replace(/[^A-Za-z0-9._-]/g, '-').slice(0, 60) || 'host';
}
