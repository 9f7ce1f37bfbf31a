import { keepHeartbeat } from './heartbeats.js';
import { CooError, isCooError, toFinding, type Finding } from '../errors.js';
import { LIMITS } from '../limits.js';
import { parseSshsig, verifySshsig, ENTRY_NAMESPACE, GIT_NAMESPACE } from '../crypto/sshsig.js';
import { parseCommit, type ParsedCommit } from '../ledger/commit-format.js';
import type { CommitFacts } from '../ledger/commit-facts.js';
import {
  approvalPath,
  classifyPath,
  explainPath,
  heartbeatPath,
  isEntry,
  isForgePath,
  manifestPath,
  messageFolder,
  promptPath,
  sigPath,
  type PathInfo,
} from '../ledger/layout.js';
import { readDocument, type DocumentKind, type DocumentOf } from '../schema/documents.js';
import { toMillis } from '../schema/common.js';
import type { AaReceipt, EaReceipt } from '../schema/receipt.js';
import type { CooMessage, EaDispatchMessage } from '../schema/message.js';
import type { ActorPolicy } from '../schema/policy.js';
import type { ActorRegistry } from '../schema/registry.js';
import type { TrustRoot } from '../schema/control.js';
import type { FileChange } from '../ledger/commit-facts.js';
import { canonicalJson, sha256Ref } from '../util/hash.js';
import { checkForgeChanges } from './forge-rules.js';
import { repeatedRequest, requestFingerprint } from './idempotency.js';
import { activeKeys, checkKeyIds, keyHolders, keyStatus, signerError, type KeyHolder, type KeyStatus } from './keys.js';
import { attemptBranchFor, dispatchRequestHash, isBranchName } from './dispatch-rules.js';
import { checkEdge, checkForbiddenEdge, checkPolicyAgainstRegistry, classOf, edgeRequires, isCommandIntent } from './policy-check.js';
import { attemptIdOf, isRunnerIntent, withinHopLimit } from './runnable.js';
import {
  correlationRemainingUsd,
  folderOf,
  idempotencySlot,
  isTerminal,
  retryApproved,
  type ApprovalRecord,
  type AttemptRecord,
  type KeyRecord,
  type LedgerState,
  type MessageRecord,
  type Revocation,
  type TrustFile,
} from './state.js';


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

/** How far a stated dollar figure may differ from the ledger's (floating-point sums of costs). */
const USD_TOLERANCE = 1e-9;

/** Processing order inside one commit: trust first, so a genesis or rotation commit sees its own files. */
const ORDER: Record<string, number> = { root: 0, registry: 1, policy: 2, kill_switch: 3, approval: 4, envelope: 5, claim: 6, receipt: 7, heartbeat: 8 };

interface EntryFile {
  readonly path: string;
  readonly info: Extract<PathInfo, { kind: 'trust' | 'kill_switch' | 'approval' | 'heartbeat' | 'envelope' | 'claim' | 'receipt' }>;
  readonly bytes: Buffer;
}

function orderOf(entry: EntryFile): number {
  return entry.info.kind === 'trust' ? ORDER[entry.info.role]! : ORDER[entry.info.kind]!;
}

/**
 * Decides whether one commit may extend the ledger whose state is `state`. The same function runs
 * at write time (`coo append`, the runner), in the pre-receive hook on pushes, and in `coo verify`.
 * Pure: the facts come in, findings and the next state go out.
 */
export function validateCommit(state: LedgerState, facts: CommitFacts): CommitVerdict {
  return new CommitCheck(state, facts).run();
}

class CommitCheck {
  private readonly findings: Finding[] = [];
  private root: TrustFile<TrustRoot> | null;
  private registry: TrustFile<ActorRegistry> | null;
  private policy: LedgerState['policy'];
  private killSwitch: LedgerState['killSwitch'];
  /** Keys this commit's trust files name, and the revocations its registry adds. */
  private readonly everKeys = new Map<string, KeyRecord>();
  private readonly revocations = new Map<string, Revocation>();
  /** The trust files this commit adds, for the record of the keys they retire. */
  private readonly trustPaths: string[] = [];
  private readonly messages = new Map<string, MessageRecord>();
  private readonly idempotency = new Map<string, string>();
  private readonly spend: Array<{ correlation: string; day: string; usd: number }> = [];
  private heartbeat: LedgerState['lastHeartbeat'];
  private runnerHeartbeat: { runner: string; seq: number; createdAt: string; expiresAt: string } | null = null;
  private readonly approvals = new Map<string, ApprovalRecord>();
  /** Artifacts added by this commit and the entry that references each, with the hash it expects. */
  private readonly references = new Map<string, string>();
  /** Changes under forge paths, judged by their own rules once the commit's trust files are read. */
  private readonly forgeChanges: FileChange[] = [];
  private seq: number;
  /** Message folders whose envelope or receipt this commit was refused: their artifacts are not reported again as unreferenced. */
  private readonly refusedFolders = new Set<string>();

  constructor(
    private readonly state: LedgerState,
    private readonly facts: CommitFacts,
  ) {
    this.root = state.root;
    this.registry = state.registry;
    this.policy = state.policy;
    this.killSwitch = state.killSwitch;
    this.heartbeat = state.lastHeartbeat;
    this.seq = state.seq + 1;
  }

  private report(error: unknown, path?: string): void {
    if (!isCooError(error)) throw error;
    const finding = toFinding(error, this.facts.oid);
    this.findings.push(path !== undefined && finding.path === undefined ? { ...finding, path } : finding);
  }

  private attempt<T>(path: string | undefined, fn: () => T): T | undefined {
    try {
      return fn();
    } catch (error) {
      this.report(error, path);
      return undefined;
    }
  }

  run(): CommitVerdict {
    const commit = this.attempt(undefined, () => this.facts.parsed ?? parseCommit(this.facts.raw)) ?? null;
    if (commit !== null) this.checkPosition(commit);
    const signer = commit === null ? null : this.checkCommitSignature(commit);
    const entries = this.collectFiles();
    for (const entry of entries) {
      const before = this.findings.length;
      this.attempt(entry.path, () => this.checkEntry(entry, signer));
      if (this.findings.length > before && 'folder' in entry.info) this.refusedFolders.add(entry.info.folder);
    }
    for (const error of checkForgeChanges(this.forgeChanges, this.facts, signer?.keyId ?? null, (keyId) => this.holders().get(keyId)?.rootAuthority === true)) this.report(error);
    this.checkArtifacts();
    if (this.state.seq === 0 && (this.root === null || this.registry === null || this.policy === null)) {
      this.report(new CooError('TRUST_VERSION', 'the first commit adds trust root, registry and policy, each version 1'));
    }
    const findings = this.findings;
    if (findings.length > 0 || commit === null || signer === null) {
      const skipped: LedgerState = { ...this.state, seq: this.state.seq + 1, head: this.facts.oid, genesis: this.state.genesis ?? this.facts.oid };
      return { findings, commit, signer, advance: () => skipped };
    }
    return { findings, commit, signer, advance: () => this.apply() };
  }

