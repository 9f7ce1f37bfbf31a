import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { isCooError, type ErrorCode } from '../errors.js';

/**
 * How tool results leave the server: JSON text plus `structuredContent`, with every secret the
 * server holds (the ledger's and key's paths, the repository's, provider keys in its environment)
 * replaced before anything is sent; and every failure as an MCP tool error that names its code.
 */

/** What the server never sends, replaced wherever it appears in a result or an error. */
export class Redactor {
  private readonly secrets: string[];

  constructor(secrets: readonly string[]) {
    this.secrets = [...new Set(secrets.filter((secret) => secret.length >= 4))].sort((a, b) => b.length - a.length);
  }

  /** Provider keys and tokens in an environment: values of *_KEY, *_TOKEN and *_SECRET variables. */
  static environmentSecrets(env: NodeJS.ProcessEnv): string[] {
    return Object.entries(env)
      .filter(([name, value]) => /(_KEY|_TOKEN|_SECRET)$/.test(name) && value !== undefined && value.length >= 8)
      .map(([, value]) => value!);
  }

  text(value: string): string {
    let out = value;
    for (const secret of this.secrets) out = out.split(secret).join('<hidden>');
    return out;
  }

  value<T>(value: T): T {
    return JSON.parse(this.text(JSON.stringify(value))) as T;
  }
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
  IDEMPOTENCY_CONFLICT: 'This key names a different request; drop idempotency_key, or use a new one for a new request.',
  CONTEXT_INVALID: 'Name files that exist as regular files at that commit of the repository, relative to its root.',
  SIGNER_UNKNOWN: "The server's key is not the active COO's; ask the operator.",
  NOT_ACTIVE_COO: "The server's key is not the active COO's; ask the operator.",
  LEDGER_LOCKED: 'Another writer holds the ledger; call again in a moment (a retried consult is never paid twice).',
  LEDGER_CONFLICT: 'Another writer moved the ledger; call again (a retried consult is never paid twice).',
  ORACLE_CONFIG: 'The runner is misconfigured; ask the operator.',
};

const DEFAULT_STEP = 'Read the message; if it does not say what to change, report it to the operator.';

export function okResult(value: Record<string, unknown>, redactor: Redactor): CallToolResult {
  const clean = redactor.value(value);
  return { content: [{ type: 'text', text: JSON.stringify(clean, null, 2) }], structuredContent: clean };
}

/** An MCP tool error: `CODE: message`, then the next step; never a stack trace. */
export function errorResult(error: unknown, redactor: Redactor): CallToolResult {
  const code: ErrorCode = isCooError(error) ? error.code : 'INTERNAL';
  const message = isCooError(error) ? error.message : 'the server failed unexpectedly (details are in its log)';
  const next = NEXT_STEP[code] ?? DEFAULT_STEP;
  return { isError: true, content: [{ type: 'text', text: redactor.text(`${code}: ${message}\n${next}`) }] };
}
