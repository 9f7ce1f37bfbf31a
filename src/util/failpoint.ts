/**
 * Named fault-injection points for the crash tests: with `COO_FAILPOINT=<name>` (or `<name>@<n>`
 * for the n-th time the point is reached) the process kills itself with SIGKILL right there, as a
 * power cut or an OOM kill would. Unset, each point is one comparison.
 */
const wanted = process.env['COO_FAILPOINT'] ?? '';
const [wantedName, wantedCountText] = wanted.split('@');
const wantedCount = Number(wantedCountText ?? '1');
let hits = 0;

export function failpoint(name: string): void {
  if (wantedName === '' || wantedName !== name) return;
  hits += 1;
  if (hits === wantedCount) process.kill(process.pid, 'SIGKILL');
}
