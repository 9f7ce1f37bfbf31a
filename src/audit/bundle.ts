import { CooError, isCooError } from '../errors.js';
import type { PublicKey } from '../crypto/keys.js';
import { ENTRY_NAMESPACE, GIT_NAMESPACE, parseSshsig, verifySshsig } from '../crypto/sshsig.js';
import { parseCommit, type ParsedCommit } from '../ledger/commit-format.js';
import { classifyPath, sigPath } from '../ledger/layout.js';
import { hashObject } from '../ledger/object-store.js';
import { parseTree, type TreeEntry } from '../ledger/tree-format.js';
import { readDocument } from '../schema/documents.js';
import type { CooMessage } from '../schema/message.js';
import type { ActorRegistry } from '../schema/registry.js';
import type { TrustRoot } from '../schema/control.js';
import { sha256Ref } from '../util/hash.js';
import { parseTar, renderTar, type TarFile } from './tar.js';

/**
 * An evidence bundle: one file that proves a receipt without the ledger. It is a canonical ustar
 * archive (stock `tar -x` unpacks it) holding
 * - `ledger/<path>`: the envelope, prompt, context manifest, receipt and answer of one message, their
 *   `.sig` files, and every version of `trust/root` and `trust/registry` with theirs;
 * - `git/<oid>`: the raw commit that added the receipt, and the raw trees from its root tree down to
 *   every file above, so each file is proven to be in that signed commit by git's own object ids;
 * - `allowed_signers`: the lines `git verify-commit` and `ssh-keygen -Y verify` need;
 * - `bundle.json`: which message, receipt and commit the bundle is about.
 * Nothing in it is trusted for being there: every byte is re-derived, hashed or signature-checked.
 */
export const BUNDLE_KIND = 'coo_evidence_bundle.v0';

export interface BundleParts {
  readonly messageId: string;
  readonly receiptPath: string;
  /** The raw commit object that added the receipt. */
  readonly commit: Buffer;
  /** Raw trees by id: at least every tree on the path from the commit's root to each ledger file. */
  readonly trees: ReadonlyMap<string, Buffer>;
  /** Ledger files by path, `.sig` files included. */
  readonly files: ReadonlyMap<string, Buffer>;
}

interface Manifest {
  readonly kind: typeof BUNDLE_KIND;
  readonly message_id: string;
  readonly receipt: string;
  readonly commit: string;
}

export function renderBundle(parts: BundleParts, roots: readonly TrustRoot[], registries: readonly ActorRegistry[]): Buffer {
  const commitOid = hashObject('commit', parts.commit);
  const manifest: Manifest = { kind: BUNDLE_KIND, message_id: parts.messageId, receipt: parts.receiptPath, commit: commitOid };
  const files: TarFile[] = [
    { name: 'bundle.json', content: Buffer.from(`${JSON.stringify(manifest, null, 2)}\n`) },
    { name: 'allowed_signers', content: Buffer.from(signerLines(roots, registries)) },
    { name: `git/${commitOid}`, content: parts.commit },
    ...[...parts.trees.keys()].sort().map((oid) => ({ name: `git/${oid}`, content: parts.trees.get(oid)! })),
    ...[...parts.files.keys()].sort().map((path) => ({ name: `ledger/${path}`, content: parts.files.get(path)! })),
  ];
  return renderTar(files);
}

export interface BundleReport {
  readonly messageId: string;
  readonly receiptPath: string;
  readonly status: string;
  readonly commit: string;
  readonly seq: number;
  readonly signer: { readonly actor: string; readonly keyId: string };
  /** The trust root's authority keys (version 1): what `--trust-root` pins. */
  readonly rootKeys: readonly string[];
  readonly pinned: boolean;
  readonly files: number;
}

function invalid(message: string): CooError {
  return new CooError('BUNDLE_INVALID', message);
}

