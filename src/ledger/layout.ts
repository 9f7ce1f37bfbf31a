/**
 * Where everything lives inside a ledger tree. Pure: paths in, facts out.
 *
 *   README.md                                      genesis only
 *   trust/{root,registry,policy}/NNNNNN.yaml(.sig)  numbered versions, each previous + 1
 *   control/kill-switch/NNNNNN.yaml(.sig)
 *   approvals/YYYY-MM/DD/HH/<approval_id>.yaml(.sig) the CEO's approvals, by hour of created_at
 *   heartbeats/YYYY-MM/DD/HH/SSSSSSSSSS.yaml(.sig)  SSSSSSSSSS = Ledger-Seq of the commit
 *   messages/YYYY-MM/DD/HH/<message_id>/           month, day and hour (UTC) of created_at
 *     envelope.yaml(.sig)  prompt.md  context-manifest.yaml  context/<sha256 hex>  proposal.yaml
 *     claims/NNN.yaml(.sig)  receipts/NNN.yaml(.sig)  artifacts/NNN/<name>
 *   .github/workflows/<name>.yml(.sig)             a forge's check, signed by the CEO (forge files)
 *
 * Every file is write-once, but for forge files: a forge runs the workflow file of the commit it
 * was pushed, so the CEO may replace one (never remove it), each version with its signature. A commit rewrites, and a replay reads, every folder on its paths, so
 * each folder stays small whatever the size of the ledger: one entry a month, at most 31 days, at
 * most 24 hours, one hour's messages (docs/design.md has what a whole day's folder cost).
 */

import type { ErrorCode } from '../errors.js';
import { LIMITS } from '../limits.js';

export type TrustRole = 'root' | 'registry' | 'policy';

export type PathInfo =
  | { readonly kind: 'readme' }
  | { readonly kind: 'trust'; readonly role: TrustRole; readonly version: number }
  | { readonly kind: 'kill_switch'; readonly version: number }
  | { readonly kind: 'approval'; readonly approvalId: string; readonly hour: string }
  | { readonly kind: 'heartbeat'; readonly hour: string; readonly seq: number }
  | { readonly kind: 'envelope'; readonly messageId: string; readonly hour: string; readonly folder: string }
  | { readonly kind: 'claim'; readonly messageId: string; readonly folder: string; readonly attempt: number }
  | { readonly kind: 'receipt'; readonly messageId: string; readonly folder: string; readonly attempt: number }
  /**
   * Beside an envelope: its prompt or task, its context manifest, a snapshot pin's files by their
   * content's sha256 (`context/<hex>`), an adopted proposal's bytes (`proposal.yaml`).
   */
  | { readonly kind: 'message_artifact'; readonly messageId: string; readonly folder: string; readonly name: MessageArtifactName }
  | { readonly kind: 'attempt_artifact'; readonly messageId: string; readonly folder: string; readonly attempt: number; readonly name: string }
  | { readonly kind: 'forge_file'; readonly name: string }
  | { readonly kind: 'signature'; readonly of: string };

export type MessageArtifactName = 'prompt.md' | 'context-manifest.yaml' | 'proposal.yaml' | `context/${string}`;

export type EntryKind = 'trust' | 'kill_switch' | 'approval' | 'heartbeat' | 'envelope' | 'claim' | 'receipt';

const SIX = (n: number): string => String(n).padStart(6, '0');
const THREE = (n: number): string => String(n).padStart(3, '0');

export const README_PATH = 'README.md';
export const SIG_SUFFIX = '.sig';

/** `YYYY-MM/DD/HH` of an entry timestamp (`YYYY-MM-DDTHH:MM:SSZ`, UTC). */
function hourPath(timestamp: string): string {
  return `${timestamp.slice(0, 7)}/${timestamp.slice(8, 10)}/${timestamp.slice(11, 13)}`;
}

export function trustPath(role: TrustRole, version: number): string {
  return `trust/${role}/${SIX(version)}.yaml`;
}

export function killSwitchPath(version: number): string {
  return `control/kill-switch/${SIX(version)}.yaml`;
}

export function approvalPath(approvalId: string, createdAt: string): string {
  return `approvals/${hourPath(createdAt)}/${approvalId}.yaml`;
}

export function heartbeatPath(createdAt: string, seq: number): string {
  return `heartbeats/${hourPath(createdAt)}/${String(seq).padStart(10, '0')}.yaml`;
}

export function messageFolder(messageId: string, createdAt: string): string {
  return `messages/${hourPath(createdAt)}/${messageId}`;
}

export function envelopePath(folder: string): string {
  return `${folder}/envelope.yaml`;
}

export function promptPath(folder: string): string {
  return `${folder}/prompt.md`;
}

export function manifestPath(folder: string): string {
  return `${folder}/context-manifest.yaml`;
}

