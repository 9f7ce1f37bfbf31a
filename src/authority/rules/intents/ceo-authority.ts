import { CooError } from '../../../errors.js';
import type { CooMessage } from '../../../schema/message.js';
import type { ActorRegistry } from '../../../schema/registry.js';
import { classOf } from '../../policy-check.js';
import type { CommitCheck } from '../../commit-check.js';

/** What the CEO's commands and rejections share: from a human authority of the registry (the CEO, who signs it), to the active COO. */
export function requireCeoToCoo(registry: ActorRegistry, doc: CooMessage, where: string): void {
  if (classOf(registry, doc.source_actor) !== 'human_authority') {
    throw new CooError('TRUST_AUTHORITY', `${where}: ${doc.intent} comes from the CEO (a human authority of the registry), not ${doc.source_actor}`, { where });
  }
  if (doc.target_actor !== registry.active_coo) {
    throw new CooError('NOT_ACTIVE_COO', `${where}: ${doc.intent} is addressed to the active COO ${registry.active_coo}, not ${doc.target_actor}`, { where });
  }
}

/**
 * A revocation ends the commands and rejections the revoked key signed that the COO has not
 * acknowledged: they are no longer the CEO's word, so they leave the COO's inbox and take no
 * acknowledgement (ack.ts isForCoo). What the COO acknowledged stands, and a command's budget still
 * bounds the work that descends from it: a revocation never loosens a limit.
 */
export function voidCeoMessagesOf(check: CommitCheck, keyId: string): void {
  for (const record of new Map([...check.state.messages, ...check.messages]).values()) {
    if ((record.intent !== 'ceo_command' && record.intent !== 'ceo_reject') || record.keyId !== keyId || record.ackedBy !== undefined || record.revoked === true) continue;
    check.messages.set(record.id, { ...record, revoked: true });
  }
}
