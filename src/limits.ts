import { CooError } from './errors.js';

/** Every bound on untrusted input, in one place. */
export const LIMITS = {
  /** Largest YAML entry read from a ledger or from a user. */
  yamlBytes: 256 * 1024,
  /** Deepest nesting of YAML collections. */
  yamlDepth: 24,
  /** Largest signature file. */
  sigBytes: 8 * 1024,
  /** Largest artifact (prompt, manifest, answer) stored in the ledger. */
  artifactBytes: 4 * 1024 * 1024,
  /** Largest forge file (a workflow the CEO signed): a check is a page of YAML, not a payload. */
  forgeFileBytes: 64 * 1024,
  /** Largest README a ledger's first commit lays (the one coo init writes is about 12 KiB). */
  readmeBytes: 64 * 1024,
  /** Largest key file (a private or public key) the CLI reads. */
  keyFileBytes: 64 * 1024,
  /** Largest list of ref updates the pre-receive hook reads from git (one line a ref). */
  refUpdatesBytes: 4 * 1024 * 1024,
  /**
   * Largest state cache (`coo/checkpoint.json` in a ledger's git directory) read. A cache only: one
   * over this, or one that is not a regular file, is passed over and the history replayed instead.
   */
  checkpointBytes: 512 * 1024 * 1024,
  /** Largest audit bundle `coo verify-bundle` reads. */
  bundleBytes: 1024 * 1024 * 1024,
  /** Largest raw commit object. */
  commitBytes: 64 * 1024,
  /** Largest tree object. */
  treeBytes: 4 * 1024 * 1024,
  /** Longest path inside the ledger or a pinned repository. */
  pathChars: 512,
  /** Most context files one consult may pin. */
  contextFiles: 200,
  /**
   * Most file patterns one request may name: a pattern that is not a plain path is tested against
   * every file of the commit (up to `workEntries`), so their number bounds the time gathering takes.
   */
  contextPatterns: 1000,
  /** Largest single pinned context file. */
  contextFileBytes: 1024 * 1024,
  /**
   * Largest Oracle session record (`meta.json`) read. It holds the prompt sent, which a policy may
   * allow up to 4 MiB, escaped as JSON: a record over this is refused, never read in part.
   */
  sessionRecordBytes: 16 * 1024 * 1024,
  /** Largest subprocess output captured (stdout or stderr). */
  subprocessOutputBytes: 2 * 1024 * 1024,
  /** Largest MCP message (one line of the stdio transport) `coo mcp` reads; a longer one ends the session with MCP_MESSAGE_TOO_LARGE. */
  mcpMessageBytes: 10 * 1024 * 1024,
  /** Deepest nesting of one MCP message: the tools' arguments nest a few levels; a deeper message is refused unread. */
  mcpMessageDepth: 64,
  /**
   * Most requests one MCP session holds at once, from the line read until the server is done with it
   * (answered, or cancelled and its handler settled); one past it is refused with a coded error.
   */
  mcpRequestsInFlight: 32,
  /** Longest id of an MCP message (a string id's characters): the server holds each id until it is done with the request, so a longer one is refused unread. */
  mcpIdChars: 256,
  /** Longest name an MCP request gives a tool or a resource by (a tool's name, a resource's URI): each of ours is far shorter, and a refusal repeats the name. */
  mcpNameChars: 256,
  /**
   * Largest call or answer of the consult tool a dispatch attempt's agent is given: one line between
   * the relay inside the agent's sandbox and the runner (a question, file names, and the answer back).
   */
  consultToolBytes: 8 * 1024 * 1024,
  /**
   * Most connections the runner's consult socket holds open at once for one attempt. Calls are
   * answered one at a time, and a relay sends them one at a time on one; more are an agent holding the runner's
   * descriptors, which every lane shares. Each one's line is read as it comes, so what the socket
   * holds unread is bounded by this many lines of consultToolBytes.
   */
  consultToolConnections: 8,
  /** How long one git command against a remote (ls-remote, fetch, push, clone) may take before it is killed. */
  remoteGitMs: 120_000,
  /**
   * The most one fetch of a remote's main may bring (the packs it leaves): a remote that sends more
   * is stopped there and what it sent removed. Sixteen pushes' worth of the hook's receive.maxInputSize.
   */
  remoteFetchBytes: 1024 * 1024 * 1024,
  /**
   * How far ahead of a runner's clock another machine's entry may be dated before the runner flags
   * it (a `clock_skew` event). No decision reads such times: leases are measured on the runner's own clock.
   */
  clockSkewSeconds: 300,
  /**
   * The largest task an execution agent is given, as rendered for it (task, acceptance, scope,
   * verification, context list): Codex and Claude Code take it as one argument, and Linux caps
   * one argument at 128 KiB. Checked when the dispatch is written and again before a claim.
   */
  executorPromptBytes: 100 * 1024,
  /**
   * What the runner reads of the work an execution agent left (dispatch/work-walk.ts): the most
   * entries it lists (ignored folders are not entered), the largest file it hashes, and the most
   * bytes it reads in all. Work past a bound is not read in part: the attempt fails with
   * `work_too_large` and nothing is committed.
   */
  workEntries: 200_000,
  workFileBytes: 64 * 1024 * 1024,
  workBytes: 1024 * 1024 * 1024,
  /**
   * Largest `packed-refs` read from a ledger's git folder: a ledger has a handful of refs, a line
   * each; one over this is refused, never read whole.
   */
  packedRefsBytes: 16 * 1024 * 1024,
  /**
   * Largest entry of a runner's journal read back (a receipt the remote could not take, with its
   * artifacts in base64). A dispatch's receipt may carry a hundred verification logs of
   * subprocessOutputBytes each beside its event stream and attachments, so the bound is the longest
   * text V8 makes (about 512 MiB): an entry the runner could write as one JSON text is never refused.
   */
  journalEntryBytes: 512 * 1024 * 1024,
  /** How long a lock may be held before a waiter gives up. */
  lockWaitMs: 30_000,
} as const;

