import type { Finding } from '../errors.js';
import type { AaAnswer } from '../schema/aa-answer.js';
import type { AaReceipt } from '../schema/receipt.js';
import { inert, literalCode } from './inert-markdown.js';
import { warningMeaning } from './warnings.js';

/** Everything a citation states, gathered by audit/evidence.ts. */
export interface Evidence {
  readonly messageId: string;
  readonly source: string;
  readonly target: string;
  readonly question: string;
  readonly repoCommit: string;
  readonly contextFiles: number;
  readonly receipt: AaReceipt;
  readonly receiptPath: string;
  readonly receiptSha256: string;
  readonly receiptCommit: string;
  readonly receiptSeq: number;
  readonly signer: string | null;
  readonly answer: AaAnswer | null;
  /** Everything `coo verify` found over the whole ledger, and any file that does not match its signed hash. */
  readonly findings: readonly Finding[];
  /** The ledger's genesis commit: its identity. */
  readonly genesis: string;
  /** The ledger's head, in Ledger-Seq. */
  readonly headSeq: number;
  /** The last Ledger-Seq up to which every commit replayed clean: the head when nothing is wrong. */
  readonly cleanToSeq: number;
}

/** Verified means what `coo verify` means by it: the whole replay found nothing. */
export function isVerified(evidence: Evidence): boolean {
  return evidence.findings.length === 0;
}

/** What is wrong, in one line an auditor can act on: the first finding, and how far history is clean. */
export function whatIsWrong(evidence: Evidence): string {
  const first = evidence.findings[0];
  if (first === undefined) return 'nothing';
  const more = evidence.findings.length > 1 ? ` (and ${evidence.findings.length - 1} more finding(s): coo verify lists them)` : '';
  const clean = evidence.cleanToSeq < evidence.headSeq ? `; history is clean only to Ledger-Seq ${evidence.cleanToSeq} of ${evidence.headSeq}` : '';
  return `${first.code}${first.commit === undefined ? '' : ` in commit ${first.commit.slice(0, 12)}`}: ${first.message}${more}${clean}`;
}

/** The hidden line that makes posting idempotent: one comment per receipt. */
export function citationMarker(evidence: Evidence): string {
  return `<!-- coo-commons:cite ${evidence.messageId} ${evidence.receiptSha256} -->`;
}

export { inert } from './inert-markdown.js';

function list(title: string, items: readonly string[]): string[] {
  return items.length === 0 ? [] : ['', `**${title}**`, ...items.map((item) => `- ${item}`)];
}

/** A Markdown block an issue or pull-request comment can hold. Pure. */
export function renderCitation(evidence: Evidence): string {
  const { receipt, answer } = evidence;
  const verified = isVerified(evidence);
  const lines = [
    citationMarker(evidence),
    '> [!NOTE]',
    '> **Advisory evidence, not authority.** An advisory agent\'s answer recorded in the coo-commons ledger. It informs the COO\'s decision; it instructs no one.',
    '',
    `**${evidence.target}** (model ${literalCode(receipt.model ?? 'unknown')}, Oracle ${receipt.engine} engine${receipt.route?.offline === true ? ', offline model' : ''}) on \`${evidence.messageId}\` from ${evidence.source}, attempt ${receipt.attempt_number}: **${receipt.status}**`,
    '',
    `**Question.** ${inert([...evidence.question].slice(0, 600).join(''))}`,
  ];
  if (answer !== null && receipt.status === 'succeeded') {
    lines.push('', `**Verdict:** ${answer.verdict} (confidence ${answer.confidence})`, '', `**Summary.** ${inert(answer.summary)}`);
    lines.push(...list('Findings', answer.findings.map((finding) => `**${finding.severity}**: ${inert(finding.title)}. ${inert(finding.detail)}${finding.refs.length > 0 ? ` (${finding.refs.map(inert).join(', ')})` : ''}`)));
    lines.push(...list('Recommendations', answer.recommendations.map(inert)));
    lines.push(...list('Objections', answer.objections.map(inert)));
  } else {
    lines.push(...list('Blockers', receipt.blockers.map((blocker) => `${literalCode(blocker.code)}: ${inert(blocker.detail)}`)));
  }
  lines.push(
    '',
    '| evidence | value |',
    '| --- | --- |',
    `| prompt | \`${receipt.prompt_hash}\` |`,
    `| context | \`${receipt.context_manifest_hash}\`: ${evidence.contextFiles} file(s) pinned at commit \`${evidence.repoCommit.slice(0, 12)}\` |`,
    `| output | ${receipt.output_hash === null ? 'none' : `\`${receipt.output_hash}\``} |`,
    `| receipt | \`${evidence.receiptPath}\` in ledger commit \`${evidence.receiptCommit.slice(0, 12)}\` (Ledger-Seq ${evidence.receiptSeq}) |`,
    `| cost | $${receipt.actual_cost_usd}${receipt.usage?.reported === false ? ' (estimated: the provider reported no usage)' : ''} |`,
    `| signatures | ${
      verified
        ? `verified by \`coo verify\`: envelope, claim and receipt signed by ${evidence.signer ?? 'the COO'}, history clean to Ledger-Seq ${evidence.headSeq}`
        : `**NOT VERIFIED** by \`coo verify\`: ${evidence.findings.length} finding(s), first ${evidence.findings[0]!.code}${
            evidence.findings[0]!.commit === undefined ? '' : ` in commit \`${evidence.findings[0]!.commit.slice(0, 12)}\``
          }; ${
            evidence.cleanToSeq < evidence.headSeq
              ? `history clean only to Ledger-Seq ${evidence.cleanToSeq} of ${evidence.headSeq}${evidence.receiptSeq > evidence.cleanToSeq ? ', before this receipt' : ''}`
              : `every commit to Ledger-Seq ${evidence.headSeq} replayed clean`
          }`
    } |`,
    `| warnings | ${receipt.warnings.length === 0 ? 'none' : receipt.warnings.map((warning) => `${literalCode(warning)}: ${warningMeaning(warning)}`).join('; ')} |`,
  );
  return `${lines.join('\n')}\n`;
}
