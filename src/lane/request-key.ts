import { idempotencySlot, type LedgerState } from '../authority/state.js';
import { CooError } from '../errors.js';
import { MCP_ARGUMENTS, type ArgumentNames } from '../util/argument-names.js';
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

/** The form of a derived key, and of a panel member's key made from one (`<key>~<member>`, consult/enqueue.ts). */
const DERIVED_FORM = /^req-[0-9a-f]{40}(?:~|$)/;

/** How a caller names a given idempotency key, and what it does instead of giving one it may not. */
export type KeyWords = Pick<ArgumentNames, 'idempotencyKey' | 'newKey'>;

/** An envelope written by hand (`coo append`, appendEnvelope): the key is its own field. */
export const ENVELOPE_KEY_WORDS: KeyWords = {
  idempotencyKey: 'idempotency_key',
  newKey: 'give a key of another form; to repeat a request, the key it was written under with the same request',
};

/**
 * The key a tool's request is written under: the one its caller gave, or the one derived from it,
 * refused before any I/O when it names a panel member (`<key>~<member>`: the panel's is `<key>`).
 * Whether a given key of the derived form may be written is the writer's to say, at the head it
 * lands on (derivedKeyRule).
 */
export function requestKey(given: string | undefined, derived: string, words: KeyWords = MCP_ARGUMENTS): string {
  if (given === undefined) return derived;
  const member = given.indexOf('~');
  if (given !== derived && DERIVED_FORM.test(given) && member !== -1) {
    throw new CooError('IDEMPOTENCY_CONFLICT', `${words.idempotencyKey} "${given}" is a panel member's key; to repeat the panel, give the panel's key ${given.slice(0, member)}, or none and one is derived from the request`, { where: words.idempotencyKey });
  }
  return given;
}

/**
 * The derived-form rule, asked by the writer (ledger/append-envelope.ts) of the key an envelope lands
 * under, in the slot it lands in (`source`'s: for an envelope the COO signs on an agent's behalf, the
 * agent's), at the head the ledger's lock holds. A key of the derived form (`req-<40 hex>`; a panel
 * member's `<key>~<member>` is judged by the panel's `<key>`) must be `derived`, the one its caller
 * derived from this very request, or one the ledger holds in that slot (a client that sends back the
 * key it was shown, with a budget or a time changed; the idempotency rule then says whether it
 * repeats that request). Any other could be the key derived for another request not sent yet, which
 * that request, sent without a key, would find taken and be refused, or be given this one's message.
 * `judged`: whether the rule speaks for this writer at all, asked only of a key of the derived form.
 */
export function derivedKeyRule(state: LedgerState, source: string, key: string, derived: string | undefined, words: KeyWords, judged: () => boolean): void {
  const member = key.indexOf('~');
  const base = member === -1 ? key : key.slice(0, member);
  if (!DERIVED_FORM.test(key) || base === derived || !judged()) return;
  const slot = idempotencySlot(source, base);
  if (state.idempotency.has(slot) || [...state.idempotency.keys()].some((other) => other.startsWith(`${slot}~`))) return;
  throw new CooError('IDEMPOTENCY_CONFLICT', `${words.idempotencyKey} "${base}" has the form of a key derived from a request (req-<40 hex>), and is neither this request's nor one the ledger holds for ${source}: such keys are the derived ones; ${words.newKey}`, { where: words.idempotencyKey });
}
