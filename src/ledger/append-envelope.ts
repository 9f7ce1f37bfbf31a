import { CooError } from '../errors.js';
import type { PrivateKey } from '../crypto/keys.js';
import { checkGivenKey, repeatedRequest, requestFingerprint } from '../authority/idempotency.js';
import { folderOf, idempotencySlot, type LedgerState } from '../authority/state.js';
import { readDocument } from '../schema/documents.js';
import { toYaml } from '../schema/strict-yaml.js';
import type { CooMessage } from '../schema/message.js';
import { classifyPath, envelopePath, messageFolder } from './layout.js';
import type { Ledger, NewFile } from './ledger.js';
import { refuseSignerSecrets } from './held-secrets.js';
import { keyHolders } from '../authority/keys.js';
import { checkAckKey } from '../authority/rules/intents/ack.js';
import { derivedKeyRule, ENVELOPE_KEY_WORDS, type KeyWords } from '../lane/request-key.js';

export interface EnvelopeAppendResult {
  readonly messageId: string;
  readonly path: string;
  /** The commit that added it; for a repeated request, null. */
  readonly commit: string | null;
  /** True when the same request was already in the ledger under this idempotency key. */
  readonly existing: boolean;
}

/** Artifacts of a message folder a caller may supply by name (a snapshot's files are `context/<sha256 hex>`). */
export const MESSAGE_ARTIFACTS = ['prompt.md', 'context-manifest.yaml', 'proposal.yaml', 'context/<sha256 hex>'] as const;

/**
 * An envelope whose bytes depend on the ledger at the head it lands on (the correlation's remaining
 * budget it states), built under the ledger's lock. Only such figures may differ between two calls:
 * the id, times and request stay the same.
 */
export type EnvelopeAtHead = (state: LedgerState) => Buffer;

/** What a writer's caller says of the envelope's idempotency key (lane/request-key.ts derivedKeyRule). */
export interface KeyOrigin {
  /** The key the caller derived from this very request, which it may write though the ledger holds none such. */
  readonly derivedKey?: string;
  /** How the caller names the key in a refusal, and what it does instead: the envelope's own field by default. */
  readonly words?: KeyWords;
}

/**
 * Signs and appends an envelope with its artifacts. The same idempotency key with the same request
 * in the same correlation returns the message already there and writes nothing; with a different
 * request, or under another correlation, it is refused. A key of the derived form is written only
 * as `origin.derivedKey` or when the ledger holds it in the slot the envelope lands in.
 */
export async function appendEnvelope(
  ledger: Ledger,
  envelope: Buffer | EnvelopeAtHead,
  artifacts: ReadonlyMap<string, Buffer>,
  key: PrivateKey,
  now: Date,
  file = 'envelope',
  origin: KeyOrigin = {},
): Promise<EnvelopeAppendResult> {
  const bytesAt = typeof envelope === 'function' ? envelope : () => envelope;
  const initial = typeof envelope === 'function' ? envelope(await ledger.state()) : envelope;
  const message: CooMessage = readDocument('coo_message.v0', initial, file);
  // One envelope alone is never a panel's member (a panel's are written together, by appendPanel).
  // Named as its caller gave it: a lane's caller in its words (a flag, a tool's argument, a field), a hand-written envelope's as its field.
  checkGivenKey(message.idempotency_key, file, origin.words?.idempotencyKey);
  // The key of an item's acknowledgement (`ack-<id>`) is that acknowledgement's alone: the validator's rule, asked first for the caller's words.
  checkAckKey(message, file, origin.words?.idempotencyKey);
  const folder = messageFolder(message.message_id, message.created_at);
  const extra: NewFile[] = [];
  for (const [name, bytes] of artifacts) {
    if (classifyPath(`${folder}/${name}`)?.kind !== 'message_artifact') {
      throw new CooError('USAGE', `artifact ${name} has no place beside an envelope (allowed: ${MESSAGE_ARTIFACTS.join(', ')})`);
    }
    extra.push({ path: `${folder}/${name}`, bytes });
  }
  refuseSignerSecrets([{ path: envelopePath(folder), bytes: initial }, ...extra], key, ledger.gitdir);
  // The envelope as it lands on the head the lock holds: the lookup of an earlier message under the
  // same key and the envelope's own correlation are decided there, never on a head read before.
  let landing: { state: LedgerState; bytes: Buffer; message: CooMessage } | null = null;
  const at = (state: LedgerState): { bytes: Buffer; message: CooMessage } => {
    if (landing?.state !== state) {
      const bytes = bytesAt(state);
      landing = { state, bytes, message: bytes === initial ? message : readDocument('coo_message.v0', bytes, file) };
    }
    return landing;
  };
  const result = await ledger.append<EnvelopeAppendResult>({
    files: (state) => [{ path: envelopePath(folder), bytes: at(state).bytes }, ...extra],
    key,
    now,
    summary: `${message.intent} ${message.message_id} ${message.source_actor} -> ${message.target_actor}`,
    precheck: (state) => {
      const landed = at(state).message;
      keyRule(state, key, landed, origin);
      const firstId = state.idempotency.get(idempotencySlot(landed.source_actor, landed.idempotency_key));
      const first = repeatedRequest(landed, requestFingerprint(landed), firstId, firstId === undefined ? undefined : state.messages.get(firstId), file);
      return first === null ? undefined : { messageId: first.id, path: envelopePath(folderOf(first)), commit: null, existing: true };
    },
  });
  if ('skipped' in result) return result.skipped;
  return { messageId: message.message_id, path: envelopePath(folder), commit: result.commit, existing: false };
}

