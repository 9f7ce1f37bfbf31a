import { CooError } from '../errors.js';
import { parsePublicKeyLine } from '../crypto/keys.js';
import type { ActorRegistry } from '../schema/registry.js';
import type { TrustRoot } from '../schema/control.js';
import type { ActorClass } from '../schema/common.js';
import type { LedgerState } from './state.js';

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

/**
 * The key holders of each pair of trust files, made once: every commit of a replay asks for them,
 * and the files change only with a new trust version. Keyed by the parsed documents, which no one
 * changes once read.
 */
const holdersOf = new WeakMap<object, Map<TrustRoot | null, ReadonlyMap<string, KeyHolder>>>();
const NO_REGISTRY = {};

/** The key holders the given root and registry allow. */
export function activeKeys(root: TrustRoot | null, registry: ActorRegistry | null): ReadonlyMap<string, KeyHolder> {
  let byRoot = holdersOf.get(registry ?? NO_REGISTRY);
  if (byRoot === undefined) {
    byRoot = new Map();
    holdersOf.set(registry ?? NO_REGISTRY, byRoot);
  }
  let holders = byRoot.get(root);
  if (holders === undefined) {
    holders = collectHolders(root, registry);
    byRoot.set(root, holders);
  }
  return holders;
}

function collectHolders(root: TrustRoot | null, registry: ActorRegistry | null): ReadonlyMap<string, KeyHolder> {
  const holders = new Map<string, KeyHolder>();
  for (const actor of registry?.actors ?? []) {
    for (const key of actor.keys) holders.set(key.key_id, Object.freeze({ actor: actor.id, actorClass: actor.class, rootAuthority: false }));
  }
  for (const authority of root?.authorities ?? []) {
    const known = holders.get(authority.key_id);
    holders.set(authority.key_id, Object.freeze({ actor: authority.actor, actorClass: known?.actorClass ?? 'human_authority', rootAuthority: true }));
  }
  return holders;
}

/** Names the right failure for a key the trust files in force do not allow. */
export function unknownSignerError(state: LedgerState, registry: ActorRegistry | null, keyId: string, where: string): CooError {
  const revoked = registry?.revoked_keys.find((entry) => entry.key_id === keyId);
  if (revoked !== undefined) return new CooError('SIGNER_REVOKED', `${where}: signed by revoked key ${keyId} (${revoked.reason})`, { where });
  const past = state.everKeys.get(keyId);
  if (past !== undefined) return new CooError('SIGNER_RETIRED', `${where}: signed by ${keyId}, a retired key of ${past.actor}`, { where });
  return new CooError('SIGNER_UNKNOWN', `${where}: signed by ${keyId}, a key the trust files do not know`, { where });
}
