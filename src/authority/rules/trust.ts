import { CooError } from '../../errors.js';
import { sha256Ref } from '../../util/hash.js';
import type { TrustFile } from '../state.js';
import { checkKeyIds, keyHolders, keyStatus, signerError } from '../keys.js';
import { checkPolicyAgainstRegistry } from '../policy-check.js';
import { panelContradiction } from './panel.js';
import { voidApprovalsOf } from './approval.js';
import { voidCeoMessagesOf } from './intents/ceo-authority.js';
import type { CommitCheck, EntryFile } from '../commit-check.js';

/**
 * The trust files (trust_root.v0, actor_registry.v0, actor_policy.v0): each version follows the one
 * before, signed by a trust-root authority; a commit reads them first, so the entries after them
 * see them in force.
 */

/** A versioned file takes exactly the next version, at the position its path names. */
export function requireVersion(current: { version: number } | null, version: number, docVersion: number, where: string): void {
  const expected = (current?.version ?? 0) + 1;
  if (version !== expected || docVersion !== version) {
    throw new CooError('TRUST_VERSION', `${where}: version ${docVersion} at position ${version} where exactly ${expected} comes next`, { where });
  }
}

export function toTrustFile<T>(check: CommitCheck, entry: EntryFile, version: number, doc: T): TrustFile<T> {
  return { version, path: entry.path, sha256: sha256Ref(entry.bytes), seq: check.seq, doc };
}

/**
 * A trust file is signed by an authority of the trust in force at its commit's parent (genesis:
 * by its own root), so a commit that rotates the root out from under its signer may still bring
 * the registry that follows the rotation. A revoked or retired key is told apart from a stranger.
 */
function requireRootAuthority(check: CommitCheck, keyId: string, where: string, what: string): void {
  const holder = (check.state.seq === 0 ? check.holders() : keyHolders(check.state)).get(keyId);
  if (holder === undefined && check.state.seq !== 0) throw signerError(keyStatus(check.state, keyId), keyId, where);
  if (holder?.rootAuthority !== true) {
    throw new CooError('TRUST_AUTHORITY', `${where}: ${what} must be signed by a trust-root authority in force, not ${check.named(keyId)}`, { where });
  }
}

/** A revoked key never regains a role, by any trust file. */
function refuseRevoked(check: CommitCheck, keyId: string, where: string, role: string): void {
  const revocation = check.revocation(keyId);
  if (revocation !== undefined) {
    throw new CooError('KEY_REVOKED', `${where}: gives ${keyId} ${role}, but it was revoked at Ledger-Seq ${revocation.seq} by ${revocation.by} (${JSON.stringify(revocation.reason)}): a revoked key never regains a role`, { where });
  }
}

function noteKey(check: CommitCheck, keyId: string, actor: string, publicKey: string, rootNamed: boolean): void {
  const known = check.record(keyId);
  check.everKeys.set(keyId, { actor, publicKey, rootNamed: rootNamed || known?.rootNamed === true, retired: known?.retired ?? null });
}

export function checkRoot(check: CommitCheck, entry: EntryFile, version: number, keyId: string): void {
  const doc = check.read('trust_root.v0', entry);
  requireVersion(check.root, version, doc.version, entry.path);
  checkKeyIds(doc.authorities, entry.path);
  // Version 1 is signed by one of its own authorities; every later root by an authority of the one before.
  const signers = version === 1 ? doc.authorities : (check.root?.doc.authorities ?? []);
  if (!signers.some((authority) => authority.key_id === keyId)) {
    throw new CooError('TRUST_AUTHORITY', `${entry.path}: a trust root must be signed by an authority of the root before it`, { where: entry.path });
  }
  if (version > 1) requireRootAuthority(check, keyId, entry.path, 'a trust root');
  for (const authority of doc.authorities) refuseRevoked(check, authority.key_id, entry.path, `trust-root authority for ${authority.actor}`);
  check.root = toTrustFile(check, entry, version, doc);
  check.trustPaths.push(entry.path);
  for (const authority of doc.authorities) noteKey(check, authority.key_id, authority.actor, authority.public_key, true);
}

