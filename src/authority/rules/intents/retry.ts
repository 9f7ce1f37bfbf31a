import { CooError } from '../../../errors.js';
import { classOf } from '../../policy-check.js';
import type { IntentRules } from '../intent.js';

/** retry: asks the runner to run a message again; it targets that message's actor, in that actor's authority class. */
export const retryRules: IntentRules<'retry'> = {
  target(check, doc, registry, where) {
    const original = check.message(doc.retry_of);
    if (original === undefined) throw new CooError('MESSAGE_UNKNOWN', `${where}: retry_of ${doc.retry_of} does not exist`, { where });
    if (original.target !== doc.target_actor) {
      throw new CooError('POLICY_INTENT_NOT_ALLOWED', `${where}: a retry targets the actor of the message it retries`, { where });
    }
    const expected = classOf(registry, doc.target_actor) === 'advisory_agent' ? 'advisory_only' : 'governed_execution';
    if (doc.authority_class !== expected) {
      throw new CooError('SCHEMA_INVALID', `${where}: a retry to ${doc.target_actor} carries authority_class ${expected}`, { where: `${where}:authority_class` });
    }
  },
};
