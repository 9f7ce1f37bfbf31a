import { CooError } from '../../../errors.js';
import type { CooMessage } from '../../../schema/message.js';
import type { ActorRegistry } from '../../../schema/registry.js';
import { classOf } from '../../policy-check.js';

/** What the CEO's commands and rejections share: from a human authority of the registry (the CEO, who signs it), to the active COO. */
export function requireCeoToCoo(registry: ActorRegistry, doc: CooMessage, where: string): void {
  if (classOf(registry, doc.source_actor) !== 'human_authority') {
    throw new CooError('TRUST_AUTHORITY', `${where}: ${doc.intent} comes from the CEO (a human authority of the registry), not ${doc.source_actor}`, { where });
  }
  if (doc.target_actor !== registry.active_coo) {
    throw new CooError('NOT_ACTIVE_COO', `${where}: ${doc.intent} is addressed to the active COO ${registry.active_coo}, not ${doc.target_actor}`, { where });
  }
}
