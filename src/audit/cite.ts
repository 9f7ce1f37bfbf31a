import type { LaneState } from '../authority/state.js';
import type { Finding } from '../errors.js';
import type { AaAnswer } from '../schema/aa-answer.js';
import type { AaReceipt } from '../schema/receipt.js';
import { sha256Ref } from '../util/hash.js';
import type { PanelComparison } from './panel-comparison.js';
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
  /** The key that signed the receipt, revoked since (at Ledger-Seq `seq`): whatever it signed may not be its holder's. */
  readonly revokedSigner?: { readonly keyId: string; readonly seq: number; readonly reason: string };
  readonly answer: AaAnswer | null;
  /** Everything `coo verify` found over the whole ledger, and any file that does not match its signed hash. */
  readonly findings: readonly Finding[];
  /** The ledger's genesis commit: its identity. */
  readonly genesis: string;
  /** The ledger's head, in Ledger-Seq. */
  readonly headSeq: number;
  /** The last Ledger-Seq up to which every commit replayed clean: the head when nothing is wrong. */
  readonly cleanToSeq: number;
  /** The refs beside main, which the replay does not judge (`otherRefsNote` says so). */
  readonly otherRefs: readonly string[];
  /** A cross-check's challenged answer: whose, the message and receipt it came from, its hash as pinned. */
  readonly challenges?: { readonly author: string; readonly messageId: string; readonly receiptPath: string; readonly answerHash: string };
  /** A panel member's panel: every member with its latest receipt, which the citation names. */
  readonly panel?: {
    readonly id: string;
    readonly name: string;
    readonly members: ReadonlyArray<{ readonly actor: string; readonly messageId: string; readonly status: string | null; readonly receiptPath: string | null; readonly receiptCommit: string | null }>;
  };
}

