import { keyHolders } from '../authority/keys.js';
import type { LedgerState } from '../authority/state.js';
import type { CommitVerdict } from '../authority/validate-commit.js';
import { ENTRY_NAMESPACE, GIT_NAMESPACE } from '../crypto/sshsig.js';
import type { CommitFacts } from '../ledger/commit-facts.js';
import { identTime } from '../ledger/commit-format.js';
import { inertJson } from '../util/invisible.js';

/** The keys one pair of trust files allowed, from the commit that put them in force. */
export interface TrustEpoch {
  readonly seq: number;
  readonly commit: string;
  /** The committer time of that commit, in seconds since the epoch: the only clock git compares. */
  readonly time: number;
  /** The trust files that changed in that commit. */
  readonly changed: readonly string[];
  /** key id -> the actor it speaks for and its public key line. */
  readonly keys: ReadonlyMap<string, { readonly actor: string; readonly publicKey: string }>;
  /** key id -> why the registry in force revoked it. */
  readonly revoked: ReadonlyMap<string, string>;
}

/** Collects the trust chain's epochs during a replay from genesis (Ledger.replay's onCommit). */
export class TrustHistoryRecorder {
  private readonly epochs: TrustEpoch[] = [];
  private root: object | null = null;
  private registry: object | null = null;

  record(facts: CommitFacts, verdict: CommitVerdict, next: LedgerState): void {
    if (verdict.commit === null || ((next.root?.doc ?? null) === this.root && (next.registry?.doc ?? null) === this.registry)) return;
    const changed = [next.root, next.registry].filter((file) => file !== null && file.seq === next.seq).map((file) => file!.path);
    this.root = next.root?.doc ?? null;
    this.registry = next.registry?.doc ?? null;
    const publicKeys = new Map<string, string>();
    for (const authority of next.root?.doc.authorities ?? []) publicKeys.set(authority.key_id, authority.public_key);
    for (const actor of next.registry?.doc.actors ?? []) for (const key of actor.keys) publicKeys.set(key.key_id, key.public_key);
    const keys = new Map<string, { actor: string; publicKey: string }>();
    for (const [keyId, holder] of keyHolders(next)) keys.set(keyId, { actor: holder.actor, publicKey: publicKeys.get(keyId)! });
    const revoked = new Map([...next.revocations].map(([keyId, revocation]) => [keyId, revocation.reason] as const));
    this.epochs.push({ seq: next.seq, commit: facts.oid, time: identTime(verdict.commit.committer), changed, keys, revoked });
  }

  history(): readonly TrustEpoch[] {
    return this.epochs;
  }
}

/** ssh-keygen's time form, in UTC: YYYYMMDDHHMMSSZ. */
function sshTime(seconds: number): string {
  return `${new Date(seconds * 1000).toISOString().replace(/[-:T]/g, '').slice(0, 14)}Z`;
}

function isoTime(seconds: number): string {
  return new Date(seconds * 1000).toISOString().replace(/\.000Z$/, 'Z');
}

const NAMESPACES = `namespaces="${GIT_NAMESPACE},${ENTRY_NAMESPACE}"`;

/**
 * The allowed-signers file (ssh-keygen(1) ALLOWED SIGNERS) for every key the ledger's trust files
 * ever allowed, named by actor. With it, `git verify-commit`, `git log --show-signature` and
 * `ssh-keygen -Y verify` check signatures.
 *
 * Given the trust chain's history, each key gets the lifetime the chain gave it: `valid-after` the
 * commit time of the trust change that put it in force (genesis for the first keys), and, for a key rotated out or revoked,
 * `valid-before` the second after the commit time of the trust change that retired it (valid through
 * that commit's second), with a comment line naming
 * the key and why. Git compares those with the signed commit's own committer date, which its
 * signer chose: coo judges by the commit's place in the chain instead, so `coo verify` still refuses
 * a back-dated commit by a retired key that git shows as good.
 */
export function allowedSigners(state: LedgerState, history: readonly TrustEpoch[] | null = null): string {
  if (history === null) {
    const lines = [...state.everKeys.values()].map((entry) => `${entry.actor} ${NAMESPACES} ${entry.publicKey}`).sort();
    return lines.length === 0 ? '' : `${[...new Set(lines)].join('\n')}\n`;
  }
  const lines: string[] = [];
  const comments: string[] = [];
  const open = new Map<string, { actor: string; publicKey: string; from: TrustEpoch }>();
  const close = (keyId: string, at: TrustEpoch | null): void => {
    const span = open.get(keyId)!;
    open.delete(keyId);
    // Every key, genesis's too, is valid from the commit that put it in force: a commit back-dated
    // before the ledger existed is not the chain's, and git should not show it as good.
    const limits = [
      `valid-after="${sshTime(span.from.time)}"`,
      // valid-before is exclusive and git's clock has whole seconds: the key stays valid through the
      // second of the retiring commit, or its own last commits in that second would show as bad.
      ...(at === null ? [] : [`valid-before="${sshTime(at.time + 1)}"`]),
    ];
    lines.push(`${span.actor} ${[NAMESPACES, ...limits].join(',')} ${span.publicKey}`);
    if (at === null) return;
    const reason = at.revoked.get(keyId);
    const why = reason === undefined ? 'rotated out' : `revoked (${inertJson(reason)})`;
    comments.push(
      `# ${keyId} of ${span.actor}: ${why} by ${at.changed.join(' and ') || 'a trust change'} at Ledger-Seq ${at.seq} (commit ${at.commit}), so valid through ${isoTime(at.time)}, that commit's time`,
    );
  };
  for (const epoch of history) {
    for (const keyId of [...open.keys()]) {
      const now = epoch.keys.get(keyId);
      if (now === undefined || now.actor !== open.get(keyId)!.actor) close(keyId, epoch);
    }
    for (const [keyId, holder] of epoch.keys) if (!open.has(keyId)) open.set(keyId, { ...holder, from: epoch });
  }
  for (const keyId of [...open.keys()]) close(keyId, null);
  if (lines.length === 0) return '';
  const header = [
    '# Signer lifetimes from the trust chain: valid-after and valid-before are the commit times of the trust',
    "# changes that put each key in force and retired it. git compares them with a commit's own committer",
    '# date, which its signer chose; coo verify judges by the chain, and refuses a back-dated commit git shows as good.',
  ];
  return `${[...header, ...comments.sort(), ...lines.sort()].join('\n')}\n`;
}

/**
 * The revocation list for git's `gpg.ssh.revocationFile` (ssh-keygen -Y verify -r): the public key
 * of every key any registry revoked, one per line. ssh-keygen then refuses every signature by those
 * keys, also those made before the revocation that `coo verify` still accepts by the chain: a
 * revoked key may have been stolen, and its holder can back-date commits past any valid-before.
 */
export function revocationList(history: readonly TrustEpoch[]): string {
  const publicKeys = new Map<string, string>();
  const revoked = new Set<string>();
  for (const epoch of history) {
    for (const [keyId, holder] of epoch.keys) publicKeys.set(keyId, holder.publicKey);
    for (const keyId of epoch.revoked.keys()) revoked.add(keyId);
  }
  const lines = [...revoked].flatMap((keyId) => {
    const key = publicKeys.get(keyId);
    return key === undefined ? [] : [key];
  });
  return lines.length === 0 ? '' : `${[...new Set(lines)].sort().join('\n')}\n`;
}
