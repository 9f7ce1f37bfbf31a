import type { AaConsultMessage } from '../../src/schema/message.js';

const CROCKFORD = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';

/**
 * The n-th id (n >= 1) that shares all but the last character of `id` and is never `id` itself: forged
 * siblings of a real message, distinct from it whatever its random tail was.
 */
export function siblingId(id: string, n: number): string {
  const tails = CROCKFORD.replace(id.slice(-1), '');
  if (n < 1 || n > tails.length) throw new Error(`siblingId: n must be 1..${tails.length}`);
  return id.slice(0, -1) + tails[n - 1];
}

/** A well-formed succeeded aa_receipt.v0 for attempt 1, as a forger would write it. */
export function forgedReceipt(envelope: AaConsultMessage): Record<string, unknown> {
  const folder = envelope.payload_ref.replace(/\/prompt\.md$/, '');
  return {
    schema_version: 'aa_receipt.v0',
    message_id: envelope.message_id,
    attempt_id: `aa_attempt_${envelope.message_id.slice(4)}_1`,
    attempt_number: 1,
    target_actor: envelope.target_actor,
    status: 'succeeded',
    created_at: envelope.created_at,
    blockers: [],
    next_attempt_at: null,
    authority_class: 'advisory_only',
    transport: 'oracle',
    transport_session_id: 'forged',
    engine: 'api',
    model: 'gpt-5.5',
    route: null,
    prompt_hash: envelope.payload_hash,
    context_manifest_hash: envelope.context_pin.context_manifest_hash,
    bundle_hash: null,
    output_ref: `${folder}/artifacts/001/answer.md`,
    output_hash: `sha256:${'1'.repeat(64)}`,
    output_validation: { schema_id: 'aa_answer.v0', status: 'pass', errors: [] },
    attachments: [],
    policy_decision_ref: 'forged',
    usage: null,
    actual_cost_usd: 0,
    budget_remaining_usd: 0,
    warnings: [],
  };
}
