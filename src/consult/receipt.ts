import type { MessageRecord } from '../authority/state.js';
import type { AdvisoryMessage } from '../schema/message.js';
import type { AaReceipt, BlockerCode, ReceiptStatus } from '../schema/receipt.js';
import { attemptIdFor } from '../util/ids.js';
import { isoSeconds } from '../util/time.js';
import { boundedUsd } from '../schema/common.js';
import { costUsd, noMessages, spentOnMessageUsd, type ModelPrice } from '../lane/budget.js';
import type { OracleSessionMeta } from './outcome.js';
import { clipText } from '../util/bytes.js';

/** Building an aa_receipt.v0. Pure: the runner supplies the facts, this decides every field. */

export interface ReceiptArtifact {
  readonly path: string;
  readonly sha256: string;
}

export interface ReceiptFacts {
  readonly now: Date;
  readonly message: AdvisoryMessage;
  readonly record: MessageRecord;
  readonly attempt: number;
  readonly status: ReceiptStatus;
  readonly blockers: ReadonlyArray<{ code: BlockerCode; detail: string }>;
  readonly nextAttemptAt: string | null;
  readonly policyRef: string;
  /** Present once a transport ran. */
  readonly transport?: {
    readonly sessionId: string;
    /** The model the claim was made on and Oracle was asked for: the one the receipt names; null when no witness the runner trusts names one. */
    readonly model: string | null;
    readonly route: { provider: string; offline: boolean };
    readonly meta: OracleSessionMeta | null;
    readonly price: ModelPrice;
    readonly estimatedInputTokens: number;
    /** The bytes the runner handed Oracle to send: the prompt bundle and the pinned files. */
    readonly sentBytes: number;
    readonly answerBytes: number;
    /**
     * Set when the provider may have billed output Oracle's record does not count: the route's record
     * leaves it out (providers/routes.ts uncountedOutputCap), or the call was ended before the
     * provider's last word. The attempt's output cap, which bounds that output; null otherwise.
     */
    readonly uncountedOutputCap: number | null;
    /** The hash of the prompt bundle as Oracle was handed it; null when this runner does not hold those bytes (a call another runner made). */
    readonly bundleHash: string | null;
  };
  readonly output?: ReceiptArtifact;
  readonly attachments?: readonly ReceiptArtifact[];
  /** The answer's proposals that passed judgement, stored as aa_proposal.v0 artifacts of the attempt. */
  readonly proposals?: readonly ReceiptArtifact[];
  readonly validation: { readonly status: 'pass' | 'fail' | 'not_run'; readonly errors: readonly string[] };
  readonly warnings: readonly string[];
}

/**
 * The most bytes a token carries on average over a whole request or answer (text runs about 4);
 * reported usage below what the bytes the runner sent and received come to at this rate is not
 * credible, and is priced as unreported usage is.
 */
const MAX_BYTES_PER_TOKEN = 8;

/** A token count as a receipt can hold it: whole, within the largest safe integer. */
const tokenCount = (value: number): number => Math.min(Number.MAX_SAFE_INTEGER, Math.ceil(value));


/**
 * Usage and cost: what Oracle's session record says when the provider reported usage that is
 * credible for the bytes the runner sent and received, whole, and priced at the higher of Oracle's
 * figure and the policy's price for those tokens; otherwise a deliberately high estimate (input as
 * estimated before the call, output at about 3 bytes a token), marked unreported or implausible, so
 * neither a silent gateway nor one that under-reports makes a consult look cheaper than it was.
 *
 * A report is whole when its total counts no token its parts do not (a total above input, output
 * and reasoning is counts that disagree: the tokens only the total counts are charged as output),
 * and when it counts all the output the provider may have billed: where the route leaves some out
 * (Gemini's thinking), or the call was ended before the provider's last word (a stream the runner's
 * timer or a stop cut), the output is charged up to the attempt's cap, which bounds it, the part not
 * counted stated as reasoning tokens.
 */
