import { CooError } from '../errors.js';
import { type AttemptRecord, type LedgerState, type MessageRecord } from '../authority/state.js';
import { appendRequest, type EnvelopeAppendResult } from '../ledger/append-envelope.js';
import { budgetAt, keyOrigin, planEnvelope, type EnvelopeRequest } from '../ledger/envelope-plan.js';
import { manifestPath, promptPath } from '../ledger/layout.js';
import type { Ledger } from '../ledger/ledger.js';
import type { PrivateKey } from '../crypto/keys.js';
import { readMessage } from '../lane/envelope.js';
import { ADVISORY_INTENTS } from '../schema/common.js';
import { parseDocument } from '../schema/documents.js';
import type { CrossCheckMessage } from '../schema/message.js';
import { sha256Ref } from '../util/hash.js';
import { CROSS_CHECK_TEMPLATE_VERSION } from './prompt.js';

export interface CrossCheckRequest extends EnvelopeRequest {
  readonly ledger: Ledger;
  readonly key: PrivateKey;
  readonly now: Date;
  /** The answer to challenge: the message it answers (its latest succeeded attempt's), or that attempt's receipt path. */
  readonly of: string;
  /** The advisory agent that challenges it. */
  readonly target: string;
  /** The COO's question about the answer; a standing one by default. */
  readonly question?: string;
}

export interface CrossCheckEnqueued extends EnvelopeAppendResult {
  readonly envelope: CrossCheckMessage;
}

const DEFAULT_QUESTION =
  'Challenge the answer below. Where is it wrong, what did it miss, which of its findings and recommendations do you dispute? Check each claim against the attached files; agree only where they bear it out.';

/** The message and the succeeded attempt whose answer `of` names: a message id (its latest such attempt) or a receipt path. */
export function challengedAnswer(state: LedgerState, of: string): { readonly record: MessageRecord; readonly attempt: AttemptRecord } {
  const byMessage = state.messages.get(of);
  const record = byMessage ?? [...state.messages.values()].find((item) => item.attempts.some((attempt) => attempt.receipt?.path === of));
  if (record === undefined) throw new CooError('MESSAGE_UNKNOWN', `${of} is neither a message nor a receipt in the ledger`);
  if (!ADVISORY_INTENTS.has(record.intent)) throw new CooError('USAGE', `${record.id} is ${record.intent}: only an advisory agent's answer can be cross-checked`);
  const answered = record.attempts.filter((attempt) => attempt.receipt?.status === 'succeeded' && attempt.receipt.output !== undefined && (byMessage !== undefined || attempt.receipt.path === of));
  const attempt = answered[answered.length - 1];
  if (attempt === undefined) throw new CooError('USAGE', `${of} has no succeeded answer to challenge`);
  return { record, attempt };
}

/**
 * Puts advisory agent A's answer to advisory agent B to challenge: a cross_check envelope the COO
 * signs on A's behalf (an agent holds no key), its parent the message A answered, its context that
 * message's pin, the answer named by its receipt and pinned by hash. The validator refuses it where
 * the policy has no edge A -> B for cross_check (the default policy has none), beyond the hop limit
 * or the fan-out, before anything lands.
 */
export async function enqueueCrossCheck(request: CrossCheckRequest): Promise<CrossCheckEnqueued> {
  const { ledger, key, now } = request;
  const state = await ledger.state();
  const { record, attempt } = challengedAnswer(state, request.of);
  const parent = await readMessage(ledger, record);
  if (parent.intent !== 'aa_consult' && parent.intent !== 'cross_check') throw new CooError('INTERNAL', `${record.id} is not a question to an advisory agent`);
  if (parent.context_pin.snapshot_of !== undefined) {
    throw new CooError('CONTEXT_INVALID', `${record.id} was answered from a snapshot of a dispatch's worktree; a cross-check pins a repository commit, so ask again with coo consult and cross-check that answer`);
  }
  const manifest = await ledger.readFile(parent.context_pin.context_manifest_ref);
  if (manifest === null) throw new CooError('NOT_FOUND', `${parent.context_pin.context_manifest_ref} is missing`);
  const question = (request.question ?? DEFAULT_QUESTION).trim();
  if (question === '') throw new CooError('USAGE', 'the question is empty');
  const prompt = Buffer.from(`${question}\n`, 'utf8');
  const plan = planEnvelope(state, key, request.target, { ...request, parentMessageId: record.id }, now, 'cross-check');
  const receipt = attempt.receipt!;
  const envelopeAt = (head: LedgerState): CrossCheckMessage =>
    parseDocument(
      'coo_message.v0',
      {
        ...plan.headerAt(head),
        // The challenged agent is the source; the COO, who signs, is the principal.
        source_actor: record.target,
        intent: 'cross_check',
        authority_class: 'advisory_only',
        budget: budgetAt(plan, head, request.maxCostUsd),
        prompt_template_version: CROSS_CHECK_TEMPLATE_VERSION,
        payload_ref: promptPath(plan.folder),
        payload_hash: sha256Ref(prompt),
        context_pin: { ...parent.context_pin, context_manifest_ref: manifestPath(plan.folder) },
        challenge: { receipt_ref: receipt.path, answer_ref: receipt.output!.path, answer_hash: receipt.output!.sha256 },
        expected_receipt_schema: 'aa_receipt.v0',
      },
      'envelope',
    ) as CrossCheckMessage;
  const artifacts = new Map([
    ['prompt.md', prompt],
    ['context-manifest.yaml', manifest],
  ]);
  return appendRequest(ledger, envelopeAt, artifacts, key, now, keyOrigin(request));
}