  /** Linear history: genesis has no parent, every other commit has exactly the previous head, and Ledger-Seq counts by one. */
  private checkPosition(commit: ParsedCommit): void {
    const genesis = this.state.seq === 0;
    if (commit.parents.length > 1) {
      this.report(new CooError('COMMIT_MERGE', `merge commit with ${commit.parents.length} parents: the ledger is linear`));
    } else if (genesis && commit.parents.length !== 0) {
      this.report(new CooError('HISTORY_FORK', 'the first commit of a ledger has no parent'));
    } else if (!genesis && commit.parents[0] !== this.state.head) {
      this.report(new CooError('HISTORY_FORK', `parent ${commit.parents[0] ?? '(none)'} is not the ledger head ${this.state.head}`));
    }
    if (commit.seq !== this.seq) {
      this.report(new CooError('COMMIT_SEQ', `Ledger-Seq ${commit.seq} where ${this.seq} comes next`));
    }
  }

  /** The commit signature (namespace `git`) by a key the trust files in force allow. */
  private checkCommitSignature(commit: ParsedCommit): Signer | null {
    return (
      this.attempt(undefined, () => {
        const pre = this.facts.preverified?.get('commit');
        const sig = pre?.sig ?? parseSshsig(commit.gpgsig);
        if (sig.namespace !== GIT_NAMESPACE) {
          throw new CooError('SIG_NAMESPACE', `commit signature namespace is ${JSON.stringify(sig.namespace)}, expected "git"`);
        }
        if (!(pre?.valid ?? verifySshsig(sig, commit.payload, GIT_NAMESPACE))) {
          throw new CooError('SIG_INVALID', `commit signature by ${sig.publicKey.keyId} does not verify`);
        }
        const keyId = sig.publicKey.keyId;
        if (this.state.seq === 0) return { keyId, actor: this.genesisSigner(keyId) };
        const holder = keyHolders(this.state).get(keyId);
        if (holder === undefined) throw signerError(keyStatus(this.state, keyId), keyId, 'commit');
        return { keyId, actor: holder.actor };
      }) ?? null
    );
  }

  /** The genesis commit is signed by an authority its own trust root names. */
  private genesisSigner(keyId: string): string {
    const bytes = this.facts.blobs.get('trust/root/000001.yaml');
    if (bytes === undefined) throw new CooError('TRUST_VERSION', 'the first commit must add trust/root/000001.yaml');
    const root = readDocument('trust_root.v0', bytes, 'trust/root/000001.yaml');
    const authority = root.authorities.find((entry) => entry.key_id === keyId);
    if (authority === undefined) throw new CooError('TRUST_AUTHORITY', `genesis is signed by ${keyId}, not by an authority of its trust root`);
    return authority.actor;
  }

  /** The key holders once this commit's trust files so far are in force. */
  private holders(): ReadonlyMap<string, KeyHolder> {
    return activeKeys(this.root?.doc ?? null, this.registry?.doc ?? null, (keyId) => this.record(keyId)?.rootNamed === true);
  }

  private record(keyId: string): KeyRecord | undefined {
    return this.everKeys.get(keyId) ?? this.state.everKeys.get(keyId);
  }

  private revocation(keyId: string): Revocation | undefined {
    return this.revocations.get(keyId) ?? this.state.revocations.get(keyId);
  }

  /** A key's status with this commit's trust files so far in force: a key it revokes or retires is already out. */
  private statusOf(keyId: string): KeyStatus {
    const revocation = this.revocation(keyId);
    const record = this.record(keyId) ?? null;
    if (revocation !== undefined) return { status: 'revoked', actor: record?.actor ?? null, revocation, record };
    if (record !== null && keyHolders(this.state).has(keyId)) return { status: 'retired', actor: record.actor, seq: this.seq, by: this.trustPaths, record };
    return keyStatus(this.state, keyId);
  }

  /** A key id with whose key it is, for messages: `SHA256:... (coo.hermes)`. */
  private named(keyId: string): string {
    const holder = this.holders().get(keyId);
    if (holder !== undefined) return `${keyId} (${holder.actor})`;
    const past = this.state.everKeys.get(keyId);
    return `${keyId} (${past === undefined ? 'a key the trust files do not know' : `a retired key of ${past.actor}`})`;
  }

  /** Sorts the commit's files into entries, signatures and artifacts; anything else is a finding. */
  private collectFiles(): EntryFile[] {
    const entries: EntryFile[] = [];
    const added = new Set<string>();
    for (const change of this.facts.changes) {
      if (isForgePath(change.path)) {
        this.forgeChanges.push(change);
        continue;
      }
      if (change.status !== 'added') {
        this.report(new CooError('WRITE_ONCE', `${change.path} was ${change.status}: ledger files are write-once`, { where: change.path }));
        continue;
      }
      if (change.mode !== '100644') {
        this.report(new CooError('TREE_MALFORMED', `${change.path} has mode ${change.mode}: only regular files`, { where: change.path }));
        continue;
      }
      added.add(change.path);
    }
    if (added.size === 0 && this.forgeChanges.length === 0 && this.findings.length === 0) {
      this.report(new CooError('PATH_INVALID', 'the commit adds nothing'));
    }
    for (const path of added) {
      const info = classifyPath(path);
      if (info === null) {
        this.report(new CooError('PATH_INVALID', `${path} has no place in the ledger layout: ${explainPath(path)}`, { where: path }));
        continue;
      }
      if (info.kind === 'readme') {
        if (this.state.seq !== 0) this.report(new CooError('PATH_INVALID', 'README.md is laid only by the first commit', { where: path }));
        continue;
      }
      if (info.kind === 'signature') {
        if (!added.has(info.of)) this.report(new CooError('ENTRY_UNPAIRED', `${path} signs a file this commit does not add`, { where: path }));
        continue;
      }
      if (info.kind === 'message_artifact' || info.kind === 'attempt_artifact') continue;
      if (!isEntry(info)) continue;
      if (!added.has(sigPath(path))) {
        this.report(new CooError('SIG_MISSING', `${path} has no ${sigPath(path)}`, { where: path }));
        continue;
      }
      const bytes = this.facts.blobs.get(path);
      if (bytes === undefined) throw new CooError('INTERNAL', `no content gathered for ${path}`);
      entries.push({ path, info, bytes });
    }
    return entries.sort((a, b) => orderOf(a) - orderOf(b) || (a.path < b.path ? -1 : 1));
  }

  private checkEntry(entry: EntryFile, signer: Signer | null): void {
    const sigBytes = this.facts.blobs.get(sigPath(entry.path));
    if (sigBytes === undefined) throw new CooError('INTERNAL', `no content gathered for ${sigPath(entry.path)}`);
    const pre = this.facts.preverified?.get(entry.path);
    const sig = pre?.sig ?? parseSshsig(sigBytes.toString('utf8'));
    if (sig.namespace !== ENTRY_NAMESPACE) {
      throw new CooError('SIG_NAMESPACE', `${entry.path}: signature namespace is ${JSON.stringify(sig.namespace)}, expected ${ENTRY_NAMESPACE}`, { where: entry.path });
    }
    if (!(pre?.valid ?? verifySshsig(sig, entry.bytes, ENTRY_NAMESPACE))) {
      throw new CooError('SIG_INVALID', `${entry.path}: the signature by ${this.named(sig.publicKey.keyId)} does not verify over these bytes (was the file changed after ssh-keygen -Y sign?)`, { where: entry.path });
    }
    if (signer !== null && sig.publicKey.keyId !== signer.keyId) {
      throw new CooError('SIGNER_MISMATCH', `${entry.path}: signed by ${this.named(sig.publicKey.keyId)} but the commit by ${this.named(signer.keyId)}: one signer per commit`, { where: entry.path });
    }
    const keyId = sig.publicKey.keyId;
    const info = entry.info;
    switch (info.kind) {
      case 'trust':
        if (info.role === 'root') this.checkRoot(entry, info.version, keyId);
        else if (info.role === 'registry') this.checkRegistry(entry, info.version, keyId);
        else this.checkPolicy(entry, info.version, keyId);
        return;
      case 'kill_switch':
        this.checkKillSwitch(entry, info.version, keyId);
        return;
      case 'approval':
        this.checkApproval(entry, keyId);
        return;
      case 'envelope':
        this.checkEnvelope(entry, info, keyId);
        return;
      case 'claim':
        this.checkClaim(entry, info, keyId);
        return;
      case 'receipt':
        this.checkReceipt(entry, info, keyId);
        return;
      case 'heartbeat':
        this.checkHeartbeat(entry, info.seq, keyId);
        return;
    }
  }

