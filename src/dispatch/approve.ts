import { requireHolder } from '../authority/keys.js';
import type { PrivateKey } from '../crypto/keys.js';
import { CooError } from '../errors.js';
import { refuseSignerSecrets } from '../ledger/held-secrets.js';
import { approvalPath } from '../ledger/layout.js';
import type { Ledger } from '../ledger/ledger.js';
import { parseDocument } from '../schema/documents.js';
import type { Approval } from '../schema/control.js';
import { toYaml } from '../schema/strict-yaml.js';
import { newMessageId } from '../util/ids.js';
import { addSeconds, isoSeconds } from '../util/time.js';

export interface ApproveRequest {
  readonly ledger: Ledger;
  /** A trust-root authority's key: the CEO's. */
  readonly key: PrivateKey;
  readonly now: Date;
  readonly reason: string;
  /** A new dispatch, by the request hash `coo dispatch` printed. */
  readonly requestHash?: string;
  /** A retry: the dispatch whose last attempt ended without success. */
  readonly messageId?: string;
  /** How long the approval may wait to be used; the policy's time-to-live caps it. Default one day. */
  readonly ttlSeconds?: number;
}

export interface Approved {
  readonly approval: Approval;
  readonly path: string;
  readonly commit: string;
}

const DEFAULT_TTL_SECONDS = 86_400;

/**
 * Writes the CEO's signed approval (approval.v0): of a new dispatch by its request hash, or of the
 * next attempt of a dispatch that ended without success. The validator holds it to the rules; this
 * refuses early what it would refuse, with what to do instead.
 */
export async function approve(request: ApproveRequest): Promise<Approved> {
  const { ledger, key, now } = request;
  if ((request.requestHash === undefined) === (request.messageId === undefined)) throw new CooError('USAGE', 'approve either a dispatch message id (a retry) or --request HASH (a new dispatch)');
  if (request.reason.trim() === '') throw new CooError('USAGE', '--reason is empty');
  const state = await ledger.state();
  const policy = state.policy?.doc;
  if (policy === undefined) throw new CooError('TRUST_VERSION', 'the ledger has no policy');
  const holder = requireHolder(state, key.publicKey.keyId, 'the approving key');
  if (!holder.rootAuthority) throw new CooError('TRUST_AUTHORITY', `key ${key.publicKey.keyId} is not a trust-root authority: approvals are the CEO's`);
  let attempt: number | null = null;
  if (request.messageId !== undefined) {
    const record = state.messages.get(request.messageId);
    if (record === undefined) throw new CooError('MESSAGE_UNKNOWN', `${request.messageId} is not in the ledger`);
    const last = record.attempts[record.attempts.length - 1];
    if (record.intent !== 'ea_dispatch' || last?.receipt == null || last.receipt.status === 'succeeded' || last.receipt.nextAttemptAt !== null) {
      throw new CooError('ATTEMPT_INVALID', `${request.messageId} is not a dispatch whose last attempt ended without success`);
    }
    attempt = last.number + 1;
  }
  const ttl = Math.min(request.ttlSeconds ?? DEFAULT_TTL_SECONDS, policy.limits.max_ttl_seconds);
  const createdAt = isoSeconds(now);
  const approval = parseDocument(
    'approval.v0',
    {
      schema_version: 'approval.v0',
      approval_id: `apr_${newMessageId(now.getTime()).slice(4)}`,
      approves: attempt === null ? 'dispatch' : 'retry',
      request_hash: request.requestHash ?? null,
      message_id: request.messageId ?? null,
      attempt_number: attempt,
      reason: request.reason,
      approved_by: holder.actor,
      created_at: createdAt,
      expires_at: isoSeconds(addSeconds(now, ttl)),
    },
    'approval',
  );
  const path = approvalPath(approval.approval_id, createdAt);
  const files = [{ path, bytes: Buffer.from(toYaml(approval)) }];
  refuseSignerSecrets(files, key, ledger.gitdir);
  const result = await ledger.append({
    files,
    key,
    now,
    summary: attempt === null ? `approval ${approval.approval_id} of dispatch request ${request.requestHash}` : `approval ${approval.approval_id}: retry ${request.messageId} as attempt ${attempt}`,
  });
  if (!('commit' in result)) throw new CooError('INTERNAL', 'the approval was not written');
  return { approval, path, commit: result.commit };
}
