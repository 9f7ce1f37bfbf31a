import type { Intent } from '../../schema/common.js';
import type { PathInfo } from '../../ledger/layout.js';
import type { CooMessage } from '../../schema/message.js';
import type { ActorPolicy } from '../../schema/policy.js';
import type { ActorRegistry } from '../../schema/registry.js';
import type { MessageRecord } from '../state.js';
import type { CommitCheck, EntryFile } from '../commit-check.js';
import { consultRules } from './intents/consult.js';
import { dispatchRules } from './intents/dispatch.js';
import { retryRules } from './intents/retry.js';
import { statusQueryRules } from './intents/status-query.js';
import { receiptNoticeRules } from './intents/receipt-notice.js';
import { blockerRules } from './intents/blocker.js';
import { ceoCommandRules } from './intents/ceo-command.js';
import { ceoRejectRules } from './intents/ceo-reject.js';
import { ackRules } from './intents/ack.js';
import { crossCheckRules } from './intents/cross-check.js';

export type MessageOf<I extends Intent> = Extract<CooMessage, { intent: I }>;

/**
 * The rules one intent adds to the envelope's own (rules/envelope.ts) and to its receipts. Each
 * hook runs at a fixed step of the one pass over a commit, so the first finding does not depend on
 * which file a rule lives in. A new intent is a new file in rules/intents/ and a row below.
 */
export interface IntentRules<I extends Intent = Intent> {
  /** Whom the envelope targets and what it names: checked right after the edge, before the causality chain. */
  target(check: CommitCheck, doc: MessageOf<I>, registry: ActorRegistry, where: string): void;
  /** What the envelope may not descend from: checked after the chain's own rules, when it has a parent. */
  ancestry?(check: CommitCheck, doc: MessageOf<I>, registry: ActorRegistry, where: string): void;
  /** The envelope's artifacts and what its lane needs to run it: checked after the limits. */
  envelope?(check: CommitCheck, doc: MessageOf<I>, registry: ActorRegistry, policy: ActorPolicy, folder: string, where: string): void;
  /**
   * Whether the active COO may sign this envelope on behalf of its `source_actor`: an actor with no
   * key of its own in this exchange, whose authority the parent chain proves (the other hooks check
   * that proof). Absent: an envelope is signed by its source.
   */
  onBehalf?(doc: MessageOf<I>): boolean;
  /** What the intent keeps of its envelope in the message's record, besides the fields every intent keeps (its signing key among them). */
  record?(doc: MessageOf<I>): Partial<MessageRecord>;
  /** The envelope was accepted and is no repeat of an earlier request: what it does to the records of others (its parent's). */
  accepted?(check: CommitCheck, doc: MessageOf<I>, record: MessageRecord, where: string): void;
  /** A receipt for one of its attempts; an intent without one takes no receipts. */
  receipt?(check: CommitCheck, entry: EntryFile, info: Extract<PathInfo, { kind: 'receipt' }>, record: MessageRecord, keyId: string): void;
}

const INTENT_RULES: { readonly [I in Intent]: IntentRules<I> } = {
  aa_consult: consultRules,
  ea_dispatch: dispatchRules,
  retry: retryRules,
  status_query: statusQueryRules,
  receipt_notice: receiptNoticeRules,
  blocker: blockerRules,
  ceo_command: ceoCommandRules,
  ceo_reject: ceoRejectRules,
  ack: ackRules,
  cross_check: crossCheckRules,
};

/** The rules of one intent; for a message of any intent, its rules take that message. */
export function intentRules<I extends Intent>(intent: I): IntentRules<I> {
  return INTENT_RULES[intent];
}
