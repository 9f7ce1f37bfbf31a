import { CooError } from '../../../errors.js';
import type { CooMessage } from '../../../schema/message.js';
import type { ActorRegistry } from '../../../schema/registry.js';
import { classOf } from '../../policy-check.js';
import type { CommitCheck } from '../../commit-check.js';
import type { MessageRecord } from '../../state.js';

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

/**
 * Work the active COO sends under a CEO command takes the command up, as its acknowledgement does
 * (ceo-command.ts takeUp), so a command a revoked key signed that the COO had not taken up is taken
 * up by neither: it is no longer the CEO's word, and the work would stand in the ledger as done at
 * it. Work under it sent before the revocation took it up, and what descends from that stands.
 * Judged as new only (the writers, the hook): builds before this rule let such work be written, and
 * a ledger whose history holds it still verifies as it did.
 */
export function checkCommandNotRevoked(check: CommitCheck, parent: MessageRecord, what: string, where: string): void {
  if (check.clock === null || parent.intent !== 'ceo_command' || parent.revoked !== true || parent.takenUp === true) return;
  const revocation = parent.keyId === undefined ? undefined : check.revocation(parent.keyId);
  const when = revocation === undefined ? '' : ` at Ledger-Seq ${revocation.seq} by ${revocation.by} (${JSON.stringify(revocation.reason)})`;
  throw new CooError(
    'SIGNER_REVOKED',
    `${where}: ${what} under the CEO's command ${parent.id}, whose key ${parent.keyId ?? ''} was revoked${when} before the COO took it up: it is no longer the CEO's word, so no work is sent under it; nothing was written; the CEO sends it again by a key in force if it is wanted`,
    { where: `${where}:parent_message_id` },
  );
}