export function checkRegistry(check: CommitCheck, entry: EntryFile, version: number, keyId: string): void {
  const doc = check.read('actor_registry.v0', entry);
  requireVersion(check.registry, version, doc.version, entry.path);
  requireRootAuthority(check, keyId, entry.path, 'a registry');
  doc.actors.forEach((actor, index) => checkKeyIds(actor.keys, `${entry.path}:actors[${index}]`));
  if (check.policy !== null) {
    checkPolicyAgainstRegistry(check.policy.doc, doc, entry.path);
    // A registry that makes a panel of the policy in force one that can never be asked; one that was already so before it is the policy's to fix, and never holds up a key's rotation.
    const contradiction = panelContradiction(check.policy.doc, doc, entry.path);
    if (contradiction !== null && (check.registry === null || panelContradiction(check.policy.doc, check.registry.doc, entry.path) === null)) throw contradiction;
  }
  // Revocation is final: every later registry keeps every revocation, and gives no revoked key a role.
  const listed = new Set(doc.revoked_keys.map((revoked) => revoked.key_id));
  for (const [revokedId, revocation] of [...check.state.revocations, ...check.revocations]) {
    if (!listed.has(revokedId)) {
      throw new CooError('KEY_REVOKED', `${entry.path}: drops the revocation of ${revokedId} (Ledger-Seq ${revocation.seq}, ${revocation.by}): revocation is final, and every later registry lists it`, { where: entry.path });
    }
  }
  for (const actor of doc.actors) for (const key of actor.keys) refuseRevoked(check, key.key_id, entry.path, `to ${actor.id}`);
  check.registry = toTrustFile(check, entry, version, doc);
  check.trustPaths.push(entry.path);
  for (const revoked of doc.revoked_keys) {
    if (check.revocation(revoked.key_id) !== undefined) continue;
    check.revocations.set(revoked.key_id, { seq: check.seq, reason: revoked.reason, by: entry.path });
    // A revocation ends what the key said and nothing acted on yet: its unused approvals, its unread commands and rejections.
    voidApprovalsOf(check, revoked.key_id);
    voidCeoMessagesOf(check, revoked.key_id);
  }
  for (const actor of doc.actors) {
    for (const key of actor.keys) noteKey(check, key.key_id, actor.id, key.public_key, false);
  }
}

/**
 * The root and the registry a commit leaves in force agree on who the root's keys speak for: each
 * authority is an actor the registry holds as a human authority, and its key is that actor's alone
 * in the registry. A root that names the COO's or an agent's key, or a registry that gives a root
 * key to another actor, would let one key speak in two roles, the CEO's among them. Judged once
 * every entry of a commit that changes either file is read, so a rotation that brings both files
 * is judged as it leaves them; `coo trust` refuses the same with TRUST_CONFLICT before it signs.
 */
export function checkRootAgreesWithRegistry(check: CommitCheck): void {
  if (check.trustPaths.length === 0 || check.root === null || check.registry === null) return;
  const { root, registry } = check;
  for (const authority of root.doc.authorities) {
    const actor = registry.doc.actors.find((entry) => entry.id === authority.actor);
    if (actor?.class !== 'human_authority') {
      throw new CooError('TRUST_CONFLICT', `${root.path}: names ${authority.key_id} for ${authority.actor}, which registry v${registry.version} does not hold as a human_authority: a trust-root authority speaks for the CEO`, { where: root.path });
    }
    const other = registry.doc.actors.find((entry) => entry.id !== authority.actor && entry.keys.some((key) => key.key_id === authority.key_id));
    if (other !== undefined) {
      throw new CooError('TRUST_CONFLICT', `${registry.path}: gives ${other.id} (${other.class}) ${authority.key_id}, the trust root's key for ${authority.actor}: one key speaks for one actor`, { where: registry.path });
    }
  }
}

export function checkPolicy(check: CommitCheck, entry: EntryFile, version: number, keyId: string): void {
  const doc = check.read('actor_policy.v0', entry);
  requireVersion(check.policy, version, doc.version, entry.path);
  requireRootAuthority(check, keyId, entry.path, 'a policy');
  if (check.registry === null) throw new CooError('TRUST_VERSION', `${entry.path}: a policy needs a registry first`, { where: entry.path });
  checkPolicyAgainstRegistry(doc, check.registry.doc, entry.path);
  const contradiction = panelContradiction(doc, check.registry.doc, entry.path);
  if (contradiction !== null) throw contradiction;
  check.policy = toTrustFile(check, entry, version, doc);
}
