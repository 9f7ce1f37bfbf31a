import { CooError, type Finding } from '../errors.js';
import { folderOf } from '../authority/state.js';
import { envelopePath } from '../ledger/layout.js';
import { Ledger } from '../ledger/ledger.js';
import { readDocument } from '../schema/documents.js';
import type { EaDispatchMessage } from '../schema/message.js';
import type { EaReceipt } from '../schema/receipt.js';
import { sha256Ref } from '../util/hash.js';
import { verifyLedger } from './verify.js';

/** What an auditor needs of a dispatch's final receipt: the receipt, the request it answers, where both live, and what `coo verify` found. */
export interface DispatchEvidence {
  readonly messageId: string;
  readonly source: string;
  readonly target: string;
  readonly request: EaDispatchMessage;
  readonly envelope: { readonly path: string; readonly sha256: string };
  readonly receipt: EaReceipt;
  readonly receiptPath: string;
  readonly receiptSha256: string;
  readonly receiptCommit: string;
  readonly receiptSeq: number;
  readonly signer: string | null;
  /** The ledger's genesis commit: its identity. */
  readonly genesis: string;
  /** Every finding of a full replay: evidence is clean only when the whole history is. */
  readonly findings: readonly Finding[];
  /** The Ledger-Seq the replay reached, and the last one up to which every commit replayed clean. */
  readonly headSeq: number;
  readonly cleanToSeq: number;
  /** The refs beside main, which the replay does not judge (`otherRefsNote` says so). */
  readonly otherRefs: readonly string[];
}

/** Gathers a dispatch's final receipt as its commit holds it, from a full replay of the ledger. */
export async function gatherDispatchEvidence(gitdir: string, messageId: string): Promise<DispatchEvidence> {
  const report = await verifyLedger(gitdir, { timeline: true });
  let record = report.state.messages.get(messageId);
  if (record === undefined) throw new CooError('NOT_FOUND', `${messageId} is not a valid message of this ledger`);
  if (record.duplicateOf !== null) record = report.state.messages.get(record.duplicateOf) ?? record;
  if (record.intent !== 'ea_dispatch') throw new CooError('USAGE', `${messageId} is ${record.intent}, not a dispatch`);
  const last = [...record.attempts].reverse().find((attempt) => attempt.receipt !== null);
  if (last?.receipt == null) throw new CooError('NOT_FOUND', `${record.id} has no receipt yet`);
  const receiptPath = last.receipt.path;
  const receiptCommit = report.timeline?.commits.find((commit) => commit.entries.some((entry) => entry.path === receiptPath));
  const ledger = Ledger.open(gitdir, { checkpoints: false });
  try {
    const read = async (path: string): Promise<Buffer> => {
      const bytes = await ledger.readFile(path, receiptCommit?.commit);
      if (bytes === null) throw new CooError('NOT_FOUND', `${path} is missing`);
      return bytes;
    };
    const receiptBytes = await read(receiptPath);
    const envelopeFile = envelopePath(folderOf(record));
    const envelopeBytes = await read(envelopeFile);
    const request = readDocument('coo_message.v0', envelopeBytes, envelopeFile);
    if (request.intent !== 'ea_dispatch') throw new CooError('INTERNAL', `${envelopeFile} is not a dispatch`);
    return {
      messageId: record.id,
      source: record.source,
      target: record.target,
      request,
      envelope: { path: envelopeFile, sha256: sha256Ref(envelopeBytes) },
      receipt: readDocument('ea_receipt.v0', receiptBytes, receiptPath),
      receiptPath,
      receiptSha256: sha256Ref(receiptBytes),
      receiptCommit: receiptCommit?.commit ?? '(unknown)',
      receiptSeq: receiptCommit?.seq ?? last.receipt.seq,
      signer: receiptCommit?.signer?.actor ?? null,
      genesis: report.state.genesis ?? '(none)',
      findings: report.findings,
      headSeq: report.seq,
      cleanToSeq: report.firstInvalid === null ? report.seq : (report.firstInvalid.lastValid?.seq ?? 0),
      otherRefs: report.otherRefs,
    };
  } finally {
    ledger.close();
  }
}
