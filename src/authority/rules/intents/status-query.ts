import { CooError } from '../../../errors.js';
import type { IntentRules } from '../intent.js';

/** status_query: asks about a message the ledger holds. */
export const statusQueryRules: IntentRules<'status_query'> = {
  target(check, doc, _registry, where) {
    if (check.message(doc.about_message_id) === undefined) {
      throw new CooError('MESSAGE_UNKNOWN', `${where}: about_message_id ${doc.about_message_id} does not exist`, { where });
    }
  },
};
