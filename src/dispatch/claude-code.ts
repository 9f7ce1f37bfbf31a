import * as fs from 'node:fs';
import { join } from 'node:path';
import { CooError } from '../errors.js';
import { endpointProblem } from '../lane/endpoint.js';
import { providerKeyProblem } from '../lane/provider-key.js';
import { LIMITS } from '../limits.js';
import { AGENT_CLIS, defaultAgentCommand, givenAgentCommand, installedAgentCommand } from './agent-cli.js';
import { claudeStreamState } from './claude-events.js';
import type { Secret } from '../util/scrub.js';
import { baseUrlSecrets, type Executor, type ExecutorRequest, type ExecutorRun } from './executor.js';
import { resolveIsolation, type Isolation } from '../util/bubblewrap.js';
import { ATTEMPT_FOLDER_REMEDY, executorPath, runExecutorProcess } from './process.js';
import { writeOwnFile } from '../util/own-write.js';

/**
 * Claude Code as an execution agent: `claude -p --output-format stream-json`, with edits accepted
 * and only the tools named, no settings, hooks or MCP servers from the worktree or a home folder
 * (`--setting-sources user` over a fresh CLAUDE_CONFIG_DIR, `--strict-mcp-config`), one provider
 * key, stdin closed. (`--bare` is not used: it takes Write away even when `--tools` names it.) Claude Code has no sandbox of its own
 * here: bubblewrap is what keeps its writes in the worktree.
 */

export interface ClaudeCodeConfig {
  /** The command (`--ea-command`); `claude` on the runner's PATH by default. */
  readonly command?: readonly string[];
  readonly model?: string;
  /** An Anthropic Messages base URL (without `/v1`); the provider's own when absent. */
  readonly baseUrl?: string;
  /** The tools the agent may use without asking, of the available ones; the rest are denied. */
  readonly tools?: readonly string[];
  readonly providerKeyEnv?: 'ANTHROPIC_API_KEY';
  /** `bwrap` by default: without it nothing keeps Claude Code's writes in the worktree, so `none` must be asked for. */
  readonly isolation?: Isolation;
  readonly hide?: readonly string[];
  readonly env?: NodeJS.ProcessEnv;
  /** The policy's price for the model: the live cost bound never counts the stream's tokens below it. */
  readonly price?: { readonly inputPerMillion: number; readonly outputPerMillion: number };
  readonly maxStreamBytes?: number;
}

/** The built-in tools an EA has (`--tools`). */
const AVAILABLE_TOOLS = ['Bash', 'Read', 'Edit', 'Write', 'Glob', 'Grep'];

/** This package's pinned @anthropic-ai/claude-code binary (a development dependency). */
export function pinnedClaudeCommand(): string[] {
  const found = installedAgentCommand('claude_code');
  if (found === null) throw new CooError('EXECUTOR_CONFIG', `${AGENT_CLIS.claude_code.packageName} is not installed`);
  return found;
}

export class ClaudeCodeExecutor implements Executor {
  readonly name = 'claude_code' as const;
  private readonly isolation: 'bwrap' | 'none';

  constructor(private readonly config: ClaudeCodeConfig = {}) {
    this.isolation = resolveIsolation(config.isolation ?? 'bwrap');
    for (const tool of config.tools ?? []) {
      if (!/^[A-Za-z][A-Za-z0-9_]{0,63}$/.test(tool)) throw new CooError('EXECUTOR_CONFIG', `ea.claude_code: ${JSON.stringify(tool)} is not a tool name`);
    }
  }

  get isolated(): boolean {
    return this.isolation === 'bwrap';
  }

  private source(): NodeJS.ProcessEnv {
    return this.config.env ?? process.env;
  }

  private program(): string[] {
    const path = this.source()['PATH'];
    return this.config.command === undefined ? defaultAgentCommand('claude_code', path, 'ea.claude_code') : givenAgentCommand('claude_code', this.config.command, path, 'ea.claude_code');
  }

  check(): void {
    this.program();
    const keyProblem = providerKeyProblem('ANTHROPIC_API_KEY', this.source()['ANTHROPIC_API_KEY'], this.config.baseUrl === undefined);
    if (keyProblem !== null) throw new CooError('EXECUTOR_CONFIG', `ea.claude_code: ${keyProblem}`);
    // A base URL no client can reach would be found only by the agent, after the claim: each dispatch would fail as the work's.
    const endpoint = this.config.baseUrl === undefined ? null : endpointProblem(this.config.baseUrl, '--ea-base-url');
    if (endpoint !== null) throw new CooError('EXECUTOR_CONFIG', `ea.claude_code: ${endpoint}`);
  }