/** A panel's evidence for one citation: each member's (null while it has none), and the runner's comparison of their answers. */
export interface PanelEvidence {
  readonly panelId: string;
  readonly name: string;
  readonly question: string | null;
  readonly members: ReadonlyArray<{ readonly actor: string; readonly messageId: string; readonly state: LaneState; readonly spentUsd: number; readonly evidence: Evidence | null }>;
  readonly comparison: PanelComparison;
  /** Everything `coo verify` found over the whole ledger. */
  readonly findings: readonly Finding[];
  readonly headSeq: number;
  /** The refs beside main, which the replay does not judge. */
  readonly otherRefs: readonly string[];
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
    `| cost | $${receipt.actual_cost_usd}${receipt.usage?.reported === false ? (receipt.warnings.includes('usage_implausible') ? ' (estimated: the usage the provider reported is not credible)' : receipt.warnings.includes('usage_partial') ? ' (estimated: the usage the provider reported leaves out output it may have billed, charged up to the cap)' : ' (estimated: the provider reported no usage)') : ''} |`,
    `| signatures | ${
      evidence.revokedSigner === undefined
        ? ''
        : `**SIGNED BY A REVOKED KEY**: the receipt's key \`${evidence.revokedSigner.keyId}\` was revoked at Ledger-Seq ${evidence.revokedSigner.seq} (${inert(evidence.revokedSigner.reason)}), so this answer may not be the COO's record; `
    }${
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
    ...(evidence.challenges === undefined
      ? []
      : [`| challenges | the answer of ${evidence.challenges.author} (\`${evidence.challenges.answerHash}\`), receipt \`${evidence.challenges.receiptPath}\` of \`${evidence.challenges.messageId}\`, sent quoted as untrusted data |`]),
  );
  if (evidence.panel !== undefined) {
    lines.push('', `**Panel** \`${evidence.panel.id}\` (${literalCode(evidence.panel.name)}): the same question to every member; \`coo cite ${evidence.panel.id}\` sets their answers side by side.`, '', '| member | message | status | receipt | ledger commit |', '| --- | --- | --- | --- | --- |');
    for (const member of evidence.panel.members) {
      lines.push(`| ${member.actor} | \`${member.messageId}\` | ${member.status ?? 'no receipt yet'} | ${member.receiptPath === null ? '' : `\`${member.receiptPath}\``} | ${member.receiptCommit === null ? '' : `\`${member.receiptCommit.slice(0, 12)}\``} |`);
    }
  }
  return `${lines.join('\n')}\n`;
}

/** The hidden line that makes posting a panel's citation idempotent: one comment per set of member receipts. */
export function panelCitationMarker(panel: PanelEvidence): string {
  const receipts = panel.members.map((member) => member.evidence?.receiptSha256 ?? 'none').join(' ');
  return `<!-- coo-commons:cite ${panel.panelId} ${sha256Ref(receipts)} -->`;
}

/**
 * A panel as one Markdown block: the question, the runner's own comparison of the members' answers
 * (which answered, where the verdicts agree and differ, each member's objections), and a table
 * naming every member's receipt. Pure.
 */
export function renderPanelCitation(panel: PanelEvidence): string {
  const { comparison } = panel;
  const verified = panel.findings.length === 0;
  const agreement = { unanimous: 'unanimous', split: 'split', partial: 'agree so far (not every member gave advice)', none: 'no advice yet' }[comparison.agreement];
  const lines = [
    panelCitationMarker(panel),
    '> [!NOTE]',
    "> **Advisory evidence, not authority.** Several advisory agents' answers to one question, recorded in the coo-commons ledger and compared by the runner's own code, never by a model. They inform the COO's decision; they instruct no one.",
    '',
    `**Panel** \`${panel.panelId}\` (${literalCode(panel.name)}): ${comparison.members.length} members, ${comparison.answered.length} answered; verdicts **${agreement}**`,
    '',
    `**Question.** ${panel.question === null ? '(no member has a receipt yet)' : inert([...panel.question].slice(0, 600).join(''))}`,
  ];
  lines.push(...list('Verdicts', comparison.verdicts.map((item) => `**${item.verdict}**: ${item.members.join(', ')}`)));
  for (const member of panel.members) {
    const compared = comparison.members.find((item) => item.message_id === member.messageId)!;
    const evidence = member.evidence;
    lines.push('', `**${member.actor}** (\`${member.messageId}\`${evidence === null ? '' : `, model ${literalCode(evidence.receipt.model ?? 'unknown')}${evidence.receipt.route?.offline === true ? ', offline model' : ''}`}): ${compared.verdict === null ? `no advice (${compared.no_advice ?? member.state})` : `**${compared.verdict}** (confidence ${compared.confidence})`}`);
    if (compared.summary !== null) lines.push('', `${inert(compared.summary)}`);
    lines.push(...list('Objections', compared.objections.map(inert)));
  }
  lines.push('', '| member | status | receipt | ledger commit | output | cost |', '| --- | --- | --- | --- | --- | --- |');
  for (const member of panel.members) {
    const evidence = member.evidence;
    lines.push(
      evidence === null
        ? `| ${member.actor} | ${member.state}, no receipt yet | | | | |`
        : `| ${member.actor} | ${evidence.receipt.status} | \`${evidence.receiptPath}\` | \`${evidence.receiptCommit.slice(0, 12)}\` (Ledger-Seq ${evidence.receiptSeq}) | ${evidence.receipt.output_hash === null ? 'none' : `\`${evidence.receipt.output_hash}\``} | $${member.spentUsd}${evidence.receipt.usage?.reported === false ? ' (estimated)' : ''} |`,
    );
  }
  lines.push('', `**Signatures:** ${verified ? `verified by \`coo verify\`: every envelope, claim and receipt signed by the COO, history clean to Ledger-Seq ${panel.headSeq}` : `**NOT VERIFIED** by \`coo verify\`: ${panel.findings.length} finding(s), first ${panel.findings[0]!.code}`}. Total cost $${comparison.total_cost_usd}.`);
  return `${lines.join('\n')}\n`;
}
