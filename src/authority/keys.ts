import { CooError } from '../errors.js';
import { parsePublicKeyLine } from '../crypto/keys.js';
import type { ActorRegistry } from '../schema/registry.js';
import type { TrustRoot } from '../schema/control.js';
import type { ActorClass } from '../schema/common.js';
import type { KeyRecord, LedgerState, Revocation } from './state.js';

/** Who a key speaks for in the trust files in force. */
export interface KeyHolder {
  readonly actor: string;
  readonly actorClass: ActorClass | null;
  /** True when the key is one of the trust root's authority keys. */
  readonly rootAuthority: boolean;
}

/** Checks that every listed key id is the fingerprint of its public key. */
export function checkKeyIds(entries: ReadonlyArray<{ key_id: string; public_key: string }>, where: string): void {
  for (const entry of entries) {
    const { key } = parsePublicKeyLine(entry.public_key);
    if (key.keyId !== entry.key_id) {
      throw new CooError('KEY_MALFORMED', `${where}: key_id ${entry.key_id} is not the fingerprint of its public key (${key.keyId})`, { where });
    }
  }
}

/** Whether a trust root ever named the key: from then on, only the root gives it a role. */
export type RootNamed = (keyId: string) => boolean;

/**
 * The key holders of each pair of trust files, made once: every commit of a replay asks for them,
 * and the files change only with a new trust version. Keyed by the parsed documents, which no one
 * changes once read; a root document stands at one place in one chain, so the keys earlier roots
 * named (`rootNamed`) are the same whenever it is asked.
 */
const holdersOf = new WeakMap<object, Map<TrustRoot | null, ReadonlyMap<string, KeyHolder>>>();
const NO_REGISTRY = {};

/**
 * The key holders the given root and registry allow. One source of truth per key and role: a key
 * the registry revoked holds no role at all, the root's authorities included; a key any root ever
 * named holds a role only while the root in force names it, so a key the root rotated out is
 * retired everywhere, even while a registry still lists it for the CEO.
 */
export function activeKeys(root: TrustRoot | null, registry: ActorRegistry | null, rootNamed: RootNamed): ReadonlyMap<string, KeyHolder> {
  let byRoot = holdersOf.get(registry ?? NO_REGISTRY);
  if (byRoot === undefined) {
    byRoot = new Map();
    holdersOf.set(registry ?? NO_REGISTRY, byRoot);
  }
  let holders = byRoot.get(root);
  if (holders === undefined) {
    holders = collectHolders(root, registry, rootNamed);
    byRoot.set(root, holders);
  }
  return holders;
}

function collectHolders(root: TrustRoot | null, registry: ActorRegistry | null, rootNamed: RootNamed): ReadonlyMap<string, KeyHolder> {
  const holders = new Map<string, KeyHolder>();
  const revoked = new Set((registry?.revoked_keys ?? []).map((entry) => entry.key_id));
  const authorities = new Set((root?.authorities ?? []).map((authority) => authority.key_id));
  for (const actor of registry?.actors ?? []) {
    for (const key of actor.keys) {
      if (revoked.has(key.key_id) || (rootNamed(key.key_id) && !authorities.has(key.key_id))) continue;
      holders.set(key.key_id, Object.freeze({ actor: actor.id, actorClass: actor.class, rootAuthority: false }));
    }
  }
  for (const authority of root?.authorities ?? []) {
    if (revoked.has(authority.key_id)) continue;
    const known = holders.get(authority.key_id);
    holders.set(authority.key_id, Object.freeze({ actor: authority.actor, actorClass: known?.actorClass ?? 'human_authority', rootAuthority: true }));
  }
  return holders;
}

/** The key holders of the trust files in force in `state`. */
export function keyHolders(state: Pick<LedgerState, 'root' | 'registry' | 'everKeys'>): ReadonlyMap<string, KeyHolder> {
  return activeKeys(state.root?.doc ?? null, state.registry?.doc ?? null, (keyId) => state.everKeys.get(keyId)?.rootNamed === true);
}

