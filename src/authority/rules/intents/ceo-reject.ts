import { CooError } from '../../../errors.js';
import type { IntentRules } from '../intent.js';
import { approvalsNow, awaitsRetryApproval, rejectionOf } from '../approval.js';
import { requireCeoToCoo } from './ceo-authority.js';

/**
 * ceo_reject: the CEO refuses a request that waits for its approval, with the reason, and tells
 * the active COO: a new dispatch or adoption by the request hash it was refused with (one no
 * approval in the ledger grants), or the next attempt of a dispatch that ended without success
 * (one no approval has reopened). Once per request, and final: no approval of it is accepted
 * afterwards (rules/approval.ts). A request waiting for approval never enters the ledger (the writer
 * and the validator refuse it with its hash), so a rejection by hash names any well-formed hash: a
 * standing refusal of that exact request, while the key that signed it is not revoked: a revoked
 * key's refusal no longer stands, and only the CEO, by a key in force, approves what it refused.
 */
export const ceoRejectRules: IntentRules<'ceo_reject'> = {
  target(check, doc, registry, where) {
    requireCeoToCoo(registry, doc, where);
    if (doc.about_message_id !== null) {
      const record = check.message(doc.about_message_id);
      if (record === undefined) throw new CooError('MESSAGE_UNKNOWN', `${where}: about_message_id ${doc.about_message_id} does not exist`, { where });
      if (!awaitsRetryApproval(record)) throw new CooError('ATTEMPT_INVALID', `${where}: ${record.id} waits for no approval of a next attempt`, { where: `${where}:about_message_id` });
    } else if ([...approvalsNow(check)].some((approval) => approval.requestHash === doc.request_hash && approval.revoked !== true)) {
      throw new CooError('APPROVAL_INVALID', `${where}: request ${doc.request_hash} is approved already; nothing waits to be rejected`, { where: `${where}:request_hash` });
    }
    const about = doc.about_message_id ?? doc.request_hash!;
    const earlier = rejectionOf(check, about);
    if (earlier !== undefined) throw new CooError('MESSAGE_DUPLICATE', `${where}: ${earlier.id} rejected ${about} already`, { where });
  },
  record(doc) {
    return doc.about_message_id === null ? { rejectsRequest: doc.request_hash! } : { about: doc.about_message_id };
  },
};
