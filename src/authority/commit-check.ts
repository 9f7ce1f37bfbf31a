import { CooError, isCooError, toFinding, type Finding } from '../errors.js';
import type { CommitFacts, FileChange } from '../ledger/commit-facts.js';
import { folderOf, type ApprovalRecord, type AttemptRecord, type KeyRecord, type LedgerState, type MessageRecord, type PanelRecord, type Revocation, type TrustFile } from './state.js';
import { activeKeys, keyHolders, keyStatus, signerError, type KeyHolder, type KeyStatus } from './keys.js';
import { keepHeartbeat } from './rules/heartbeat.js';
import { checkNotAhead, writtenAt } from './rules/clock.js';
import { readDocument, type DocumentKind, type DocumentOf } from '../schema/documents.js';
import type { PathInfo } from '../ledger/layout.js';
import type { ActorRegistry } from '../schema/registry.js';
import type { TrustRoot } from '../schema/control.js';

/** The kinds of signed entry a commit may add, each judged by the rules of its kind (authority/rules/). */
export type EntryInfo = Extract<PathInfo, { kind: 'trust' | 'kill_switch' | 'approval' | 'heartbeat' | 'envelope' | 'claim' | 'receipt' }>;

/** One signed entry of a commit, its signature already checked. */
export interface EntryFile<I extends EntryInfo = EntryInfo> {
  readonly path: string;
  readonly info: I;
  readonly bytes: Buffer;
}

/** A panel as the envelopes of one commit write it. */
export interface PanelInCommit {
  readonly name: string;
  readonly members: readonly string[];
  /** The first member's request: every member puts the same question, with the same context, in the same place of a chain. */
  readonly request: { readonly payloadHash: string; readonly manifestHash: string; readonly correlation: string; readonly parent: string | null; readonly source: string };
  /** Member actor -> its message id. */
  readonly seen: Map<string, string>;
  readonly where: string;
}

/**
 * What one pass over one commit works with: the state at the commit's parent, the commit's facts,
 * the running state the pass extends entry by entry (a trust file read first is in force for the
 * entries after it), and the findings. The rules of each entry kind (authority/rules/) read and
 * extend it; validate-commit.ts runs them in one fixed order. Pure.
 */
export class CommitCheck {
  readonly findings: Finding[] = [];
  root: TrustFile<TrustRoot> | null;
  registry: TrustFile<ActorRegistry> | null;
  policy: LedgerState['policy'];
  killSwitch: LedgerState['killSwitch'];
  /** Keys this commit's trust files name, and the revocations its registry adds. */
  readonly everKeys = new Map<string, KeyRecord>();
  readonly revocations = new Map<string, Revocation>();
  /** The trust files this commit adds, for the record of the keys they retire. */
  readonly trustPaths: string[] = [];
  readonly messages = new Map<string, MessageRecord>();
  readonly idempotency = new Map<string, string>();
  readonly spend: Array<{ correlation: string; day: string; usd: number }> = [];
  heartbeat: LedgerState['lastHeartbeat'];
  runnerHeartbeat: { runner: string; seq: number; createdAt: string; expiresAt: string } | null = null;
  readonly approvals = new Map<string, ApprovalRecord>();
  /** Panels this commit writes: the members each declares, and the member messages seen so far (rules/panel.ts). */
  readonly panels = new Map<string, PanelInCommit>();
  /** Fan-out and in-flight counts as this commit extends them (rules/fanout.ts). */
  readonly children = new Map<string, number>();
  readonly openByCorrelation = new Map<string, readonly string[]>();
  /** Artifacts added by this commit and the entry that references each, with the hash it expects. */
  readonly references = new Map<string, string>();
  /** Changes under forge paths, judged by their own rules once the commit's trust files are read. */
  readonly forgeChanges: FileChange[] = [];
  /** The Ledger-Seq this commit takes. */
  readonly seq: number;
  /** Message folders whose envelope or receipt this commit was refused: their artifacts are not reported again as unreferenced. */
  readonly refusedFolders = new Set<string>();
  /** Claims of attempts the runner's gate would stop (rules/claim.ts checkUnrunClaims), with why: each lands only closed, blocked, in this commit. */
  readonly unrunClaims = new Map<string, { readonly attempt: number; readonly refusal: CooError }>();