/** What the chain says of one key now: in force, rotated out, revoked, or never given. */
export type KeyStatus =
  | { readonly status: 'active'; readonly actor: string; readonly rootAuthority: boolean; readonly record: KeyRecord | null }
  | { readonly status: 'retired'; readonly actor: string; readonly seq: number; readonly by: readonly string[]; readonly record: KeyRecord }
  | { readonly status: 'revoked'; readonly actor: string | null; readonly revocation: Revocation; readonly record: KeyRecord | null }
  | { readonly status: 'unknown' };

/**
 * A key's status at the state's head. Revocation is final and wins over every other fact; a key
 * that left force otherwise was retired (rotated out) by the trust change named, and a later trust
 * change may grant it again. The runner's start-up check and the auditors' views ask this.
 */
export function keyStatus(state: LedgerState, keyId: string): KeyStatus {
  const record = state.everKeys.get(keyId) ?? null;
  const revocation = state.revocations.get(keyId);
  if (revocation !== undefined) return { status: 'revoked', actor: record?.actor ?? null, revocation, record };
  const holder = keyHolders(state).get(keyId);
  if (holder !== undefined) return { status: 'active', actor: holder.actor, rootAuthority: holder.rootAuthority, record };
  if (record === null) return { status: 'unknown' };
  return { status: 'retired', actor: record.actor, seq: record.retired?.seq ?? state.seq, by: record.retired?.by ?? [], record };
}

/** One line on a key's status, for messages: `revoked at Ledger-Seq 7 by trust/registry/000003.yaml ("laptop stolen")`. */
export function describeStatus(status: KeyStatus): string {
  switch (status.status) {
    case 'active':
      return status.rootAuthority ? `in force, a trust-root authority of ${status.actor}` : `in force, a key of ${status.actor}`;
    case 'retired':
      return `a key of ${status.actor} retired (rotated out) at Ledger-Seq ${status.seq}${status.by.length > 0 ? ` by ${status.by.join(' and ')}` : ''}`;
    case 'revoked':
      return `${status.actor === null ? 'a key' : `a key of ${status.actor}`} revoked at Ledger-Seq ${status.revocation.seq} by ${status.revocation.by} (${JSON.stringify(status.revocation.reason)})`;
    case 'unknown':
      return 'a key the trust files never gave';
  }
}

/**
 * The code for a key the trust files in force do not allow, the same for every writer and reader:
 * SIGNER_REVOKED for a revoked key (whatever came after), SIGNER_RETIRED for a key rotated out,
 * SIGNER_UNKNOWN for a key never given.
 */
export function signerCode(status: KeyStatus): 'SIGNER_REVOKED' | 'SIGNER_RETIRED' | 'SIGNER_UNKNOWN' {
  return status.status === 'revoked' ? 'SIGNER_REVOKED' : status.status === 'retired' ? 'SIGNER_RETIRED' : 'SIGNER_UNKNOWN';
}

/** The coded error for an entry or commit at `where` signed by a key not in force. */
export function signerError(status: KeyStatus, keyId: string, where: string): CooError {
  const what = status.status === 'active' || status.status === 'unknown' ? 'a key the trust files do not know' : describeStatus(status);
  return new CooError(signerCode(status), `${where}: signed by ${keyId}, ${what}`, { where });
}

/**
 * The holder of `keyId` in `state`, or the coded error the validator would give a signature by it:
 * writers refuse a key with the same code before they sign anything. `purpose` says what the key
 * was given for (`--key`, "the COO key").
 */
export function requireHolder(state: LedgerState, keyId: string, purpose: string): KeyHolder {
  const holder = keyHolders(state).get(keyId);
  if (holder !== undefined) return holder;
  const status = keyStatus(state, keyId);
  const what = status.status === 'active' || status.status === 'unknown' ? 'a key the trust files do not know' : describeStatus(status);
  throw new CooError(signerCode(status), `${purpose} ${keyId} is ${what}`);
}