  private read<K extends DocumentKind>(kind: K, entry: EntryFile): DocumentOf<K> {
    return readDocument(kind, entry.bytes, entry.path);
  }

  /**
   * A trust file is signed by an authority of the trust in force at its commit's parent (genesis:
   * by its own root), so a commit that rotates the root out from under its signer may still bring
   * the registry that follows the rotation. A revoked or retired key is told apart from a stranger.
   */
  private requireRootAuthority(keyId: string, where: string, what: string): void {
    const holder = (this.state.seq === 0 ? this.holders() : keyHolders(this.state)).get(keyId);
    if (holder === undefined && this.state.seq !== 0) throw signerError(keyStatus(this.state, keyId), keyId, where);
    if (holder?.rootAuthority !== true) {
      throw new CooError('TRUST_AUTHORITY', `${where}: ${what} must be signed by a trust-root authority in force, not ${this.named(keyId)}`, { where });
    }
  }

  /** A revoked key never regains a role, by any trust file. */
  private refuseRevoked(keyId: string, where: string, role: string): void {
    const revocation = this.revocation(keyId);
    if (revocation !== undefined) {
      throw new CooError('KEY_REVOKED', `${where}: gives ${keyId} ${role}, but it was revoked at Ledger-Seq ${revocation.seq} by ${revocation.by} (${JSON.stringify(revocation.reason)}): a revoked key never regains a role`, { where });
    }
  }

  private noteKey(keyId: string, actor: string, publicKey: string, rootNamed: boolean): void {
    const known = this.record(keyId);
    this.everKeys.set(keyId, { actor, publicKey, rootNamed: rootNamed || known?.rootNamed === true, retired: known?.retired ?? null });
  }

  private requireVersion(current: { version: number } | null, version: number, docVersion: number, where: string): void {
    const expected = (current?.version ?? 0) + 1;
    if (version !== expected || docVersion !== version) {
      throw new CooError('TRUST_VERSION', `${where}: version ${docVersion} at position ${version} where exactly ${expected} comes next`, { where });
    }
  }

  private trustFile<T>(entry: EntryFile, version: number, doc: T): TrustFile<T> {
    return { version, path: entry.path, sha256: sha256Ref(entry.bytes), seq: this.seq, doc };
  }

  private checkRoot(entry: EntryFile, version: number, keyId: string): void {
    const doc = this.read('trust_root.v0', entry);
    this.requireVersion(this.root, version, doc.version, entry.path);
    checkKeyIds(doc.authorities, entry.path);
    // Version 1 is signed by one of its own authorities; every later root by an authority of the one before.
    const signers = version === 1 ? doc.authorities : (this.root?.doc.authorities ?? []);
    if (!signers.some((authority) => authority.key_id === keyId)) {
      throw new CooError('TRUST_AUTHORITY', `${entry.path}: a trust root must be signed by an authority of the root before it`, { where: entry.path });
    }
    if (version > 1) this.requireRootAuthority(keyId, entry.path, 'a trust root');
    for (const authority of doc.authorities) this.refuseRevoked(authority.key_id, entry.path, `trust-root authority for ${authority.actor}`);
    this.root = this.trustFile(entry, version, doc);
    this.trustPaths.push(entry.path);
    for (const authority of doc.authorities) this.noteKey(authority.key_id, authority.actor, authority.public_key, true);
  }

  private checkRegistry(entry: EntryFile, version: number, keyId: string): void {
    const doc = this.read('actor_registry.v0', entry);
    this.requireVersion(this.registry, version, doc.version, entry.path);
    this.requireRootAuthority(keyId, entry.path, 'a registry');
    doc.actors.forEach((actor, index) => checkKeyIds(actor.keys, `${entry.path}:actors[${index}]`));
    if (this.policy !== null) checkPolicyAgainstRegistry(this.policy.doc, doc, entry.path);
    // Revocation is final: every later registry keeps every revocation, and gives no revoked key a role.
    const listed = new Set(doc.revoked_keys.map((revoked) => revoked.key_id));
    for (const [revokedId, revocation] of [...this.state.revocations, ...this.revocations]) {
      if (!listed.has(revokedId)) {
        throw new CooError('KEY_REVOKED', `${entry.path}: drops the revocation of ${revokedId} (Ledger-Seq ${revocation.seq}, ${revocation.by}): revocation is final, and every later registry lists it`, { where: entry.path });
      }
    }
    for (const actor of doc.actors) for (const key of actor.keys) this.refuseRevoked(key.key_id, entry.path, `to ${actor.id}`);
    this.registry = this.trustFile(entry, version, doc);
    this.trustPaths.push(entry.path);
    for (const revoked of doc.revoked_keys) {
      if (this.revocation(revoked.key_id) === undefined) this.revocations.set(revoked.key_id, { seq: this.seq, reason: revoked.reason, by: entry.path });
    }
    for (const actor of doc.actors) {
      for (const key of actor.keys) this.noteKey(key.key_id, actor.id, key.public_key, false);
    }
  }

  private checkPolicy(entry: EntryFile, version: number, keyId: string): void {
    const doc = this.read('actor_policy.v0', entry);
    this.requireVersion(this.policy, version, doc.version, entry.path);
    this.requireRootAuthority(keyId, entry.path, 'a policy');
    if (this.registry === null) throw new CooError('TRUST_VERSION', `${entry.path}: a policy needs a registry first`, { where: entry.path });
    checkPolicyAgainstRegistry(doc, this.registry.doc, entry.path);
    this.policy = this.trustFile(entry, version, doc);
  }

  private signerHolder(keyId: string, where: string): KeyHolder {
    const holder = this.holders().get(keyId);
    if (holder === undefined) throw signerError(this.statusOf(keyId), keyId, where);
    return holder;
  }

  /**
   * The kill switch: a CEO may set either way; the active COO may stop, and may restart only what it
   * stopped. A stop belongs to whoever set it, and ownership does not pass by re-asserting it: the
   * COO may not set `on` over another's standing stop (its `off` would then release that stop).
   */
  private checkKillSwitch(entry: EntryFile, version: number, keyId: string): void {
    const doc = this.read('kill_switch.v0', entry);
    this.requireVersion(this.killSwitch, version, doc.version, entry.path);
    const holder = this.signerHolder(keyId, entry.path);
    if (holder.actor !== doc.set_by) {
      throw new CooError('SIGNER_WRONG_ACTOR', `${entry.path}: set_by ${doc.set_by} but signed by a key of ${holder.actor}`, { where: entry.path });
    }
    const isCoo = holder.actor === this.registry?.doc.active_coo;
    if (!holder.rootAuthority && !isCoo) {
      throw new CooError('TRUST_AUTHORITY', `${entry.path}: only a trust-root authority or the active COO may set the kill switch`, { where: entry.path });
    }
    const current = this.killSwitch?.doc;
    if (!holder.rootAuthority && current !== undefined && current.state === 'on' && current.set_by !== holder.actor) {
      const what = doc.state === 'off' ? 'the COO cannot release it' : 'the COO cannot take the stop over by setting it again';
      throw new CooError('TRUST_AUTHORITY', `${entry.path}: the kill switch was set by ${current.set_by}; ${what}`, { where: entry.path });
    }
    this.killSwitch = this.trustFile(entry, version, doc);
  }

