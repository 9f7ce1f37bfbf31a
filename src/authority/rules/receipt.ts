import { CooError } from '../../errors.js';
import type { PathInfo } from '../../ledger/layout.js';
import type { CommitCheck, EntryFile } from '../commit-check.js';
import { intentRules } from './intent.js';

/**
 * A receipt sits in its message's own folder, names that message and closes one of its attempts;
 * what it states is the rule of its message's intent (rules/intents/), and an intent without a
 * receipt rule takes none.
 */
export function checkReceipt(check: CommitCheck, entry: EntryFile, info: Extract<PathInfo, { kind: 'receipt' }>, keyId: string): void {
  const where = entry.path;
  const record = check.messageAt(info, where);
  const rule = intentRules(record.intent).receipt;
  if (rule === undefined) throw new CooError('ATTEMPT_INVALID', `${where}: ${record.intent} messages take no receipts`, { where });
  rule(check, entry, info, record, keyId);
}
