import { CooError, type Finding } from '../errors.js';
import { folderOf, laneStateOf } from '../authority/state.js';
import { readAnswerBlock } from '../consult/answer.js';
import { envelopePath } from '../ledger/layout.js';
import { Ledger } from '../ledger/ledger.js';
import { ADVISORY_INTENTS } from '../schema/common.js';
import { readDocument } from '../schema/documents.js';
import { sha256Ref } from '../util/hash.js';
import type { Evidence, PanelEvidence } from './cite.js';
import { signerOf } from './message-view.js';
import { adviceOf, comparePanel } from './panel-comparison.js';
import { verifyLedger, type VerifyReport } from './verify.js';

/**
 * Gathers a message's evidence for citing: its final receipt and answer, and what `coo verify` (a
 * full replay) finds anywhere in the ledger: evidence is verified only when the whole history is.
 */
export async function gatherEvidence(gitdir: string, messageId: string): Promise<Evidence> {
  const report = await verifyLedger(gitdir, { timeline: true });
  const evidence = await evidenceFrom(report, gitdir, messageId);
  const panelId = report.state.messages.get(evidence.messageId)?.panel;
  return panelId === undefined ? evidence : { ...evidence, panel: panelReceipts(report, panelId) };
}

/** A panel's evidence: each member's as `coo cite` gives it (null while a member has no receipt), from one replay of the ledger. */
export async function gatherPanelEvidence(gitdir: string, panelId: string): Promise<PanelEvidence> {
  const report = await verifyLedger(gitdir, { timeline: true });
  const written = report.state.panels.get(panelId);
  if (written === undefined) throw new CooError('NOT_FOUND', `${panelId} is not a valid panel of this ledger`);
  const ids = written.messages;
  const members: Array<PanelEvidence['members'][number]> = [];
  for (const id of ids) {
    const record = report.state.messages.get(id)!;
    const hasReceipt = record.attempts.some((attempt) => attempt.receipt !== null);
    members.push({ actor: record.target, messageId: id, state: laneStateOf(record, report.state.registry?.doc), spentUsd: record.attempts.reduce((sum, attempt) => sum + (attempt.receipt?.costUsd ?? 0), 0), evidence: hasReceipt ? await evidenceFrom(report, gitdir, id) : null });
  }
  const first = members.find((member) => member.evidence !== null)?.evidence ?? null;
  const name = written.name;
  return {
    panelId,
    name,
    question: first?.question ?? null,
    members,
    findings: report.findings,
    headSeq: report.seq,
    otherRefs: report.otherRefs,
    comparison: comparePanel(
      panelId,
      name,
      members.map((member) => ({
        actor: member.actor,
        messageId: member.messageId,
        state: member.state,
        receipt: member.evidence === null ? null : { path: member.evidence.receiptPath, attempt: member.evidence.receipt.attempt_number, status: member.evidence.receipt.status, blockers: member.evidence.receipt.blockers.map((blocker) => blocker.code) },
        spentUsd: member.spentUsd,
        advice: member.evidence?.receipt.status === 'succeeded' && member.evidence.answer !== null ? adviceOf(member.evidence.answer) : null,
      })),
    ),
  };
}

/** Every member of a panel with its latest receipt and the ledger commit that added it: a member's citation names them all. */
function panelReceipts(report: VerifyReport, panelId: string): NonNullable<Evidence['panel']> {
  const written = report.state.panels.get(panelId);
  const ids = written?.messages ?? [];
  const commits = report.timeline?.commits ?? [];
  const members = ids.map((id) => {
    const record = report.state.messages.get(id)!;
    const last = [...record.attempts].reverse().find((attempt) => attempt.receipt !== null);
    const commit = last?.receipt == null ? undefined : commits.find((item) => item.entries.some((entry) => entry.path === last.receipt!.path));
    return { actor: record.target, messageId: id, status: last?.receipt?.status ?? null, receiptPath: last?.receipt?.path ?? null, receiptCommit: commit?.commit ?? null };
  });
  return { id: panelId, name: written?.name ?? '', members };
}

