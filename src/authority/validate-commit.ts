import { CooError, type Finding } from '../errors.js';
import { LIMITS } from '../limits.js';
import { parseSshsig, verifySshsig, ENTRY_NAMESPACE, GIT_NAMESPACE } from '../crypto/sshsig.js';
import { forgeSkipWords, parseCommit, type ParsedCommit } from '../ledger/commit-format.js';
import type { CommitFacts } from '../ledger/commit-facts.js';
import { classifyPath, explainPath, isEntry, isForgePath, sigPath } from '../ledger/layout.js';
import { readDocument } from '../schema/documents.js';
import { sha256Ref } from '../util/hash.js';
import { keyHolders, keyStatus, signerError } from './keys.js';
import type { LedgerState } from './state.js';
import { CommitCheck, type EntryFile } from './commit-check.js';
import { checkPolicy, checkRegistry, checkRoot, checkRootAgreesWithRegistry } from './rules/trust.js';
import { checkKillSwitch } from './rules/kill-switch.js';
import { checkApproval } from './rules/approval.js';
import { checkEnvelope } from './rules/envelope.js';
import { checkPanels } from './rules/panel.js';
import { checkClaim, checkUnrunClaims } from './rules/claim.js';
import { checkReceipt } from './rules/receipt.js';
import { checkHeartbeat } from './rules/heartbeat.js';
import { checkForgeChanges } from './rules/forge.js';

export interface Signer {
  readonly keyId: string;
  readonly actor: string;
}

export interface CommitVerdict {
  readonly findings: readonly Finding[];
  readonly commit: ParsedCommit | null;
  readonly signer: Signer | null;
  /**
   * The state after this commit: its effects when it is valid, only its new position when it is
   * not. Extends the prior state's maps in place, so call it once, after the commit has landed.
   */
  readonly advance: () => LedgerState;
}

/** Processing order inside one commit: trust first, so a genesis or rotation commit sees its own files. */
const ORDER: Record<string, number> = { root: 0, registry: 1, policy: 2, kill_switch: 3, approval: 4, envelope: 5, claim: 6, receipt: 7, heartbeat: 8 };

function orderOf(entry: EntryFile): number {
  return entry.info.kind === 'trust' ? ORDER[entry.info.role]! : ORDER[entry.info.kind]!;
}

/**
 * Decides whether one commit may extend the ledger whose state is `state`. The same function runs
 * at write time (`coo append`, the runner), in the pre-receive hook on pushes, and in `coo verify`.
 * Pure: the facts come in, findings and the next state go out. A writer and the hook judge a commit
 * as new and give their own `clock`: an entry dated ahead of it beyond the allowed skew is refused
 * (rules/clock.ts); history (coo verify, a replay) is judged without one. The hook judges a commit
 * pushed alone as it lands (`landing`): a claim, or a dispatch using an approval, dated behind its
 * clock beyond the skew is refused there too.
 *
 * One ordered pass: the commit's position and signature, then each signed entry in ORDER, each
 * judged by the rules of its kind (authority/rules/), then what the commit leaves as a whole (the
 * root and registry agreeing, its panels), then forge files and the artifacts the entries referenced. The order fixes which finding comes first.
 */
export function validateCommit(state: LedgerState, facts: CommitFacts, clock: Date | null = null, landing = false): CommitVerdict {
  const check = new CommitCheck(state, facts, clock, landing);
  const commit = check.attempt(undefined, () => facts.parsed ?? parseCommit(facts.raw)) ?? null;
  if (commit !== null) checkPosition(check, commit);
  const signer = commit === null ? null : checkCommitSignature(check, commit);
  const entries = collectFiles(check);
  for (const entry of entries) {
    const before = check.findings.length;
    check.attempt(entry.path, () => checkEntry(check, entry, signer));
    if (check.findings.length > before && 'folder' in entry.info) check.refusedFolders.add(entry.info.folder);
  }
  checkUnrunClaims(check);
  check.attempt(undefined, () => checkRootAgreesWithRegistry(check));
  checkPanels(check);
  for (const error of checkForgeChanges(check.forgeChanges, facts, signer?.keyId ?? null, (keyId) => check.holders().get(keyId)?.rootAuthority === true)) check.report(error);
  checkArtifacts(check);
  if (state.seq === 0 && (check.root === null || check.registry === null || check.policy === null)) {
    check.report(new CooError('TRUST_VERSION', 'the first commit adds trust root, registry and policy, each version 1'));
  }
  const findings = check.findings;
  if (findings.length > 0 || commit === null || signer === null) {
    const skipped: LedgerState = { ...state, seq: state.seq + 1, head: facts.oid, genesis: state.genesis ?? facts.oid };
    return { findings, commit, signer, advance: () => skipped };
  }
  return { findings, commit, signer, advance: () => check.apply() };
}

