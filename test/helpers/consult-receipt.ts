import type { AaConsultMessage } from '../../src/schema/message.js';

/** A consult's fields a receipt is built from, for tests of consult receipts' cost and usage. */
const sha = `sha256:${'a'.repeat(64)}`;
export const receiptMessage = {
  message_id: 'msg_01M8NQFJ01J7CG66HWNDDJ8485',
  target_actor: 'aa.chatgpt',
  payload_hash: sha,
  context_pin: { context_manifest_hash: sha },
  budget: { max_cost_usd: 0.5, max_runtime_seconds: 300, correlation_budget_remaining_usd: null },
} as unknown as AaConsultMessage;

/** gpt-5.5's price in the default policy. */
export const receiptPrice = { input_usd_per_million: 5, output_usd_per_million: 30, max_output_tokens: 32_000 };