export function accountUsage(transport: NonNullable<ReceiptFacts['transport']>): { usage: AaReceipt['usage']; cost: number; reported: boolean; implausible: boolean; partial: boolean } {
  const usage = transport.meta?.usage;
  // A figure stated as no honest provider states one is a report, and not one to take (lane/usage-figure.ts).
  const implausible = usage?.implausible === true;
  // Any figure counts as a report: a total of 0 beside the input it states does not make it silent.
  const reportedAny = usage != null && (implausible || Math.max(usage.totalTokens, usage.inputTokens, usage.outputTokens, usage.reasoningTokens, usage.cost ?? 0) > 0);
  // Tokens the total counts and no part does.
  const onlyInTotal = usage == null ? 0 : Math.max(0, tokenCount(usage.totalTokens) - tokenCount(usage.inputTokens) - tokenCount(usage.outputTokens) - tokenCount(usage.reasoningTokens));
  const uncountedCap = transport.uncountedOutputCap;
  if (reportedAny && !implausible && onlyInTotal === 0) {
    const input = tokenCount(usage.inputTokens);
    const output = tokenCount(usage.outputTokens);
    const reasoning = tokenCount(usage.reasoningTokens);
    const credible = input >= Math.ceil(transport.sentBytes / MAX_BYTES_PER_TOKEN) && output + reasoning >= Math.ceil(transport.answerBytes / MAX_BYTES_PER_TOKEN);
    if (credible && uncountedCap === null) {
      const cost = Math.max(usage.cost ?? 0, costUsd(input, output + reasoning, transport.price));
      return {
        usage: { input_tokens: input, output_tokens: output, reasoning_tokens: reasoning, total_tokens: tokenCount(Math.max(usage.totalTokens, input + output + reasoning)), reported: true },
        cost: boundedUsd(cost),
        reported: true,
        implausible: false,
        partial: false,
      };
    }
    if (credible && uncountedCap !== null) {
      // Credible as far as it goes, and the route leaves output out: the rest of the cap is charged as the reasoning it was not told of.
      const hidden = Math.max(0, uncountedCap - output - reasoning);
      const cost = Math.max(usage.cost ?? 0, costUsd(input, output + reasoning + hidden, transport.price));
      return {
        usage: { input_tokens: input, output_tokens: output, reasoning_tokens: tokenCount(reasoning + hidden), total_tokens: tokenCount(input + output + reasoning + hidden), reported: false },
        cost: boundedUsd(cost),
        reported: false,
        implausible: false,
        partial: true,
      };
    }
  }
  // The estimate, never below any part the provider did report, as it reads: an implausible input count does not
  // erase its reasoning tokens or its own cost, nor the tokens only its total counts.
  const input = reportedAny ? Math.max(transport.estimatedInputTokens, tokenCount(usage.inputTokens)) : transport.estimatedInputTokens;
  const output = reportedAny ? Math.max(Math.ceil(transport.answerBytes / 3), tokenCount(usage.outputTokens)) : Math.ceil(transport.answerBytes / 3);
  const stated = reportedAny ? tokenCount(usage.reasoningTokens + onlyInTotal) : 0;
  const reasoning = Math.max(stated, (uncountedCap ?? 0) - output);
  const estimated = costUsd(input, output + reasoning, transport.price);
  return {
    usage: { input_tokens: input, output_tokens: output, reasoning_tokens: reasoning, total_tokens: tokenCount(input + output + reasoning), reported: false },
    cost: transport.meta === null && transport.answerBytes === 0 ? 0 : boundedUsd(Math.max(reportedAny ? (usage.cost ?? 0) : 0, estimated)),
    reported: false,
    implausible: reportedAny,
    partial: reportedAny && uncountedCap !== null,
  };
}

const micro = (usd: number): number => Math.round(usd * 1e6) / 1e6;

/**
 * The receipt. A recorded cost over what the message's budget had left (its `max_cost_usd` less
 * what its other attempts cost) fails the attempt with `budget_cost_breach`, whatever else was
 * decided, and ends the message: the answer was paid for, but not within the budget it was
 * allowed. The output cap bounds the spend before the call; this holds when the provider did not.
 */
export function buildReceipt(facts: ReceiptFacts): AaReceipt {
  const { message, transport } = facts;
  const accounted = transport === undefined ? null : accountUsage(transport);
  const cost = micro(accounted?.cost ?? 0);
  const spentBefore = spentOnMessageUsd(facts.record, facts.attempt, noMessages);
  const left = micro(Math.max(0, message.budget.max_cost_usd - spentBefore));
  const warnings = [...facts.warnings];
  if (accounted !== null && !accounted.reported && cost > 0) warnings.push(accounted.partial && !accounted.implausible ? 'usage_partial' : accounted.implausible ? 'usage_implausible' : 'usage_unreported');
  let status = facts.status;
  let blockers = [...facts.blockers];
  let nextAttemptAt = facts.nextAttemptAt;
  if (cost > left) {
    status = status === 'succeeded' ? 'failed' : status;
    blockers = [{ code: 'budget_cost_breach', detail: `cost $${cost} exceeds the $${left} the message's budget had left ($${message.budget.max_cost_usd}, $${micro(spentBefore)} spent by earlier attempts)` }, ...blockers];
    nextAttemptAt = null;
  }
  return {
    schema_version: 'aa_receipt.v0',
    message_id: message.message_id,
    attempt_id: attemptIdFor(message.message_id, facts.attempt),
    attempt_number: facts.attempt,
    target_actor: message.target_actor,
    status,
    created_at: isoSeconds(facts.now),
    blockers: blockers.map((blocker) => ({ code: blocker.code, detail: clipText(blocker.detail, 2000) })),
    next_attempt_at: nextAttemptAt,
    authority_class: 'advisory_only',
    transport: 'oracle',
    transport_session_id: transport?.sessionId ?? null,
    engine: 'api',
    // The model the claim was made on and Oracle was asked for: Oracle's session record lies in the folder it writes, and
    // its word (another model, a name no receipt holds) made another model the answer's, or left a paid answer unreceipted.
    model: transport?.model ?? null,
    route: transport?.route ?? null,
    prompt_hash: message.payload_hash,
    context_manifest_hash: message.context_pin.context_manifest_hash,
    bundle_hash: transport?.bundleHash ?? null,
    output_ref: facts.output?.path ?? null,
    output_hash: facts.output?.sha256 ?? null,
    output_validation: { schema_id: 'aa_answer.v0', status: facts.validation.status, errors: facts.validation.errors.map((error) => clipText(error, 2000)).slice(0, 50) },
    attachments: [...(facts.attachments ?? [])],
    policy_decision_ref: facts.policyRef,
    usage: accounted?.usage ?? null,
    actual_cost_usd: cost,
    budget_remaining_usd: micro(Math.max(0, left - cost)),
    warnings: [...new Set(warnings)].slice(0, 20),
    ...(facts.proposals === undefined || facts.proposals.length === 0 ? {} : { proposals: [...facts.proposals] }),
  };
}