/** Where a snapshot pin keeps one file's bytes: named by their sha256, so one name can hold only those bytes. */
export function snapshotFilePath(folder: string, sha256: string): string {
  return `${folder}/context/${sha256.replace(/^sha256:/, '')}`;
}

/** An adopted proposal's bytes, beside the dispatch that adopted it. */
export function proposalPath(folder: string): string {
  return `${folder}/proposal.yaml`;
}

export function claimPath(folder: string, attempt: number): string {
  return `${folder}/claims/${THREE(attempt)}.yaml`;
}

export function receiptPath(folder: string, attempt: number): string {
  return `${folder}/receipts/${THREE(attempt)}.yaml`;
}

export function attemptArtifactPath(folder: string, attempt: number, name: string): string {
  return `${folder}/artifacts/${THREE(attempt)}/${name}`;
}

/** Where a forge runs a workflow from: GitHub Actions reads `.github/workflows/` of the pushed commit. */
export function forgeWorkflowPath(name: string): string {
  return `.github/workflows/${name}`;
}

export function sigPath(path: string): string {
  return `${path}${SIG_SUFFIX}`;
}

const HOUR = '(\\d{4}-\\d{2})/(\\d{2})/(\\d{2})';
const MESSAGE_ID = '(msg_[0-9A-HJKMNP-TV-Z]{26})';
const RE = {
  trust: /^trust\/(root|registry|policy)\/(\d{6})\.yaml$/,
  killSwitch: /^control\/kill-switch\/(\d{6})\.yaml$/,
  heartbeat: new RegExp(`^heartbeats/${HOUR}/(\\d{10})\\.yaml$`),
  approval: new RegExp(`^approvals/${HOUR}/(apr_[0-9A-HJKMNP-TV-Z]{26})\\.yaml$`),
  message: new RegExp(`^(messages/${HOUR}/${MESSAGE_ID})/(.+)$`),
  claim: /^claims\/(\d{3})\.yaml$/,
  receipt: /^receipts\/(\d{3})\.yaml$/,
  artifact: /^artifacts\/(\d{3})\/([a-z0-9][a-z0-9._-]{0,63})$/,
  snapshot: /^context\/[0-9a-f]{64}$/,
  forge: /^\.github\/workflows\/([a-z0-9][a-z0-9._-]{0,63}\.ya?ml)$/,
};

function positive(text: string): number | null {
  const n = Number(text);
  return Number.isSafeInteger(n) && n > 0 ? n : null;
}

/** What a ledger path is, or null when the layout has no place for it. */
export function classifyPath(path: string): PathInfo | null {
  if (path.endsWith(SIG_SUFFIX)) {
    const of = path.slice(0, -SIG_SUFFIX.length);
    const target = classifyPath(of);
    return target !== null && isSigned(target) ? { kind: 'signature', of } : null;
  }
  if (path === README_PATH) return { kind: 'readme' };
  const forge = RE.forge.exec(path);
  if (forge !== null) return { kind: 'forge_file', name: forge[1]! };
  let m = RE.trust.exec(path);
  if (m !== null) {
    const version = positive(m[2]!);
    return version === null ? null : { kind: 'trust', role: m[1] as TrustRole, version };
  }
  m = RE.killSwitch.exec(path);
  if (m !== null) {
    const version = positive(m[1]!);
    return version === null ? null : { kind: 'kill_switch', version };
  }
  m = RE.heartbeat.exec(path);
  if (m !== null) {
    const seq = positive(m[4]!);
    return seq === null ? null : { kind: 'heartbeat', hour: `${m[1]}-${m[2]}T${m[3]}`, seq };
  }
  m = RE.approval.exec(path);
  if (m !== null) return { kind: 'approval', approvalId: m[4]!, hour: `${m[1]}-${m[2]}T${m[3]}` };
  m = RE.message.exec(path);
  if (m === null) return null;
  const folder = m[1]!;
  const messageId = m[5]!;
  const rest = m[6]!;
  if (rest === 'envelope.yaml') return { kind: 'envelope', messageId, hour: `${m[2]}-${m[3]}T${m[4]}`, folder };
  if (rest === 'prompt.md' || rest === 'context-manifest.yaml' || rest === 'proposal.yaml') return { kind: 'message_artifact', messageId, folder, name: rest };
  if (RE.snapshot.test(rest)) return { kind: 'message_artifact', messageId, folder, name: rest as `context/${string}` };
  let r = RE.claim.exec(rest);
  if (r !== null) {
    const attempt = positive(r[1]!);
    return attempt === null ? null : { kind: 'claim', messageId, folder, attempt };
  }
  r = RE.receipt.exec(rest);
  if (r !== null) {
    const attempt = positive(r[1]!);
    return attempt === null ? null : { kind: 'receipt', messageId, folder, attempt };
  }
  r = RE.artifact.exec(rest);
  if (r !== null) {
    const attempt = positive(r[1]!);
    return attempt === null ? null : { kind: 'attempt_artifact', messageId, folder, attempt, name: r[2]! };
  }
  return null;
}

