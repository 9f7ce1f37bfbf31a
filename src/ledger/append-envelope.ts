import { CooError } from '../errors.js';
import type { PrivateKey } from '../crypto/keys.js';
import { folderOf, idempotencySlot } from '../authority/state.js';
import { requestFingerprint } from '../authority/validate-commit.js';
import { readDocument } from '../schema/documents.js';
import type { CooMessage } from '../schema/message.js';
import { envelopePath, messageFolder } from './layout.js';
import type { Ledger, NewFile } from './ledger.js';

export interface EnvelopeAppendResult {
  readonly messageId: string;
  readonly path: string;
  /** The commit that added it; for a repeated request, null. */
  readonly commit: string | null;
  /** True when the same request was already in the ledger under this idempotency key. */
  readonly existing: boolean;
}

/** Artifacts of a message folder a caller may supply by name. */
export const MESSAGE_ARTIFACTS = ['prompt.md', 'context-manifest.yaml'] as const;

/**
 * Signs and appends an envelope with its artifacts. The same idempotency key with the same request
 * returns the message already there and writes nothing; with a different request it is refused.
 */
export async function appendEnvelope(
  ledger: Ledger,
  envelopeBytes: Buffer,
  artifacts: ReadonlyMap<string, Buffer>,
  key: PrivateKey,
  now: Date,
  file = 'envelope',
): Promise<EnvelopeAppendResult> {
  const message: CooMessage = readDocument('coo_message.v0', envelopeBytes, file);
  const folder = messageFolder(message.message_id, message.created_at);
  const files: NewFile[] = [{ path: envelopePath(folder), bytes: envelopeBytes }];
  for (const [name, bytes] of artifacts) {
    if (!(MESSAGE_ARTIFACTS as readonly string[]).includes(name)) {
      throw new CooError('USAGE', `artifact ${name} has no place beside an envelope (allowed: ${MESSAGE_ARTIFACTS.join(', ')})`);
    }
    files.push({ path: `${folder}/${name}`, bytes });
  }
  const fingerprint = requestFingerprint(message);
  const result = await ledger.append<EnvelopeAppendResult>({
    files,
    key,
    now,
    summary: `${message.intent} ${message.message_id} ${message.source_actor} -> ${message.target_actor}`,
    precheck: (state) => {
      const firstId = state.idempotency.get(idempotencySlot(message.source_actor, message.idempotency_key));
      if (firstId === undefined) return undefined;
      const first = state.messages.get(firstId);
      if (first !== undefined && first.fingerprint === fingerprint) {
        return { messageId: first.id, path: envelopePath(folderOf(first)), commit: null, existing: true };
      }
      throw new CooError('IDEMPOTENCY_CONFLICT', `idempotency_key ${JSON.stringify(message.idempotency_key)} was used by ${firstId} for a different request`);
    },
  });
  if ('skipped' in result) return result.skipped;
  return { messageId: message.message_id, path: envelopePath(folder), commit: result.commit, existing: false };
}
