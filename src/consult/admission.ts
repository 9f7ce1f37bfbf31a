import { CooError } from '../errors.js';
import type { LedgerState } from '../authority/state.js';

/**
 * Refuses a new consult while the kill switch is on. The runner blocks queued consults while it is
 * on (consult/lane.ts); this keeps a stopped ledger from filling with requests in the meantime, so a
 * caller learns at once that nothing will run.
 */
export function refuseWhileStopped(state: LedgerState): void {
  const stop = state.killSwitch?.doc;
  if (stop?.state === 'on') throw new CooError('KILL_SWITCH', `the kill switch is on (set by ${stop.set_by}: ${stop.reason}); no consult is accepted until it is released`);
}
