/**
 * coo-commons as a library: the calls the `coo` verbs make, for a program that drives the ledger
 * itself (`import { Ledger, verifyLedger } from 'coo-commons'`). Every failure is a `CooError`
 * with a code from a closed set; nothing here prints or exits.
 *
 * - Open a ledger: `Ledger.open(gitdir)`, then `state()` (trust files, messages, attempts, spend),
 *   `readFile(path)` and `close()`. A new one: `initLedger`.
 * - Verify it from a pinned trust root: `verifyLedger(gitdir, { trustRoot })` replays every commit
 *   through the validator and returns its findings (empty when the history is clean).
 * - Read messages and receipts: `viewMessage(ledger, state, record)` gives the envelope, lane
 *   state, claims and receipt documents; `readDocument(kind, bytes, where)` parses one entry.
 * - Enqueue work: `enqueueConsult` (a pinned consult of an advisory agent) and `enqueueDispatch`
 *   (governed work for an execution agent), each signed with the COO's key and validated first.
 * - Append an entry written by hand: `appendEnvelope(ledger, bytes, artifacts, key, now)`.
 * - Keys: `generatePrivateKey`, `parsePrivateKey`, `parsePublicKeyLine`, and their formatters.
 *
 * Importing it adds group and other write to the process's umask (util/umask.ts): a ledger is never
 * made writable by other users.
 */

import { closeUmask } from './util/umask.js';

closeUmask();

export { Ledger } from './ledger/ledger.js';
export type { AppendResult, NewFile } from './ledger/ledger.js';
export { initLedger, defaultPolicy, defaultRegistry } from './ledger/init.js';
export type { InitOptions } from './ledger/init.js';
export { appendEnvelope, MESSAGE_ARTIFACTS } from './ledger/append-envelope.js';
export type { EnvelopeAppendResult } from './ledger/append-envelope.js';

export { verifyLedger } from './audit/verify.js';
export type { VerifyOptions, VerifyReport } from './audit/verify.js';
export { viewMessage } from './audit/message-view.js';
export type { AttemptView, DispatchAttemptView, DispatchView, MessageView } from './audit/message-view.js';

export { enqueueConsult } from './consult/enqueue.js';
export type { ConsultEnqueued, ConsultRequest } from './consult/enqueue.js';
export { enqueueDispatch } from './dispatch/enqueue.js';
export type { DispatchEnqueued, DispatchRequest } from './dispatch/enqueue.js';

export { LANE_STATES, laneStateOf } from './authority/state.js';
export type { AttemptRecord, LaneState, LedgerState, MessageRecord } from './authority/state.js';

export { readDocument } from './schema/documents.js';
export type { AaConsultMessage, CooMessage, EaDispatchMessage } from './schema/message.js';
export type { AaReceipt, BlockerCode, EaReceipt, ReceiptStatus } from './schema/receipt.js';

export { formatPrivateKey, formatPublicKeyLine, generatePrivateKey, parsePrivateKey, parsePublicKeyLine } from './crypto/keys.js';
export type { PrivateKey, PublicKey } from './crypto/keys.js';

export { CooError, ERROR_CODES, errorClassOf, isCooError } from './errors.js';
export type { ErrorClass, ErrorCode, Finding } from './errors.js';
