import * as fs from 'node:fs';
import { join } from 'node:path';
import { CooError } from '../errors.js';
import { endpointProblem } from '../lane/endpoint.js';
import { providerKeyProblem } from '../lane/provider-key.js';
import { LIMITS } from '../limits.js';
import { AGENT_CLIS, defaultAgentCommand, givenAgentCommand, installedAgentCommand } from './agent-cli.js';
import { codexStreamState } from './codex-events.js';
import type { Secret } from '../util/scrub.js';
import { baseUrlSecrets, type Executor, type ExecutorRequest, type ExecutorRun } from './executor.js';
import { resolveIsolation, type Isolation } from '../util/bubblewrap.js';
import { executorPath, runExecutorProcess } from './process.js';

/**
 * The Codex CLI as an execution agent: `codex exec --json` with no user configuration, its own
 * `workspace-write` sandbox (writes in the worktree only: neither /tmp nor $TMPDIR, no network for
 * its commands), approval policy `never`, a fresh CODEX_HOME and HOME, one provider key, stdin
 * closed, and bubblewrap around all of it where installed.
 */

export interface CodexConfig {
  /** The command (`--ea-command`); `codex` on the runner's PATH by default. */
  readonly command?: readonly string[];
  readonly model?: string;
  /** A Responses API base URL (`…/v1`); the provider's own endpoint when absent. */
  readonly baseUrl?: string;
  /** The environment variable that holds the provider key; the only one passed through. */
  readonly providerKeyEnv?: string;
  readonly isolation?: Isolation;
  /** Paths hidden from the executor entirely (the ledger, the key folder, the runner's state). */
  readonly hide?: readonly string[];
  /** Where the command and provider key are read from; the runner's environment by default. */
  readonly env?: NodeJS.ProcessEnv;
  readonly price?: { readonly inputPerMillion: number; readonly outputPerMillion: number };
  readonly maxStreamBytes?: number;
}

/** This package's pinned @openai/codex launcher, under the current node. */
export function pinnedCodexCommand(): string[] {
  const found = installedAgentCommand('codex');
  if (found === null) throw new CooError('EXECUTOR_CONFIG', `${AGENT_CLIS.codex.packageName} is not installed`);
  return found;
}

/** The folders Codex keeps in /tmp whatever TMPDIR says (each with the user's id after a dash). */
const CODEX_TMP_DIRS = ['codex-bwrap-synthetic-mount-targets', 'codex-daemon'];

/** `-c` values are TOML; a string is quoted as a TOML basic string. */
function toml(value: string): string {
  return JSON.stringify(value);
}


/**
 * The agent's consult tool as Codex configures an MCP server: Codex starts it as its own child and
 * under approval policy `never` calls its tools only when they are approved in advance.
 */
function consultToolConfig(tool: ExecutorRequest['consultTool']): string[] {
  if (tool === undefined) return [];
  const [command, ...args] = tool.command;
  const key = `mcp_servers.${tool.server}`;
  return [
    '-c', `${key}.command=${toml(command!)}`,
    '-c', `${key}.args=[${args.map(toml).join(',')}]`,
    '-c', `${key}.startup_timeout_sec=30`,
    '-c', `${key}.tool_timeout_sec=${Math.max(1, Math.ceil(tool.timeoutSeconds))}`,
    '-c', `${key}.default_tools_approval_mode="approve"`,
    // The turn starts once the tool is there (or not at all): a model may call it from its first request.
    '-c', `${key}.required=true`,
  ];
}

export class CodexExecutor implements Executor {
  readonly name = 'codex' as const;
  private readonly isolation: 'bwrap' | 'none';
  private readonly providerKeyEnv: string;

  constructor(private readonly config: CodexConfig = {}) {
    this.isolation = resolveIsolation(config.isolation ?? 'bwrap');
    this.providerKeyEnv = config.providerKeyEnv ?? 'OPENAI_API_KEY';
    if (!/^[A-Z_][A-Z0-9_]{0,63}$/.test(this.providerKeyEnv)) throw new CooError('EXECUTOR_CONFIG', `${this.providerKeyEnv} is not an environment variable name`);
  }

  get isolated(): boolean {
    return this.isolation === 'bwrap';
  }

  private source(): NodeJS.ProcessEnv {
    return this.config.env ?? process.env;
  }

  private program(): string[] {
    const path = this.source()['PATH'];
    return this.config.command === undefined ? defaultAgentCommand('codex', path, 'ea.codex') : givenAgentCommand('codex', this.config.command, path, 'ea.codex');
  }

  check(): void {
    this.program();
    const keyProblem = providerKeyProblem(this.providerKeyEnv, this.source()[this.providerKeyEnv], this.config.baseUrl === undefined);
    if (keyProblem !== null) throw new CooError('EXECUTOR_CONFIG', `ea.codex: ${keyProblem}`);
    // A base URL no client can reach would be found only by the agent, after the claim: each dispatch would fail as the work's.
    const endpoint = this.config.baseUrl === undefined ? null : endpointProblem(this.config.baseUrl, '--ea-base-url');
    if (endpoint !== null) throw new CooError('EXECUTOR_CONFIG', `ea.codex: ${endpoint}`);
  }

