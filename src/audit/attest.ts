import { signEd25519 } from '../crypto/ed25519.js';
import type { PrivateKey } from '../crypto/keys.js';
import { CooError } from '../errors.js';
import { isVerified, whatIsWrong, type Evidence } from './cite.js';

/**
 * A receipt as an in-toto Statement v1 in a DSSE envelope, signed with the COO's ed25519 key, so
 * that tools which know nothing of coo (in-toto, sigstore, any DSSE verifier given the public key)
 * can check who recorded what. The predicate is this project's own (docs/attestation.md). Pure.
 */
export const STATEMENT_TYPE = 'https://in-toto.io/Statement/v1';
export const PREDICATE_TYPE = 'urn:coo-commons:predicate:agent-receipt:v0';
export const DSSE_PAYLOAD_TYPE = 'application/vnd.in-toto+json';

export interface ResourceDescriptor {
  readonly name: string;
  readonly digest: { readonly sha256: string };
}

export interface DsseEnvelope {
  readonly payloadType: string;
  readonly payload: string;
  readonly signatures: ReadonlyArray<{ readonly keyid: string; readonly sig: string }>;
}

/** DSSE's pre-authentication encoding: what is signed, never the JSON itself. */
export function preAuthEncoding(payloadType: string, payload: Buffer): Buffer {
  const type = Buffer.from(payloadType, 'utf8');
  return Buffer.concat([Buffer.from(`DSSEv1 ${type.length} `), type, Buffer.from(` ${payload.length} `), payload]);
}

/** The `attempt` part of both predicates: which attempt, how it ended, and what its receipt warns of. */
export function attemptPredicate(receipt: { attempt_id: string; attempt_number: number; status: string; blockers: ReadonlyArray<{ code: string }>; warnings: readonly string[] }): Record<string, unknown> {
  return {
    attempt_id: receipt.attempt_id,
    attempt_number: receipt.attempt_number,
    status: receipt.status,
    blockers: receipt.blockers.map((blocker) => blocker.code),
    warnings: receipt.warnings,
  };
}

function descriptor(name: string, sha256Ref: string): ResourceDescriptor {
  return { name, digest: { sha256: sha256Ref.replace(/^sha256:/, '') } };
}

/**
 * The statement for one cited receipt; `envelope` is the message's envelope path and sha256. Only
 * for evidence `coo verify` found clean: `verified_to_seq` is the head it replayed clean.
 */
export function receiptStatement(evidence: Evidence, envelope: { path: string; sha256: string }): Record<string, unknown> {
  if (!isVerified(evidence)) throw new CooError('SIG_INVALID', `not attesting: the ledger does not verify (${whatIsWrong(evidence)})`, { findings: evidence.findings });
  const { receipt } = evidence;
  const outputs = [
    ...(receipt.output_ref !== null && receipt.output_hash !== null ? [descriptor(receipt.output_ref, receipt.output_hash)] : []),
    ...receipt.attachments.map((item) => descriptor(item.path, item.sha256)),
  ];
  return {
    _type: STATEMENT_TYPE,
    subject: [...outputs, descriptor(envelope.path, envelope.sha256)],
    predicateType: PREDICATE_TYPE,
    predicate: {
      authority: 'advisory_only',
      message: { message_id: evidence.messageId, intent: evidence.challenges === undefined ? 'aa_consult' : 'cross_check', source_actor: evidence.source, target_actor: evidence.target },
      // A cross-check's statement names the answer it challenged, by the hash its envelope pins.
      ...(evidence.challenges === undefined
        ? {}
        : { challenges: { author: evidence.challenges.author, message_id: evidence.challenges.messageId, receipt_path: evidence.challenges.receiptPath, answer_sha256: evidence.challenges.answerHash.replace(/^sha256:/, '') } }),
      attempt: attemptPredicate(receipt),
      context: { repo_commit_sha: evidence.repoCommit, context_manifest_hash: receipt.context_manifest_hash, files: evidence.contextFiles },
      prompt_hash: receipt.prompt_hash,
      output_hash: receipt.output_hash,
      transport: { kind: receipt.transport, engine: receipt.engine, model: receipt.model, session_id: receipt.transport_session_id },
      cost: { actual_cost_usd: receipt.actual_cost_usd, usage: receipt.usage },
      // The ledger by its genesis commit: two ledgers may share a COO key, and a statement is held to one of them.
      ledger: {
        genesis: evidence.genesis,
        receipt_path: evidence.receiptPath,
        receipt_sha256: evidence.receiptSha256.replace(/^sha256:/, ''),
        commit: evidence.receiptCommit,
        seq: evidence.receiptSeq,
        signer: evidence.signer,
        verified_to_seq: evidence.cleanToSeq,
      },
    },
  };
}

/** Signs a statement as a DSSE envelope with one signature, keyid the key's SHA256 fingerprint. */
export function signStatement(statement: unknown, key: PrivateKey): DsseEnvelope {
  const payload = Buffer.from(JSON.stringify(statement), 'utf8');
  const sig = signEd25519(key.keyObject, preAuthEncoding(DSSE_PAYLOAD_TYPE, payload));
  return { payloadType: DSSE_PAYLOAD_TYPE, payload: payload.toString('base64'), signatures: [{ keyid: key.publicKey.keyId, sig: Buffer.from(sig).toString('base64') }] };
}
