import { CooError } from '../../errors.js';
import { LIMITS } from '../../limits.js';
import { toMillis } from '../../schema/common.js';

/** How a refusal of checkNotAhead says it: a writer that reads it in a remote's refusal knows its own clock was judged (remote/publish.ts). */
export const AHEAD_OF_JUDGE = 'ahead of the clock that judges it';

/**
 * An entry is dated no later than the clock of the one who judges it as new, plus the skew allowed
 * between machines (LIMITS.clockSkewSeconds): the writer's own clock when it writes, the server's in
 * the pre-receive hook. An entry dated ahead was written by a clock that runs ahead (or dated so on
 * purpose), and it would block what builds on it: a claim dated before it by more than the skew is
 * refused (rules/claim.ts), so its message could not be claimed until real time caught up.
 * `coo verify` judges history and has no clock of the past to compare with: it does not apply this.
 */
export function checkNotAhead(clock: Date, field: string, at: string, where: string): void {
  const ahead = Math.floor((toMillis(at) - clock.getTime()) / 1000);
  if (ahead <= LIMITS.clockSkewSeconds) return;
  throw new CooError(
    'CLOCK_SKEW',
    `${where}: ${field} ${at} is ${ahead} s ${AHEAD_OF_JUDGE} (${clock.toISOString()}), more than the ${LIMITS.clockSkewSeconds} s allowed between machines: the clock of the machine that wrote it runs ahead; nothing was written; set that machine's clock right (NTP) and write it again, dated now`,
    { where: `${where}:${field}` },
  );
}

/** How a refusal of checkNotBehind says it: a runner that reads it in a remote's refusal knows its own clock was judged (remote/publish.ts). */
export const BEHIND_JUDGE = 'behind the clock that judges it';

/**
 * A claim, a dispatch that uses the CEO's approval, and an ack of the CEO's command or an envelope
 * whose parent is one (while the COO has not taken it up) is dated no earlier than the clock of the one
 * who judges it as new, less the skew allowed between machines: each is written at once, and its time
 * is what the ledger judges it by. A claim's fixes whether its message had expired, whether its retry
 * was due, whether the CEO's approval of it still stood, and the day its spend counts on
 * (lane/budget.ts chargedDay); a dispatch's, whether the approval it uses still stood; an ack's or a
 * child's, whether the command still stood (intents/ceo-command.ts checkCommandStands). One dated
 * behind was written by a clock that runs behind, by whose reading a message, an approval or a command
 * that expired minutes ago is still live and a day that is over still has its cap to spend. The
 * pre-receive hook applies it by the server's clock as the entry lands, in a push of one commit (a
 * push of several is history put back or moved, dated when written: ledger/receive.ts); a writer dates these entries
 * by the clock it judges with, so there it holds as written. `coo verify` judges history and has no
 * clock of the past to compare with: it does not apply this.
 */
export function checkNotBehind(clock: Date, field: string, at: string, where: string): void {
  const behind = Math.floor((clock.getTime() - toMillis(at)) / 1000);
  if (behind <= LIMITS.clockSkewSeconds) return;
  throw new CooError(
    'CLOCK_SKEW',
    `${where}: ${field} ${at} is ${behind} s ${BEHIND_JUDGE} (${clock.toISOString()}), more than the ${LIMITS.clockSkewSeconds} s allowed between machines: the clock of the machine that wrote it runs behind, and by it an expired message, approval or command, a retry not yet due or a day that is over reads as open; nothing was written; set that machine's clock right (NTP) and write it again, dated now`,
    { where: `${where}:${field}` },
  );
}

/** The time an entry says it was written: `claimed_at` of a claim, `created_at` of the others; null for the trust files that carry none. */
export function writtenAt(doc: object): { readonly field: string; readonly at: string } | null {
  const fields = doc as { readonly claimed_at?: unknown; readonly created_at?: unknown };
  if (typeof fields.claimed_at === 'string') return { field: 'claimed_at', at: fields.claimed_at };
  if (typeof fields.created_at === 'string') return { field: 'created_at', at: fields.created_at };
  return null;
}
