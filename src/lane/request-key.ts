import { canonicalJson, sha256Ref } from '../util/hash.js';

/** What a consult asks, with the context commit resolved: equal requests give equal keys. */
export interface ConsultRequestParts {
  readonly target: string;
  readonly commit: string;
  readonly patterns: readonly string[];
  readonly question: string;
  readonly maxCostUsd?: number;
  readonly maxRuntimeSeconds?: number;
  readonly ttlSeconds?: number;
  readonly correlationId?: string;
  readonly parentMessageId?: string;
  readonly maxHops?: number;
}

/**
 * An idempotency key derived from the request itself, for callers that retry without keeping a key
 * of their own (an agent whose tool call timed out): the retry finds the message the first call
 * queued, and never pays for a second consult. A new commit to pin is a new request.
 */
export function derivedIdempotencyKey(parts: ConsultRequestParts): string {
  const asked = {
    target: parts.target,
    commit: parts.commit,
    patterns: parts.patterns,
    question: parts.question,
    max_cost_usd: parts.maxCostUsd ?? null,
    max_runtime_seconds: parts.maxRuntimeSeconds ?? null,
    ttl_seconds: parts.ttlSeconds ?? null,
    correlation_id: parts.correlationId ?? null,
    parent_message_id: parts.parentMessageId ?? null,
    max_hops: parts.maxHops ?? null,
  };
  return derivedRequestKey(asked);
}

/** An idempotency key from what a request asks, every unset field null: the same request, the same key. */
export function derivedRequestKey(asked: Record<string, unknown>): string {
  return `req-${sha256Ref(canonicalJson(asked)).slice('sha256:'.length, 'sha256:'.length + 40)}`;
}
