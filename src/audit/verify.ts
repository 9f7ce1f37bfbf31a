import type { Finding } from '../errors.js';
import type { LedgerState } from '../authority/state.js';
import { commitsSince } from '../ledger/history.js';
import { Ledger } from '../ledger/ledger.js';
import { emptyState } from '../authority/state.js';

export interface VerifyReport {
  readonly head: string | null;
  readonly seq: number;
  readonly commits: number;
  readonly findings: readonly Finding[];
  readonly state: LedgerState;
}

export interface VerifyOptions {
  readonly onProgress?: (done: number, total: number) => void;
}

/**
 * Replays the whole history from genesis through the validator, with no cached state, and
 * reports every finding: each invalid commit is reported and skipped, and the replay goes on.
 */
export async function verifyLedger(gitdir: string, options: VerifyOptions = {}): Promise<VerifyReport> {
  const ledger = Ledger.open(gitdir, { checkpoints: false });
  try {
    const head = ledger.head();
    if (head === null) return { head, seq: 0, commits: 0, findings: [], state: emptyState() };
    const commits = (await commitsSince(ledger.reader, head, null)) ?? [];
    const findings: Finding[] = [];
    const { state } = await ledger.replay({ state: emptyState(), tree: null }, commits, (finding) => findings.push(finding), (seq) =>
      options.onProgress?.(seq, commits.length),
    );
    return { head, seq: state.seq, commits: commits.length, findings, state };
  } finally {
    ledger.close();
  }
}
