import { CooError } from '../../../errors.js';
import type { CommitCheck } from '../../commit-check.js';
import type { IntentRules } from '../intent.js';
import { checkTask } from '../message-artifacts.js';
import { requireCeoToCoo } from './ceo-authority.js';

/**
 * ceo_command: the CEO tells the active COO what to do. Signed by the CEO, its text beside it by
 * hash, its budget within the policy's cap for a correlation. Nothing runs it: it waits in the
 * COO's inbox until the COO acknowledges it, and the COO acts through its own lanes; what it starts
 * with the command as its chain's first message (`--parent`) may cost at most what its budget has left.
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
  /** The work that descends from the command is held to its budget (rules/envelope.ts); its key answers for it (voidCommandsOf). */
  record(doc, keyId) {
    return doc.budget_usd === null ? { keyId } : { keyId, budgetUsd: doc.budget_usd };
  },
};

/**
 * A revocation ends the commands the revoked key signed that the COO has not acknowledged: they are
 * no longer the CEO's word, so they leave the COO's inbox and take no acknowledgement (ack.ts
 * isForCoo). What the COO acknowledged stands, and the budget of a command still bounds the work
 * that descends from it: a revocation never loosens a limit.
 */
export function voidCommandsOf(check: CommitCheck, keyId: string): void {
  for (const record of new Map([...check.state.messages, ...check.messages]).values()) {
    if (record.intent !== 'ceo_command' || record.keyId !== keyId || record.ackedBy !== undefined || record.revoked === true) continue;
    check.messages.set(record.id, { ...record, revoked: true });
  }
}
