import { eaCommands } from '../schema/receipt.js';
import { attemptPredicate, STATEMENT_TYPE } from './attest.js';
import type { DispatchEvidence } from './dispatch-evidence.js';

/**
 * A dispatch's receipt as an in-toto Statement v1: its subjects are the signed head commit the
 * work landed in (by its `gitCommit` digest, in the repository and on the branch the receipt
 * names) and every file it changed (by sha256, as the runner hashed the committed bytes), then the
 * envelope that asked for it; the predicate is the receipt's evidence, every field measured by the
 * runner itself (docs/attestation.md). Each subject's name is one thing's: a changed file whose path is
 * the name the head or the envelope goes by, or that the receipt gives two files, is left to the predicate. Pure; signed by attest.ts's
 * signStatement.
 */
export const DISPATCH_PREDICATE_TYPE = 'urn:coo-commons:predicate:dispatch-receipt:v0';

/** An in-toto resource descriptor: a name and its digests, by algorithm (`sha256`, or `gitCommit` for a commit). */
interface Subject {
  readonly name: string;
  readonly digest: Readonly<Record<string, string>>;
}

const hex = (ref: string): string => ref.replace(/^sha256:/, '');

export function dispatchStatement(evidence: DispatchEvidence): Record<string, unknown> {
  const { receipt, request } = evidence;
  const commands = eaCommands(receipt);
  const head: Subject[] = receipt.head_sha === null ? [] : [{ name: `${request.dispatch.repo}@${receipt.branch ?? receipt.head_sha}`, digest: { gitCommit: receipt.head_sha } }];
  const envelope: Subject = { name: evidence.envelope.path, digest: { sha256: hex(evidence.envelope.sha256) } };
  // The agent names its files: one it named as the head or the envelope go by is no subject (the predicate's files list it), so each name is one thing.
  const own = new Set([...head, envelope].map((item) => item.name));
  // Nor is a name the receipt gives two files: two names the receipt records by one marker (a secret's, a folder's) are two files.
  const times = new Map<string, number>();
  for (const file of receipt.file_hashes) times.set(file.path, (times.get(file.path) ?? 0) + 1);
  const subject: Subject[] = [
    ...head,
    ...receipt.file_hashes.flatMap((file) => (file.sha256 === null || own.has(file.path) || times.get(file.path)! > 1 ? [] : [{ name: file.path, digest: { sha256: hex(file.sha256) } }])),
    envelope,
  ];
  return {
    _type: STATEMENT_TYPE,
    subject,
    predicateType: DISPATCH_PREDICATE_TYPE,
    predicate: {
      authority: 'governed_execution',
      message: { message_id: evidence.messageId, intent: 'ea_dispatch', source_actor: evidence.source, target_actor: evidence.target },
      attempt: attemptPredicate(receipt),
      task_hash: request.payload_hash,
      base: { repo: request.dispatch.repo, base_sha: receipt.base_sha },
      scope: request.dispatch.scope_paths,
      branch: receipt.branch,
      head_sha: receipt.head_sha,
      files: receipt.file_hashes.map((file) => ({ path: file.path, sha256: file.sha256 === null ? null : hex(file.sha256) })),
      verification: commands.filter(({ by }) => by === 'verification').map(({ command, exitCode }) => ({ command, exit_code: exitCode })),
      executor: {
        kind: receipt.executor,
        model: receipt.model,
        session_id: receipt.executor_session_id,
        commands: commands.filter(({ by }) => by === 'executor').map(({ command, exitCode }) => ({ command, exit_code: exitCode })),
      },
      cost: { actual_cost_usd: receipt.actual_cost_usd, usage: receipt.usage },
      ledger: {
        genesis: evidence.genesis,
        receipt_path: evidence.receiptPath,
        receipt_sha256: hex(evidence.receiptSha256),
        commit: evidence.receiptCommit,
        seq: evidence.receiptSeq,
        signer: evidence.signer,
        verified_to_seq: evidence.cleanToSeq,
      },
    },
  };
}
