import type { LedgerState } from '../authority/state.js';
import { ENTRY_NAMESPACE, GIT_NAMESPACE } from '../crypto/sshsig.js';

/**
 * The allowed-signers file (ssh-keygen(1) ALLOWED SIGNERS) for every key the ledger's trust files
 * ever allowed, named by actor. With it, `git verify-commit`, `git log --show-signature` and
 * `ssh-keygen -Y verify` check signatures; which key may sign what, and when, is what
 * `coo verify` adds (git's valid-before trusts the signer's own clock).
 */
export function allowedSigners(state: LedgerState): string {
  const lines = [...state.everKeys.values()]
    .map((entry) => `${entry.actor} namespaces="${GIT_NAMESPACE},${ENTRY_NAMESPACE}" ${entry.publicKey}`)
    .sort();
  return lines.length === 0 ? '' : `${[...new Set(lines)].join('\n')}\n`;
}
