import { keyHolders } from '../authority/keys.js';
import { idempotencySlot, type LedgerState } from '../authority/state.js';
import { CooError } from '../errors.js';
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

/**
 * The key a request is written under: the one its caller gave, or the one derived from it. A given
 * key of the derived form must be this request's own, or one the ledger already holds (`taken`: a
 * client that sends back the key it was shown, with a budget or a time changed, which the derived key
 * counts and the request's fingerprint does not; the idempotency rule then says whether it repeats
 * that request). Any other could be the key derived for another request not sent yet, which that
 * request, sent without a key, would find taken and be told IDEMPOTENCY_CONFLICT, or be given this
 * request's message. A panel member's key (`<key>~<member>`) names one member: the panel's is `<key>`.
 * `derived` is undefined for a caller that derives no key (a CLI verb's `--idempotency-key`): a given
 * key of the derived form is then one the ledger holds, or refused.
 */
export function requestKey(given: string | undefined, derived: string, taken: (key: string) => boolean): string;
export function requestKey(given: string | undefined, derived: string | undefined, taken: (key: string) => boolean): string | undefined;
export function requestKey(given: string | undefined, derived: string | undefined, taken: (key: string) => boolean): string | undefined {
  if (given === undefined || given === derived || !DERIVED_FORM.test(given)) return given ?? derived;
  const member = given.indexOf('~');
  if (member !== -1) {
    throw new CooError('IDEMPOTENCY_CONFLICT', `idempotency_key "${given}" is a panel member's key; to repeat the panel, give the panel's key ${given.slice(0, member)}, or none and one is derived from the request`, { where: 'idempotency_key' });
  }
  if (taken(given)) return given;
  throw new CooError('IDEMPOTENCY_CONFLICT', `idempotency_key "${given}" has the form of a key derived from a request (req-<40 hex>), and is neither this request's nor one the ledger holds: such keys are the derived ones'; give a key of another form, or none and one is derived from the request`, { where: 'idempotency_key' });
}

/** Where the ledger's state is read: a Ledger, or a RemoteLedger's clone. */
export interface StateSource {
  state(): Promise<LedgerState>;
}

/**
 * The key a request from `signer`'s holder is written under (requestKey), with the keys `ledger`
 * holds for that holder (a panel's by its members'): another actor's key is another slot, which a
 * request of this one's would not repeat. Every writer that takes a caller's key asks it: the MCP
 * tools, which derive a key when given none, and the CLI's verbs (`--idempotency-key`), which do not.
 * Asked of the head the write starts from; the idempotency rule itself runs again under the lock.
 */
export async function givenRequestKey(ledger: StateSource, signer: string, given: string | undefined, derived: string): Promise<string>;
export async function givenRequestKey(ledger: StateSource, signer: string, given: string | undefined, derived?: string): Promise<string | undefined>;
export async function givenRequestKey(ledger: StateSource, signer: string, given: string | undefined, derived?: string): Promise<string | undefined> {
  if (given === undefined || given === derived || !DERIVED_FORM.test(given)) return requestKey(given, derived, () => false);
  const state = await ledger.state();
  const holder = keyHolders(state).get(signer);
  const taken = (key: string): boolean => {
    if (holder === undefined) return false;
    const slot = idempotencySlot(holder.actor, key);
    return state.idempotency.has(slot) || [...state.idempotency.keys()].some((other) => other.startsWith(`${slot}~`));
  };
  return requestKey(given, derived, taken);
}
