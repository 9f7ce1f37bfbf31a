import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { claudeMcpJson, codexConfigToml } from '../../helpers/agent-config.js';

/** The README's section "Use from Codex or Claude Code" shows these two blocks; the contract tests run the same renderer. */
const PLACEHOLDERS = { repo: '/path/to/repo', ledger: '/path/to/ledger.git', key: '/path/to/coo.key', openaiApiKey: 'sk-...' };

const CODEX = `[mcp_servers.coo]
command = "coo"
args = ["mcp", "--run", "--repo", "/path/to/repo"]
startup_timeout_sec = 30
tool_timeout_sec = 120
default_tools_approval_mode = "approve"

[mcp_servers.coo.env]
COO_LEDGER = "/path/to/ledger.git"
COO_KEY = "/path/to/coo.key"
OPENAI_API_KEY = "sk-..."
`;

const CLAUDE = `{
  "mcpServers": {
    "coo": {
      "type": "stdio",
      "command": "coo",
      "args": [
        "mcp",
        "--run",
        "--repo",
        "/path/to/repo"
      ],
      "env": {
        "COO_LEDGER": "/path/to/ledger.git",
        "COO_KEY": "/path/to/coo.key",
        "OPENAI_API_KEY": "sk-..."
      }
    }
  }
}
`;

describe('the agent configuration the README shows', () => {
  it('is what the Codex contract test writes to config.toml', () => {
    expect(codexConfigToml(PLACEHOLDERS)).toBe(CODEX);
  });

  it('is what the Claude Code contract test writes to .mcp.json', () => {
    expect(claudeMcpJson(PLACEHOLDERS)).toBe(CLAUDE);
  });

  it('is what the README shows, byte for byte', () => {
    const readme = readFileSync(join(import.meta.dirname, '..', '..', '..', 'README.md'), 'utf8');
    expect(readme).toContain(`\`\`\`toml\n${CODEX}\`\`\``);
    expect(readme).toContain(`\`\`\`json\n${CLAUDE}\`\`\``);
  });
});