  private approval(id: string): ApprovalRecord | undefined {
    return this.approvals.get(id) ?? this.state.approvals.get(id);
  }

  /**
   * A CEO approval (approval.v0): signed by a trust-root authority in its own name, living under
   * the hour of its creation, within the policy's time-to-live. A retry approval reopens a dispatch
   * whose last attempt ended without success, for exactly the next attempt, once.
   */
  private checkApproval(entry: EntryFile, keyId: string): void {
    const where = entry.path;
    const doc = this.read('approval.v0', entry);
    const { policy } = this.requireTrust(where);
    if (approvalPath(doc.approval_id, doc.created_at) !== where) {
      throw new CooError('PATH_INVALID', `${where}: an approval lives at ${approvalPath(doc.approval_id, doc.created_at)}`, { where });
    }
    const holder = this.signerHolder(keyId, where);
    if (!holder.rootAuthority) throw new CooError('TRUST_AUTHORITY', `${where}: approvals are signed by a trust-root authority (the CEO), not ${holder.actor}`, { where });
    if (holder.actor !== doc.approved_by) throw new CooError('SIGNER_WRONG_ACTOR', `${where}: approved_by ${doc.approved_by} but signed by a key of ${holder.actor}`, { where });
    if (this.approval(doc.approval_id) !== undefined) throw new CooError('MESSAGE_DUPLICATE', `${where}: approval ${doc.approval_id} already exists`, { where });
    if ((toMillis(doc.expires_at) - toMillis(doc.created_at)) / 1000 > policy.limits.max_ttl_seconds) {
      throw new CooError('POLICY_LIMIT', `${where}: an approval lives at most ${policy.limits.max_ttl_seconds} s (policy v${policy.version})`, { where });
    }
    if (doc.approves === 'retry') {
      const record = this.message(doc.message_id!);
      if (record === undefined) throw new CooError('MESSAGE_UNKNOWN', `${where}: ${doc.message_id} does not exist`, { where });
      if (record.intent !== 'ea_dispatch') throw new CooError('ATTEMPT_INVALID', `${where}: only dispatches take retry approvals; ${record.id} is ${record.intent}`, { where });
      const last = record.attempts[record.attempts.length - 1];
      if (last?.receipt == null || last.receipt.status === 'succeeded' || last.receipt.nextAttemptAt !== null || record.duplicateOf !== null) {
        throw new CooError('ATTEMPT_INVALID', `${where}: ${record.id} has no ended, unsuccessful attempt to retry`, { where });
      }
      if (doc.attempt_number !== last.number + 1 || (record.approvedRetries ?? []).includes(last.number + 1)) {
        throw new CooError('ATTEMPT_INVALID', `${where}: a retry approval names attempt ${last.number + 1} of ${record.id}, once`, { where });
      }
      this.messages.set(record.id, { ...record, approvedRetries: [...(record.approvedRetries ?? []), last.number + 1] });
    }
    this.approvals.set(doc.approval_id, {
      id: doc.approval_id,
      path: where,
      approves: doc.approves,
      requestHash: doc.request_hash,
      messageId: doc.message_id,
      attempt: doc.attempt_number,
      approvedBy: doc.approved_by,
      createdAt: doc.created_at,
      expiresAt: doc.expires_at,
      seq: this.seq,
      usedBy: null,
    });
  }

  /**
   * A dispatch the runner can execute: its executor is the one the registry gives its target, it is
   * pinned to a full base commit (the context pin, when it has one, at the same commit), it carries
   * its task, its first attempt id is the lane's, and its timeout is within the policy. Where the
   * policy's edge asks for the CEO, it names an unused, unexpired approval of its exact request.
   */
  private checkDispatch(doc: EaDispatchMessage, registry: ActorRegistry, policy: ActorPolicy, folder: string, where: string): void {
    const executor = registry.actors.find((actor) => actor.id === doc.target_actor)?.executor;
    if (executor === undefined) throw new CooError('POLICY_INTENT_NOT_ALLOWED', `${where}: ${doc.target_actor} has no executor in the registry`, { where });
    if (doc.dispatch.executor !== executor.kind) {
      throw new CooError('SCHEMA_INVALID', `${where}: ${doc.target_actor} runs ${executor.kind}, not ${doc.dispatch.executor}`, { where: `${where}:dispatch.executor` });
    }
    if (!/^[0-9a-f]{40}$/.test(doc.dispatch.base_ref)) {
      throw new CooError('SCHEMA_INVALID', `${where}: base_ref must be the full commit the work starts from`, { where: `${where}:dispatch.base_ref` });
    }
    if (!isBranchName(doc.dispatch.branch_name) || !isBranchName(attemptBranchFor(doc.dispatch.branch_name, 100))) {
      throw new CooError('SCHEMA_INVALID', `${where}: branch_name ${JSON.stringify(doc.dispatch.branch_name)} is not a branch name git takes`, { where: `${where}:dispatch.branch_name` });
    }
    if (doc.context_pin !== null && doc.context_pin.repo_commit_sha !== doc.dispatch.base_ref) {
      throw new CooError('SCHEMA_INVALID', `${where}: the context pin and base_ref name different commits`, { where: `${where}:context_pin.repo_commit_sha` });
    }
    if (doc.payload_ref === null || doc.payload_hash === null) throw new CooError('SCHEMA_INVALID', `${where}: a dispatch carries its task (payload_ref)`, { where: `${where}:payload_ref` });
    this.checkTask(doc.payload_ref, doc.payload_hash, folder, where);
    if (doc.context_pin !== null) this.checkManifest(doc.context_pin, folder, where);
    const attemptId = attemptIdOf({ id: doc.message_id, intent: doc.intent }, 1);
    if (doc.dispatch.attempt_id !== attemptId) throw new CooError('ATTEMPT_INVALID', `${where}: dispatch.attempt_id must be ${attemptId}`, { where: `${where}:dispatch.attempt_id` });
    if (doc.dispatch.timeout_seconds > policy.budgets.max_runtime_seconds || doc.dispatch.timeout_seconds > doc.budget.max_runtime_seconds) {
      throw new CooError('POLICY_LIMIT', `${where}: timeout_seconds ${doc.dispatch.timeout_seconds} exceeds the runtime budget`, { where: `${where}:dispatch.timeout_seconds` });
    }
    const required = edgeRequires(policy, doc.source_actor, doc.target_actor, doc.intent, 'ceo_approval');
    if (doc.approval_id === undefined) {
      if (required) throw new CooError('APPROVAL_REQUIRED', `${where}: the policy (v${policy.version}) requires the CEO's approval for ea_dispatch to ${doc.target_actor}; request ${dispatchRequestHash(doc)}`, { where });
      return;
    }
    const approval = this.approval(doc.approval_id);
    const hash = dispatchRequestHash(doc);
    if (approval === undefined || approval.approves !== 'dispatch') throw new CooError('APPROVAL_INVALID', `${where}: ${doc.approval_id} is not a dispatch approval in the ledger`, { where: `${where}:approval_id` });
    if (approval.requestHash !== hash) throw new CooError('APPROVAL_INVALID', `${where}: ${doc.approval_id} approves another request than ${hash}`, { where: `${where}:approval_id` });
    if (approval.usedBy !== null) throw new CooError('APPROVAL_INVALID', `${where}: ${doc.approval_id} was used by ${approval.usedBy}`, { where: `${where}:approval_id` });
    // Times are the writers' statements, as everywhere in the ledger: the dispatch is dated within the approval's life.
    if (toMillis(doc.created_at) >= toMillis(approval.expiresAt) || toMillis(doc.created_at) < toMillis(approval.createdAt)) {
      throw new CooError('APPROVAL_INVALID', `${where}: ${doc.approval_id} holds from ${approval.createdAt} until ${approval.expiresAt}, not at ${doc.created_at}`, { where: `${where}:approval_id` });
    }
    this.approvals.set(approval.id, { ...approval, usedBy: doc.message_id });
  }

