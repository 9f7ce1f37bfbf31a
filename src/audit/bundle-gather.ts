import { CooError } from '../errors.js';
import { LIMITS } from '../limits.js';
import { blobBound, envelopePath, sigPath } from '../ledger/layout.js';
import { readCommitLinks, tooLarge } from '../ledger/history.js';
import { CatFileReader } from '../ledger/object-store.js';
import { parseTree } from '../ledger/tree-format.js';
import { readDocument } from '../schema/documents.js';
import type { TrustRoot } from '../schema/control.js';
import type { ActorRegistry } from '../schema/registry.js';
import { isVerified, whatIsWrong, type Evidence } from './cite.js';
import { attachedFiles, BUNDLE_KIND, renderBundle } from './bundle.js';

/**
 * Reads from the ledger what a bundle holds for one cited message: the receipt's commit, the trees
 * from its root down to every file, the message's files and every trust root and registry version,
 * and the ledger's genesis commit with the trees down to its first trust root, which name the
 * ledger. Refuses evidence that `coo verify` does not find clean: a bundle is for handing out.
 */
export async function gatherBundle(gitdir: string, evidence: Evidence): Promise<Buffer> {
  if (!isVerified(evidence)) {
    throw new CooError('SIG_INVALID', `no bundle: the evidence for ${evidence.messageId} does not verify (${whatIsWrong(evidence)})`, { findings: evidence.findings });
  }
  const reader = new CatFileReader(gitdir);
  try {
    const links = await readCommitLinks(reader, evidence.receiptCommit);
    const trees = new Map<string, Buffer>();
    const readTree = async (oid: string): Promise<ReturnType<typeof parseTree>> => {
      const object = await reader.read(oid, LIMITS.treeBytes);
      if (object === null || object.type !== 'tree') throw new CooError('NOT_FOUND', `tree ${oid} is missing from the ledger`);
      if (object.content === null) throw new CooError('TREE_MALFORMED', `tree ${oid} is ${object.size} bytes, over the ${LIMITS.treeBytes}-byte bound on a folder: it was not read`);
      trees.set(oid, object.content);
      return parseTree(object.content);
    };
    const files = new Map<string, Buffer>();
    /** Reads `path` at the receipt's commit, keeping every tree on the way. */
    const take = async (path: string): Promise<Buffer> => {
      let entries = await readTree(links.tree);
      const parts = path.split('/');
      for (const [index, part] of parts.entries()) {
        const entry = entries.find((item) => item.name === part);
        if (entry === undefined) throw new CooError('NOT_FOUND', `${path} is not in commit ${evidence.receiptCommit}`);
        if (index < parts.length - 1) {
          entries = await readTree(entry.oid);
          continue;
        }
        const bound = blobBound(path);
        const blob = bound === null ? null : await reader.read(entry.oid, bound.bytes);
        if (bound === null || blob === null) throw new CooError('NOT_FOUND', `${path} is missing from the ledger`);
        if (blob.content === null) throw tooLarge(path, blob.size, bound);
        files.set(path, blob.content);
        return blob.content;
      }
      throw new CooError('INTERNAL', `empty path ${path}`);
    };
    const folder = evidence.receiptPath.slice(0, evidence.receiptPath.indexOf('/receipts/'));
    const envelope = readDocument('coo_message.v0', await take(envelopePath(folder)), envelopePath(folder));
    for (const path of [envelopePath(folder), evidence.receiptPath]) await take(sigPath(path));
    await take(evidence.receiptPath);
    if (envelope.intent === 'aa_consult' || envelope.intent === 'cross_check') {
      await take(envelope.payload_ref);
      await take(envelope.context_pin.context_manifest_ref);
    }
    // A cross-check's bundle holds the answer it challenged, so that what the challenger was sent can be proved from it.
    if (envelope.intent === 'cross_check') await take(envelope.challenge.answer_ref);
    if (evidence.receipt.output_ref !== null) await take(evidence.receipt.output_ref);
    // What else the receipt names by hash, so an auditor can check it: each read within its artifact
    // bound, as many as the receipt's schema allows (10 attachments and 5 proposals, 120 for a dispatch).
    for (const item of attachedFiles(evidence.receipt)) await take(item.path);
    const trust = { root: [] as TrustRoot[], registry: [] as ActorRegistry[] };
    const trustFolder = await readTree(folderOid(await readTree(links.tree), 'trust'));
    for (const role of ['root', 'registry'] as const) {
      const listing = await readTree(folderOid(trustFolder, role));
      for (const entry of listing) {
        const bytes = await take(`trust/${role}/${entry.name}`);
        if (!entry.name.endsWith('.yaml')) continue;
        if (role === 'root') trust.root.push(readDocument('trust_root.v0', bytes, `trust/root/${entry.name}`));
        else trust.registry.push(readDocument('actor_registry.v0', bytes, `trust/registry/${entry.name}`));
      }
    }
    // The ledger's name: its genesis commit, and the trees down to the first trust files it laid, in it and in the receipt's commit.
    const genesis = await readCommitLinks(reader, evidence.genesis);
    const genesisTrust = await readTree(folderOid(await readTree(genesis.tree), 'trust'));
    for (const role of ['root', 'registry', 'policy']) {
      await readTree(folderOid(genesisTrust, role));
      await readTree(folderOid(trustFolder, role));
    }
    return renderBundle({ kind: BUNDLE_KIND, messageId: evidence.messageId, receiptPath: evidence.receiptPath, commit: links.raw, genesis: genesis.raw, trees, files }, trust.root, trust.registry);
  } finally {
    reader.close();
  }
}

function folderOid(entries: ReturnType<typeof parseTree>, name: string): string {
  const entry = entries.find((item) => item.name === name && item.mode === '40000');
  if (entry === undefined) throw new CooError('NOT_FOUND', `the ledger has no ${name} folder`);
  return entry.oid;
}
