import { CooError } from '../errors.js';
import type { CooMessage } from '../schema/message.js';
import { canonicalJson, sha256Ref } from '../util/hash.js';
import { stableDispatchFields } from './rules/intents/dispatch.js';
import type { MessageRecord } from './state.js';

/**
 * What an envelope asks, without what differs between two submissions of the same request (ids,
 * times, budget, paths inside the message's own folder, and the route it came by: a CLI retry of a
 * request an agent made over MCP asks the same thing). Equal fingerprints ask the same thing.
 * The correlation is left out here and compared on its own, so that the conflict can say so.
 */
const VOLATILE_FIELDS = new Set(['message_id', 'correlation_id', 'created_at', 'expires_at', 'deadline_at', 'budget', 'payload_ref', 'submitted_via']);

export function requestFingerprint(message: CooMessage): string {
  const asked: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(message)) if (!VOLATILE_FIELDS.has(key)) asked[key] = value;
  const pin = asked['context_pin'] as Record<string, unknown> | null | undefined;
  if (pin != null) asked['context_pin'] = { ...pin, context_manifest_ref: undefined };
  // A dispatch's attempt id and default branch derive from its message id.
  if (message.intent === 'ea_dispatch') asked['dispatch'] = stableDispatchFields(message);
  // A panel's id is new with every submission; which panel and which members are the request.
  if (message.intent === 'aa_consult' && message.panel !== undefined) asked['panel'] = { name: message.panel.name, members: message.panel.members };
  return sha256Ref(canonicalJson(asked));
}

/**
 * What joins a panel's idempotency key to a member's id in that member's key (`<key>~<member>`):
 * the one place a key is built from two strings.
 */
export const MEMBER_KEY_JOIN = '~';

/**
 * A key a writer is given (by a tool's client, a flag or an envelope written by hand) has no `~`:
 * one that had could be the key a later panel derives for a member (`k~aa.chatgpt` for panel `k`),
 * whose member was then refused as a key reused. Refused where a key is given, never on replay:
 * the ledger may hold such keys from before, and they stay valid.
 */
export function checkGivenKey(key: string | undefined, where: string, name?: string): void {
  if (key === undefined || !key.includes(MEMBER_KEY_JOIN)) return;
  // As the caller gave it: a flag (`--idempotency-key`) is named alone, an envelope's field with the envelope.
  const said = name === undefined ? `${where}: idempotency_key` : name;
  throw new CooError('USAGE', `${said} ${JSON.stringify(key)} has a "${MEMBER_KEY_JOIN}", which joins a panel's key to each member's (<key>${MEMBER_KEY_JOIN}<member>) and which no given key may have: it could take a key a panel derives for its member. Give a key without "${MEMBER_KEY_JOIN}"; to repeat a panel, its own key`, { where: name ?? `${where}:idempotency_key` });
}

/**
 * The same rule where an envelope is judged as written (the writers and the hook; keys the ledger
 * holds from before stay valid): a key holds a `~` only as a panel member's, `<panel key>~<member>`
 * with one `~` and the member the envelope's own target. An envelope pushed straight to a remote,
 * which no writer's check saw, could otherwise take the key a later panel derives for its member.
 */
export function checkMemberJoin(doc: CooMessage, where: string): void {
  const key = doc.idempotency_key;
  const at = key.indexOf(MEMBER_KEY_JOIN);
  if (at === -1) return;
  if (doc.intent === 'aa_consult' && doc.panel !== undefined && at === key.lastIndexOf(MEMBER_KEY_JOIN) && key.slice(at + 1) === doc.target_actor) return;
  throw new CooError('IDEMPOTENCY_CONFLICT', `${where}: idempotency_key ${JSON.stringify(key)} has a "${MEMBER_KEY_JOIN}", which only a panel member's key has (<panel key>${MEMBER_KEY_JOIN}<member>, the member its target): it could take a key a panel derives for its member. Give a key without "${MEMBER_KEY_JOIN}"`, { where: `${where}:idempotency_key` });
}

/** A panel member's idempotency key, from the panel's (a given key, checked) and the member's id. */
export function panelMemberKey(panelKey: string, member: string): string {
  checkGivenKey(panelKey, 'panel');
  return `${panelKey}${MEMBER_KEY_JOIN}${member}`;
}

/**
 * An idempotency key names one request in one correlation. Given the first message that used the
 * sender's key (`firstId`, undefined when the key is new), returns the message this envelope
 * repeats, or null when it is the first; throws IDEMPOTENCY_CONFLICT when the key was used for
 * another request or under another correlation. The one rule: the validator and the writer's
 * shortcut (ledger/append-envelope.ts) both ask it.
 */
export function repeatedRequest(
  message: Pick<CooMessage, 'idempotency_key' | 'correlation_id'>,
  fingerprint: string,
  firstId: string | undefined,
  first: MessageRecord | undefined,
  where: string,
): MessageRecord | null {
  if (firstId === undefined) return null;
  const key = JSON.stringify(message.idempotency_key);
  if (first === undefined || first.fingerprint !== fingerprint) {
    throw new CooError('IDEMPOTENCY_CONFLICT', `${where}: idempotency_key ${key} was used by ${firstId} for a different request`, { where });
  }
  if (first.correlation !== message.correlation_id) {
    throw new CooError('IDEMPOTENCY_CONFLICT', `${where}: idempotency_key ${key} names ${firstId} in ${first.correlation}, not a request in ${message.correlation_id}`, {
      where: `${where}:correlation_id`,
    });
  }
  return first;
}