  endpoint(): string | null {
    return this.config.baseUrl ?? null;
  }

  handedSecrets(): Secret[] {
    const value = this.source()[this.providerKeyEnv];
    return [...(value === undefined || value === '' ? [] : [{ name: this.providerKeyEnv, value }]), ...baseUrlSecrets(this.config.baseUrl)];
  }

  /** The arguments after the command: everything the lane decides, nothing from the user's config. */
  argv(request: ExecutorRequest): string[] {
    if (Buffer.byteLength(request.prompt) > LIMITS.executorPromptBytes) throw new CooError('EXECUTOR_CONFIG', `ea.codex: the task is over ${LIMITS.executorPromptBytes} bytes`);
    const provider =
      this.config.baseUrl === undefined
        ? []
        : ['-c', 'model_provider=coo', '-c', `model_providers.coo={name="coo",base_url=${toml(this.config.baseUrl)},env_key=${toml(this.providerKeyEnv)},wire_api="responses",request_max_retries=0,stream_max_retries=0}`];
    return [
      'exec',
      '--ignore-user-config',
      ...provider,
      ...(this.config.model === undefined ? [] : ['-c', `model=${toml(this.config.model)}`]),
      '-c', 'approval_policy="never"',
      '-c', 'analytics.enabled=false',
      '-c', 'features.plugins=false',
      '-c', 'features.remote_plugin=false',
      '-c', 'sandbox_workspace_write.exclude_slash_tmp=true',
      '-c', 'sandbox_workspace_write.exclude_tmpdir_env_var=true',
      '-c', 'sandbox_workspace_write.network_access=false',
      // Codex hands its own environment to the agent's commands: the provider key is kept from them.
      '-c', `shell_environment_policy.exclude=[${toml(this.providerKeyEnv)}]`,
      ...consultToolConfig(request.consultTool),
      '--sandbox', 'workspace-write',
      '--cd', request.worktree,
      '--json',
      '--',
      request.prompt,
    ];
  }

  run(request: ExecutorRequest): Promise<ExecutorRun> {
    const command = this.program();
    // CODEX_HOME must not be under the temporary folder Codex sees, or it refuses to install its
    // sandbox helper; TMPDIR is the scratch folder's own.
    const home = join(request.scratch, 'home');
    const codexHome = join(request.scratch, 'codex-home');
    const tmp = join(request.scratch, 'tmp');
    // Codex keeps folders in /tmp whatever TMPDIR says (its sandbox's lock before each command, its
    // daemon): under our bubblewrap, where the host's /tmp is read-only, each is one of the attempt's
    // own, or on a host where they are not there yet every command fails with "Read-only file system".
    const lockDir = join(request.scratch, 'codex-mount-targets');
    for (const dir of [home, codexHome, tmp, ...CODEX_TMP_DIRS.map((name) => join(lockDir, name))]) fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
    const env: NodeJS.ProcessEnv = {
      PATH: executorPath(command[0]!),
      HOME: home,
      CODEX_HOME: codexHome,
      TMPDIR: tmp,
      LANG: 'C.UTF-8',
      NO_COLOR: '1',
      GIT_CONFIG_NOSYSTEM: '1',
      [this.providerKeyEnv]: this.source()[this.providerKeyEnv] ?? '',
    };
    return runExecutorProcess({
      executor: 'codex',
      attemptId: request.attemptId,
      argv: [...command, ...this.argv(request)],
      programs: [command, ...(request.consultTool === undefined ? [] : [request.consultTool.command])],
      cwd: request.worktree,
      env,
      isolation: this.isolation,
      writable: [request.worktree, request.scratch],
      readOnly: request.consultTool === undefined ? [] : [request.consultTool.socketDir],
      hide: this.config.hide ?? [],
      ...(request.repository === undefined ? {} : { repository: request.repository }),
      privateDirs: CODEX_TMP_DIRS.map((name) => ({ source: join(lockDir, name), target: `/tmp/${name}-${process.getuid?.() ?? 0}` })),
      timeoutSeconds: request.timeoutSeconds,
      ...(this.config.maxStreamBytes === undefined ? {} : { maxStreamBytes: this.config.maxStreamBytes }),
      ...(request.maxCostUsd === undefined ? {} : { maxCostUsd: request.maxCostUsd }),
      ...(request.spend === undefined ? {} : { spend: request.spend }),
      ...(request.pidFile === undefined ? {} : { pidFile: request.pidFile }),
      ...(this.config.price === undefined ? {} : { price: this.config.price }),
      state: codexStreamState(),
    });
  }
}