/** A forge file or its signature: the paths a trust-root authority may replace (authority/rules/forge.ts). */
export function isForgePath(path: string): boolean {
  const info = classifyPath(path);
  return info !== null && (info.kind === 'forge_file' || (info.kind === 'signature' && classifyPath(info.of)?.kind === 'forge_file'));
}

/** The largest file a place in the layout holds, what the file is, and the code that refuses a larger one. */
export interface BlobBound {
  readonly bytes: number;
  readonly what: string;
  readonly code: ErrorCode;
}

/**
 * The bound on the file at `path`, or null when the layout has no place for it (the validator
 * refuses such a path without reading it). Every read of a ledger file checks the object's size
 * against this before reading its bytes (history.ts gatherFacts, Ledger.readFile), with the bound
 * and code the validator applies to the same file when it is written.
 */
export function blobBound(path: string): BlobBound | null {
  const info = classifyPath(path);
  if (info === null) return null;
  switch (info.kind) {
    case 'readme':
      return { bytes: LIMITS.readmeBytes, what: 'the README', code: 'POLICY_LIMIT' };
    case 'signature':
      return { bytes: LIMITS.sigBytes, what: 'a signature file', code: 'SIG_MALFORMED' };
    case 'forge_file':
      return { bytes: LIMITS.forgeFileBytes, what: 'a forge file', code: 'POLICY_LIMIT' };
    case 'message_artifact':
    case 'attempt_artifact':
      return { bytes: LIMITS.artifactBytes, what: 'an artifact', code: 'POLICY_LIMIT' };
    default:
      return { bytes: LIMITS.yamlBytes, what: 'a YAML entry', code: 'YAML_TOO_LARGE' };
  }
}

/** Files that carry a detached signature: entries, and forge files (which are not YAML documents of ours). */
export function isSigned(info: PathInfo): boolean {
  return isEntry(info) || info.kind === 'forge_file';
}

/**
 * Why the layout has no place for `path` (classifyPath gave null): the rule it breaks, in words a
 * person writing files by hand can act on.
 */
export function explainPath(path: string): string {
  const parts = path.split('/');
  const [top] = parts;
  if (top === 'messages') {
    if (parts.length < 6 || !/^\d{4}-\d{2}$/.test(parts[1]!) || !/^\d{2}$/.test(parts[2]!) || !/^\d{2}$/.test(parts[3]!)) {
      return "a message's files live in messages/YYYY-MM/DD/HH/<message_id>/, the month, day and hour (UTC) of the envelope's created_at";
    }
    const id = parts[4]!;
    if (!new RegExp(`^${MESSAGE_ID}$`).test(id)) {
      return `${JSON.stringify(id)} is not a message id: msg_ and then 26 characters of Crockford's base32 (0-9 and A-Z without I, L, O and U), as a ULID is written, e.g. msg_01JZ3K8W6QF4S2V9X0B1C5D7EA`;
    }
    return 'a message folder holds envelope.yaml, prompt.md, context-manifest.yaml, context/<64 hex digits of a sha256>, proposal.yaml, claims/NNN.yaml, receipts/NNN.yaml, ack.yaml and artifacts/NNN/<name> (lower-case letters, digits, ".", "_" and "-"), each entry .yaml with its .sig';
  }
  if (top === 'trust') return 'trust files are trust/root|registry|policy/NNNNNN.yaml, six digits from 000001';
  if (top === 'control') return 'the kill switch is control/kill-switch/NNNNNN.yaml, six digits from 000001';
  if (top === 'heartbeats') return 'heartbeats are heartbeats/YYYY-MM/DD/HH/SSSSSSSSSS.yaml, ten digits of the Ledger-Seq of their commit';
  if (top === 'approvals') return 'approvals are approvals/YYYY-MM/DD/HH/apr_<26 characters of base32>.yaml';
  if (top === '.github') return 'under .github only workflows/<name>.yml or .yaml (lower-case letters, digits, ".", "_" and "-"), each with its .sig, written by a trust-root authority';
  if (path.endsWith(SIG_SUFFIX)) return 'a .sig file signs an entry (a .yaml file with a place of its own) and sits beside it';
  return 'the ledger holds README.md (laid by its first commit) and the folders trust/, control/, approvals/, heartbeats/, messages/ and .github/workflows/, nothing else';
}

export function isEntry(info: PathInfo): info is Extract<PathInfo, { kind: EntryKind }> {
  return (
    info.kind === 'trust' ||
    info.kind === 'kill_switch' ||
    info.kind === 'approval' ||
    info.kind === 'heartbeat' ||
    info.kind === 'envelope' ||
    info.kind === 'claim' ||
    info.kind === 'receipt'
  );
}
