import type { LedgerState } from '../../src/authority/state.js';
import { spentOnMessageUsd } from '../../src/lane/budget.js';
import { approvalPath, claimPath } from '../../src/ledger/layout.js';
import type { NewFile } from '../../src/ledger/ledger.js';
import { toYaml } from '../../src/schema/strict-yaml.js';
import { attemptIdFor, newMessageId } from '../../src/util/ids.js';
import { addSeconds, isoSeconds } from '../../src/util/time.js';

/** What a hand-written claim names: its message, the message's folder, the attempt, the lane's kind and who claims it when. */
export interface ClaimOf {
  readonly id: string;
  readonly folder: string;
  readonly attempt: number;
  readonly kind: 'aa' | 'ea';
  readonly runner: string;
  readonly claimedAt: string;
  /** Further fields (`allowance_usd`), or fields to state otherwise than the ledger counts them. */
  readonly extra?: Record<string, unknown>;
}

/**
 * A claim written on `state` stating what that ledger counts as spent before it (`spent_before_usd`),
 * and its command's budget (`command_budget_usd`) only when `extra` states it, as the runner writes it.
 * `asBefore` writes it as builds before spent_before_usd did, which the rules counting a dispatch's
 * consults and the shared budgets at the claim do not bind.
 */
export function claimFileOn(state: LedgerState, claim: ClaimOf, asBefore = false): NewFile {
  const record = state.messages.get(claim.id);
  const spent = asBefore || record === undefined ? {} : { spent_before_usd: spentOnMessageUsd(record, claim.attempt, (other) => state.messages.get(other)) };
  const doc = {
    schema_version: 'claim.v0', message_id: claim.id, attempt_id: attemptIdFor(claim.id, claim.attempt, claim.kind), attempt_number: claim.attempt,
    runner_id: claim.runner, transport_session_id: claim.runner, claimed_at: claim.claimedAt, ...spent, ...claim.extra,
  };
  return { path: claimPath(claim.folder, claim.attempt), bytes: Buffer.from(toYaml(doc)) };
}

/** The CEO's approval of attempt `attempt` of message `messageId`, given at `now` for ten minutes. */
export function retryApprovalFile(messageId: string, attempt: number, now = new Date()): NewFile {
  const doc = {
    schema_version: 'approval.v0', approval_id: `apr_${newMessageId(now.getTime()).slice(4)}`, reason: 'one more try', approved_by: 'ceo', created_at: isoSeconds(now), expires_at: isoSeconds(addSeconds(now, 600)),
    approves: 'retry', request_hash: null, message_id: messageId, attempt_number: attempt,
  };
  return { path: approvalPath(doc.approval_id, doc.created_at), bytes: Buffer.from(toYaml(doc)) };
}