/**
 * The derived-form rule on the key `landed` is written under, in its source's slot, for a signer the
 * trust files know: one they do not is refused by the validator in its own words (requireHolder's).
 */
function keyRule(state: LedgerState, key: PrivateKey, landed: CooMessage, origin: KeyOrigin): void {
  // The trust files' holders are built only for a key of the derived form, not on every write.
  derivedKeyRule(state, landed.source_actor, landed.idempotency_key, origin.derivedKey, origin.words ?? ENVELOPE_KEY_WORDS, () => keyHolders(state).has(key.publicKey.keyId));
}

/**
 * A lane's request: the envelope built at the head it lands on, appended with its artifacts. The
 * caller gets the envelope the ledger holds: for a repeated request, the earlier one.
 */
export async function appendRequest<M extends CooMessage>(
  ledger: Ledger,
  envelopeAt: (state: LedgerState) => M,
  artifacts: ReadonlyMap<string, Buffer>,
  key: PrivateKey,
  now: Date,
  origin: KeyOrigin = {},
): Promise<EnvelopeAppendResult & { readonly envelope: M }> {
  let envelope = envelopeAt(await ledger.state());
  const result = await appendEnvelope(
    ledger,
    (head) => {
      envelope = envelopeAt(head);
      return Buffer.from(toYaml(envelope));
    },
    artifacts,
    key,
    now,
    'envelope',
    origin,
  );
  if (!result.existing) return { ...result, envelope };
  const stored = await ledger.readFile(result.path);
  if (stored === null) throw new CooError('NOT_FOUND', `${result.path} is missing`);
  return { ...result, envelope: readDocument('coo_message.v0', stored, result.path) as M };
}

/** The envelopes of one panel, as they land on one head: every member's envelope and its artifacts. */
export type PanelAtHead = (state: LedgerState) => ReadonlyArray<{ readonly envelope: CooMessage; readonly artifacts: ReadonlyMap<string, Buffer> }>;

export interface PanelAppendResult {
  /** The members' messages, in the order given; for a repeated request, the ones already there. */
  readonly messages: ReadonlyArray<{ readonly messageId: string; readonly path: string; readonly target: string }>;
  readonly commit: string | null;
  readonly existing: boolean;
}

/**
 * Signs and appends a panel: every member's envelope with its artifacts, in one commit, so that a
 * panel is whole or absent. A repeated request (the first member's idempotency key and request)
 * returns the panel already there and writes nothing.
 */
export async function appendPanel(ledger: Ledger, membersAt: PanelAtHead, key: PrivateKey, now: Date, origin: KeyOrigin = {}): Promise<PanelAppendResult> {
  let landing: { state: LedgerState; members: ReturnType<PanelAtHead> } | null = null;
  const at = (state: LedgerState): ReturnType<PanelAtHead> => {
    if (landing?.state !== state) landing = { state, members: membersAt(state) };
    return landing.members;
  };
  const members = at(await ledger.state());
  refuseSignerSecrets(
    members.flatMap(({ envelope, artifacts }) => [{ path: 'envelope', bytes: Buffer.from(toYaml(envelope)) }, ...[...artifacts].map(([name, bytes]) => ({ path: name, bytes }))]),
    key,
    ledger.gitdir,
  );
  const first = members[0]!.envelope;
  const result = await ledger.append<PanelAppendResult>({
    files: (state) =>
      at(state).flatMap(({ envelope, artifacts }) => {
        const folder = messageFolder(envelope.message_id, envelope.created_at);
        for (const name of artifacts.keys()) if (!(MESSAGE_ARTIFACTS as readonly string[]).includes(name)) throw new CooError('USAGE', `artifact ${name} has no place beside an envelope`);
        return [{ path: envelopePath(folder), bytes: Buffer.from(toYaml(envelope)) }, ...[...artifacts].map(([name, bytes]) => ({ path: `${folder}/${name}`, bytes }))];
      }),
    key,
    now,
    summary: `aa_consult panel ${first.intent === 'aa_consult' ? (first.panel?.id ?? '') : ''} ${first.source_actor} -> ${at(landing!.state).map((member) => member.envelope.target_actor).join(', ')}`,
    precheck: (state) => {
      const landed = at(state)[0]!.envelope;
      keyRule(state, key, landed, origin);
      const firstId = state.idempotency.get(idempotencySlot(landed.source_actor, landed.idempotency_key));
      const repeated = repeatedRequest(landed, requestFingerprint(landed), firstId, firstId === undefined ? undefined : state.messages.get(firstId), 'panel');
      if (repeated === null) return undefined;
      const original = state.messages.get(repeated.duplicateOf ?? repeated.id) ?? repeated;
      const ids = original.panel === undefined ? [original.id] : (state.panels.get(original.panel)?.messages ?? [original.id]);
      const messages = ids.map((id) => state.messages.get(id)!).map((record) => ({ messageId: record.id, path: envelopePath(folderOf(record)), target: record.target }));
      return { messages, commit: null, existing: true };
    },
  });
  if ('skipped' in result) return result.skipped;
  return { messages: at(landing!.state).map(({ envelope }) => ({ messageId: envelope.message_id, path: envelopePath(messageFolder(envelope.message_id, envelope.created_at)), target: envelope.target_actor })), commit: result.commit, existing: false };
}
