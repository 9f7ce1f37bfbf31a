import type { Repository } from '../util/bubblewrap.js';
import { MIN_SECRET_CHARS, type Secret } from '../util/scrub.js';
import { urlSecrets } from '../util/display-url.js';
import type { AttemptSpend } from './attempt-spend.js';
import { boundedUsd } from '../schema/common.js';

/**
 * The execution-agent port: one run of an EA in one worktree, and the facts its event stream
 * states. Facts are what the agent says; the COO's own evidence (evidence.ts) is what it checks.
 * The adapters (codex.ts, claude-code.ts) are the only places the lane starts an EA.
 */

export type ExecutorName = 'codex' | 'claude_code';

export interface CommandFact {
  readonly command: string;
  /** Null when the stream never gave one (the command was cut off or declined). */
  readonly exitCode: number | null;
}

export interface FileChangeFact {
  /** As the agent named it: absolute or relative; the COO never trusts it for evidence. */
  readonly path: string;
  readonly kind: string;
}

/**
 * A refusal the executor reports in a structured field, never found by matching text: Codex's
 * `declined` command status, Claude Code's `permission_denials` list.
 */
export interface PermissionDenial {
  readonly code: 'command_declined' | 'tool_denied';
  readonly tool: string;
}

export interface StreamUsage {
  readonly inputTokens: number;
  readonly cachedInputTokens: number;
  readonly outputTokens: number;
  readonly reasoningTokens: number;
  /** The executor's own cost figure, when it reports one (Claude Code's `total_cost_usd`). */
  readonly costUsd: number | null;
}

/** What one event stream states, read by a pure parser (codex-events.ts, claude-events.ts). */
export interface StreamFacts {
  readonly executor: ExecutorName;
  /** The executor's own session id (Codex's thread id, Claude Code's session id). */
  readonly sessionId: string | null;
  readonly commands: readonly CommandFact[];
  readonly fileChanges: readonly FileChangeFact[];
  readonly denials: readonly PermissionDenial[];
  /** The terminal event's usage (never below observedUsage); null when no terminal event stated one. */
  readonly usage: StreamUsage | null;
  /**
   * What the stream's own model calls state they used (Claude Code's messages, each Codex turn),
   * wherever they stand in it: a floor under the terminal event's figure, and under what a run that
   * stated none is charged.
   */
  readonly observedUsage: StreamUsage | null;
  /**
   * Some figure of usage was stated as no honest stream states one (a string, a negative, a
   * fraction of a token, past the largest safe integer, a key stated twice): the run is charged as
   * one that stated none is, never below what its figures can be read as.
   */
  readonly implausibleUsage: boolean;
  readonly finalMessage: string | null;
  /** Error messages the stream carried, as facts to show; decisions never read their text. */
  readonly errors: readonly string[];
  /** The first terminal event: a completed turn, a failed one, or none at all. */
  readonly terminal: 'completed' | 'failed' | null;
  /** Events after the first terminal one: recorded, never applied; a run with any is not clean (outcome.ts). */
  readonly afterTerminal: number;
  /** Lines that are not JSON objects of a known shape. */
  readonly malformedLines: number;
  /** The last line had no newline: the stream was cut off mid-event. */
  readonly truncated: boolean;
}

export interface ExecutorRequest {
  /** The attempt this run belongs to; the adapter echoes it in the run so a late or stray result can be told apart. */
  readonly attemptId: string;
  /** The worktree the EA may write; the only writable place it gets. */
  readonly worktree: string;
  /** A fresh folder for the EA's HOME, config home and temporary files, outside the worktree. */
  readonly scratch: string;
  readonly prompt: string;
  readonly timeoutSeconds: number;
  /** Kills the run once the stream's usage costs more than this (when the executor reports usage as it goes). */
  readonly maxCostUsd?: number;
  /** The attempt's live spend, when its agent may consult: the run reports its cost to it and is stopped at what its consults leave. */
  readonly spend?: AttemptSpend;
  /** Where the executor's process group id is written, so that a runner after a crash can end it. */
  readonly pidFile?: string;
  /** The agent's consult tool for this attempt, when it has one (dispatch/consult-bridge.ts). */
  readonly consultTool?: ConsultToolSpec;
  /** The repository the worktree is of: under bubblewrap its work tree is hidden, its git folder read-only (util/bubblewrap.ts). */
  readonly repository?: Repository;
}

/**
 * The MCP server an executor starts for its agent and names in its own configuration (Codex's
 * `mcp_servers`, Claude Code's `--mcp-config`): the relay, which reaches the runner through the
 * socket in `socketDir` (bound read-only into the agent's sandbox) and holds nothing itself.
 */
export interface ConsultToolSpec {
  /** The MCP server's name: its tool is `mcp__<server>__consult` to the agent. */
  readonly server: string;
  readonly command: readonly string[];
  readonly socketDir: string;
  /** How long one call may take: an answer runs within the attempt's time box. */
  readonly timeoutSeconds: number;
}

export interface ExecutorRun {
  readonly executor: ExecutorName;
  readonly attemptId: string;
  readonly exitCode: number | null;
  readonly signal: string | null;
  /** Why our own code killed the process group, if it did. */
  readonly killedBy: 'timeout' | 'cost' | 'stream_bound' | null;
  readonly elapsedMs: number;
  /** The raw event stream (stdout), bounded; keep it as a hashed artifact. */
  readonly stream: Buffer;
  /** True when the stream passed the bound: the run was killed and `stream` holds only its first bytes. */
  readonly streamOverflow: boolean;
  readonly stderrTail: string;
  /** True when stderr was longer than its tail: `stderrTail` holds only its last lines. */
  readonly stderrCut?: boolean;
  readonly facts: StreamFacts;
  /** True when bubblewrap wrapped the executor. */
  readonly isolated: boolean;
  /** False when the process could not be started: it ran nothing and spent nothing. */
  readonly started: boolean;
  /** Why nothing ran when its sandbox never stood (dispatch/process.ts): the receipt says so. */
  readonly notStarted?: string;
}