/** The longest time limit a caller may give a command (a day): Node's timers overflow past 2^31 - 1 ms and fire at once. */
export const MAX_TIME_LIMIT_MS = 86_400_000;

/**
 * A time limit in milliseconds a library caller gives (a clone's, a remote's, a pull request's), or
 * undefined when none was given: a number above 0 and at most a day. One of 2^31 ms or more killed
 * the command the moment it started; NaN or Infinity, the same.
 */
export function checkTimeLimitMs(ms: number | undefined, where: string): number | undefined {
  if (ms === undefined) return undefined;
  if (typeof ms !== 'number' || !Number.isFinite(ms) || ms <= 0 || ms > MAX_TIME_LIMIT_MS) {
    throw new CooError('USAGE', `${where}: timeoutMs takes a number of milliseconds above 0 and at most ${MAX_TIME_LIMIT_MS} (a day), got ${String(ms)}`);
  }
  return ms;
}

/** The most a caller may let one fetch bring (1 TiB, as `--max-fetch` allows): past it a number is a typo, not a ledger. */
export const MAX_FETCH_BYTES = 1024 ** 4;

/**
 * The most a library caller lets one fetch bring (a clone's, a remote's `maxFetchBytes`), or undefined
 * when none was given: a whole number of bytes from 1 to MAX_FETCH_BYTES. NaN or Infinity took the bound
 * away (no size is over them), and 0 stopped every fetch.
 */
export function checkFetchBytes(bytes: number | undefined, where: string): number | undefined {
  if (bytes === undefined) return undefined;
  if (typeof bytes !== 'number' || !Number.isSafeInteger(bytes) || bytes < 1 || bytes > MAX_FETCH_BYTES) {
    throw new CooError('USAGE', `${where}: maxFetchBytes takes a whole number of bytes from 1 to ${MAX_FETCH_BYTES} (1 TiB), got ${String(bytes)}`);
  }
  return bytes;
}
