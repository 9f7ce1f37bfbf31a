import type { Finding } from '../errors.js';
import type { LedgerState } from '../authority/state.js';
import type { CommitVerdict } from '../authority/validate-commit.js';
import type { CommitFacts } from '../ledger/commit-facts.js';
import { identTime } from '../ledger/commit-format.js';
import { classifyPath, type PathInfo } from '../ledger/layout.js';

/** One commit as an auditor sees it: position, time, signer, what it added, what was wrong with it. */
export interface TimelineCommit {
  readonly seq: number;
  readonly commit: string;
  readonly time: string | null;
  readonly signer: { readonly actor: string; readonly keyId: string } | null;
  readonly summary: string;
  readonly entries: ReadonlyArray<{ readonly path: string; readonly kind: PathInfo['kind'] | 'unknown'; readonly messageId: string | null }>;
  readonly findings: readonly Finding[];
}

export interface Timeline {
  readonly commits: readonly TimelineCommit[];
}

/** Collects the timeline during a verification replay (audit/verify.ts), for the report. */
export class TimelineRecorder {
  private readonly commits: TimelineCommit[] = [];

  record(facts: CommitFacts, verdict: CommitVerdict, next: LedgerState): void {
    const commit = verdict.commit;
    this.commits.push({
      seq: next.seq,
      commit: facts.oid,
      time: commit === null ? null : new Date(identTime(commit.committer) * 1000).toISOString(),
      signer: verdict.signer,
      summary: commit?.message.split('\n')[0] ?? '(unparsable commit)',
      entries: facts.changes
        .filter((change) => !change.path.endsWith('.sig'))
        .map((change) => {
          const info = classifyPath(change.path);
          const messageId = info !== null && 'messageId' in info ? info.messageId : null;
          return { path: change.path, kind: info?.kind ?? 'unknown', messageId };
        }),
      findings: verdict.findings,
    });
  }

  timeline(): Timeline {
    return { commits: this.commits };
  }
}
