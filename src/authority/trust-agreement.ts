import { CooError } from '../errors.js';
import type { TrustRoot } from '../schema/control.js';
import type { ActorRegistry } from '../schema/registry.js';
import type { LedgerState } from './state.js';

/**
 * The trust root and the registry both name the CEO's keys: the root as authorities, the registry
 * as the `ceo` actor's keys. The root is the one source of truth for them; these rules keep the
 * registry `coo trust` writes saying the same, and refuse, with what to do, a change that would
 * leave the two disagreeing. Pure.
 */

type RegistryDoc = Omit<ActorRegistry, 'version'> & { readonly version?: number };

/** The actors the root names, each with its authority keys in the root's order. */
function rootActors(root: TrustRoot): Map<string, Array<{ key_id: string; public_key: string }>> {
  const actors = new Map<string, Array<{ key_id: string; public_key: string }>>();
  for (const authority of root.authorities) {
    actors.set(authority.actor, [...(actors.get(authority.actor) ?? []), { key_id: authority.key_id, public_key: authority.public_key }]);
  }
  return actors;
}

/**
 * The registry that agrees with `next` (the root about to be written) after `previous`: every
 * actor either root names holds exactly the new root's keys for it, every revoked key is listed
 * and given to no one. Null when the registry in force already agrees.
 */
export function registryFollowingRoot(registry: ActorRegistry, previous: TrustRoot | null, next: TrustRoot, revoke: ReadonlyMap<string, string>): RegistryDoc | null {
  const named = rootActors(next);
  for (const authority of next.authorities) {
    if (revoke.has(authority.key_id)) throw new CooError('TRUST_CONFLICT', `the next root names ${authority.key_id}, the key it revokes: a revoked key holds no role, so name another`);
  }
  const formerly = new Set((previous?.authorities ?? []).map((authority) => authority.actor));
  for (const actor of named.keys()) {
    const entry = registry.actors.find((item) => item.id === actor);
    if (entry === undefined || entry.class !== 'human_authority') {
      throw new CooError('TRUST_CONFLICT', `the root names ${actor}, which the registry does not hold as a human_authority: add ${actor} to the registry first (coo trust --registry)`);
    }
  }
  const revoked = [...registry.revoked_keys, ...[...revoke].filter(([keyId]) => !registry.revoked_keys.some((entry) => entry.key_id === keyId)).map(([keyId, reason]) => ({ key_id: keyId, reason }))];
  const actors = registry.actors.map((actor) => {
    const keys = named.get(actor.id) ?? (formerly.has(actor.id) ? [] : actor.keys);
    return { ...actor, keys: keys.filter((key) => !revoke.has(key.key_id)) };
  });
  const changed = revoked.length !== registry.revoked_keys.length || actors.some((actor, index) => JSON.stringify(actor.keys) !== JSON.stringify(registry.actors[index]!.keys));
  if (!changed) return null;
  const { version: _version, ...rest } = registry;
  return { ...rest, actors, revoked_keys: revoked };
}

/**
 * Refuses a registry that would disagree with the root in force: an actor the root names with
 * other keys than the root's, a key a root once named and has since retired given to anyone, or a
 * new revocation of a key the root still names (its authority would end with no root saying so).
 */
export function checkRegistryAgreesWithRoot(state: LedgerState, registry: RegistryDoc): void {
  const root = state.root?.doc;
  if (root === undefined) return;
  const named = rootActors(root);
  const inRoot = new Set(root.authorities.map((authority) => authority.key_id));
  const alreadyRevoked = new Set(state.revocations.keys());
  for (const revoked of registry.revoked_keys) {
    if (inRoot.has(revoked.key_id) && !alreadyRevoked.has(revoked.key_id)) {
      throw new CooError(
        'TRUST_CONFLICT',
        `${revoked.key_id} is a trust-root authority in force: revoking it ends every role it holds, so the next root must name another key in the same change: coo trust --root NEXT_ROOT --revoke ${revoked.key_id}=REASON`,
      );
    }
  }
  for (const actor of registry.actors) {
    const rootKeys = named.get(actor.id);
    const keys = actor.keys.map((key) => key.key_id);
    if (rootKeys !== undefined && (keys.length !== rootKeys.length || rootKeys.some((key) => !keys.includes(key.key_id)))) {
      throw new CooError(
        'TRUST_CONFLICT',
        `the registry gives ${actor.id} ${keys.join(', ') || 'no key'}, but the trust root names ${rootKeys.map((key) => key.key_id).join(', ')}: ${actor.id}'s keys are the root's; list exactly those, and rotate them with coo trust --root`,
      );
    }
    for (const key of keys) {
      if (state.everKeys.get(key)?.rootNamed === true && !inRoot.has(key)) {
        throw new CooError('TRUST_CONFLICT', `the registry gives ${actor.id} ${key}, a key the trust root retired: a key rotated out of the root is retired everywhere`);
      }
    }
  }
}