  private message(id: string): MessageRecord | undefined {
    return this.messages.get(id) ?? this.state.messages.get(id);
  }

  private requireTrust(where: string): { registry: ActorRegistry; policy: NonNullable<LedgerState['policy']>['doc'] } {
    if (this.registry === null || this.policy === null) {
      throw new CooError('TRUST_VERSION', `${where}: the ledger has no registry and policy yet`, { where });
    }
    return { registry: this.registry.doc, policy: this.policy.doc };
  }

  /** Write-time authority for an envelope (review correction 3): signer, principal, edge, intent, limits. */
  private checkEnvelope(entry: EntryFile, info: Extract<PathInfo, { kind: 'envelope' }>, keyId: string): void {
    const where = entry.path;
    const doc = this.read('coo_message.v0', entry);
    const { registry, policy } = this.requireTrust(where);
    if (doc.message_id !== info.messageId || messageFolder(doc.message_id, doc.created_at) !== info.folder) {
      throw new CooError('PATH_INVALID', `${where}: an envelope lives at ${messageFolder(doc.message_id, doc.created_at)}/envelope.yaml`, { where });
    }
    if (this.message(doc.message_id) !== undefined) {
      throw new CooError('MESSAGE_DUPLICATE', `${where}: message ${doc.message_id} already exists`, { where });
    }
    const holder = this.signerHolder(keyId, where);
    if (holder.actor !== doc.source_actor) {
      throw new CooError('SIGNER_WRONG_ACTOR', `${where}: source_actor is ${doc.source_actor} but the key belongs to ${holder.actor}`, { where });
    }
    if (classOf(registry, doc.principal) === null) {
      throw new CooError('ACTOR_UNKNOWN', `${where}: principal ${doc.principal} is not in the registry`, { where });
    }
    checkForbiddenEdge(registry, doc.source_actor, doc.target_actor, where);
    if (isCommandIntent(doc.intent)) {
      if (doc.source_actor !== registry.active_coo) {
        throw new CooError('NOT_ACTIVE_COO', `${where}: ${doc.intent} is command-class; only the active COO ${registry.active_coo} may send it, not ${doc.source_actor}`, { where });
      }
      if (doc.principal !== registry.active_coo) {
        throw new CooError('NOT_ACTIVE_COO', `${where}: a command-class envelope's principal must be the active COO ${registry.active_coo}`, { where });
      }
    } else if (doc.principal !== doc.source_actor && doc.principal !== registry.active_coo) {
      throw new CooError('NOT_ACTIVE_COO', `${where}: principal ${doc.principal} is neither the sender nor the active COO`, { where });
    }
    checkEdge(registry, policy, doc.source_actor, doc.target_actor, doc.intent, where);
    this.checkIntentTarget(doc, registry, where);
    this.checkChain(doc, registry, where);
    this.checkLimits(doc, where);
    const folder = info.folder;
    if (doc.intent === 'aa_consult') this.checkConsultArtifacts(doc, folder, where);
    if (doc.intent === 'ea_dispatch') this.checkDispatch(doc, registry, policy, folder, where);
    const fingerprint = requestFingerprint(doc);
    const slot = idempotencySlot(doc.source_actor, doc.idempotency_key);
    const firstId = this.idempotency.get(slot) ?? this.state.idempotency.get(slot);
    const first = repeatedRequest(doc, fingerprint, firstId, firstId === undefined ? undefined : this.message(firstId), where);
    const duplicateOf = first === null ? null : (first.duplicateOf ?? first.id);
    if (first === null) this.idempotency.set(slot, doc.message_id);
    this.messages.set(doc.message_id, {
      id: doc.message_id,
      intent: doc.intent,
      source: doc.source_actor,
      target: doc.target_actor,
      correlation: doc.correlation_id,
      createdAt: doc.created_at,
      chain: doc.causality_chain,
      maxHops: doc.max_hops,
      idempotencyKey: doc.idempotency_key,
      fingerprint,
      payloadHash: 'payload_hash' in doc ? doc.payload_hash : null,
      manifestHash: 'context_pin' in doc && doc.context_pin !== null ? doc.context_pin.context_manifest_hash : null,
      maxCostUsd: doc.budget.max_cost_usd,
      seq: this.seq,
      duplicateOf,
      attempts: [],
      ...(doc.submitted_via === undefined ? {} : { submittedVia: doc.submitted_via }),
    });
  }

  private checkIntentTarget(doc: CooMessage, registry: ActorRegistry, where: string): void {
    const targetClass = classOf(registry, doc.target_actor);
    const needs = (cls: string, what: string): void => {
      if (targetClass !== cls) throw new CooError('POLICY_INTENT_NOT_ALLOWED', `${where}: ${doc.intent} must target ${what}, not ${doc.target_actor}`, { where });
    };
    switch (doc.intent) {
      case 'aa_consult':
        needs('advisory_agent', 'an advisory agent');
        return;
      case 'ea_dispatch':
        needs('execution_agent', 'an execution agent');
        return;
      case 'retry': {
        const original = this.message(doc.retry_of);
        if (original === undefined) throw new CooError('MESSAGE_UNKNOWN', `${where}: retry_of ${doc.retry_of} does not exist`, { where });
        if (original.target !== doc.target_actor) {
          throw new CooError('POLICY_INTENT_NOT_ALLOWED', `${where}: a retry targets the actor of the message it retries`, { where });
        }
        const expected = targetClass === 'advisory_agent' ? 'advisory_only' : 'governed_execution';
        if (doc.authority_class !== expected) {
          throw new CooError('SCHEMA_INVALID', `${where}: a retry to ${doc.target_actor} carries authority_class ${expected}`, { where: `${where}:authority_class` });
        }
        return;
      }
      case 'status_query':
        if (this.message(doc.about_message_id) === undefined) {
          throw new CooError('MESSAGE_UNKNOWN', `${where}: about_message_id ${doc.about_message_id} does not exist`, { where });
        }
        return;
      case 'receipt_notice': {
        // The path names a message: it must be a receipt the ledger holds, in that message's own folder.
        const info = classifyPath(doc.receipt_ref.path);
        const record = info?.kind === 'receipt' ? this.message(info.messageId) : undefined;
        const receipt = info?.kind === 'receipt' ? record?.attempts[info.attempt - 1]?.receipt : undefined;
        if (receipt?.path !== doc.receipt_ref.path) {
          throw new CooError('MESSAGE_UNKNOWN', `${where}: receipt_ref ${doc.receipt_ref.path} is not a receipt in the ledger`, { where: `${where}:receipt_ref` });
        }
        return;
      }
      case 'blocker':
        if (doc.about_message_id !== null && this.message(doc.about_message_id) === undefined) {
          throw new CooError('MESSAGE_UNKNOWN', `${where}: about_message_id ${doc.about_message_id} does not exist`, { where });
        }
        return;
    }
  }

