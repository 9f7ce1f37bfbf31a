/**
 * Whether an error (or an error it was caused by) says the disk or the user's quota is full
 * (ENOSPC, EDQUOT): what a writer can answer by freeing space of its own and writing again.
 */
export function isDiskFull(error: unknown): boolean {
  for (let cause: unknown = error, depth = 0; cause !== null && cause !== undefined && depth < 8; depth += 1) {
    const code = (cause as { code?: unknown }).code;
    if (code === 'ENOSPC' || code === 'EDQUOT') return true;
    cause = (cause as { cause?: unknown }).cause;
  }
  return false;
}
