/**
 * The closed set of error codes. Every failure the library reports carries one of these,
 * and the CLI maps each code's class to an exit status in one place (cli/coo.ts).
 *
 * Classes: `usage` (the caller asked for something malformed, exit 2), `rejected` (input was
 * read and refused: verification, authority, policy; exit 3), `error` (anything else, exit 1).
 */
const CODES = {
  // usage
  USAGE: 'usage',
  CONFIG_INVALID: 'usage',
  /** The runner's own setup cannot run any lane (its repository, its key): found at start, nothing claimed. */
  RUNNER_CONFIG: 'usage',
  /**
   * A remote's hook refused a write for being dated ahead of the server's clock, though the writer's
   * own clock took it: the writer's clock runs ahead of the remote's (or the remote's behind), and
   * everything it dates is refused there until one is set right.
   */
  CLOCK_AHEAD: 'usage',
  /**
   * A remote's hook refused a claim (or a dispatch using the CEO's approval) for being dated behind the
   * server's clock: the writer's clock runs behind the remote's (or the remote's ahead), and every such
   * entry it dates is refused there until one is set right (authority/rules/clock.ts checkNotBehind).
   */
  CLOCK_BEHIND: 'usage',
  /** No OS sandbox (bubblewrap) where one is required: no lane runs unless --isolation none is chosen. */
  SANDBOX_UNAVAILABLE: 'usage',
  /** The path given as the ledger names no ledger (a typo, a work tree, an empty repository): a mistake in the command line, in every verb. */
  LEDGER_NOT_FOUND: 'usage',
  /** Where coo init or coo clone was to make a ledger, something is already there: as keygen refuses to overwrite a key. */
  LEDGER_EXISTS: 'usage',
  // plain errors
  IO_ERROR: 'error',
  NOT_FOUND: 'error',
  GIT_FAILED: 'error',
  LEDGER_LOCKED: 'error',
  LEDGER_CONFLICT: 'error',
  // remotes: a clone publishing through its origin (src/remote)
  REMOTE_UNREACHABLE: 'error',
  REMOTE_CONFLICT: 'error',
  REMOTE_UNPUBLISHED: 'error',
  /** A one-shot runner's pass kept a paid result whose receipt the ledger refused: it waits for the operator, unlanded. */
  RESULT_KEPT: 'error',
  INTERNAL: 'error',
  // untrusted YAML
  YAML_TOO_LARGE: 'rejected',
  YAML_INVALID_UTF8: 'rejected',
  YAML_SYNTAX: 'rejected',
  YAML_MULTI_DOCUMENT: 'rejected',
  YAML_DUPLICATE_KEY: 'rejected',
  YAML_ALIAS: 'rejected',
  YAML_TAG: 'rejected',
  YAML_DEPTH: 'rejected',
  YAML_NON_JSON: 'rejected',
  // schemas
  SCHEMA_INVALID: 'rejected',
  SCHEMA_UNKNOWN: 'rejected',
  // keys and signatures
  KEY_MALFORMED: 'rejected',
  KEY_UNSUPPORTED: 'rejected',
  /** A trust file that gives a revoked key a role again, or drops its revocation: revocation is final. */
  KEY_REVOKED: 'rejected',
  SIG_MISSING: 'rejected',
  SIG_MALFORMED: 'rejected',
  SIG_NONCANONICAL: 'rejected',
  SIG_NAMESPACE: 'rejected',
  SIG_INVALID: 'rejected',
  // commits and trees
  COMMIT_MALFORMED: 'rejected',
  COMMIT_UNSIGNED: 'rejected',
  COMMIT_MERGE: 'rejected',
  COMMIT_SEQ: 'rejected',
  TREE_MALFORMED: 'rejected',
  HISTORY_ROLLBACK: 'rejected',
  HISTORY_FORK: 'rejected',
  REF_FORBIDDEN: 'rejected',
  REMOTE_UNVERIFIED: 'rejected',
  REMOTE_REJECTED: 'rejected',
  /** A remote that answers but has no main: a finding about it, never taken for a network failure. */
  REMOTE_MAIN_MISSING: 'rejected',
  // authority and trust
  SIGNER_UNKNOWN: 'rejected',
  SIGNER_RETIRED: 'rejected',
  SIGNER_REVOKED: 'rejected',
  SIGNER_WRONG_ACTOR: 'rejected',
  SIGNER_MISMATCH: 'rejected',
  ACTOR_UNKNOWN: 'rejected',
  NOT_ACTIVE_COO: 'rejected',
  TRUST_VERSION: 'rejected',
  TRUST_AUTHORITY: 'rejected',
  TRUST_ROOT_MISMATCH: 'rejected',
  /** A trust change that would leave the root and the registry disagreeing about who holds a key. */
  TRUST_CONFLICT: 'rejected',
  // policy
  POLICY_EDGE_FORBIDDEN: 'rejected',
  POLICY_EDGE_NOT_ALLOWED: 'rejected',
  POLICY_INTENT_NOT_ALLOWED: 'rejected',
  POLICY_PROPOSAL_TO_DISPATCH: 'rejected',
  /** A dispatch the policy's edge gives to the CEO, written without an approval. */
  APPROVAL_REQUIRED: 'rejected',
  /** An approval that is missing, of another request, used, or expired. */
  APPROVAL_INVALID: 'rejected',
  /** An approval of what the CEO rejected (a request hash, a dispatch's next attempt): a rejection is final. */
  APPROVAL_REJECTED: 'rejected',
  POLICY_LIMIT: 'rejected',
  /** A consult fanned out to several advisory agents where no policy panel allows it. */
  POLICY_PANEL_NOT_ALLOWED: 'rejected',
  /** A panel's member messages that do not put one question, or that were not written together. */
  PANEL_INVALID: 'rejected',
  /** A consult an execution agent asks about files outside its dispatch's scope. */
  SCOPE_VIOLATION: 'rejected',
  /** A consult that would cost more than its dispatch (or the command it serves) has left. */
  BUDGET_EXCEEDED: 'rejected',
  /**
   * An ack of a CEO command, or an envelope whose parent is one, dated after the command's expires_at
   * when the COO never took it up (acknowledged it, or sent work under it) in time: the command lapsed,
   * and with it the budget it granted; the CEO sends it again.
   */
  COMMAND_EXPIRED: 'rejected',
  KILL_SWITCH: 'rejected',
  // ledger layout and content
  PATH_INVALID: 'rejected',
  WRITE_ONCE: 'rejected',
  ENTRY_UNPAIRED: 'rejected',
  ARTIFACT_UNREFERENCED: 'rejected',
  ARTIFACT_HASH_MISMATCH: 'rejected',
  ARTIFACT_MISSING: 'rejected',
  MESSAGE_DUPLICATE: 'rejected',
  MESSAGE_UNKNOWN: 'rejected',
  ATTEMPT_INVALID: 'rejected',
  IDEMPOTENCY_CONFLICT: 'rejected',
  HEARTBEAT_EXPIRED: 'rejected',
  /** A claim dated earlier than an entry the ledger holds before it and it builds on, by more than the skew allowed between machines: its writer's clock is off. */
  CLOCK_SKEW: 'rejected',
  // portable evidence
  BUNDLE_INVALID: 'rejected',
  /** Evidence from another ledger than the one pinned (its genesis commit). */
  LEDGER_MISMATCH: 'rejected',
  // the MCP shell: a client message over the transport's limit, or one it cannot take (mcp/wire.ts)
  MCP_MESSAGE_TOO_LARGE: 'rejected',
  MCP_MESSAGE_INVALID: 'rejected',
  // consult lane
  CONTEXT_INVALID: 'rejected',
  ORACLE_CONFIG: 'usage',
  ORACLE_FAILED: 'error',
  GITHUB_FAILED: 'error',
  // dispatch lane
  EXECUTOR_CONFIG: 'usage',
  PR_REFUSED: 'rejected',
  PUSH_CONFLICT: 'rejected',
  PUSH_FAILED: 'error',
} as const;

