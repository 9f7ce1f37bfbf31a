import { z } from 'zod';
import { ISO_UTC, isoUtcMillis } from '../util/time.js';

/** Shared field types. Every document is a strict object: unknown keys are errors, never dropped. */

export const actorId = z
  .string()
  .regex(/^[a-z][a-z0-9_]*(\.[a-z0-9_]+)*$/, 'actor ids are dotted lowercase names such as coo.hermes or aa.chatgpt')
  .max(64);

/** `msg_` and 26 Crockford base32 characters (time then randomness, so ids sort by creation). */
export const messageId = z.string().regex(/^msg_[0-9A-HJKMNP-TV-Z]{26}$/, "message ids look like msg_ followed by 26 characters of Crockford's base32 (0-9 and A-Z without I, L, O and U)");

export const correlationId = z.string().regex(/^corr_[A-Za-z0-9_-]{1,64}$/, 'correlation ids look like corr_...');

export const attemptId = z.string().regex(/^(aa|ea)_attempt_[A-Za-z0-9_-]{1,80}$/, 'attempt ids look like aa_attempt_...');

export const sha256Ref = z.string().regex(/^sha256:[0-9a-f]{64}$/, 'hashes are written sha256:<64 lowercase hex>');

export const gitSha = z.string().regex(/^[0-9a-f]{40}$/, 'a full 40-character commit SHA');

export const keyId = z.string().regex(/^SHA256:[A-Za-z0-9+/]{43}$/, 'key ids are the SHA256:... fingerprint ssh-keygen -l prints');

export const publicKeyLine = z.string().regex(/^ssh-ed25519 [A-Za-z0-9+/]+={0,2}$/, 'an OpenSSH public key line without comment');

/** RFC 3339 UTC timestamps with a `Z`, and a real calendar date. */
export const timestamp = z
  .string()
  .regex(ISO_UTC, 'timestamps are UTC, e.g. 2026-11-30T07:00:00Z')
  .refine((value) => !Number.isNaN(isoUtcMillis(value)), 'not a real date and time');

/** The words for a NUL in a path: no file name can hold one, so it is named, not called an escape. */
export const NUL_IN_PATH = 'holds a NUL character (U+0000), which no path can hold';

/** A relative path with `/` separators that cannot leave its root. */
export const relativePath = z
  .string()
  .min(1)
  .max(512)
  .refine(
    (value) =>
      !value.startsWith('/') &&
      !value.includes('\\') &&
      !value.includes('\0') &&
      value.split('/').every((part) => part !== '' && part !== '.' && part !== '..'),
    { error: (issue) => (typeof issue.input === 'string' && issue.input.includes('\0') ? NUL_IN_PATH : 'a relative path without "..", "." or empty segments') },
  );


/** A model name as Oracle takes it: one of its keys (gpt-5.5, claude-4.6-sonnet), or a provider's id (OpenRouter's have one `/`). */
export const oracleModelName = z.string().max(100).regex(/^[a-z0-9][a-z0-9._-]*(\/[a-z0-9][a-z0-9._-]*)?$/, 'an Oracle model key such as gpt-5.5, or an OpenRouter id such as anthropic/claude-sonnet-4.5');

/** The largest dollar figure a document holds: over any budget a policy can state. */
export const MAX_USD = 1_000_000;

/** A cost as a document can hold it: within MAX_USD. */
export const boundedUsd = (usd: number): number => Math.min(MAX_USD, usd);

export const usd = z.number().finite().nonnegative().max(MAX_USD);

export const positiveInt = z.number().int().positive().max(Number.MAX_SAFE_INTEGER);

/** The longest runtime (and dispatch time box) an envelope or a policy states, in seconds: a day. The CLI's flags and the tools' arguments take no more. */
export const MAX_RUNTIME_SECONDS = 86_400;

/** The most hops an envelope or a policy allows a chain; the CLI's flags and the tools' arguments take no more. */
export const MAX_HOPS = 64;

export const nonNegativeInt = z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER);

export const shortText = z.string().max(2000);

export const version = z.number().int().min(1).max(999_999);

export const intent = z.enum(['aa_consult', 'ea_dispatch', 'status_query', 'retry', 'receipt_notice', 'blocker', 'ceo_command', 'ceo_reject', 'ack', 'cross_check']);
export type Intent = z.infer<typeof intent>;

/** Intents that make another actor act: accepted only from the active COO with the COO as principal. */
export const COMMAND_INTENTS: ReadonlySet<Intent> = new Set(['aa_consult', 'ea_dispatch', 'status_query', 'retry', 'cross_check']);

/**
 * Intents the runner executes: each is claimed before it runs and closed by receipts. The one list:
 * a lane the runner learns to execute adds its intent here, and claims on it become valid. Every
 * other message (a CEO's command or rejection, an acknowledgement, a blocker, a notice) is recorded
 * and read, never run (authority/runnable.ts, authority/state.ts laneStateOf).
 */
export const RUNNER_INTENTS: ReadonlySet<Intent> = new Set<Intent>(['aa_consult', 'ea_dispatch', 'cross_check']);

export function isRunnerIntent(intent: Intent): boolean {
  return RUNNER_INTENTS.has(intent);
}

/** Intents that put a question to an advisory agent and take aa_receipt.v0: the consult lane runs them. */
export const ADVISORY_INTENTS: ReadonlySet<Intent> = new Set(['aa_consult', 'cross_check']);

export const actorClass = z.enum(['human_authority', 'orchestrator', 'execution_agent', 'advisory_agent']);
export type ActorClass = z.infer<typeof actorClass>;

/** Milliseconds since the epoch of a timestamp (arithmetic for the entry form, Date for anything else). */
export function toMillis(value: string): number {
  const millis = isoUtcMillis(value);
  return Number.isNaN(millis) ? new Date(value).getTime() : millis;
}
