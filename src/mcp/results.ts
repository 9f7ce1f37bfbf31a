import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { isCooError, type ErrorCode } from '../errors.js';
import type { PrivateKey } from '../crypto/keys.js';
import { credentialFileSecrets, gitRemoteSecrets } from '../util/credential-files.js';
import { urlCredentials } from '../util/display-url.js';
import { environmentSecrets, privateKeySecrets, Scrubber, type Place } from '../util/scrub.js';

/**
 * How tool results leave the server: JSON text plus `structuredContent`, with every secret the
 * server holds (the ledger's and key's paths, the repository's, provider keys in its environment
 * and in the machine's credential files, the key itself, a remote's credentials) replaced before anything is sent (util/scrub.ts): in the
 * values, before they are serialised, so no escaping hides one; and every failure as an MCP tool
 * error that names its code.
 */

export interface ServerSecrets {
  readonly key: PrivateKey;
  /** The server's folders and files, by the name their marker gives them (ledger, key, repo, state). */
  readonly places: readonly Place[];
  readonly env: NodeJS.ProcessEnv;
  /** The remote the ledger is a clone of, whose URL may carry credentials. */
  readonly remoteUrl?: string;
  /** The git repositories the server works with (its ledger, the target): the credentials in their remotes' URLs are secrets too. */
  readonly repositories?: readonly string[];
}

/** What the server never sends: its key, the secrets of its environment, a remote's credentials, its folders. */
export function serverScrubber(held: ServerSecrets): Scrubber {
  return new Scrubber(
    [...privateKeySecrets(held.key), ...environmentSecrets(held.env), ...credentialFileSecrets(held.env), ...(held.remoteUrl === undefined ? [] : urlCredentials(held.remoteUrl).map((value) => ({ name: 'remote credentials', value }))), ...gitRemoteSecrets(held.repositories ?? [], { helpers: false })],
    held.places,
  );
}

/** One line on what to do, per code an agent can meet here. */
const NEXT_STEP: Partial<Record<ErrorCode, string>> = {
  USAGE: 'Fix the arguments as the message says and call again.',
  CONFIG_INVALID: 'The server is misconfigured; ask the operator to check its configuration.',
  NOT_FOUND: 'Check the id with the sessions tool; a consult without a receipt yet needs the wait tool.',
  MESSAGE_UNKNOWN: 'Check the id with the sessions tool.',
  KILL_SWITCH: 'Nothing will run until the CEO or the COO that set the switch releases it; do not retry.',
  POLICY_LIMIT: 'Ask for less (fewer files, a smaller budget or runtime) within the policy, or ask the CEO to change the policy.',
  POLICY_EDGE_FORBIDDEN: 'This actor may not be consulted from here; pick an advisory agent the policy allows.',
  POLICY_EDGE_NOT_ALLOWED: 'This actor may not be consulted from here; pick an advisory agent the policy allows.',
  POLICY_INTENT_NOT_ALLOWED: 'This actor does not take consults; pick an advisory agent.',
  ACTOR_UNKNOWN: 'Use an actor id from the registry, such as aa.chatgpt.',
  IDEMPOTENCY_CONFLICT: 'This idempotency key already names another request, or the same request in another correlation: for a new request give a new idempotency_key, or none and one is derived from the request; to repeat the first, call again without correlation_id.',
  CONTEXT_INVALID: 'Name files that exist as regular files at that commit of the repository, relative to its root.',
  SIGNER_UNKNOWN: "The server's key is not the active COO's; ask the operator.",
  NOT_ACTIVE_COO: "The server's key is not the active COO's; ask the operator.",
  COMMAND_EXPIRED: "The CEO's command lapsed at its expires_at before you took it up: do not work under it; ask the CEO to send it again.",
  LEDGER_LOCKED: 'Another writer holds the ledger; call again in a moment (a retried consult is never paid twice).',
  LEDGER_CONFLICT: 'Another writer moved the ledger; call again (a retried consult is never paid twice).',
  ORACLE_CONFIG: 'The runner is misconfigured; ask the operator.',
  EXECUTOR_CONFIG: "The server's runner cannot start this message (its execution agent is missing or misconfigured); ask the operator, and do not queue it again: it stays queued and runs once the runner is fixed.",
};

