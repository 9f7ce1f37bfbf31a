import { describeStatus, keyStatus } from '../authority/keys.js';
import type { LedgerState } from '../authority/state.js';
import type { Finding } from '../errors.js';
import type { TrustRoot } from '../schema/control.js';

/** What an auditor's pinned key turned out to be: a refusal when it does not anchor the ledger, a note when it did but no longer holds. */
export interface PinOutcome {
  readonly finding: Finding | null;
  readonly note: string | null;
}

/**
 * Judges the key an auditor pins (`--trust-root`) against the ledger: it must be an authority of
 * the first trust root, the one genesis laid, since a later root proves nothing alone (anyone can
 * make a ledger whose chain rotates to a public key they know). Says what the key is either way:
 * the CEO key since rotated out or revoked, the current CEO key of a rotated ledger, another
 * actor's key, or a key the ledger never knew. Pure.
 */
export function judgePin(state: LedgerState, firstRoot: TrustRoot | null, keyId: string): PinOutcome {
  // No commit at all (main missing or never written): nothing names the key, so nothing verified from it.
  if (state.genesis === null) {
    return { finding: { code: 'TRUST_ROOT_MISMATCH', message: `the ledger has no commit (its main is missing): no first trust root names the pinned key ${keyId}, and nothing was verified from it; a ledger starts with the genesis coo init lays, so fetch or restore its main` }, note: null };
  }
  const first = (firstRoot?.authorities ?? []).map((authority) => authority.key_id);
  const status = keyStatus(state, keyId);
  const now = (state.root?.doc.authorities ?? []).map((authority) => authority.key_id).join(', ') || '(none)';
  if (first.includes(keyId)) {
    if (status.status === 'active' && status.rootAuthority) return { finding: null, note: null };
    return { finding: null, note: `the pinned key ${keyId} is the ledger's first trust root, and the history verifies from it; it is now ${describeStatus(status)}: the trust root in force names ${now}` };
  }
  const pinFirst = `pin the key the ledger started from, ${first.join(', ') || '(none)'}: the chain from it is what carries authority to later keys, and a later root key proves nothing alone`;
  const record = status.status === 'unknown' ? null : status.record;
  const what =
    status.status === 'unknown'
      ? 'a key the trust files never gave'
      : record?.rootNamed === true
        ? `a trust-root key the chain reached after genesis, ${describeStatus(status)}`
        : `not a trust-root key but ${describeStatus(status)}`;
  return {
    finding: { code: 'TRUST_ROOT_MISMATCH', commit: state.genesis, message: `the ledger's first trust root does not name the pinned key ${keyId}, ${what}; ${pinFirst}` },
    note: null,
  };
}

/**
 * Judges the ledger an auditor pins (`--genesis`): its genesis commit must be the pinned one. The
 * first trust root carries random bits (`ledger_id`), so two ledgers under the same CEO key (a
 * staging copy, a ledger made again) have different genesis commits: the key pin alone takes either.
 */
export function judgeLedgerPin(genesis: string | null, pinned: string): Finding | null {
  if (genesis === pinned) return null;
  return {
    code: 'LEDGER_MISMATCH',
    message:
      genesis === null
        ? `the ledger has no commit (its main is missing), not the pinned ledger whose genesis is ${pinned}`
        : `the ledger's genesis is ${genesis}, not the pinned ${pinned}: this is another ledger (one made with the same keys, a staging copy); pin the genesis coo verify --json printed for the ledger you mean`,
    ...(genesis === null ? {} : { commit: genesis }),
  };
}