/** Linear history: genesis has no parent, every other commit has exactly the previous head, and Ledger-Seq counts by one. */
function checkPosition(check: CommitCheck, commit: ParsedCommit): void {
  const genesis = check.state.seq === 0;
  if (commit.parents.length > 1) {
    check.report(new CooError('COMMIT_MERGE', `merge commit with ${commit.parents.length} parents: the ledger is linear`));
  } else if (genesis && commit.parents.length !== 0) {
    check.report(new CooError('HISTORY_FORK', 'the first commit of a ledger has no parent'));
  } else if (!genesis && commit.parents[0] !== check.state.head) {
    check.report(new CooError('HISTORY_FORK', `parent ${commit.parents[0] ?? '(none)'} is not the ledger head ${check.state.head}`));
  }
  if (commit.seq !== check.seq) {
    check.report(new CooError('COMMIT_SEQ', `Ledger-Seq ${commit.seq} where ${check.seq} comes next`));
  }
  const skip = forgeSkipWords(commit.message);
  if (skip !== null) {
    check.report(new CooError('COMMIT_MALFORMED', `commit message holds ${JSON.stringify(skip)}, for which a forge runs no check on the push: coo never writes it, and a ledger commit may not hold it`));
  }
}

/** The commit signature (namespace `git`) by a key the trust files in force allow. */
function checkCommitSignature(check: CommitCheck, commit: ParsedCommit): Signer | null {
  return (
    check.attempt(undefined, () => {
      const pre = check.facts.preverified?.get('commit');
      const sig = pre?.sig ?? parseSshsig(commit.gpgsig);
      if (sig.namespace !== GIT_NAMESPACE) {
        throw new CooError('SIG_NAMESPACE', `commit signature namespace is ${JSON.stringify(sig.namespace)}, expected "git"`);
      }
      if (!(pre?.valid ?? verifySshsig(sig, commit.payload, GIT_NAMESPACE))) {
        throw new CooError('SIG_INVALID', `commit signature by ${sig.publicKey.keyId} does not verify`);
      }
      const keyId = sig.publicKey.keyId;
      if (check.state.seq === 0) return { keyId, actor: genesisSigner(check, keyId) };
      const holder = keyHolders(check.state).get(keyId);
      if (holder === undefined) throw signerError(keyStatus(check.state, keyId), keyId, 'commit');
      return { keyId, actor: holder.actor };
    }) ?? null
  );
}

/** The genesis commit is signed by an authority its own trust root names. */
function genesisSigner(check: CommitCheck, keyId: string): string {
  const bytes = check.facts.blobs.get('trust/root/000001.yaml');
  if (bytes === undefined) throw new CooError('TRUST_VERSION', 'the first commit must add trust/root/000001.yaml');
  const root = readDocument('trust_root.v0', bytes, 'trust/root/000001.yaml');
  const authority = root.authorities.find((entry) => entry.key_id === keyId);
  if (authority === undefined) throw new CooError('TRUST_AUTHORITY', `genesis is signed by ${keyId}, not by an authority of its trust root`);
  return authority.actor;
}

/** Sorts the commit's files into entries, signatures and artifacts; anything else is a finding. */
function collectFiles(check: CommitCheck): EntryFile[] {
  const entries: EntryFile[] = [];
  const added = new Set<string>();
  for (const change of check.facts.changes) {
    if (isForgePath(change.path)) {
      check.forgeChanges.push(change);
      continue;
    }
    if (change.status !== 'added') {
      check.report(new CooError('WRITE_ONCE', `${change.path} was ${change.status}: ledger files are write-once`, { where: change.path }));
      continue;
    }
    if (change.mode !== '100644') {
      check.report(new CooError('TREE_MALFORMED', `${change.path} has mode ${change.mode}: only regular files`, { where: change.path }));
      continue;
    }
    added.add(change.path);
  }
  if (added.size === 0 && check.forgeChanges.length === 0 && check.findings.length === 0) {
    check.report(new CooError('PATH_INVALID', 'the commit adds nothing'));
  }
  for (const path of added) {
    const info = classifyPath(path);
    if (info === null) {
      check.report(new CooError('PATH_INVALID', `${path} has no place in the ledger layout: ${explainPath(path)}`, { where: path }));
      continue;
    }
    if (info.kind === 'readme') {
      if (check.state.seq !== 0) check.report(new CooError('PATH_INVALID', 'README.md is laid only by the first commit', { where: path }));
      continue;
    }
    if (info.kind === 'signature') {
      if (!added.has(info.of)) check.report(new CooError('ENTRY_UNPAIRED', `${path} signs a file this commit does not add`, { where: path }));
      continue;
    }
    if (info.kind === 'message_artifact' || info.kind === 'attempt_artifact') continue;
    if (!isEntry(info)) continue;
    if (!added.has(sigPath(path))) {
      check.report(new CooError('SIG_MISSING', `${path} has no ${sigPath(path)}`, { where: path }));
      continue;
    }
    const bytes = check.facts.blobs.get(path);
    if (bytes === undefined) throw new CooError('INTERNAL', `no content gathered for ${path}`);
    entries.push({ path, info, bytes });
  }
  return entries.sort((a, b) => orderOf(a) - orderOf(b) || (a.path < b.path ? -1 : 1));
}

