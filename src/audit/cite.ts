import type { Finding } from '../errors.js';
import type { AaAnswer } from '../schema/aa-answer.js';
import type { AaReceipt } from '../schema/receipt.js';
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
  /** Findings of `coo verify` on the commits of this message, and on the history as a whole. */
  readonly findings: readonly Finding[];
  readonly ledgerSeq: number;
  readonly ledgerFindings: number;
}

export function isVerified(evidence: Evidence): boolean {
  return evidence.findings.length === 0;
}

/** The hidden line that makes posting idempotent: one comment per receipt. */
export function citationMarker(evidence: Evidence): string {
  return `<!-- coo-commons:cite ${evidence.messageId} ${evidence.receiptSha256} -->`;
}

/**
 * Model text is untrusted: it may not render HTML, images, links or @-mentions in an issue. It is
 * kept readable, one line per item.
 */
export function inert(text: string): string {
  return text
    .replace(/\r?\n+/g, ' ')
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/@/g, '@\u200b')
    .replace(/!\[/g, '!\\[')
    .replace(/\]\(/g, ']\\(')
    .replace(/`/g, "'")
    .trim();
}

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
    `**${evidence.target}** (model \`${receipt.model ?? 'unknown'}\`, Oracle ${receipt.engine} engine${receipt.route?.offline === true ? ', offline model' : ''}) on \`${evidence.messageId}\` from ${evidence.source}, attempt ${receipt.attempt_number}: **${receipt.status}**`,
    '',
    `**Question.** ${inert(evidence.question).slice(0, 600)}`,
  ];
  if (answer !== null && receipt.status === 'succeeded') {
    lines.push('', `**Verdict:** ${answer.verdict} (confidence ${answer.confidence})`, '', `**Summary.** ${inert(answer.summary)}`);
    lines.push(...list('Findings', answer.findings.map((finding) => `**${finding.severity}**: ${inert(finding.title)}. ${inert(finding.detail)}${finding.refs.length > 0 ? ` (${finding.refs.map(inert).join(', ')})` : ''}`)));
    lines.push(...list('Recommendations', answer.recommendations.map(inert)));
    lines.push(...list('Objections', answer.objections.map(inert)));
  } else {
    lines.push(...list('Blockers', receipt.blockers.map((blocker) => `\`${blocker.code}\`: ${inert(blocker.detail)}`)));
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
        ? `verified by \`coo verify\`: envelope, claim and receipt signed by ${evidence.signer ?? 'the COO'}, history clean to Ledger-Seq ${evidence.ledgerSeq}`
        : `**NOT VERIFIED**: ${evidence.findings.length} finding(s), e.g. ${evidence.findings[0]!.code}`
    } |`,
    `| warnings | ${receipt.warnings.length === 0 ? 'none' : receipt.warnings.map((warning) => `\`${inert(warning)}\`: ${warningMeaning(warning)}`).join('; ')} |`,
  );
  return `${lines.join('\n')}\n`;
}
