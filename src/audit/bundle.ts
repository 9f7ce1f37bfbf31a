import { ENTRY_NAMESPACE, GIT_NAMESPACE } from '../crypto/sshsig.js';
import { hashObject } from '../ledger/object-store.js';
import type { ActorRegistry } from '../schema/registry.js';
import type { TrustRoot } from '../schema/control.js';
import type { AaReceipt, EaReceipt } from '../schema/receipt.js';
import { renderTar, type TarFile } from './tar.js';

/**
 * An evidence bundle: one file that proves a receipt without the ledger. It is a canonical ustar
 * archive (stock `tar -x` unpacks it) holding, in this order and nothing else:
 * - `bundle.json`: which ledger (its genesis commit), message, receipt and commit the bundle is about;
 * - `allowed_signers`: the lines `git verify-commit` and `ssh-keygen -Y verify` need;
 * - `git/<oid>`: the raw commit that added the receipt, the ledger's genesis commit, and the raw
 *   trees from each one's root tree down to every file below and to the first trust root, registry
 *   and policy, so each file is proven to be in that signed commit, and that commit to hold the
 *   first trust files the genesis laid, by git's own object ids;
 * - `ledger/<path>`: the envelope, prompt, context manifest, receipt and answer of one message, their
 *   `.sig` files, every file the receipt names by hash (its attachments, an advisory receipt's
 *   proposals), and every version of `trust/root` and `trust/registry` with theirs.
 * Nothing in it is trusted for being there: every byte is re-derived, hashed or signature-checked,
 * and the whole archive must be the one coo renders from what it proves.
 */
export const BUNDLE_KIND = 'coo_evidence_bundle.v2';
/** Bundles written before they carried the receipt's attachments: still read, and said to hold none. */
export const BUNDLE_KIND_V1 = 'coo_evidence_bundle.v1';
/** Bundles written before they named their ledger: still read, with no ledger to pin. */
export const BUNDLE_KIND_V0 = 'coo_evidence_bundle.v0';
export type BundleKind = typeof BUNDLE_KIND | typeof BUNDLE_KIND_V1 | typeof BUNDLE_KIND_V0;

export interface BundleParts {
  /** What the archive is written as: coo writes BUNDLE_KIND; a verifier renders an older bundle again as its own kind. */
  readonly kind: BundleKind;
  readonly messageId: string;
  readonly receiptPath: string;
  /** The raw commit object that added the receipt. */
  readonly commit: Buffer;
  /** The ledger's raw genesis commit; null for a v0 bundle, written before bundles named their ledger. */
  readonly genesis: Buffer | null;
  /** Raw trees by id: every tree on the path from the commit's root to each ledger file, and from both commits' roots to the first trust files. */
  readonly trees: ReadonlyMap<string, Buffer>;
  /** Ledger files by path, `.sig` files included. */
  readonly files: ReadonlyMap<string, Buffer>;
}

export interface BundleManifest {
  readonly kind: BundleKind;
  /** The ledger's genesis commit (v1 and later). */
  readonly ledger?: string;
  readonly message_id: string;
  readonly receipt: string;
  readonly commit: string;
}

/** The bundle coo writes for these parts: the one canonical archive a verifier renders again and compares. */
export function renderBundle(parts: BundleParts, roots: readonly TrustRoot[], registries: readonly ActorRegistry[]): Buffer {
  const commitOid = hashObject('commit', parts.commit);
  const genesisOid = parts.genesis === null ? null : hashObject('commit', parts.genesis);
  const manifest: BundleManifest =
    parts.kind === BUNDLE_KIND_V0 || genesisOid === null
      ? { kind: BUNDLE_KIND_V0, message_id: parts.messageId, receipt: parts.receiptPath, commit: commitOid }
      : { kind: parts.kind, ledger: genesisOid, message_id: parts.messageId, receipt: parts.receiptPath, commit: commitOid };
  const files: TarFile[] = [
    { name: 'bundle.json', content: Buffer.from(`${JSON.stringify(manifest, null, 2)}\n`) },
    { name: 'allowed_signers', content: Buffer.from(signerLines(roots, registries)) },
    { name: `git/${commitOid}`, content: parts.commit },
    ...(parts.genesis === null || genesisOid === null ? [] : [{ name: `git/${genesisOid}`, content: parts.genesis }]),
    ...[...parts.trees.keys()].sort().map((oid) => ({ name: `git/${oid}`, content: parts.trees.get(oid)! })),
    ...[...parts.files.keys()].sort().map((path) => ({ name: `ledger/${path}`, content: parts.files.get(path)! })),
  ];
  return renderTar(files);
}

/** The files a receipt names by hash besides its output, in its order: its attachments, then an advisory receipt's proposals. */
export function attachedFiles(receipt: AaReceipt | EaReceipt): ReadonlyArray<{ readonly path: string; readonly sha256: string }> {
  return [...receipt.attachments, ...('proposals' in receipt ? (receipt.proposals ?? []) : [])];
}

/** The allowed-signers lines for every key the bundled trust files give, each named by its actor. */
export function signerLines(roots: readonly TrustRoot[], registries: readonly ActorRegistry[]): string {
  const lines = new Set<string>();
  const add = (actor: string, key: string): void => void lines.add(`${actor} namespaces="${GIT_NAMESPACE},${ENTRY_NAMESPACE}" ${key}`);
  for (const root of roots) for (const authority of root.authorities) add(authority.actor, authority.public_key);
  for (const registry of registries) for (const actor of registry.actors) for (const key of actor.keys) add(actor.id, key.public_key);
  return `${[...lines].sort().join('\n')}\n`;
}
