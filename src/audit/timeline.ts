import type { Finding } from '../errors.js';
import type { LedgerState } from '../authority/state.js';
import type { CommitVerdict } from '../authority/validate-commit.js';
import type { CommitFacts } from '../ledger/commit-facts.js';
import { identTime } from '../ledger/commit-format.js';
import { classifyPath, type PathInfo } from '../ledger/layout.js';
import type { Approval } from '../schema/control.js';
import { eaCommands, type EaReceipt } from '../schema/receipt.js';
import { readStrictYaml } from '../schema/strict-yaml.js';
import { readAnswerBlock } from '../consult/answer.js';
import { adviceOf, type MemberAdvice } from './panel-comparison.js';

/** One file a commit added, as the report lists it. */
export interface TimelineEntry {
  readonly path: string;
  readonly kind: PathInfo['kind'] | 'unknown';
  readonly messageId: string | null;
  /** A receipt's `warnings` (what held but was weaker than it should be), when its commit is valid. */
  readonly warnings: readonly string[];
  /** An approval (approval.v0) in a valid commit: who approved what, and why. */
  readonly approval?: TimelineApproval;
  /** An ea_receipt.v0 in a valid commit: the attempt's branch, verification and cost. */
  readonly dispatch?: TimelineDispatch;
  /** A message's prompt.md in a valid commit: the question (or task), as the COO wrote it. */
  readonly question?: string;
  /** An attempt's answer.md in a valid commit, when it holds one valid aa_answer block: the advice's verdict and summary. */
  readonly verdict?: { readonly verdict: string; readonly summary: string };
  /** The same answer as a panel's comparison reads it: verdict, confidence, objections and findings (texts clipped). */
  readonly advice?: MemberAdvice;
}

export interface TimelineApproval {
  readonly approvedBy: string;
  readonly approves: 'dispatch' | 'retry';
  readonly requestHash: string | null;
  readonly messageId: string | null;
  readonly attempt: number | null;
  readonly reason: string;
}

export interface TimelineDispatch {
  readonly status: string;
  readonly executor: string;
  readonly branch: string | null;
  readonly headSha: string | null;
  readonly filesChanged: number;
  /** The runner's own verification commands with their exit codes, in order. */
  readonly verification: ReadonlyArray<{ readonly command: string; readonly exitCode: number }>;
  readonly costUsd: number;
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

function approvalOf(bytes: Buffer | undefined, path: string): TimelineApproval | undefined {
  if (bytes === undefined) return undefined;
  const doc = readStrictYaml(bytes, path) as Approval;
  return { approvedBy: doc.approved_by, approves: doc.approves, requestHash: doc.request_hash, messageId: doc.message_id, attempt: doc.attempt_number, reason: doc.reason };
}

/** The dispatch facts of a receipt the validator accepted, when it is an ea_receipt.v0. */
function dispatchOf(bytes: Buffer | undefined, path: string): TimelineDispatch | undefined {
  if (bytes === undefined) return undefined;
  const doc = readStrictYaml(bytes, path) as EaReceipt | { schema_version?: unknown };
  if (doc.schema_version !== 'ea_receipt.v0') return undefined;
  const receipt = doc as EaReceipt;
  return {
    status: receipt.status,
    executor: receipt.executor,
    branch: receipt.branch,
    headSha: receipt.head_sha,
    filesChanged: receipt.files_changed.length,
    verification: eaCommands(receipt).filter(({ by }) => by === 'verification').map(({ command, exitCode }) => ({ command, exitCode })),
    costUsd: receipt.actual_cost_usd,
  };
}

/** The longest question or summary the report keeps of a message: the page shows a line of it. */
const TEXT_CHARS = 300;

function clip(text: string): string {
  const trimmed = text.trim();
  return trimmed.length > TEXT_CHARS ? `${trimmed.slice(0, TEXT_CHARS - 1)}…` : trimmed;
}

function verdictOf(bytes: Buffer | undefined): Pick<TimelineEntry, 'verdict' | 'advice'> {
  if (bytes === undefined) return {};
  const read = readAnswerBlock(bytes.toString('utf8'));
  if (!('answer' in read)) return {};
  const advice = adviceOf(read.answer);
  return { verdict: { verdict: read.answer.verdict, summary: clip(read.answer.summary) }, advice: { ...advice, summary: clip(advice.summary), objections: advice.objections.slice(0, 20).map(clip) } };
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
          const blob = facts.blobs.get(change.path);
          const warnings = valid && info?.kind === 'receipt' ? receiptWarnings(blob, change.path) : [];
          const approval = valid && info?.kind === 'approval' ? approvalOf(blob, change.path) : undefined;
          const dispatch = valid && info?.kind === 'receipt' ? dispatchOf(blob, change.path) : undefined;
          const question = valid && info?.kind === 'message_artifact' && info.name === 'prompt.md' && blob !== undefined ? clip(blob.toString('utf8')) : undefined;
          const advice = valid && info?.kind === 'attempt_artifact' && info.name === 'answer.md' ? verdictOf(blob) : {};
          return {
            path: change.path,
            kind: info?.kind ?? 'unknown',
            messageId,
            warnings,
            ...(approval === undefined ? {} : { approval }),
            ...(dispatch === undefined ? {} : { dispatch }),
            ...(question === undefined ? {} : { question }),
            ...advice,
          };
        }),
      findings: verdict.findings,
    });
  }

  timeline(): Timeline {
    return { commits: this.commits };
  }
}
