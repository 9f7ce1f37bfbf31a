import { describe, expect, it } from 'vitest';
import { ClaudeCodeExecutor } from '../../../src/dispatch/claude-code.js';
import { CodexExecutor } from '../../../src/dispatch/codex.js';
import type { ExecutorRequest } from '../../../src/dispatch/executor.js';

/** How each executor names the agent's consult tool in its own configuration. */

const TOOL = { server: 'coo', command: ['/usr/bin/node', '/opt/coo/dist/cli/main.js', 'consult-relay', '--socket', '/tmp/coo-consult-x/s'], socketDir: '/tmp/coo-consult-x', timeoutSeconds: 300 };
const REQUEST: ExecutorRequest = { attemptId: 'ea_attempt_X_1', worktree: '/w', scratch: '/s', prompt: 'fix it', timeoutSeconds: 300, consultTool: TOOL };

describe("an executor's configuration of the consult tool", () => {
  it('names it to Codex as an MCP server it starts itself, approved in advance and required before the turn starts', () => {
    const argv = new CodexExecutor({ isolation: 'none', env: {} }).argv(REQUEST);
    const config = argv.filter((_, index) => argv[index - 1] === '-c');
    expect(config).toEqual(
      expect.arrayContaining([
        'mcp_servers.coo.command="/usr/bin/node"',
        'mcp_servers.coo.args=["/opt/coo/dist/cli/main.js","consult-relay","--socket","/tmp/coo-consult-x/s"]',
        'mcp_servers.coo.tool_timeout_sec=300',
        'mcp_servers.coo.default_tools_approval_mode="approve"',
        'mcp_servers.coo.required=true',
      ]),
    );
    // The prompt stays the last argument, after --.
    expect(argv.slice(-2)).toEqual(['--', 'fix it']);
  });

  it('names it to Claude Code in an MCP configuration file, the only server, with its one tool allowed', () => {
    const argv = new ClaudeCodeExecutor({ isolation: 'none', env: {} }).argv(REQUEST, '/tmp/coo-consult-x/mcp.json');
    expect(argv).toContain('--strict-mcp-config');
    expect(argv[argv.indexOf('--mcp-config') + 1]).toBe('/tmp/coo-consult-x/mcp.json');
    expect(argv[argv.indexOf('--allowedTools') + 1]!.split(' ')).toContain('mcp__coo__consult');
  });

  it('gives neither executor an MCP server when the attempt has no consult tool', () => {
    const { consultTool: _tool, ...plain } = REQUEST;
    expect(new CodexExecutor({ isolation: 'none', env: {} }).argv(plain).some((arg) => arg.startsWith('mcp_servers.'))).toBe(false);
    const claude = new ClaudeCodeExecutor({ isolation: 'none', env: {} }).argv(plain);
    expect(claude).not.toContain('--mcp-config');
    expect(claude[claude.indexOf('--allowedTools') + 1]).not.toMatch(/mcp__/);
  });
});