  endpoint(): string | null {
    return this.config.baseUrl ?? null;
  }

  handedSecrets(): Secret[] {
    const value = this.source()['ANTHROPIC_API_KEY'];
    return [...(value === undefined || value === '' ? [] : [{ name: 'ANTHROPIC_API_KEY', value }]), ...baseUrlSecrets(this.config.baseUrl)];
  }

  argv(request: ExecutorRequest, mcpConfig?: string): string[] {
    if (Buffer.byteLength(request.prompt) > LIMITS.executorPromptBytes) throw new CooError('EXECUTOR_CONFIG', `ea.claude_code: the task is over ${LIMITS.executorPromptBytes} bytes`);
    const tool = request.consultTool;
    return [
      '-p', request.prompt,
      '--setting-sources', 'user',
      // Only the MCP servers named here: the agent's consult tool, when it has one.
      '--strict-mcp-config',
      ...(tool === undefined || mcpConfig === undefined ? [] : ['--mcp-config', mcpConfig]),
      '--no-session-persistence',
      '--permission-mode', 'acceptEdits',
      '--tools', AVAILABLE_TOOLS.join(','),
      '--allowedTools', [...(this.config.tools ?? AVAILABLE_TOOLS), ...(tool === undefined ? [] : [`mcp__${tool.server}__consult`])].join(' '),
      ...(this.config.model === undefined ? [] : ['--model', this.config.model]),
      '--output-format', 'stream-json',
      '--verbose',
    ];
  }

  run(request: ExecutorRequest): Promise<ExecutorRun> {
    const command = this.program();
    const home = join(request.scratch, 'home');
    const configDir = join(request.scratch, 'claude-config');
    const tmp = join(request.scratch, 'tmp');
    for (const dir of [home, configDir, tmp]) fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
    const tool = request.consultTool;
    // Claude Code reads its MCP servers from a file: written where the agent cannot write, before it starts.
    const mcpConfig = tool === undefined ? undefined : join(tool.socketDir, 'mcp.json');
    if (tool !== undefined && mcpConfig !== undefined) {
      const [toolCommand, ...args] = tool.command;
      writeOwnFile(mcpConfig, JSON.stringify({ mcpServers: { [tool.server]: { type: 'stdio', command: toolCommand, args } } }), { what: "Claude Code's tool configuration", remedy: ATTEMPT_FOLDER_REMEDY, code: 'IO_ERROR' });
    }
    const env: NodeJS.ProcessEnv = {
      PATH: executorPath(command[0]!),
      HOME: home,
      CLAUDE_CONFIG_DIR: configDir,
      TMPDIR: tmp,
      LANG: 'C.UTF-8',
      NO_COLOR: '1',
      GIT_CONFIG_NOSYSTEM: '1',
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
      DISABLE_TELEMETRY: '1',
      DISABLE_AUTOUPDATER: '1',
      DISABLE_ERROR_REPORTING: '1',
      ANTHROPIC_API_KEY: this.source()['ANTHROPIC_API_KEY'] ?? '',
      ...(this.config.baseUrl === undefined ? {} : { ANTHROPIC_BASE_URL: this.config.baseUrl }),
      // MCP tools are offered at once (not behind tool search), and a consult may take the attempt's time box.
      ...(tool === undefined ? {} : { ENABLE_TOOL_SEARCH: 'false', MCP_TIMEOUT: '30000', MCP_TOOL_TIMEOUT: String(Math.max(1, Math.ceil(tool.timeoutSeconds)) * 1000) }),
    };
    return runExecutorProcess({
      executor: 'claude_code',
      attemptId: request.attemptId,
      argv: [...command, ...this.argv(request, mcpConfig)],
      programs: [command, ...(tool === undefined ? [] : [tool.command])],
      cwd: request.worktree,
      env,
      isolation: this.isolation,
      writable: [request.worktree, request.scratch],
      readOnly: tool === undefined ? [] : [tool.socketDir],
      hide: this.config.hide ?? [],
      ...(request.repository === undefined ? {} : { repository: request.repository }),
      timeoutSeconds: request.timeoutSeconds,
      ...(this.config.maxStreamBytes === undefined ? {} : { maxStreamBytes: this.config.maxStreamBytes }),
      ...(request.maxCostUsd === undefined ? {} : { maxCostUsd: request.maxCostUsd }),
      ...(request.spend === undefined ? {} : { spend: request.spend }),
      ...(request.pidFile === undefined ? {} : { pidFile: request.pidFile }),
      ...(this.config.price === undefined ? {} : { price: this.config.price }),
      state: claudeStreamState(),
    });
  }
}
