/**
 * The MCP configuration the README shows for Codex and Claude Code, rendered with real values. The
 * contract tests run the real agents with exactly this text, so what the README says is what was run.
 */
export interface CooServerConfig {
  /** The repository consults pin their context in. */
  readonly repo: string;
  readonly ledger: string;
  readonly key: string;
  /** The provider key Oracle uses when the runner consults. */
  readonly openaiApiKey: string;
  /** More `coo mcp` arguments, such as --oracle-base-url for an OpenAI-compatible gateway. */
  readonly extraArgs?: readonly string[];
  /** More environment for the server (the tests keep its state directory out of the real home). */
  readonly extraEnv?: Readonly<Record<string, string>>;
  /** Codex's limit on one tool call, in seconds. */
  readonly toolTimeoutSeconds?: number;
}

const q = (value: string): string => JSON.stringify(value);

function argsOf(config: CooServerConfig): string[] {
  return ['mcp', '--run', '--repo', config.repo, ...(config.extraArgs ?? [])];
}

function envOf(config: CooServerConfig): Record<string, string> {
  return { COO_LEDGER: config.ledger, COO_KEY: config.key, OPENAI_API_KEY: config.openaiApiKey, ...config.extraEnv };
}

/** Codex: `~/.codex/config.toml`. Without default_tools_approval_mode, `codex exec` refuses the calls under approval_policy never. */
export function codexConfigToml(config: CooServerConfig): string {
  return [
    '[mcp_servers.coo]',
    'command = "coo"',
    `args = [${argsOf(config).map(q).join(', ')}]`,
    'startup_timeout_sec = 30',
    `tool_timeout_sec = ${config.toolTimeoutSeconds ?? 120}`,
    'default_tools_approval_mode = "approve"',
    '',
    '[mcp_servers.coo.env]',
    ...Object.entries(envOf(config)).map(([name, value]) => `${name} = ${q(value)}`),
    '',
  ].join('\n');
}

/** Claude Code: `.mcp.json` in the project (or `claude --mcp-config`). */
export function claudeMcpJson(config: CooServerConfig): string {
  return `${JSON.stringify({ mcpServers: { coo: { type: 'stdio', command: 'coo', args: argsOf(config), env: envOf(config) } } }, null, 2)}\n`;
}
