import { CooError, isCooError } from '../errors.js';
import type { PublicKey } from '../crypto/keys.js';
import { ENTRY_NAMESPACE, GIT_NAMESPACE, parseSshsig, verifySshsig } from '../crypto/sshsig.js';
import { parseCommit, type ParsedCommit } from '../ledger/commit-format.js';
import { classifyPath, sigPath, trustPath } from '../ledger/layout.js';
import { hashObject } from '../ledger/object-store.js';
import { parseTree, type TreeEntry } from '../ledger/tree-format.js';
import { readDocument } from '../schema/documents.js';
import type { CooMessage } from '../schema/message.js';
import { sha256Ref } from '../util/hash.js';
import { attachedFiles, BUNDLE_KIND, BUNDLE_KIND_V0, BUNDLE_KIND_V1, renderBundle, type BundleManifest } from './bundle.js';
import { parseTar } from './tar.js';

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
  /** The ledger's genesis commit the bundle proves it comes from; null for a bundle written before bundles named it. */
  readonly ledger: string | null;
  /** Whether `--genesis` pinned the ledger. */
  readonly ledgerPinned: boolean;
  /** How many files the receipt names by hash (attachments, proposals) the bundle carries and proved; null for a bundle written before bundles carried them. */
  readonly attachments: number | null;
  readonly files: number;
}

export interface VerifyBundleOptions {
  /** The CEO key the auditor trusts: the bundle's trust root version 1 must list it. */
  readonly trustRoot?: PublicKey;
  /** The genesis commit of the ledger the auditor expects the evidence from. */
  readonly genesis?: string;
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

function readManifest(content: Buffer): BundleManifest {
  let manifest: BundleManifest;
  try {
    manifest = JSON.parse(content.toString('utf8')) as BundleManifest;
  } catch {
    throw invalid('bundle.json is not JSON');
  }
  const known = manifest.kind === BUNDLE_KIND || manifest.kind === BUNDLE_KIND_V1 ? typeof manifest.ledger === 'string' : manifest.kind === BUNDLE_KIND_V0;
  if (!known || typeof manifest.message_id !== 'string' || typeof manifest.receipt !== 'string' || typeof manifest.commit !== 'string') {
    throw invalid(`bundle.json is not a ${BUNDLE_KIND} manifest`);
  }
  return manifest;
}

function readCommit(raw: Buffer, what: string): ParsedCommit {
  try {
    return parseCommit(raw);
  } catch (error) {
    throw invalid(`the ${what} does not parse: ${isCooError(error) ? error.message : String(error)}`);
  }
}

/** Reads trees of one commit from the bundle's objects, recording every tree it reads. */
class TreeWalk {
  private readonly folders = new Map<string, TreeEntry[]>();
  constructor(
    private readonly root: string,
    private readonly objects: ReadonlyMap<string, Buffer>,
    private readonly used: Set<string>,
    private readonly what: string,
  ) {}

  at(dir: string): TreeEntry[] {
    const known = this.folders.get(dir);
    if (known !== undefined) return known;
    let oid = this.root;
    if (dir !== '') {
      const cut = dir.lastIndexOf('/');
      const name = dir.slice(cut + 1);
      const entry = this.at(cut === -1 ? '' : dir.slice(0, cut)).find((item) => item.name === name && item.mode === '40000');
      if (entry === undefined) throw invalid(`${dir} is not a folder of the ${this.what}'s tree`);
      oid = entry.oid;
    }
    const raw = this.objects.get(oid);
    if (raw === undefined) throw invalid(`tree ${oid} (${dir === '' ? 'the root' : dir}) of the ${this.what} is not in the bundle`);
    const entries = parseTree(raw);
    this.used.add(oid);
    this.folders.set(dir, entries);
    return entries;
  }