  /** Causality: the parent exists, the chain extends the parent's, the correlation carries over, and advice never becomes a dispatch. */
  private checkChain(doc: CooMessage, registry: ActorRegistry, where: string): void {
    if (doc.parent_message_id === null) return;
    const parent = this.message(doc.parent_message_id);
    if (parent === undefined) throw new CooError('MESSAGE_UNKNOWN', `${where}: parent ${doc.parent_message_id} does not exist`, { where });
    const expected = [...parent.chain, parent.id];
    if (canonicalJson(expected) !== canonicalJson(doc.causality_chain)) {
      throw new CooError('SCHEMA_INVALID', `${where}: causality_chain must be the parent's chain followed by the parent`, { where: `${where}:causality_chain` });
    }
    if (parent.correlation !== doc.correlation_id) {
      throw new CooError('SCHEMA_INVALID', `${where}: a reply keeps its parent's correlation_id ${parent.correlation}`, { where: `${where}:correlation_id` });
    }
    // Hop limits only tighten down a chain: max_hops counts from the chain's first message, so a reply leaves at most what its parent left.
    if (doc.max_hops > parent.maxHops) {
      throw new CooError('POLICY_LIMIT', `${where}: max_hops ${doc.max_hops} exceeds the ${parent.maxHops} its parent ${parent.id} leaves`, { where: `${where}:max_hops` });
    }
    if (doc.intent === 'ea_dispatch') {
      for (const id of doc.causality_chain) {
        const ancestor = this.message(id);
        if (ancestor === undefined) continue;
        if (classOf(registry, ancestor.target) === 'advisory_agent' || classOf(registry, ancestor.source) === 'advisory_agent') {
          throw new CooError('POLICY_PROPOSAL_TO_DISPATCH', `${where}: a dispatch may not descend from advisory traffic (${id}); AA proposals do not become dispatches in the first slice`, { where });
        }
      }
    }
  }

  private checkLimits(doc: CooMessage, where: string): void {
    const policy = this.policy!.doc;
    const limit = (ok: boolean, what: string): void => {
      if (!ok) throw new CooError('POLICY_LIMIT', `${where}: ${what} (policy v${policy.version})`, { where });
    };
    limit(doc.max_hops <= policy.limits.max_hops, `max_hops ${doc.max_hops} exceeds ${policy.limits.max_hops}`);
    // The runner blocks a message at its hop limit; one it would never run is refused now, not queued.
    limit(!isRunnerIntent(doc.intent) || withinHopLimit(doc), `hop_count ${doc.hop_count} reaches max_hops ${doc.max_hops}: the runner would never run it`);
    limit((toMillis(doc.expires_at) - toMillis(doc.created_at)) / 1000 <= policy.limits.max_ttl_seconds, `time to live exceeds ${policy.limits.max_ttl_seconds} s`);
    limit(doc.budget.max_cost_usd <= policy.budgets.max_cost_usd_per_message, `max_cost_usd ${doc.budget.max_cost_usd} exceeds ${policy.budgets.max_cost_usd_per_message}`);
    limit(doc.budget.max_runtime_seconds <= policy.budgets.max_runtime_seconds, `max_runtime_seconds exceeds ${policy.budgets.max_runtime_seconds}`);
    const pin = doc.intent === 'aa_consult' || doc.intent === 'ea_dispatch' ? doc.context_pin : null;
    if (pin !== null) limit(pin.files.length <= policy.limits.max_context_files, `${pin.files.length} context files exceed ${policy.limits.max_context_files}`);
    this.checkCorrelationBudget(doc, where);
  }

  /**
   * An envelope's correlation_budget_remaining_usd is the writer's claim about the ledger; when it
   * states one, it must be the ledger's own figure at this commit's parent (the policy in force less
   * what the correlation's receipts have cost). Null, or leaving the field out, states none.
   */
  private checkCorrelationBudget(doc: CooMessage, where: string): void {
    const claimed = doc.budget.correlation_budget_remaining_usd;
    if (claimed == null) return;
    const actual = correlationRemainingUsd(this.policy!.doc, this.state.spendByCorrelation.get(doc.correlation_id) ?? 0);
    if (Math.abs(claimed - actual) > USD_TOLERANCE) {
      throw new CooError('POLICY_LIMIT', `${where}: correlation_budget_remaining_usd ${claimed} is not the ${actual} the ledger leaves ${doc.correlation_id} (policy v${this.policy!.doc.version})`, {
        where: `${where}:budget.correlation_budget_remaining_usd`,
      });
    }
  }

  private expectArtifact(ref: string, expectedPath: string, sha256: string, where: string): void {
    if (ref !== expectedPath) throw new CooError('PATH_INVALID', `${where}: reference ${ref} must be ${expectedPath}`, { where });
    this.references.set(ref, sha256);
  }

  /** A consult's prompt and context manifest are added with it, match their hashes, and the manifest matches the pin. */
  private checkConsultArtifacts(doc: Extract<CooMessage, { intent: 'aa_consult' }>, folder: string, where: string): void {
    this.checkTask(doc.payload_ref, doc.payload_hash, folder, where);
    this.checkManifest(doc.context_pin, folder, where);
  }

  /** A message's prompt or task: in its own folder, added with it, hashed, within the policy's size. */
  private checkTask(ref: string, hash: string, folder: string, where: string): void {
    const policy = this.policy!.doc;
    this.expectArtifact(ref, promptPath(folder), hash, where);
    const prompt = this.facts.blobs.get(ref);
    if (prompt !== undefined && prompt.length > policy.limits.max_prompt_bytes) {
      throw new CooError('POLICY_LIMIT', `${where}: prompt of ${prompt.length} bytes exceeds ${policy.limits.max_prompt_bytes}`, { where });
    }
  }

  /** A context pin's manifest: added with the message, hashed, listing exactly the pinned files, within the policy's limits. */
  private checkManifest(pin: NonNullable<EaDispatchMessage['context_pin']>, folder: string, where: string): void {
    const policy = this.policy!.doc;
    this.expectArtifact(pin.context_manifest_ref, manifestPath(folder), pin.context_manifest_hash, where);
    const manifestBytes = this.facts.blobs.get(pin.context_manifest_ref);
    if (manifestBytes === undefined) return;
    const manifest = readDocument('context_manifest.v0', manifestBytes, pin.context_manifest_ref);
    const pinned = pin.files.map((file) => ({ path: file.path, sha256: file.sha256 }));
    const listed = manifest.files.map((file) => ({ path: file.path, sha256: file.sha256 }));
    if (manifest.repo_commit_sha !== pin.repo_commit_sha || canonicalJson(pinned) !== canonicalJson(listed)) {
      throw new CooError('CONTEXT_INVALID', `${where}: context_pin and the context manifest disagree`, { where });
    }
    const bytes = manifest.files.reduce((sum, file) => sum + file.bytes, 0);
    if (bytes > policy.limits.max_context_bytes) {
      throw new CooError('POLICY_LIMIT', `${where}: ${bytes} bytes of context exceed ${policy.limits.max_context_bytes}`, { where });
    }
  }


