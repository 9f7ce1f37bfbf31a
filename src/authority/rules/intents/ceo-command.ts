import { CooError } from '../../../errors.js';
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
  /** The work that descends from the command is held to its budget (rules/envelope.ts); its key answers for it (ceo-authority.ts voidCeoMessagesOf). */
  record(doc) {
    return doc.budget_usd === null ? {} : { budgetUsd: doc.budget_usd };
  },
};