/** Every version of one trust file kind, in order, with nothing missing and nothing beyond what the commit's tree lists. */
function versions(files: ReadonlyMap<string, Buffer>, listed: readonly string[], role: 'root' | 'registry'): string[] {
  const paths = listed.filter((name) => name.endsWith('.yaml')).map((name) => `trust/${role}/${name}`);
  if (paths.length === 0) throw invalid(`the bundle has no trust/${role} versions`);
  paths.forEach((path, index) => {
    const info = classifyPath(path);
    if (info?.kind !== 'trust' || info.version !== index + 1) throw invalid(`${path}: trust/${role} versions must run 1, 2, 3, ...`);
    if (!files.has(path) || !files.has(sigPath(path))) throw invalid(`${path} (and its .sig) must be in the bundle`);
  });
  return paths;
}

function signedBy(files: ReadonlyMap<string, Buffer>, path: string): PublicKey {
  const sig = parseSshsig(files.get(sigPath(path))!.toString('utf8'));
  if (sig.namespace !== ENTRY_NAMESPACE || !verifySshsig(sig, files.get(path)!, ENTRY_NAMESPACE)) {
    throw new CooError('SIG_INVALID', `${path}: its signature does not verify`, { where: path });
  }
  return sig.publicKey;
}

/**
 * Checks a bundle with nothing but its own bytes (and, with `trustRoot`, the key the auditor pins):
 * canonical archive, commit and tree ids, every file in the commit's tree, the trust chain from
 * root version 1, the commit's and every entry's signature by a key that chain gives the right
 * actor, and the answer, prompt and manifest against the hashes the signed entries record. Pure.
 * The chain's order of changes is not in the bundle: `coo verify` on the ledger proves that.
 */