export interface Executor {
  readonly name: ExecutorName;
  readonly isolated: boolean;
  /** Throws EXECUTOR_CONFIG when the command is missing or not executable, or the provider key is not set. */
  check(): void;
  /** The model base URL the executor is given (`--ea-base-url`), or null for its provider's own: one on this machine is probed at start. */
  endpoint?(): string | null;
  /** The secret values a run hands the executor (its provider key), so its output can be scrubbed of them (util/scrub.ts). */
  handedSecrets(): readonly Secret[];
  run(request: ExecutorRequest): Promise<ExecutorRun>;
}

type TokenPrice = { readonly inputPerMillion: number; readonly outputPerMillion: number };


/**
 * The least a stream's tokens can have cost at the policy's price: uncached input and output
 * (reasoning included). Cache reads are left out (providers price them lower) and cache writes are
 * counted as input (they cost more), so no honest figure is below it.
 */
export function floorUsd(usage: StreamUsage, price: TokenPrice | null): number {
  if (price === null) return 0;
  const uncached = Math.max(0, usage.inputTokens - usage.cachedInputTokens);
  return boundedUsd((uncached * price.inputPerMillion + (usage.outputTokens + usage.reasoningTokens) * price.outputPerMillion) / 1_000_000);
}

/** The least a stream's stated usage cost: its own figure, never below the floor its tokens give. */
export function floorCostUsd(usage: StreamUsage, price: TokenPrice | null): number {
  return Math.max(usage.costUsd ?? 0, floorUsd(usage, price));
}

/** Whether a stream states any usage at all: tokens or a cost. */
const reportsUsage = (usage: StreamUsage | null): usage is StreamUsage =>
  usage !== null && (usage.inputTokens + usage.outputTokens + usage.reasoningTokens > 0 || (usage.costUsd ?? 0) > 0);

/**
 * Cost of a stream's usage at a price per million tokens: the executor's own figure, never below
 * the floor its tokens give (floorUsd); without a figure, every token at the policy's price.
 */
export function costOf(usage: StreamUsage | null, price: TokenPrice | null): number {
  if (usage === null) return 0;
  if (usage.costUsd !== null) return boundedUsd(Math.max(usage.costUsd, floorUsd(usage, price)));
  if (price === null) return 0;
  return boundedUsd((usage.inputTokens * price.inputPerMillion + (usage.outputTokens + usage.reasoningTokens) * price.outputPerMillion) / 1_000_000);
}

export interface DispatchCost {
  /** The usage the receipt records: null when the stream stated none. */
  readonly usage: StreamUsage | null;
  readonly costUsd: number;
  readonly warning: 'usage_implausible' | 'usage_unreported' | null;
}

/**
 * What one run is charged. A stated cost below the floor its tokens give is raised to the floor
 * (`usage_implausible`); its tokens are never fewer than its own model calls state. A run whose
 * process started and stated no usage spent what the runner cannot know: it is charged all it was
 * allowed to spend, or the floor of what its model calls state when that is more (`usage_unreported`).
 * A run that stated a figure of its usage as no honest stream does (StreamState.figure) is charged
 * as one that stated nothing is, or what its figures come to when that is more (`usage_implausible`).
 * A run that never started cost nothing.
 */
export function accountRun(run: Pick<ExecutorRun, 'started' | 'facts'>, price: TokenPrice | null, allowanceUsd: number): DispatchCost {
  const usage = run.facts.usage;
  // Nor below what its own model calls state, when they state more than it was allowed.
  const observed = run.facts.observedUsage === null ? 0 : floorCostUsd(run.facts.observedUsage, price);
  if (run.facts.implausibleUsage && run.started) {
    // What it stated is kept as evidence; what it is charged is what the runner charges a run that stated nothing.
    return { usage: reportsUsage(usage) ? usage : null, costUsd: boundedUsd(Math.max(0, allowanceUsd, observed, costOf(usage, price))), warning: 'usage_implausible' };
  }
  if (!reportsUsage(usage)) {
    return run.started ? { usage: null, costUsd: boundedUsd(Math.max(0, allowanceUsd, observed)), warning: 'usage_unreported' } : { usage: null, costUsd: 0, warning: null };
  }
  const implausible = usage.costUsd !== null && usage.costUsd < floorUsd(usage, price);
  return { usage, costUsd: costOf(usage, price), warning: implausible ? 'usage_implausible' : null };
}

/** What the registry and policy say about one dispatch's executor. */
export interface ExecutorSpec {
  readonly kind: ExecutorName;
  readonly model: string;
  readonly providerKeyEnv: string;
  readonly price: { readonly inputPerMillion: number; readonly outputPerMillion: number };
}

/**
 * How the runner makes an executor for a dispatch (cli/watch.ts configures it from its flags), and the secrets its flags hand
 * every executor it makes (--ea-base-url's credentials): the runner's scrubber holds them from its start, so a consult's pinned
 * file holding them is refused and every receipt masks them, not only a dispatch's.
 */
export type ExecutorFactory = ((spec: ExecutorSpec) => Executor) & { readonly handedSecrets?: () => readonly Secret[] };

/** The credentials of an executor's base URL (`--ea-base-url https://u:TOKEN@gw/v1`, `?key=`): what every executor given it hands its agent. */
export function baseUrlSecrets(baseUrl: string | undefined): Secret[] {
  return urlSecrets([baseUrl], 'ea base URL credentials', MIN_SECRET_CHARS);
}
