import type { Finding } from '../errors.js';
import type { LedgerState } from '../authority/state.js';
import type { CommitVerdict } from '../authority/validate-commit.js';
import type { CommitFacts } from '../ledger/commit-facts.js';
import { identTime } from '../ledger/commit-format.js';
import { classifyPath, type PathInfo } from '../ledger/layout.js';
import { readStrictYaml } from '../schema/strict-yaml.js';

/** One file a commit added, as the report lists it. */
export interface TimelineEntry {
  readonly path: string;
  readonly kind: PathInfo['kind'] | 'unknown';
  readonly messageId: string | null;
  /** A receipt's `warnings` (what held but was weaker than it should be), when its commit is valid. */
  readonly warnings: readonly string[];
}

/** One commit as an auditor sees it: position, time, signer, what it added, what was wrong with it. */
export interface TimelineCommit {
  readonly seq: number;
  readonly commit: string;
  readonly time: string | null;
  readonly signer: { readonly actor: string; readonly keyId: string } | null;
  readonly summary: string;
  readonly entries: readonly TimelineEntry[];
  readonly findings: readonly Finding[];
}

export interface Timeline {
  readonly commits: readonly TimelineCommit[];
}

/**
 * The warnings of a receipt the validator accepted. The validator read it against its schema
 * (a list of short codes), so this only picks the field out.
 */
function receiptWarnings(bytes: Buffer | undefined, path: string): readonly string[] {
  if (bytes === undefined) return [];
  const doc = readStrictYaml(bytes, path) as { warnings?: unknown };
  return Array.isArray(doc.warnings) ? doc.warnings.filter((warning): warning is string => typeof warning === 'string') : [];
}

/** Collects the timeline during a verification replay (audit/verify.ts), for the report. */
export class TimelineRecorder {
  private readonly commits: TimelineCommit[] = [];

  record(facts: CommitFacts, verdict: CommitVerdict, next: LedgerState): void {
    const commit = verdict.commit;
    const valid = verdict.findings.length === 0;
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
          const warnings = valid && info?.kind === 'receipt' ? receiptWarnings(facts.blobs.get(change.path), change.path) : [];
          return { path: change.path, kind: info?.kind ?? 'unknown', messageId, warnings };
        }),
      findings: verdict.findings,
    });
  }

  timeline(): Timeline {
    return { commits: this.commits };
  }
}
