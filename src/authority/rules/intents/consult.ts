import { CooError } from '../../../errors.js';
import type { IntentRules } from '../intent.js';
import { checkManifest, checkTask } from '../message-artifacts.js';
import { closeAttempt, openAttempt, referenceAttemptArtifacts } from '../attempt.js';
import { notePanelMember } from '../panel.js';
import { requireTargetClass } from './target-class.js';

/**
 * aa_consult: a question to an advisory agent. Its prompt and context manifest are added with it,
 * match their hashes, and the manifest matches the pin; its receipt (aa_receipt.v0) answers that
 * exact prompt and context.
 */
export const consultRules: IntentRules<'aa_consult'> = {
  target(_check, doc, registry, where) {
    requireTargetClass(registry, doc, 'advisory_agent', 'an advisory agent', where);
  },
  envelope(check, doc, _registry, policy, folder, where) {
    checkTask(check, doc.payload_ref, doc.payload_hash, folder, where);
    checkManifest(check, doc.context_pin, folder, where);
    notePanelMember(check, doc, policy, where);
  },
  receipt(check, entry, info, record, keyId) {
    const where = entry.path;
    const doc = check.read('aa_receipt.v0', entry);
    check.requireActiveCoo(keyId, where, 'receipts');
    const attempt = openAttempt(record, info.attempt, doc, where);
    if (doc.prompt_hash !== record.payloadHash || doc.context_manifest_hash !== record.manifestHash) {
      throw new CooError('ARTIFACT_HASH_MISMATCH', `${where}: prompt_hash or context_manifest_hash differs from the envelope's`, { where });
    }
    const refs = [...(doc.output_ref !== null && doc.output_hash !== null ? [{ path: doc.output_ref, sha256: doc.output_hash }] : []), ...doc.attachments];
    referenceAttemptArtifacts(check, record, info.attempt, refs, where);
    closeAttempt(check, record, attempt, doc, where);
  },
};