  constructor(
    readonly state: LedgerState,
    readonly facts: CommitFacts,
    /** The clock of the one who judges this commit as new (the writer, the hook); null when history is judged (coo verify, a replay). */
    readonly clock: Date | null = null,
    /**
     * Whether the commit lands as it is judged (the pre-receive hook, by the server's clock, on a push of one commit): a claim,
     * a dispatch using the CEO's approval, and an ack of or work under a CEO command not yet taken up, is there dated no earlier than the clock less the skew
     * (rules/clock.ts checkNotBehind). A writer dates them by the clock it judges with, so the rule
     * holds there as written.
     */
    readonly landing = false,
  ) {
    this.root = state.root;
    this.registry = state.registry;
    this.policy = state.policy;
    this.killSwitch = state.killSwitch;
    this.heartbeat = state.lastHeartbeat;
    this.seq = state.seq + 1;
  }

  report(error: unknown, path?: string): void {
    if (!isCooError(error)) throw error;
    const finding = toFinding(error, this.facts.oid);
    this.findings.push(path !== undefined && finding.path === undefined ? { ...finding, path } : finding);
  }

  attempt<T>(path: string | undefined, fn: () => T): T | undefined {
    try {
      return fn();
    } catch (error) {
      this.report(error, path);
      return undefined;
    }
  }

  /**
   * Reads a signed entry of this commit. Judged as new, it is dated no later than the judge's clock
   * allows (rules/clock.ts), and reads the same to YAML 1.1 readers (no plain `off` or `1:20`).
   */
  read<K extends DocumentKind>(kind: K, entry: EntryFile): DocumentOf<K> {
    const doc = this.readArtifact(kind, entry.bytes, entry.path);
    const written = this.clock === null ? null : writtenAt(doc);
    if (written !== null) checkNotAhead(this.clock!, written.field, written.at, entry.path);
    return doc;
  }

  /** Reads a YAML artifact this commit adds beside a signed entry (a manifest, a stored proposal): judged as new, it too reads the same to YAML 1.1 readers. */
  readArtifact<K extends DocumentKind>(kind: K, bytes: Uint8Array, path: string): DocumentOf<K> {
    return readDocument(kind, bytes, path, { sameInYaml11: this.clock !== null });
  }

  /** The key holders once this commit's trust files so far are in force. */
  holders(): ReadonlyMap<string, KeyHolder> {
    return activeKeys(this.root?.doc ?? null, this.registry?.doc ?? null, (keyId) => this.record(keyId)?.rootNamed === true);
  }

  record(keyId: string): KeyRecord | undefined {
    return this.everKeys.get(keyId) ?? this.state.everKeys.get(keyId);
  }

  revocation(keyId: string): Revocation | undefined {
    return this.revocations.get(keyId) ?? this.state.revocations.get(keyId);
  }

  /** A key's status with this commit's trust files so far in force: a key it revokes or retires is already out. */
  statusOf(keyId: string): KeyStatus {
    const revocation = this.revocation(keyId);
    const record = this.record(keyId) ?? null;
    if (revocation !== undefined) return { status: 'revoked', actor: record?.actor ?? null, revocation, record };
    if (record !== null && keyHolders(this.state).has(keyId)) return { status: 'retired', actor: record.actor, seq: this.seq, by: this.trustPaths, record };
    return keyStatus(this.state, keyId);
  }

  /** A key id with whose key it is, for messages: `SHA256:... (coo.hermes)`. */
  named(keyId: string): string {
    const holder = this.holders().get(keyId);
    if (holder !== undefined) return `${keyId} (${holder.actor})`;
    const past = this.state.everKeys.get(keyId);
    return `${keyId} (${past === undefined ? 'a key the trust files do not know' : `a retired key of ${past.actor}`})`;
  }

  signerHolder(keyId: string, where: string): KeyHolder {
    const holder = this.holders().get(keyId);
    if (holder === undefined) throw signerError(this.statusOf(keyId), keyId, where);
    return holder;
  }

  requireActiveCoo(keyId: string, where: string, what: string): void {
    const holder = this.signerHolder(keyId, where);
    const coo = this.registry?.doc.active_coo;
    if (holder.actor !== coo) {
      throw new CooError('NOT_ACTIVE_COO', `${where}: ${what} are written by the active COO ${coo ?? '(none)'}, not ${holder.actor}`, { where });
    }
  }

  requireTrust(where: string): { registry: ActorRegistry; policy: NonNullable<LedgerState['policy']>['doc'] } {
    if (this.registry === null || this.policy === null) {
      throw new CooError('TRUST_VERSION', `${where}: the ledger has no registry and policy yet`, { where });
    }
    return { registry: this.registry.doc, policy: this.policy.doc };
  }