async function evidenceFrom(report: VerifyReport, gitdir: string, messageId: string): Promise<Evidence> {
  let record = report.state.messages.get(messageId);
  if (record === undefined) throw new CooError('NOT_FOUND', `${messageId} is not a valid message of this ledger`);
  if (record.duplicateOf !== null) record = report.state.messages.get(record.duplicateOf) ?? record;
  if (!ADVISORY_INTENTS.has(record.intent)) {
    const instead = record.intent === 'ea_dispatch' ? `; a dispatch's evidence is its receipt, branch and verification: \`coo show ${record.id}\`, and its branch checks with stock git (\`coo allowed-signers\`, \`git log %G?\`)` : '';
    throw new CooError('USAGE', `${messageId} is ${record.intent}: only advisory consults are cited${instead}`);
  }
  const last = [...record.attempts].reverse().find((attempt) => attempt.receipt !== null);
  if (last === undefined || last.receipt === null) {
    // A receipt in a commit the validator refused never took effect: that is the news, not its absence.
    const id = record.id;
    const refused = report.timeline?.commits.find((commit) => commit.findings.length > 0 && commit.entries.some((entry) => entry.kind === 'receipt' && entry.messageId === id));
    const finding = refused?.findings[0];
    if (refused !== undefined && finding !== undefined) {
      throw new CooError(finding.code, `${id} has no valid receipt: its receipt commit ${refused.commit} (Ledger-Seq ${refused.seq}) is invalid: ${finding.message}`, {
        findings: refused.findings,
        ...(finding.path === undefined ? {} : { where: finding.path }),
      });
    }
    throw new CooError('NOT_FOUND', `${id} has no receipt yet`);
  }
  const commits = report.timeline?.commits ?? [];
  const receiptCommit = commits.find((commit) => commit.entries.some((entry) => entry.path === last.receipt!.path));
  const ledger = Ledger.open(gitdir, { checkpoints: false });
  try {
    // Read as the receipt's commit holds them, not at the head; and a file an invalid commit
    // replaced on the way (its changes stay in later trees) shows as a hash that does not match.
    const mismatches: Finding[] = [];
    const read = async (path: string, sha256?: string | null): Promise<Buffer> => {
      const bytes = await ledger.readFile(path, receiptCommit?.commit);
      if (bytes === null) throw new CooError('NOT_FOUND', `${path} is missing`);
      if (sha256 != null && sha256Ref(bytes) !== sha256) {
        mismatches.push({ code: 'ARTIFACT_HASH_MISMATCH', message: `${path} does not match the hash its signed entry records`, path, ...(receiptCommit === undefined ? {} : { commit: receiptCommit.commit }) });
      }
      return bytes;
    };
    const receiptBytes = await read(last.receipt.path);
    const receipt = readDocument('aa_receipt.v0', receiptBytes, last.receipt.path);
    const envelope = readDocument('coo_message.v0', await read(envelopePath(folderOf(record))), envelopePath(folderOf(record)));
    if (envelope.intent !== 'aa_consult' && envelope.intent !== 'cross_check') throw new CooError('INTERNAL', 'not a consult');
    const question = (await read(envelope.payload_ref, record.payloadHash)).toString('utf8');
    let answer = null;
    if (receipt.output_ref !== null) {
      // Read by the judge's own reader: a proposal the judge stripped does not unmake the advice it passed.
      const block = readAnswerBlock((await read(receipt.output_ref, receipt.output_hash)).toString('utf8'));
      answer = 'answer' in block ? block.answer : null;
    }
    // Evidence is clean only when history is: every finding of the replay counts, wherever it is.
    const findings = [...mismatches, ...report.findings];
    const firstBad = commits.find((commit) => commit.findings.length > 0);
    return {
      messageId: record.id,
      source: record.source,
      target: record.target,
      question,
      repoCommit: envelope.context_pin.repo_commit_sha,
      contextFiles: envelope.context_pin.files.length,
      receipt,
      receiptPath: last.receipt.path,
      receiptSha256: sha256Ref(receiptBytes),
      ...(envelope.intent === 'cross_check'
        ? { challenges: { author: envelope.source_actor, messageId: envelope.parent_message_id, receiptPath: envelope.challenge.receipt_ref, answerHash: envelope.challenge.answer_hash } }
        : {}),
      receiptCommit: receiptCommit?.commit ?? '(unknown)',
      receiptSeq: receiptCommit?.seq ?? last.receipt.seq,
      signer: receiptCommit?.signer?.actor ?? null,
      ...revokedSignerOf(report, last.receipt.keyId),
      answer,
      findings: [...new Map(findings.map((finding) => [`${finding.code} ${finding.commit ?? ''} ${finding.path ?? ''} ${finding.message}`, finding])).values()],
      genesis: report.state.genesis ?? '(none)',
      headSeq: report.seq,
      cleanToSeq: firstBad === undefined ? report.seq : firstBad.seq - 1,
      otherRefs: report.otherRefs,
    };
  } finally {
    ledger.close();
  }
}

/** The key that signed the receipt, when a registry revoked it since: whatever it signed may be a thief's, and a citation says so. */
function revokedSignerOf(report: VerifyReport, keyId: string | undefined): Pick<Evidence, 'revokedSigner'> {
  const signer = signerOf(report.state, keyId);
  return signer?.revoked == null ? {} : { revokedSigner: { keyId: signer.key_id, seq: signer.revoked.seq, reason: signer.revoked.reason } };
}
