import { CooError } from '../../../errors.js';
import type { ActorClass } from '../../../schema/common.js';
import type { ActorRegistry } from '../../../schema/registry.js';
import type { CooMessage } from '../../../schema/message.js';
import { classOf } from '../../policy-check.js';

/** The class of actor an intent must target, said the same way by every intent that has one. */
export function requireTargetClass(registry: ActorRegistry, doc: CooMessage, targetClass: ActorClass, what: string, where: string): void {
  if (classOf(registry, doc.target_actor) !== targetClass) throw new CooError('POLICY_INTENT_NOT_ALLOWED', `${where}: ${doc.intent} must target ${what}, not ${doc.target_actor}`, { where });
}
