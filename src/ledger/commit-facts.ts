import type { Sshsig } from '../crypto/sshsig.js';
import type { ParsedCommit } from './commit-format.js';

/** One path a commit touches, relative to its parent (for the first commit: every file). */
export interface FileChange {
  readonly path: string;
  readonly status: 'added' | 'modified' | 'deleted';
  readonly mode: string;
}

/** What the I/O shell gathers about a commit; the validator needs nothing else. */
export interface CommitFacts {
  readonly oid: string;
  readonly raw: Buffer;
  readonly changes: readonly FileChange[];
  /** The bytes of every added file, and of every forge file the commit replaced (layout.ts). */
  readonly blobs: ReadonlyMap<string, Buffer>;
  /**
   * Signatures already parsed and verified over exactly these bytes (by the replay's worker
   * threads): `commit` for the commit signature, an entry's path for its detached signature.
   */
  readonly preverified?: ReadonlyMap<string, PreverifiedSignature>;
  /** `raw`, already parsed by the same strict parser (when the replay's preparation parsed it). */
  readonly parsed?: ParsedCommit;
}

/** A signature parsed from a commit's bytes, in the namespace its place requires, and its verdict. */
export interface PreverifiedSignature {
  readonly sig: Sshsig;
  readonly valid: boolean;
}
