import { describe, expect, it } from 'vitest';
import type { MessageRecord } from '../../../src/authority/state.js';
import { buildReceipt, type ReceiptFacts } from '../../../src/consult/receipt.js';
import type { OracleSessionMeta } from '../../../src/consult/outcome.js';
import { aaReceipt } from '../../../src/schema/receipt.js';
import { receiptMessage, receiptPrice } from '../../helpers/consult-receipt.js';

const sha = `sha256:${'a'.repeat(64)}`;
const message = receiptMessage;
const price = receiptPrice;
const meta = (inputTokens: number, outputTokens: number): OracleSessionMeta => ({
  status: 'completed',
  usage: { inputTokens, outputTokens, reasoningTokens: 0, totalTokens: inputTokens + outputTokens, cost: null },
  errorMessage: null,
  transportReason: null,
  errorCategory: null,
  incompleteReason: null,
  responseId: null,
});
const earlier = (costUsd: number) => ({ number: 1, attemptId: 'a1', claim: null, receipt: { path: '', status: 'failed' as const, blockers: [], costUsd, nextAttemptAt: 'x', createdAt: '', seq: 1 } });
const record = (attempts: unknown[]): MessageRecord => ({ id: message.message_id, attempts } as unknown as MessageRecord);

/** A succeeded attempt 2 whose provider reported `inputTokens` and `outputTokens`. */
function facts(inputTokens: number, outputTokens: number, attempts: unknown[] = []): ReceiptFacts {
  return {
    now: new Date('2026-11-30T08:00:00Z'),
    message,
    record: record(attempts),
    attempt: 2,
    status: 'succeeded',
    blockers: [],
    nextAttemptAt: null,
    policyRef: 'trust/policy/000001.yaml@x',
    transport: { sessionId: 's', model: 'gpt-5.5', route: { provider: 'openai-compatible', offline: true }, meta: meta(inputTokens, outputTokens), price, estimatedInputTokens: 3000, sentBytes: 4500, answerBytes: 300, uncountedOutputCap: null, bundleHash: sha },
    output: { path: 'messages/2026-11/30/08/m/artifacts/002/answer.md', sha256: sha },
    validation: { status: 'pass', errors: [] },
    warnings: [],
  };
}

describe("a receipt's cost against the message's budget", () => {
  it('keeps an attempt within the budget succeeded, with what the budget has left', () => {
    const receipt = buildReceipt(facts(10_000, 1000));
    expect(receipt).toMatchObject({ status: 'succeeded', blockers: [], actual_cost_usd: 0.08, budget_remaining_usd: 0.42 });
    expect(aaReceipt.safeParse(receipt).success).toBe(true);
  });

  it('fails an attempt that cost more than its budget with budget_cost_breach, and ends the message', () => {
    // 8M input tokens at $5 a million: $40, eighty times the $0.50 budget.
    const receipt = buildReceipt({ ...facts(8_000_000, 1000), nextAttemptAt: '2026-11-30T08:01:00Z' });
    expect(receipt).toMatchObject({ status: 'failed', next_attempt_at: null, actual_cost_usd: 40.03, budget_remaining_usd: 0 });
    expect(receipt.blockers).toEqual([{ code: 'budget_cost_breach', detail: "cost $40.03 exceeds the $0.5 the message's budget had left ($0.5, $0 spent by earlier attempts)" }]);
    expect(receipt.warnings).not.toContain('budget_overrun');
    expect(aaReceipt.safeParse(receipt).success).toBe(true);
  });

  it("counts the message's earlier attempts against its budget", () => {
    const within = buildReceipt(facts(10_000, 1000));
    const after = buildReceipt(facts(10_000, 1000, [earlier(0.45)]));
    expect(within.status).toBe('succeeded');
    expect(after).toMatchObject({ status: 'failed', blockers: [{ code: 'budget_cost_breach' }], budget_remaining_usd: 0 });
  });

  it('adds the breach to a failure decided before it, first', () => {
    const receipt = buildReceipt({ ...facts(8_000_000, 1000), status: 'failed', blockers: [{ code: 'output_invalid', detail: 'no aa_answer block' }], nextAttemptAt: '2026-11-30T08:01:00Z' });
    expect(receipt.blockers.map((blocker) => blocker.code)).toEqual(['budget_cost_breach', 'output_invalid']);
    expect(receipt.next_attempt_at).toBeNull();
  });
});
