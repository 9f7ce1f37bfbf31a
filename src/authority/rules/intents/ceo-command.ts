import { CooError } from '../../../errors.js';
import { toMillis } from '../../../schema/common.js';
import type { CommitCheck } from '../../commit-check.js';
import type { MessageRecord } from '../../state.js';
import { checkNotBehind } from '../clock.js';
import type { IntentRules } from '../intent.js';
import { checkTask } from '../message-artifacts.js';
import { requireCeoToCoo } from './ceo-authority.js';

/**
 * ceo_command: the CEO tells the active COO what to do. Signed by the CEO, its text beside it by
 * hash, its budget within the policy's cap for a correlation. Nothing runs it: it waits in the
 * COO's inbox until the COO acknowledges it, and the COO acts through its own lanes; what it starts
 * with the command as its chain's first message (`--parent`) may cost at most what its budget has left.
 * Its expires_at is how long the COO has to take it up (checkCommandStands).
 */
export const ceoCommandRules: IntentRules<'ceo_command'> = {
  target(_check, doc, registry, where) {
    requireCeoToCoo(registry, doc, where);
  },
  envelope(check, doc, _registry, policy, folder, where) {
    checkTask(check, doc.payload_ref, doc.payload_hash, folder, where);
    if (doc.budget_usd !== null && doc.budget_usd > policy.budgets.max_cost_usd_per_correlation) {
      throw new CooError('POLICY_LIMIT', `${where}: budget_usd ${doc.budget_usd} exceeds the ${policy.budgets.max_cost_usd_per_correlation} a correlation may cost (policy v${policy.version})`, { where: `${where}:budget_usd` });
    }
  },
  /** The work that descends from the command is held to its budget (rules/envelope.ts); its key answers for it (ceo-authority.ts voidCeoMessagesOf). */
  record(doc) {
    return doc.budget_usd === null ? {} : { budgetUsd: doc.budget_usd };
  },
};

/**
 * Whether the CEO's command `command` still stands for an entry about it dated `at`: its ack, or an
 * envelope naming it as its parent. A command the active COO took up (acknowledged, or sent work under) is
 * the COO's to carry out from then on, however long that takes; one it never took up lapses at its
 * expires_at, and with it the budget it grants (rules/envelope.ts checkCommandBudget). The entry's
 * time decides this, so it is held to the judge's clock as claims are (rules/clock.ts checkNotBehind):
 * a clock running behind would read a lapsed command as standing. Other messages pass untouched.
 */
export function checkCommandStands(check: CommitCheck, command: MessageRecord, at: string, what: string, where: string): void {
  if (command.intent !== 'ceo_command' || command.takenUp === true) return;
  if (check.clock !== null && check.landing) checkNotBehind(check.clock, 'created_at', at, where);
  if (toMillis(at) <= toMillis(command.expiresAt)) return;
  throw new CooError(
    'COMMAND_EXPIRED',
    `${where}: ${what} dated ${at}, after the CEO's command ${command.id} lapsed at its expires_at ${command.expiresAt}: the COO never took it up in time (an ack, or work with it as its parent), so it no longer stands and grants no budget; nothing was written; the CEO sends it again (coo command)`,
    { where: `${where}:created_at` },
  );
}

/** Whether `record` is a CEO command the COO never took up that lapsed by `now`: no ack of it, and no work under it, is taken any more. Pure. */
export function commandLapsed(record: MessageRecord, now: Date): boolean {
  return record.intent === 'ceo_command' && record.takenUp !== true && now.getTime() > toMillis(record.expiresAt);
}

/** The active COO took the command up (its ack, or a message it sent under it): from now on it stands past its expires_at. */
export function takeUp(check: CommitCheck, command: MessageRecord): void {
  if (command.intent === 'ceo_command' && command.takenUp !== true) check.messages.set(command.id, { ...command, takenUp: true });
}
