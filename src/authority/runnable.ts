import type { Intent } from '../schema/common.js';
import { attemptIdFor } from '../util/ids.js';

/**
 * What the runner executes. The validator holds claims, hops and attempt ids to these rules at
 * write time, so nothing lands that the runner would never run or that would wedge a message.
 */

/**
 * Intents the runner executes: each is claimed before it runs and closed by receipts. The one list:
 * a lane the runner learns to execute adds its intent here, and claims on it become valid.
 */
export const RUNNER_INTENTS: ReadonlySet<Intent> = new Set<Intent>(['aa_consult']);

export function isRunnerIntent(intent: Intent): boolean {
  return RUNNER_INTENTS.has(intent);
}

/**
 * Whether a message may still run at its place in a chain: `hop_count` counts the hops already
 * taken from the chain's first message, and the runner blocks a message once they reach `max_hops`
 * (consult/lane.ts). The validator refuses such a message of a runner intent when it is written.
 */
export function withinHopLimit(message: { readonly hop_count: number; readonly max_hops: number }): boolean {
  return message.hop_count < message.max_hops;
}

/** The one attempt id attempt `attempt` of a message can have: its lane's prefix, the message id, the number. */
export function attemptIdOf(record: { readonly id: string; readonly intent: Intent }, attempt: number): string {
  return attemptIdFor(record.id, attempt, record.intent === 'ea_dispatch' ? 'ea' : 'aa');
}