/** One entry: its signature over its exact bytes by the commit's one signer, then the rules of its kind. */
function checkEntry(check: CommitCheck, entry: EntryFile, signer: Signer | null): void {
  const sigBytes = check.facts.blobs.get(sigPath(entry.path));
  if (sigBytes === undefined) throw new CooError('INTERNAL', `no content gathered for ${sigPath(entry.path)}`);
  const pre = check.facts.preverified?.get(entry.path);
  const sig = pre?.sig ?? parseSshsig(sigBytes.toString('utf8'));
  if (sig.namespace !== ENTRY_NAMESPACE) {
    throw new CooError('SIG_NAMESPACE', `${entry.path}: signature namespace is ${JSON.stringify(sig.namespace)}, expected ${ENTRY_NAMESPACE}`, { where: entry.path });
  }
  if (!(pre?.valid ?? verifySshsig(sig, entry.bytes, ENTRY_NAMESPACE))) {
    throw new CooError('SIG_INVALID', `${entry.path}: the signature by ${check.named(sig.publicKey.keyId)} does not verify over these bytes (was the file changed after ssh-keygen -Y sign?)`, { where: entry.path });
  }
  if (signer !== null && sig.publicKey.keyId !== signer.keyId) {
    throw new CooError('SIGNER_MISMATCH', `${entry.path}: signed by ${check.named(sig.publicKey.keyId)} but the commit by ${check.named(signer.keyId)}: one signer per commit`, { where: entry.path });
  }
  const keyId = sig.publicKey.keyId;
  const info = entry.info;
  switch (info.kind) {
    case 'trust':
      if (info.role === 'root') checkRoot(check, entry, info.version, keyId);
      else if (info.role === 'registry') checkRegistry(check, entry, info.version, keyId);
      else checkPolicy(check, entry, info.version, keyId);
      return;
    case 'kill_switch':
      checkKillSwitch(check, entry, info.version, keyId);
      return;
    case 'approval':
      checkApproval(check, entry, keyId);
      return;
    case 'envelope':
      checkEnvelope(check, entry, info, keyId);
      return;
    case 'claim':
      checkClaim(check, entry, info, keyId);
      return;
    case 'receipt':
      checkReceipt(check, entry, info, keyId);
      return;
    case 'heartbeat':
      checkHeartbeat(check, entry, info.seq, keyId);
      return;
  }
}

/** Every artifact the commit adds is referenced by an entry of the same commit, with its hash; every reference is present. */
function checkArtifacts(check: CommitCheck): void {
  for (const change of check.facts.changes) {
    if (change.status !== 'added') continue;
    const info = classifyPath(change.path);
    if (info === null || (info.kind !== 'message_artifact' && info.kind !== 'attempt_artifact')) continue;
    const bytes = check.facts.blobs.get(change.path);
    const expected = check.references.get(change.path);
    if (bytes === undefined) continue;
    if (bytes.length > LIMITS.artifactBytes) {
      check.report(new CooError('POLICY_LIMIT', `${change.path}: artifact exceeds ${LIMITS.artifactBytes} bytes`, { where: change.path }));
    } else if (expected === undefined) {
      // Beside a refused envelope or receipt, an artifact is unreferenced only because that entry was refused: one finding says why.
      if (!check.refusedFolders.has(info.folder)) check.report(new CooError('ARTIFACT_UNREFERENCED', `${change.path} is referenced by no entry of this commit`, { where: change.path }));
    } else if (sha256Ref(bytes) !== expected) {
      check.report(new CooError('ARTIFACT_HASH_MISMATCH', `${change.path} does not match the hash its entry records`, { where: change.path }));
    }
  }
  for (const path of check.references.keys()) {
    if (!check.facts.blobs.has(path)) {
      check.report(new CooError('ARTIFACT_MISSING', `${path} is referenced but not added by this commit`, { where: path }));
    }
  }
}
