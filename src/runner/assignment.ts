import { createHash } from 'node:crypto';

/**
 * Which runner takes which queued message, when several runners work through one remote.
 *
 * Every runner reads the same ledger and computes the same answer, so they do not all race for the
 * oldest message (each lost race costs a push the hook validates, a fetch and a rebuild). Messages
 * are taken in queue order; each goes to the idle runner (one with no open claim) whose rendezvous
 * score for it is highest among those not yet given one. The matching is stable: a runner that
 * claims its message drops out of the idle set together with that message, and every other pair
 * stays as it was, so runners that see the ledger a claim apart still agree.
 *
 * The assignment is a hint that saves work, never a rule of the ledger: the claim (a compare-and-swap
 * on the remote) still decides, and a message its runner does not take within the hand-off time is
 * taken by whoever sees it next (runner/runner.ts). Pure.
 */

/** A runner's rendezvous score for a message: the first 8 bytes of SHA-256 over both ids. */
export function rendezvousScore(runner: string, messageId: string): bigint {
  return createHash('sha256').update(runner).update('\n').update(messageId).digest().readBigUInt64BE(0);
}

/**
 * The matching of `messages` (in queue order) to `idleRunners`: message id -> runner id. Messages
 * beyond the number of idle runners are matched to no one (whoever is idle next takes them).
 */
export function assignWork(messages: readonly string[], idleRunners: Iterable<string>): Map<string, string> {
  const free = new Set(idleRunners);
  const matched = new Map<string, string>();
  for (const message of messages) {
    if (free.size === 0) break;
    let best: string | null = null;
    let bestScore = -1n;
    for (const runner of free) {
      const score = rendezvousScore(runner, message);
      // Ties (vanishingly rare) go to the smaller id, so every runner breaks them alike.
      if (score > bestScore || (score === bestScore && best !== null && runner < best)) {
        best = runner;
        bestScore = score;
      }
    }
    matched.set(message, best!);
    free.delete(best!);
  }
  return matched;
}