/** What the consult lines above say of an actor, for the tools that give work to an execution agent. */
const WORK_STEP: Partial<Record<ErrorCode, string>> = {
  POLICY_EDGE_FORBIDDEN: 'This actor may not be given work from here; pick an execution agent the policy allows.',
  POLICY_EDGE_NOT_ALLOWED: 'This actor may not be given work from here; pick an execution agent the policy allows.',
  POLICY_INTENT_NOT_ALLOWED: 'This actor does not take dispatches; pick an execution agent, such as ea.codex.',
};

/** Where a code means something else for one tool than the lines above say: per tool, it wins. */
const TOOL_STEP: Readonly<Record<string, Partial<Record<ErrorCode, string>>>> = {
  ack: {
    MESSAGE_UNKNOWN: 'Acknowledge an item the inbox tool lists, by its message_id.',
    POLICY_INTENT_NOT_ALLOWED: 'Only what reached you is acknowledged: call the inbox tool and acknowledge an item it lists.',
    MESSAGE_DUPLICATE: 'The item is acknowledged already, once for all: show the acknowledgement the message names; do not acknowledge it again.',
  },
  dispatch: WORK_STEP,
  adopt: WORK_STEP,
};

const DEFAULT_STEP = 'Read the message; if it does not say what to change, report it to the operator.';

export function okResult(value: Record<string, unknown>, scrubber: Scrubber): CallToolResult {
  const clean = scrubber.value(value);
  return { content: [{ type: 'text', text: JSON.stringify(clean, null, 2) }], structuredContent: clean };
}

/** An MCP tool error: `CODE: message`, then the next step; never a stack trace. */
export function errorResult(error: unknown, scrubber: Scrubber, tool?: string): CallToolResult {
  const code: ErrorCode = isCooError(error) ? error.code : 'INTERNAL';
  const message = isCooError(error) ? error.message : 'the server failed unexpectedly (details are in its log)';
  const next = (tool === undefined ? undefined : TOOL_STEP[tool]?.[code]) ?? NEXT_STEP[code] ?? DEFAULT_STEP;
  return { isError: true, content: [{ type: 'text', text: scrubber.text(`${code}: ${message}\n${next}`) }] };
}

/**
 * A call the SDK refuses before any tool runs (a tool name the server does not have, arguments that
 * do not fit the tool's schema), as every other tool error is: the code first, the SDK's words, and
 * the next step. Its output check failing is the server's own fault (INTERNAL). `tools` are the names
 * the server registers, for the step after a name it does not know.
 */
export function sdkToolError(sdkMessage: string, scrubber: Scrubber, tools: readonly string[]): CallToolResult {
  // The SDK looks a name up in a plain object: `__proto__` or `constructor` is found there and reported
  // "disabled"; this server disables no tool, so either way the name is not one of its tools.
  const words = sdkMessage.replace(/^MCP error -?\d+: /, '').replace(/^(Tool .*) disabled$/s, '$1 not found');
  const unknown = /^Tool .* not found$/s.test(words);
  const internal = /^Output validation error/.test(words);
  const code: ErrorCode = internal ? 'INTERNAL' : 'USAGE';
  const next = unknown ? `Call one of this server's tools (tools/list lists them): ${tools.join(', ')}.` : internal ? DEFAULT_STEP : NEXT_STEP.USAGE!;
  return { isError: true, content: [{ type: 'text', text: scrubber.text(`${code}: ${internal ? 'the server built a result its own schema refuses (details are in its log)' : words}\n${next}`) }] };
}