  private requireActiveCoo(keyId: string, where: string, what: string): void {
    const holder = this.signerHolder(keyId, where);
    const coo = this.registry?.doc.active_coo;
    if (holder.actor !== coo) {
      throw new CooError('NOT_ACTIVE_COO', `${where}: ${what} are written by the active COO ${coo ?? '(none)'}, not ${holder.actor}`, { where });
    }
  }

  private updateMessage(record: MessageRecord, attempts: AttemptRecord[]): void {
    this.messages.set(record.id, { ...record, attempts });
  }

  /**
   * The message an entry under a message folder belongs to: it exists, and the folder is the one its
   * id and created_at name. A claim or receipt for M under another hour's folder would close M's
   * attempt from a path the runner never writes, and split M's files across two folders.
   */
  private messageAt(info: { readonly messageId: string; readonly folder: string }, where: string): MessageRecord {
    const record = this.message(info.messageId);
    if (record === undefined) throw new CooError('MESSAGE_UNKNOWN', `${where}: ${info.messageId} does not exist`, { where });
    const folder = folderOf(record);
    if (info.folder !== folder) throw new CooError('PATH_INVALID', `${where}: the entries of ${record.id} live under ${folder}/`, { where });
    return record;
  }

  /**
   * A claim takes exactly the next attempt of a live message of an intent the runner executes, at
   * or after the time a retry may start, before anything is paid for. A claim the runner would never
   * make would hold the attempt open, and every later receipt for the message would be refused.
   */
  private checkClaim(entry: EntryFile, info: Extract<PathInfo, { kind: 'claim' }>, keyId: string): void {
    const where = entry.path;
    const doc = this.read('claim.v0', entry);
    this.requireActiveCoo(keyId, where, 'claims');
    const record = this.messageAt(info, where);
    if (doc.message_id !== record.id) {
      throw new CooError('MESSAGE_UNKNOWN', `${where}: claim for ${doc.message_id}, which is not the message of this folder`, { where });
    }
    if (!isRunnerIntent(record.intent)) throw new CooError('ATTEMPT_INVALID', `${where}: the runner does not execute ${record.intent} messages; they take no claims`, { where });
    if (record.duplicateOf !== null) throw new CooError('ATTEMPT_INVALID', `${where}: ${record.id} repeats ${record.duplicateOf} and is never run`, { where });
    const next = record.attempts.length + 1;
    const last = record.attempts[record.attempts.length - 1];
    if (info.attempt !== next || doc.attempt_number !== next) {
      throw new CooError('ATTEMPT_INVALID', `${where}: attempt ${doc.attempt_number} where ${next} comes next`, { where });
    }
    if (last !== undefined && (last.receipt === null || (last.receipt.nextAttemptAt === null && !retryApproved(record)))) {
      throw new CooError('ATTEMPT_INVALID', `${where}: attempt ${last.number} is ${last.receipt === null ? 'still open' : 'final'}`, { where });
    }
    if (last?.receipt?.nextAttemptAt === null) {
      const approval = [...this.approvals.values(), ...this.state.approvals.values()].find((item) => item.approves === 'retry' && item.messageId === record.id && item.attempt === next);
      if (approval === undefined || toMillis(doc.claimed_at) >= toMillis(approval.expiresAt)) {
        throw new CooError('ATTEMPT_INVALID', `${where}: the CEO's approval of attempt ${next} ${approval === undefined ? 'is missing' : `expired at ${approval.expiresAt}`}`, { where });
      }
    }
    if (last?.receipt?.nextAttemptAt != null && toMillis(doc.claimed_at) < toMillis(last.receipt.nextAttemptAt)) {
      throw new CooError('ATTEMPT_INVALID', `${where}: claimed at ${doc.claimed_at}, before attempt ${next} may start at ${last.receipt.nextAttemptAt}`, { where });
    }
    const attemptId = attemptIdOf(record, next);
    if (doc.attempt_id !== attemptId) {
      throw new CooError('ATTEMPT_INVALID', `${where}: attempt_id must be ${attemptId}`, { where });
    }
    this.updateMessage(record, [
      ...record.attempts,
      { number: next, attemptId: doc.attempt_id, claim: { path: where, session: doc.transport_session_id, runner: doc.runner_id, at: doc.claimed_at, seq: this.seq }, receipt: null },
    ]);
  }

  /** A receipt sits in its message's own folder, names that message and closes one of its attempts. */
  private checkReceipt(entry: EntryFile, info: Extract<PathInfo, { kind: 'receipt' }>, keyId: string): void {
    const where = entry.path;
    const record = this.messageAt(info, where);
    switch (record.intent) {
      case 'aa_consult':
        this.checkAaReceipt(entry, info, record, keyId);
        return;
      case 'ea_dispatch':
        this.checkEaReceipt(entry, info, record, keyId);
        return;
      default:
        throw new CooError('ATTEMPT_INVALID', `${where}: ${record.intent} messages take no receipts`, { where });
    }
  }

  private checkAaReceipt(entry: EntryFile, info: Extract<PathInfo, { kind: 'receipt' }>, record: MessageRecord, keyId: string): void {
    const where = entry.path;
    const doc = this.read('aa_receipt.v0', entry);
    this.requireActiveCoo(keyId, where, 'receipts');
    const attempt = this.openAttempt(record, info.attempt, doc, where);
    if (doc.prompt_hash !== record.payloadHash || doc.context_manifest_hash !== record.manifestHash) {
      throw new CooError('ARTIFACT_HASH_MISMATCH', `${where}: prompt_hash or context_manifest_hash differs from the envelope's`, { where });
    }
    const refs = [...(doc.output_ref !== null && doc.output_hash !== null ? [{ path: doc.output_ref, sha256: doc.output_hash }] : []), ...doc.attachments];
    this.referenceAttemptArtifacts(record, info.attempt, refs, where);
    this.closeAttempt(record, attempt, doc, where);
  }

  /**
   * An EA receipt closes the claimed attempt, as a consult's does: written by the active COO from
   * the evidence its runner gathered, its attachments inside the attempt's own artifact folder.
   */
  private checkEaReceipt(entry: EntryFile, info: Extract<PathInfo, { kind: 'receipt' }>, record: MessageRecord, keyId: string): void {
    const where = entry.path;
    const doc = this.read('ea_receipt.v0', entry);
    this.requireActiveCoo(keyId, where, 'receipts');
    const attempt = this.openAttempt(record, info.attempt, doc, where);
    this.referenceAttemptArtifacts(record, info.attempt, doc.attachments, where);
    this.closeAttempt(record, attempt, doc, where);
  }

  /** Artifacts a receipt names: each inside its attempt's folder, added by the same commit with the hash named. */
  private referenceAttemptArtifacts(record: MessageRecord, attempt: number, refs: ReadonlyArray<{ readonly path: string; readonly sha256: string }>, where: string): void {
    const prefix = `${folderOf(record)}/artifacts/${String(attempt).padStart(3, '0')}/`;
    for (const ref of refs) {
      if (!ref.path.startsWith(prefix)) throw new CooError('PATH_INVALID', `${where}: ${ref.path} is outside ${prefix}`, { where });
      this.references.set(ref.path, ref.sha256);
    }
  }


