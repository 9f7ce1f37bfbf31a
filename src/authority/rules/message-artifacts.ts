import { CooError } from '../../errors.js';
import { manifestPath, promptPath } from '../../ledger/layout.js';
import type { ContextManifest } from '../../schema/control.js';
import type { EaDispatchMessage } from '../../schema/message.js';
import { canonicalJson } from '../../util/hash.js';
import type { CommitCheck } from '../commit-check.js';

/** The artifacts an envelope adds to its own folder: its prompt or task, and its context manifest. */

/** A message's prompt or task: in its own folder, added with it, hashed, within the policy's size. */
export function checkTask(check: CommitCheck, ref: string, hash: string, folder: string, where: string): void {
  const policy = check.policy!.doc;
  check.expectArtifact(ref, promptPath(folder), hash, where);
  const prompt = check.facts.blobs.get(ref);
  if (prompt !== undefined && prompt.length > policy.limits.max_prompt_bytes) {
    throw new CooError('POLICY_LIMIT', `${where}: prompt of ${prompt.length} bytes exceeds ${policy.limits.max_prompt_bytes}`, { where });
  }
}

/**
 * A context pin's manifest: added with the message, hashed, listing exactly the pinned files (a
 * snapshot's manifest naming the same attempt), within the policy's limits. Its files, when the
 * manifest is in this commit.
 */
export function checkManifest(check: CommitCheck, pin: NonNullable<EaDispatchMessage['context_pin']>, folder: string, where: string): ContextManifest['files'] | null {
  const policy = check.policy!.doc;
  check.expectArtifact(pin.context_manifest_ref, manifestPath(folder), pin.context_manifest_hash, where);
  const manifestBytes = check.facts.blobs.get(pin.context_manifest_ref);
  if (manifestBytes === undefined) return null;
  const manifest = check.readArtifact('context_manifest.v0', manifestBytes, pin.context_manifest_ref);
  const pinned = pin.files.map((file) => ({ path: file.path, sha256: file.sha256 }));
  const listed = manifest.files.map((file) => ({ path: file.path, sha256: file.sha256 }));
  if (manifest.repo_commit_sha !== pin.repo_commit_sha || manifest.snapshot_of !== pin.snapshot_of || canonicalJson(pinned) !== canonicalJson(listed)) {
    throw new CooError('CONTEXT_INVALID', `${where}: context_pin and the context manifest disagree`, { where });
  }
  const bytes = manifest.files.reduce((sum, file) => sum + file.bytes, 0);
  if (bytes > policy.limits.max_context_bytes) {
    throw new CooError('POLICY_LIMIT', `${where}: ${bytes} bytes of context exceed ${policy.limits.max_context_bytes}`, { where });
  }
  return manifest.files;
}
