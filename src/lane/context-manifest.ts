import { parseDocument } from '../schema/documents.js';
import { toYaml } from '../schema/strict-yaml.js';

/** The context manifest of files pinned at `commit` (or snapshotted from the worktree of attempt `snapshotOf`, which started there): what a consult may see, or a dispatch is given. */
export function contextManifestBytes(commit: string, files: ReadonlyArray<{ readonly path: string; readonly sha256: string; readonly bytes: Buffer }>, snapshotOf?: string): Buffer {
  return Buffer.from(
    toYaml(
      parseDocument(
        'context_manifest.v0',
        { schema_version: 'context_manifest.v0', repo_commit_sha: commit, ...(snapshotOf === undefined ? {} : { snapshot_of: snapshotOf }), files: files.map((file) => ({ path: file.path, sha256: file.sha256, bytes: file.bytes.length })) },
        'context manifest',
      ),
    ),
  );
}
