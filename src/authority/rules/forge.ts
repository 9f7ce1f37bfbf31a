import { CooError } from '../../errors.js';
import { LIMITS } from '../../limits.js';
import { ENTRY_NAMESPACE, parseSshsig, verifySshsig } from '../../crypto/sshsig.js';
import type { CommitFacts, FileChange } from '../../ledger/commit-facts.js';
import { classifyPath, sigPath } from '../../ledger/layout.js';

/**
 * The rules of forge files (`.github/workflows/<name>.yml` and its `.sig`), the one place where a
 * ledger file may change. A forge with no pre-receive hook runs the workflow file of the commit
 * that was pushed, so the check it runs is whatever that commit's tree says: only a trust-root
 * authority (the CEO) may add or replace one, each version signed over its exact bytes like a
 * trust file, in a commit the same key signs. Removing one would silently stop the check, and is
 * refused like any other change to a write-once file.
 *
 * Pure: `changes` are the commit's changes under forge paths, `isRootAuthority` tells a trust-root
 * authority in force once the commit's own trust files are read (so a genesis commit may lay one;
 * a revoked or rotated-out key is none, whatever a root document still lists), `signerKeyId` the key
 * that signed the commit when its signature verified. Every problem is returned, none thrown.
 */
export function checkForgeChanges(
  changes: readonly FileChange[],
  facts: Pick<CommitFacts, 'blobs' | 'preverified'>,
  signerKeyId: string | null,
  isRootAuthority: (keyId: string) => boolean,
): CooError[] {
  const errors: CooError[] = [];
  const changed = new Set<string>();
  for (const change of changes) {
    const where = change.path;
    if (change.status === 'deleted') {
      errors.push(new CooError('WRITE_ONCE', `${where} was deleted: a forge file is replaced by a trust-root authority, never removed`, { where }));
    } else if (change.mode !== '100644') {
      errors.push(new CooError('TREE_MALFORMED', `${where} has mode ${change.mode}: only regular files`, { where }));
    } else {
      changed.add(where);
    }
  }
  for (const path of changed) {
    const info = classifyPath(path);
    if (info?.kind === 'signature') {
      if (!changed.has(info.of)) errors.push(new CooError('ENTRY_UNPAIRED', `${path} changes without ${info.of}, the file it signs`, { where: path }));
      continue;
    }
    if (!changed.has(sigPath(path))) {
      errors.push(new CooError('SIG_MISSING', `${path} changes without a new ${sigPath(path)}`, { where: path }));
      continue;
    }
    try {
      checkForgeFile(path, facts, signerKeyId, isRootAuthority);
    } catch (error) {
      if (!(error instanceof CooError)) throw error;
      errors.push(error);
    }
  }
  return errors;
}

function checkForgeFile(path: string, facts: Pick<CommitFacts, 'blobs' | 'preverified'>, signerKeyId: string | null, isRootAuthority: (keyId: string) => boolean): void {
  const bytes = facts.blobs.get(path);
  const sigBytes = facts.blobs.get(sigPath(path));
  if (bytes === undefined || sigBytes === undefined) throw new CooError('INTERNAL', `no content gathered for ${path}`);
  if (bytes.length > LIMITS.forgeFileBytes) {
    throw new CooError('POLICY_LIMIT', `${path}: a forge file is at most ${LIMITS.forgeFileBytes} bytes`, { where: path });
  }
  const pre = facts.preverified?.get(path);
  const sig = pre?.sig ?? parseSshsig(sigBytes.toString('utf8'));
  if (sig.namespace !== ENTRY_NAMESPACE) {
    throw new CooError('SIG_NAMESPACE', `${path}: signature namespace is ${JSON.stringify(sig.namespace)}, expected ${ENTRY_NAMESPACE}`, { where: path });
  }
  if (!(pre?.valid ?? verifySshsig(sig, bytes, ENTRY_NAMESPACE))) {
    throw new CooError('SIG_INVALID', `${path}: signature by ${sig.publicKey.keyId} does not verify`, { where: path });
  }
  const keyId = sig.publicKey.keyId;
  if (signerKeyId !== null && keyId !== signerKeyId) {
    throw new CooError('SIGNER_MISMATCH', `${path}: signed by ${keyId} but the commit by ${signerKeyId}: one signer per commit`, { where: path });
  }
  if (!isRootAuthority(keyId)) {
    throw new CooError('TRUST_AUTHORITY', `${path}: what a forge runs is set by a trust-root authority in force, not ${keyId}`, { where: path });
  }
}
