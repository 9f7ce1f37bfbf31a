import { CooError } from '../../../errors.js';
import type { IntentRules } from '../intent.js';

/** blocker: says what stands in the way, of a message the ledger holds when it names one. */
export const blockerRules: IntentRules<'blocker'> = {
  target(check, doc, _registry, where) {
    if (doc.about_message_id !== null && check.message(doc.about_message_id) === undefined) {
      throw new CooError('MESSAGE_UNKNOWN', `${where}: about_message_id ${doc.about_message_id} does not exist`, { where });
    }
  },
};
