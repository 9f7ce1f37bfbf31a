import { CooError } from '../../../errors.js';
import { classifyPath } from '../../../ledger/layout.js';
import type { IntentRules } from '../intent.js';

/** receipt_notice: tells of a receipt the ledger holds. */
export const receiptNoticeRules: IntentRules<'receipt_notice'> = {
  target(check, doc, _registry, where) {
    // The path names a message: it must be a receipt the ledger holds, in that message's own folder.
    const info = classifyPath(doc.receipt_ref.path);
    const record = info?.kind === 'receipt' ? check.message(info.messageId) : undefined;
    const receipt = info?.kind === 'receipt' ? record?.attempts[info.attempt - 1]?.receipt : undefined;
    if (receipt?.path !== doc.receipt_ref.path) {
      throw new CooError('MESSAGE_UNKNOWN', `${where}: receipt_ref ${doc.receipt_ref.path} is not a receipt in the ledger`, { where: `${where}:receipt_ref` });
    }
  },
};
