import { folderOf, laneStateOf, type AttemptRecord, type LaneState, type LedgerState, type MessageRecord } from '../authority/state.js';
import { envelopePath } from '../ledger/layout.js';
import type { Ledger } from '../ledger/ledger.js';
import { readStrictYaml } from '../schema/strict-yaml.js';

/** One attempt of a message as `coo show` and the MCP `show` tool present it. */
export interface AttemptView {
  readonly number: number;
  readonly attempt_id: string;
  readonly claim: AttemptRecord['claim'];
  readonly receipt: { readonly path: string; readonly document: unknown } | null;
}

/** A message with its envelope, lane state, claims and receipts, read from one ledger state. */
export interface MessageView {
  readonly message_id: string;
  readonly lane_state: LaneState;
  readonly duplicate_of: string | null;
  /** How the request reached the ledger (`mcp`), or null when it was typed at the CLI or predates the field. */
  readonly submitted_via: string | null;
  readonly envelope: unknown;
  readonly attempts: readonly AttemptView[];
  readonly original_lane_state?: LaneState;
  readonly original_attempts?: readonly AttemptRecord[];
}

/** The envelope's `submitted_via`, or null; read from the parsed document, so old entries without it read as null. */
export function submittedViaOf(envelope: unknown): string | null {
  if (envelope === null || typeof envelope !== 'object') return null;
  const via = (envelope as Record<string, unknown>)['submitted_via'];
  return typeof via === 'string' ? via : null;
}

/** Reads what `coo show` prints for one message: every document comes from the ledger at its current head. */
export async function viewMessage(ledger: Ledger, state: LedgerState, record: MessageRecord): Promise<MessageView> {
  const read = async (path: string): Promise<unknown> => {
    const bytes = await ledger.readFile(path);
    return bytes === null ? null : readStrictYaml(bytes, path);
  };
  const attempts: AttemptView[] = [];
  for (const attempt of record.attempts) {
    attempts.push({
      number: attempt.number,
      attempt_id: attempt.attemptId,
      claim: attempt.claim,
      receipt: attempt.receipt === null ? null : { path: attempt.receipt.path, document: await read(attempt.receipt.path) },
    });
  }
  const duplicateOf = record.duplicateOf === null ? null : state.messages.get(record.duplicateOf) ?? null;
  const envelope = await read(envelopePath(folderOf(record)));
  return {
    message_id: record.id,
    lane_state: laneStateOf(record),
    duplicate_of: record.duplicateOf,
    submitted_via: submittedViaOf(envelope),
    envelope,
    attempts,
    ...(duplicateOf === null ? {} : { original_lane_state: laneStateOf(duplicateOf), original_attempts: duplicateOf.attempts }),
  };
}