  /** The blob id at `path`, a regular file. */
  blob(path: string): string | null {
    const cut = path.lastIndexOf('/');
    return this.at(cut === -1 ? '' : path.slice(0, cut)).find((item) => item.name === path.slice(cut + 1) && item.mode === '100644')?.oid ?? null;
  }
}

/**
 * Checks a bundle with nothing but its own bytes (and what the auditor pins: the CEO key, the
 * ledger's genesis): commit and tree ids, every file in the commit's tree, the trust chain from
 * root version 1, the commit's and every entry's signature by a key that chain gives the right
 * actor, the answer, prompt and manifest against the hashes the signed entries record, the
 * ledger's genesis commit signed by the first root's authority and holding the same first root,
 * and the archive itself: exactly the entries coo writes for what it proves, in its order. Pure.
 * The chain's order of changes is not in the bundle: `coo verify` on the ledger proves that.
 */
export function verifyBundle(bytes: Buffer, options: VerifyBundleOptions = {}): BundleReport {
  const archive = parseTar(bytes);
  const names = archive.map((file) => file.name);
  if (new Set(names).size !== names.length) throw invalid('a name appears twice');
  const manifestFile = archive.find((file) => file.name === 'bundle.json');
  if (manifestFile === undefined) throw invalid('no bundle.json');
  const manifest = readManifest(manifestFile.content);
  const genesisOid = manifest.ledger ?? null;
  const objects = new Map<string, Buffer>();
  const files = new Map<string, Buffer>();
  for (const file of archive) {
    if (file.name.startsWith('git/')) objects.set(file.name.slice(4), file.content);
    else if (file.name.startsWith('ledger/')) files.set(file.name.slice(7), file.content);
    else if (file.name !== 'bundle.json' && file.name !== 'allowed_signers') throw invalid(`${file.name} has no place in a bundle`);
  }
  for (const [oid, raw] of objects) {
    const type = oid === manifest.commit || oid === genesisOid ? 'commit' : 'tree';
    if (hashObject(type, raw) !== oid) throw invalid(`git/${oid} is not the ${type} of that id`);
  }
  const commitRaw = objects.get(manifest.commit);
  if (commitRaw === undefined) throw invalid(`the commit ${manifest.commit} is not in the bundle`);
  const commit = readCommit(commitRaw, 'commit');

  // Every ledger file sits at its path in the commit's tree, by the trees' and blobs' own ids.
  const usedTrees = new Set<string>();
  const tree = new TreeWalk(commit.tree, objects, usedTrees, 'commit');
  for (const [path, content] of files) {
    if (tree.blob(path) !== hashObject('blob', content)) throw invalid(`${path} is not the file of that name in the commit's tree`);
  }
  const listing = (dir: string): string[] => tree.at(dir).map((entry) => entry.name);

  // The trust chain, from root version 1 (pinned or printed) through every version in the tree.
  const rootListing = listing('trust/root');
  const registryListing = listing('trust/registry');
  const roots = versions(files, rootListing, 'root').map((path) => ({ path, doc: readDocument('trust_root.v0', files.get(path)!, path) }));
  const registries = versions(files, registryListing, 'registry').map((path) => ({ path, doc: readDocument('actor_registry.v0', files.get(path)!, path) }));
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

  // The ledger: its genesis commit, signed by the first root's authority, holds the same first root.
  if (genesisOid !== null) checkGenesis(genesisOid, objects, usedTrees, roots[0]!.doc.authorities.map((authority) => authority.key_id), tree);
  if (options.genesis !== undefined && genesisOid !== options.genesis) {
    throw new CooError(
      'LEDGER_MISMATCH',
      genesisOid === null
        ? `the bundle names no ledger (it was written before bundles did), so it cannot be held to genesis ${options.genesis}`
        : `the bundle's evidence is from the ledger whose genesis is ${genesisOid}, not the pinned ${options.genesis}`,
    );
  }

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
  // An envelope is signed by its principal (rules/envelope.ts): the active COO for every command-class one, a consult an execution agent asked and a cross-check, which it writes on an agent's behalf, among them.
  const signerActor = envelope.principal;
  if (!keysOf(signerActor, true).has(envelopeSigner.keyId) && !(signerActor === root.authorities.find((authority) => authority.key_id === envelopeSigner.keyId)?.actor)) {
    throw new CooError('SIGNER_WRONG_ACTOR', `${envelopePath}: signed by ${envelopeSigner.keyId}, not a key of ${signerActor}`);
  }
  const receiptSigner = signedBy(files, receiptPath);
  if (receiptSigner.keyId !== commitSig.publicKey.keyId) throw new CooError('SIGNER_MISMATCH', `${receiptPath}: signed by another key than its commit`);
  if (envelope.message_id !== manifest.message_id) throw invalid(`${envelopePath} is not the envelope of ${manifest.message_id}`);
  const receipt = envelope.intent === 'ea_dispatch' ? readDocument('ea_receipt.v0', files.get(receiptPath)!, receiptPath) : readDocument('aa_receipt.v0', files.get(receiptPath)!, receiptPath);
  if (receipt.message_id !== manifest.message_id || receipt.attempt_number !== receiptInfo.attempt) {
    throw invalid(`${receiptPath} names ${receipt.message_id} attempt ${receipt.attempt_number}`);
  }
  const bound: Array<{ path: string; sha256: string }> = [];
  if (envelope.intent === 'aa_consult' || envelope.intent === 'cross_check') {
    bound.push({ path: envelope.payload_ref, sha256: envelope.payload_hash }, { path: envelope.context_pin.context_manifest_ref, sha256: envelope.context_pin.context_manifest_hash });
  }
  if (envelope.intent === 'cross_check') bound.push({ path: envelope.challenge.answer_ref, sha256: envelope.challenge.answer_hash });
  if ('output_ref' in receipt && receipt.output_ref !== null && receipt.output_hash !== null) bound.push({ path: receipt.output_ref, sha256: receipt.output_hash });
  for (const item of bound) {
    const content = files.get(item.path);
    if (content === undefined) throw invalid(`${item.path} is not in the bundle`);
    if (sha256Ref(content) !== item.sha256) throw new CooError('ARTIFACT_HASH_MISMATCH', `${item.path} does not match the hash its signed entry records`, { where: item.path });
  }
  // What else the receipt names by hash. A bundle written before bundles carried them holds none, and says so in its report.
  const attached = manifest.kind === BUNDLE_KIND ? attachedFiles(receipt) : [];
  for (const item of attached) {
    const content = files.get(item.path);
    if (content === undefined) throw new CooError('ARTIFACT_MISSING', `${item.path}, which ${receiptPath} names by hash (${item.sha256}), is not in the bundle`, { where: item.path });
    if (sha256Ref(content) !== item.sha256) throw new CooError('ARTIFACT_HASH_MISMATCH', `${item.path} does not match the hash ${receiptPath} records`, { where: item.path });
  }

  // Nothing coo would not write: exactly these files and objects, and the archive coo renders from them.
  const expected = new Set([
    envelopePath,
    sigPath(envelopePath),
    receiptPath,
    sigPath(receiptPath),
    ...bound.map((item) => item.path),
    ...attached.map((item) => item.path),
    ...rootListing.map((name) => `trust/root/${name}`),
    ...registryListing.map((name) => `trust/registry/${name}`),
  ]);
  const extraFile = [...files.keys()].find((path) => !expected.has(path));
  if (extraFile !== undefined) throw invalid(`ledger/${extraFile} is not a file coo puts in a bundle of ${manifest.message_id}`);
  const extraObject = [...objects.keys()].find((oid) => oid !== manifest.commit && oid !== genesisOid && !usedTrees.has(oid));
  if (extraObject !== undefined) throw invalid(`git/${extraObject} is not an object the bundle's proof uses`);
  const trees = new Map([...usedTrees].map((oid) => [oid, objects.get(oid)!] as const));
  const canonical = renderBundle(
    { kind: manifest.kind, messageId: manifest.message_id, receiptPath, commit: commitRaw, genesis: genesisOid === null ? null : objects.get(genesisOid)!, trees, files },
    roots.map((item) => item.doc),
    registries.map((item) => item.doc),
  );
  if (!canonical.equals(bytes)) throw invalid('it is not the archive coo writes for this evidence (entries out of order, a changed bundle.json, or allowed_signers not the bundled trust chain)');
  return {
    messageId: manifest.message_id,
    receiptPath,
    status: receipt.status,
    commit: manifest.commit,
    seq: commit.seq,
    signer: { actor: registry.active_coo, keyId: commitSig.publicKey.keyId },
    rootKeys,
    pinned: options.trustRoot !== undefined,
    ledger: genesisOid,
    ledgerPinned: options.genesis !== undefined,
    attachments: manifest.kind === BUNDLE_KIND ? new Set(attached.map((item) => item.path)).size : null,
    files: files.size,
  };
}

/** The trust files a genesis commit lays: write-once, so every later commit of its ledger holds them as they were. */
export const GENESIS_TRUST = [trustPath('root', 1), trustPath('registry', 1), trustPath('policy', 1)] as const;

/**
 * The genesis commit a bundle names: the first of its ledger (no parent, Ledger-Seq 1), signed by
 * an authority of the first trust root, and laying byte for byte the first trust root, registry
 * and policy the receipt's commit holds. The first root `coo init` writes carries the ledger's
 * random id, so another ledger's commit holds the same three files only if its genesis is this one.
 */
function checkGenesis(oid: string, objects: ReadonlyMap<string, Buffer>, usedTrees: Set<string>, authorities: readonly string[], receiptTree: TreeWalk): void {
  const raw = objects.get(oid);
  if (raw === undefined) throw invalid(`the ledger's genesis commit ${oid} is not in the bundle`);
  const genesis = readCommit(raw, 'genesis commit');
  if (genesis.parents.length !== 0 || genesis.seq !== 1) throw invalid(`${oid} is not the first commit of a ledger`);
  const sig = parseSshsig(genesis.gpgsig);
  if (sig.namespace !== GIT_NAMESPACE || !verifySshsig(sig, genesis.payload, GIT_NAMESPACE) || !authorities.includes(sig.publicKey.keyId)) {
    throw new CooError('SIG_INVALID', `the genesis commit ${oid} is not signed by an authority of the first trust root`);
  }
  const genesisTree = new TreeWalk(genesis.tree, objects, usedTrees, 'genesis commit');
  for (const path of GENESIS_TRUST) {
    const laid = genesisTree.blob(path);
    if (laid === null || laid !== receiptTree.blob(path)) throw new CooError('LEDGER_MISMATCH', `the receipt's commit does not hold the ${path} of the ledger whose genesis is ${oid}: it is from another ledger`);
  }
}