export function verifyBundle(bytes: Buffer, options: { trustRoot?: PublicKey } = {}): BundleReport {
  const archive = parseTar(bytes);
  const names = archive.map((file) => file.name);
  if (new Set(names).size !== names.length) throw invalid('a name appears twice');
  const manifestFile = archive.find((file) => file.name === 'bundle.json');
  if (manifestFile === undefined) throw invalid('no bundle.json');
  let manifest: Manifest;
  try {
    manifest = JSON.parse(manifestFile.content.toString('utf8')) as Manifest;
  } catch {
    throw invalid('bundle.json is not JSON');
  }
  if (manifest.kind !== BUNDLE_KIND || typeof manifest.message_id !== 'string' || typeof manifest.receipt !== 'string' || typeof manifest.commit !== 'string') {
    throw invalid(`bundle.json is not a ${BUNDLE_KIND} manifest`);
  }
  const objects = new Map<string, Buffer>();
  const files = new Map<string, Buffer>();
  for (const file of archive) {
    if (file.name.startsWith('git/')) objects.set(file.name.slice(4), file.content);
    else if (file.name.startsWith('ledger/')) files.set(file.name.slice(7), file.content);
    else if (file.name !== 'bundle.json' && file.name !== 'allowed_signers') throw invalid(`${file.name} has no place in a bundle`);
  }
  for (const [oid, raw] of objects) {
    const type = oid === manifest.commit ? 'commit' : 'tree';
    if (hashObject(type, raw) !== oid) throw invalid(`git/${oid} is not the ${type} of that id`);
  }
  const commitRaw = objects.get(manifest.commit);
  if (commitRaw === undefined) throw invalid(`the commit ${manifest.commit} is not in the bundle`);
  let commit: ParsedCommit;
  try {
    commit = parseCommit(commitRaw);
  } catch (error) {
    throw invalid(`the commit does not parse: ${isCooError(error) ? error.message : String(error)}`);
  }

  // Every ledger file sits at its path in the commit's tree, by the trees' and blobs' own ids.
  const folders = new Map<string, TreeEntry[]>();
  const treeAt = (dir: string): TreeEntry[] => {
    const known = folders.get(dir);
    if (known !== undefined) return known;
    let oid = commit.tree;
    if (dir !== '') {
      const cut = dir.lastIndexOf('/');
      const name = dir.slice(cut + 1);
      const entry = treeAt(cut === -1 ? '' : dir.slice(0, cut)).find((item) => item.name === name && item.mode === '40000');
      if (entry === undefined) throw invalid(`${dir} is not a folder of the commit's tree`);
      oid = entry.oid;
    }
    const raw = objects.get(oid);
    if (raw === undefined) throw invalid(`tree ${oid} (${dir === '' ? 'the root' : dir}) is not in the bundle`);
    const entries = parseTree(raw);
    folders.set(dir, entries);
    return entries;
  };
  for (const [path, content] of files) {
    const cut = path.lastIndexOf('/');
    const name = path.slice(cut + 1);
    const leaf = treeAt(cut === -1 ? '' : path.slice(0, cut)).find((item) => item.name === name && item.mode === '100644');
    if (leaf === undefined || leaf.oid !== hashObject('blob', content)) throw invalid(`${path} is not the file of that name in the commit's tree`);
  }
  const listing = (dir: string): string[] => treeAt(dir).map((entry) => entry.name);

  // The trust chain, from root version 1 (pinned or printed) through every version in the tree.
  const roots = versions(files, listing('trust/root'), 'root').map((path) => ({ path, doc: readDocument('trust_root.v0', files.get(path)!, path) }));
  const registries = versions(files, listing('trust/registry'), 'registry').map((path) => ({ path, doc: readDocument('actor_registry.v0', files.get(path)!, path) }));
  const authorityIds = new Set<string>();
  roots.forEach((root, index) => {
    const signer = signedBy(files, root.path);
    const allowed = index === 0 ? root.doc.authorities : roots[index - 1]!.doc.authorities;
    if (!allowed.some((authority) => authority.key_id === signer.keyId)) {
      throw new CooError('TRUST_AUTHORITY', `${root.path} is not signed by an authority of the root before it`, { where: root.path });
    }
    for (const authority of root.doc.authorities) authorityIds.add(authority.key_id);
  });
  const rootKeys = roots[0]!.doc.authorities.map((authority) => authority.key_id);
  if (options.trustRoot !== undefined && !rootKeys.includes(options.trustRoot.keyId)) {
    throw new CooError('TRUST_ROOT_MISMATCH', `the bundle's trust root is ${rootKeys.join(', ')}, not the pinned ${options.trustRoot.keyId}`);
  }
  for (const registry of registries) {
    if (!authorityIds.has(signedBy(files, registry.path).keyId)) {
      throw new CooError('TRUST_AUTHORITY', `${registry.path} is not signed by a trust-root authority`, { where: registry.path });
    }
  }
  const registry = registries[registries.length - 1]!.doc;
  const root = roots[roots.length - 1]!.doc;
  const keysOf = (actor: string, everGiven: boolean): Set<string> => {
    const ids = new Set<string>();
    for (const version of everGiven ? registries.map((item) => item.doc) : [registry]) {
      for (const key of version.actors.find((item) => item.id === actor)?.keys ?? []) ids.add(key.key_id);
    }
    return ids;
  };

  // The commit: signed by the active COO's key in force, and it names its sequence.
  const commitSig = parseSshsig(commit.gpgsig);
  if (commitSig.namespace !== GIT_NAMESPACE || !verifySshsig(commitSig, commit.payload, GIT_NAMESPACE)) {
    throw new CooError('SIG_INVALID', `commit ${manifest.commit}: its signature does not verify`);
  }
  if (!keysOf(registry.active_coo, false).has(commitSig.publicKey.keyId)) {
    throw new CooError('SIGNER_WRONG_ACTOR', `commit ${manifest.commit} is signed by ${commitSig.publicKey.keyId}, not a key of the active COO ${registry.active_coo}`);
  }

  // The receipt, its envelope and the files their signed hashes bind.
  const receiptPath = manifest.receipt;
  const receiptInfo = classifyPath(receiptPath);
  if (receiptInfo?.kind !== 'receipt' || receiptInfo.messageId !== manifest.message_id || !files.has(receiptPath)) {
    throw invalid(`${receiptPath} is not a receipt of ${manifest.message_id} in the bundle`);
  }
  const envelopePath = `${receiptInfo.folder}/envelope.yaml`;
  if (!files.has(envelopePath) || !files.has(sigPath(envelopePath)) || !files.has(sigPath(receiptPath))) {
    throw invalid('the envelope, the receipt and their .sig files must be in the bundle');
  }
  const envelope: CooMessage = readDocument('coo_message.v0', files.get(envelopePath)!, envelopePath);
  const envelopeSigner = signedBy(files, envelopePath);
  const revoked = registry.revoked_keys.find((entry) => entry.key_id === envelopeSigner.keyId);
  if (revoked !== undefined) throw new CooError('SIGNER_REVOKED', `${envelopePath}: signed by revoked key ${envelopeSigner.keyId} (${revoked.reason})`);
  if (!keysOf(envelope.source_actor, true).has(envelopeSigner.keyId) && !(envelope.source_actor === rootAuthorityActor(root, envelopeSigner.keyId))) {
    throw new CooError('SIGNER_WRONG_ACTOR', `${envelopePath}: signed by ${envelopeSigner.keyId}, not a key of ${envelope.source_actor}`);
  }
  const receiptSigner = signedBy(files, receiptPath);
  if (receiptSigner.keyId !== commitSig.publicKey.keyId) throw new CooError('SIGNER_MISMATCH', `${receiptPath}: signed by another key than its commit`);
  if (envelope.message_id !== manifest.message_id) throw invalid(`${envelopePath} is not the envelope of ${manifest.message_id}`);
  const receipt = envelope.intent === 'ea_dispatch' ? readDocument('ea_receipt.v0', files.get(receiptPath)!, receiptPath) : readDocument('aa_receipt.v0', files.get(receiptPath)!, receiptPath);
  if (receipt.message_id !== manifest.message_id || receipt.attempt_number !== receiptInfo.attempt) {
    throw invalid(`${receiptPath} names ${receipt.message_id} attempt ${receipt.attempt_number}`);
  }
  const bound: Array<{ path: string; sha256: string }> = [];
  if (envelope.intent === 'aa_consult') {
    bound.push({ path: envelope.payload_ref, sha256: envelope.payload_hash }, { path: envelope.context_pin.context_manifest_ref, sha256: envelope.context_pin.context_manifest_hash });
  }
  if ('output_ref' in receipt && receipt.output_ref !== null && receipt.output_hash !== null) bound.push({ path: receipt.output_ref, sha256: receipt.output_hash });
  for (const item of bound) {
    const content = files.get(item.path);
    if (content === undefined) throw invalid(`${item.path} is not in the bundle`);
    if (sha256Ref(content) !== item.sha256) throw new CooError('ARTIFACT_HASH_MISMATCH', `${item.path} does not match the hash its signed entry records`, { where: item.path });
  }
  const expectedSigners = signerLines(roots.map((item) => item.doc), registries.map((item) => item.doc));
  const signersFile = archive.find((file) => file.name === 'allowed_signers');
  if (signersFile === undefined || signersFile.content.toString('utf8') !== expectedSigners) {
    throw invalid('allowed_signers is not the file the bundled trust chain gives');
  }
  return {
    messageId: manifest.message_id,
    receiptPath,
    status: receipt.status,
    commit: manifest.commit,
    seq: commit.seq,
    signer: { actor: registry.active_coo, keyId: commitSig.publicKey.keyId },
    rootKeys,
    pinned: options.trustRoot !== undefined,
    files: files.size,
  };
}

function rootAuthorityActor(root: TrustRoot, keyId: string): string | null {
  return root.authorities.find((authority) => authority.key_id === keyId)?.actor ?? null;
}

/** The allowed-signers lines for every key the bundled trust files give, each named by its actor. */
export function signerLines(roots: readonly TrustRoot[], registries: readonly ActorRegistry[]): string {
  const lines = new Set<string>();
  const add = (actor: string, key: string): void => void lines.add(`${actor} namespaces="${GIT_NAMESPACE},${ENTRY_NAMESPACE}" ${key}`);
  for (const root of roots) for (const authority of root.authorities) add(authority.actor, authority.public_key);
  for (const registry of registries) for (const actor of registry.actors) for (const key of actor.keys) add(actor.id, key.public_key);
  return `${[...lines].sort().join('\n')}\n`;
}
