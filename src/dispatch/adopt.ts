import { adoptionChanges, revokedProposal } from '../authority/rules/intents/dispatch.js';
import { folderOf } from '../authority/state.js';
import { CooError } from '../errors.js';
import { readLaneMessage } from '../lane/envelope.js';
import { attemptArtifactPath } from '../ledger/layout.js';
import type { StoredProposal } from '../schema/aa-answer.js';
import { readDocument } from '../schema/documents.js';
import { sha256Ref } from '../util/hash.js';
import { enqueueDispatch, type DispatchEnqueued, type DispatchRequest } from './enqueue.js';

/**
 * AA -> COO -> EA: the COO adopts an advisory agent's proposal. The proposal is advice stored
 * beside its consult's receipt (aa_proposal.v0), addressed to no one; adopting it writes a
 * COO-signed ea_dispatch whose parent is the consult, which names the proposal by its hash, keeps
 * its bytes beside the envelope, and records what the COO changed of it. The COO chooses the
 * executor, the base and the budget; the proposal carries none of them. Where the policy gives
 * adoptions to the CEO (the default policy does), it is refused with the request hash to approve.
 */

export interface AdoptRequest extends Omit<DispatchRequest, 'task' | 'scope' | 'accept' | 'verify' | 'adoption' | 'parentMessageId' | 'correlationId'> {
  /** The consult whose answer carried the proposal. */
  readonly consultId: string;
  /** The proposal's place among those its receipt stores, from 1. */
  readonly proposal: number;
  /** The consult's attempt that answered; its latest succeeded one by default. */
  readonly attempt?: number;
  /** What the COO changes of the proposal; the proposal's own by default. */
  readonly task?: string;
  readonly scope?: readonly string[];
  readonly accept?: readonly string[];
  readonly verify?: readonly string[];
}

export interface Adopted extends DispatchEnqueued {
  readonly proposal: StoredProposal;
  readonly changed: readonly string[];
}

export async function adoptProposal(request: AdoptRequest): Promise<Adopted> {
  const { ledger } = request;
  const state = await ledger.state();
  const consult = state.messages.get(request.consultId);
  if (consult === undefined) throw new CooError('MESSAGE_UNKNOWN', `${request.consultId} is not a message of this ledger`);
  if (consult.intent !== 'aa_consult') throw new CooError('USAGE', `${consult.id} is ${consult.intent}: only a consult's answer carries proposals`);
  const attempt =
    request.attempt === undefined
      ? [...consult.attempts].reverse().find((item) => item.receipt?.status === 'succeeded' && (item.receipt.proposals ?? []).length > 0)
      : consult.attempts[request.attempt - 1];
  const hashes = attempt?.receipt?.status === 'succeeded' ? (attempt.receipt.proposals ?? []) : [];
  const sha256 = hashes[request.proposal - 1];
  if (attempt === undefined || sha256 === undefined) {
    throw new CooError('NOT_FOUND', `${consult.id}${request.attempt === undefined ? '' : ` attempt ${request.attempt}`} has ${hashes.length === 0 ? 'no stored proposal' : `proposals 1 to ${hashes.length}, not ${request.proposal}`} (coo show ${consult.id} lists them)`);
  }
  const revoked = revokedProposal(consult.id, attempt.number, request.proposal, attempt.receipt?.keyId, (keyId) => state.revocations.get(keyId));
  if (revoked !== null) throw new CooError('POLICY_PROPOSAL_TO_DISPATCH', revoked);
  const path = attemptArtifactPath(folderOf(consult), attempt.number, `proposal-${String(request.proposal).padStart(2, '0')}.yaml`);
  const bytes = await ledger.readFile(path);
  if (bytes === null || sha256Ref(bytes) !== sha256) throw new CooError('ARTIFACT_HASH_MISMATCH', `${path} is not the proposal its receipt names (${sha256})`);
  const stored = readDocument('aa_proposal.v0', bytes, path);
  const envelope = await readLaneMessage(ledger, consult, 'aa_consult', 'a consult');
  const work = { task: request.task ?? stored.task, scope: request.scope ?? stored.scope, accept: request.accept ?? stored.acceptance, verify: request.verify ?? stored.verification };
  const changed = adoptionChanges(stored, { task: work.task, scope: work.scope, acceptance: work.accept, verification: work.verify });
  const queued = await enqueueDispatch({
    ...request,
    ...work,
    // The work starts from the commit the consult's context was pinned at, unless the COO names another.
    rev: request.rev ?? envelope.context_pin.repo_commit_sha,
    parentMessageId: consult.id,
    adoption: { proposal: bytes, adopted: { attempt_number: attempt.number, index: request.proposal, sha256, changed } },
  });
  return { ...queued, proposal: stored, changed };
}