export type ErrorCode = keyof typeof CODES;
export type ErrorClass = (typeof CODES)[ErrorCode];

export const ERROR_CODES = Object.keys(CODES) as ErrorCode[];

export function errorClassOf(code: ErrorCode): ErrorClass {
  return CODES[code];
}

export interface CooErrorOptions {
  /** Where the problem is: a file, a ledger path, or `file:path.inside.document`. */
  readonly where?: string;
  readonly cause?: unknown;
  /** Every finding behind a rejection, when there is more than one thing wrong. */
  readonly findings?: readonly Finding[];
}

/** Every error the library throws on purpose. `code` is stable; `message` is one line for humans. */
export class CooError extends Error {
  readonly code: ErrorCode;
  readonly where: string | undefined;
  readonly findings: readonly Finding[];

  constructor(code: ErrorCode, message: string, options: CooErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'CooError';
    this.code = code;
    this.where = options.where;
    this.findings = options.findings ?? [];
  }
}

export function isCooError(value: unknown): value is CooError {
  return value instanceof CooError;
}

/** One finding of a read-side check: stable code, where it is, what it is. */
export interface Finding {
  readonly code: ErrorCode;
  readonly message: string;
  readonly commit?: string;
  readonly path?: string;
}

export function toFinding(error: CooError, commit?: string): Finding {
  return {
    code: error.code,
    message: error.message,
    ...(commit === undefined ? {} : { commit }),
    ...(error.where === undefined ? {} : { path: error.where }),
  };
}