  message(id: string): MessageRecord | undefined {
    return this.messages.get(id) ?? this.state.messages.get(id);
  }

  updateMessage(record: MessageRecord, attempts: AttemptRecord[]): void {
    this.messages.set(record.id, { ...record, attempts });
  }

  /**
   * The message an entry under a message folder belongs to: it exists, and the folder is the one its
   * id and created_at name. A claim or receipt for M under another hour's folder would close M's
   * attempt from a path the runner never writes, and split M's files across two folders.
   */
  messageAt(info: { readonly messageId: string; readonly folder: string }, where: string): MessageRecord {
    const record = this.message(info.messageId);
    if (record === undefined) throw new CooError('MESSAGE_UNKNOWN', `${where}: ${info.messageId} does not exist`, { where });
    const folder = folderOf(record);
    if (info.folder !== folder) throw new CooError('PATH_INVALID', `${where}: the entries of ${record.id} live under ${folder}/`, { where });
    return record;
  }

  approval(id: string): ApprovalRecord | undefined {
    return this.approvals.get(id) ?? this.state.approvals.get(id);
  }

  /** An artifact an entry names: at the one path it may have, added by this commit with the hash named. */
  expectArtifact(ref: string, expectedPath: string, sha256: string, where: string): void {
    if (ref !== expectedPath) throw new CooError('PATH_INVALID', `${where}: reference ${ref} must be ${expectedPath}`, { where });
    this.reference(ref, sha256, where);
  }

  /**
   * Records that an entry names the artifact at `path` by `sha256`. A path named twice is named by
   * one hash: the bytes are checked against one expected hash, and a second, other hash for the same
   * path would be a hash the entry states that no bytes were ever checked against (a receipt's
   * output_hash beside an attachment of the same path hashed as the bytes are).
   */
  reference(path: string, sha256: string, where: string): void {
    const named = this.references.get(path);
    if (named !== undefined && named !== sha256) {
      throw new CooError('ARTIFACT_HASH_MISMATCH', `${where}: ${path} is named by two hashes (${named} and ${sha256}); an artifact has one`, { where });
    }
    this.references.set(path, sha256);
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

  /**
   * The spend and open attempts of the ledger as this commit has them so far: its earlier claims
   * hold (a panel's members are claimed in one commit, together), and its earlier receipts have
   * spent. Copies of the spend maps, for a rule that judges a claim on them (rules/claim.ts).
   */
  spendSoFar(): Pick<LedgerState, 'spendByCorrelation' | 'spendByDay' | 'policy' | 'messages'> {
    const spendByCorrelation = new Map(this.state.spendByCorrelation);
    const spendByDay = new Map(this.state.spendByDay);
    addSpend(spendByCorrelation, spendByDay, this.spend);
    const messages = this.messages.size === 0 ? this.state.messages : new Map([...this.state.messages, ...this.messages]);
    return { spendByCorrelation, spendByDay, policy: this.policy, messages };
  }

  /** The next state. Maps are extended in place: a fold over 100k commits must not copy them per commit. */
  apply(): LedgerState {
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
    const panels = state.panels as Map<string, PanelRecord>;
    for (const [id, written] of this.panels) panels.set(id, { name: written.name, messages: written.members.map((member) => written.seen.get(member)!) });
    const children = state.children as Map<string, number>;
    for (const [id, count] of this.children) children.set(id, count);
    const open = state.openByCorrelation as Map<string, readonly string[]>;
    for (const [correlation, ids] of this.openByCorrelation) open.set(correlation, ids);
    if (this.runnerHeartbeat !== null) {
      const { runner, ...beat } = this.runnerHeartbeat;
      keepHeartbeat(state.runnerHeartbeats as Map<string, typeof beat>, runner, beat);
    }
    addSpend(state.spendByCorrelation as Map<string, number>, state.spendByDay as Map<string, number>, this.spend);
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

/** Adds a commit's spend to the maps by correlation and by day. */
function addSpend(byCorrelation: Map<string, number>, byDay: Map<string, number>, spend: ReadonlyArray<{ readonly correlation: string; readonly day: string; readonly usd: number }>): void {
  for (const item of spend) {
    byCorrelation.set(item.correlation, (byCorrelation.get(item.correlation) ?? 0) + item.usd);
    byDay.set(item.day, (byDay.get(item.day) ?? 0) + item.usd);
  }
}