  /** The claimed, still open attempt a receipt closes. */
  private openAttempt(record: MessageRecord, number: number, doc: AaReceipt | EaReceipt, where: string): AttemptRecord {
    const attempt = record.attempts[number - 1];
    if (doc.message_id !== record.id || doc.attempt_number !== number || attempt === undefined || attempt.claim === null) {
      throw new CooError('ATTEMPT_INVALID', `${where}: no claimed attempt ${number} of ${record.id} for this receipt`, { where });
    }
    if (attempt.receipt !== null) throw new CooError('ATTEMPT_INVALID', `${where}: attempt ${number} already has a receipt`, { where });
    if (doc.attempt_id !== attempt.attemptId) throw new CooError('ATTEMPT_INVALID', `${where}: attempt_id ${doc.attempt_id} is not the claimed ${attempt.attemptId}`, { where });
    if (doc.target_actor !== record.target) throw new CooError('ATTEMPT_INVALID', `${where}: target_actor differs from the envelope's`, { where });
    if (isTerminal(record)) throw new CooError('ATTEMPT_INVALID', `${where}: ${record.id} is already final`, { where });
    return attempt;
  }

  private closeAttempt(record: MessageRecord, attempt: AttemptRecord, doc: AaReceipt | EaReceipt, where: string, base?: AttemptRecord[]): void {
    const cost = 'actual_cost_usd' in doc ? doc.actual_cost_usd : 0;
    const closed: AttemptRecord = {
      ...attempt,
      receipt: {
        path: where,
        status: doc.status,
        blockers: doc.blockers.map((blocker) => blocker.code),
        costUsd: cost,
        nextAttemptAt: doc.next_attempt_at,
        createdAt: doc.created_at,
        seq: this.seq,
      },
    };
    const attempts = [...(base ?? record.attempts)];
    attempts[attempt.number - 1] = closed;
    this.updateMessage(record, attempts);
    if (cost > 0) this.spend.push({ correlation: record.correlation, day: doc.created_at.slice(0, 10), usd: cost });
  }

  private checkHeartbeat(entry: EntryFile, pathSeq: number, keyId: string): void {
    const where = entry.path;
    const doc = this.read('heartbeat.v0', entry);
    this.requireActiveCoo(keyId, where, 'heartbeats');
    if (heartbeatPath(doc.created_at, pathSeq) !== where) {
      throw new CooError('PATH_INVALID', `${where}: a heartbeat lives under the hour of its created_at, at ${heartbeatPath(doc.created_at, pathSeq)}`, { where });
    }
    if (doc.ledger_seq !== this.seq || pathSeq !== this.seq) {
      throw new CooError('COMMIT_SEQ', `${where}: a heartbeat names the sequence of its own commit (${this.seq})`, { where });
    }
    const ttl = (toMillis(doc.expires_at) - toMillis(doc.created_at)) / 1000;
    const limit = this.policy?.doc.heartbeat.ttl_seconds ?? 0;
    if (ttl <= 0 || ttl > limit) throw new CooError('POLICY_LIMIT', `${where}: a heartbeat lives between 0 and ${limit} seconds`, { where });
    this.heartbeat = { seq: this.seq, expiresAt: doc.expires_at, runner: doc.runner_id };
    this.runnerHeartbeat = { runner: doc.runner_id, seq: this.seq, createdAt: doc.created_at, expiresAt: doc.expires_at };
  }

  /** Every artifact the commit adds is referenced by an entry of the same commit, with its hash; every reference is present. */
  private checkArtifacts(): void {
    for (const change of this.facts.changes) {
      if (change.status !== 'added') continue;
      const info = classifyPath(change.path);
      if (info === null || (info.kind !== 'message_artifact' && info.kind !== 'attempt_artifact')) continue;
      const bytes = this.facts.blobs.get(change.path);
      const expected = this.references.get(change.path);
      if (bytes === undefined) continue;
      if (bytes.length > LIMITS.artifactBytes) {
        this.report(new CooError('POLICY_LIMIT', `${change.path}: artifact exceeds ${LIMITS.artifactBytes} bytes`, { where: change.path }));
      } else if (expected === undefined) {
        // Beside a refused envelope or receipt, an artifact is unreferenced only because that entry was refused: one finding says why.
        if (!this.refusedFolders.has(info.folder)) this.report(new CooError('ARTIFACT_UNREFERENCED', `${change.path} is referenced by no entry of this commit`, { where: change.path }));
      } else if (sha256Ref(bytes) !== expected) {
        this.report(new CooError('ARTIFACT_HASH_MISMATCH', `${change.path} does not match the hash its entry records`, { where: change.path }));
      }
    }
    for (const path of this.references.keys()) {
      if (!this.facts.blobs.has(path)) {
        this.report(new CooError('ARTIFACT_MISSING', `${path} is referenced but not added by this commit`, { where: path }));
      }
    }
  }

  /**
   * What this commit's trust change does to each key's life: a key that leaves force without being
   * revoked is retired here; a key that comes back into force is no longer retired.
   */
  private keyChanges(): Array<[string, KeyRecord['retired']]> {
    const before = keyHolders(this.state);
    const after = this.holders();
    const changes: Array<[string, KeyRecord['retired']]> = [];
    for (const keyId of before.keys()) {
      if (!after.has(keyId) && this.revocation(keyId) === undefined) changes.push([keyId, { seq: this.seq, by: [...this.trustPaths] }]);
    }
    for (const keyId of after.keys()) if (!before.has(keyId) && this.record(keyId)?.retired != null) changes.push([keyId, null]);
    return changes;
  }

  /** The next state. Maps are extended in place: a fold over 100k commits must not copy them per commit. */
  private apply(): LedgerState {
    const state = this.state;
    const retiring = this.trustPaths.length === 0 ? [] : this.keyChanges();
    const everKeys = state.everKeys as Map<string, KeyRecord>;
    for (const [key, value] of this.everKeys) everKeys.set(key, value);
    for (const [key, retired] of retiring) everKeys.set(key, { ...everKeys.get(key)!, retired });
    const revocations = state.revocations as Map<string, Revocation>;
    for (const [key, value] of this.revocations) revocations.set(key, value);
    const messages = state.messages as Map<string, MessageRecord>;
    for (const [id, record] of this.messages) messages.set(id, record);
    const idempotency = state.idempotency as Map<string, string>;
    for (const [slot, id] of this.idempotency) idempotency.set(slot, id);
    const approvals = state.approvals as Map<string, ApprovalRecord>;
    for (const [id, approval] of this.approvals) approvals.set(id, approval);
    if (this.runnerHeartbeat !== null) {
      const { runner, ...beat } = this.runnerHeartbeat;
      keepHeartbeat(state.runnerHeartbeats as Map<string, typeof beat>, runner, beat);
    }
    const byCorrelation = state.spendByCorrelation as Map<string, number>;
    const byDay = state.spendByDay as Map<string, number>;
    for (const item of this.spend) {
      byCorrelation.set(item.correlation, (byCorrelation.get(item.correlation) ?? 0) + item.usd);
      byDay.set(item.day, (byDay.get(item.day) ?? 0) + item.usd);
    }
    return {
      ...state,
      seq: this.seq,
      head: this.facts.oid,
      genesis: state.genesis ?? this.facts.oid,
      root: this.root,
      registry: this.registry,
      policy: this.policy,
      killSwitch: this.killSwitch,
      lastHeartbeat: this.heartbeat,
    };
  }
}
