import { folderOf, type MessageRecord } from '../authority/state.js';
import { CooError } from '../errors.js';
import { envelopePath } from '../ledger/layout.js';
import type { Ledger } from '../ledger/ledger.js';
import type { Intent } from '../schema/common.js';
import { readDocument } from '../schema/documents.js';
import type { CooMessage } from '../schema/message.js';

/** The signed envelope of a message the ledger holds, read back from its folder. */
export async function readMessage(ledger: Ledger, record: MessageRecord): Promise<CooMessage> {
  const path = envelopePath(folderOf(record));
  const bytes = await ledger.readFile(path);
  if (bytes === null) throw new CooError('NOT_FOUND', `${path} is missing`);
  return readDocument('coo_message.v0', bytes, path);
}

/** The envelope of a message a lane runs: of the lane's intent (`what` names it for the error a bug would raise). */
export async function readLaneMessage<I extends Intent>(ledger: Ledger, record: MessageRecord, intent: I, what: string): Promise<Extract<CooMessage, { intent: I }>> {
  const message = await readMessage(ledger, record);
  if (message.intent !== intent) throw new CooError('INTERNAL', `${record.id} is not ${what}`);
  return message as Extract<CooMessage, { intent: I }>;
}
