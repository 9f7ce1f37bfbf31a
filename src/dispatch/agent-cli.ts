import { realpathSync } from 'node:fs';
import { createRequire } from 'node:module';
import { basename, dirname, join } from 'node:path';
import { CooError } from '../errors.js';
import { findExecutable, startProblem } from '../util/executable.js';
import { executorPath, resolveCommand } from './process.js';
import type { ExecutorName } from './executor.js';

/**
 * Where an execution agent's CLI is found when no `--ea-command` names one. The agent CLIs are
 * optional (peer) dependencies: coo is tested with one version of each, a user who only consults
 * or brings their own never downloads them (Codex's native build is about 400 MB), and the
 * checkout's `npm ci` installs them for the demo and the tests.
 */

export interface AgentCli {
  /** The command's name on PATH. */
  readonly program: string;
  /** The npm package that ships it, and the version coo is tested with. */
  readonly packageName: string;
  readonly version: string;
  /** The command line that starts the package's CLI, from the package's folder. */
  readonly launcher: (packageDir: string) => string[];
}

export const AGENT_CLIS: Record<ExecutorName, AgentCli> = {
  codex: { program: 'codex', packageName: '@openai/codex', version: '0.169.0', launcher: (dir) => [process.execPath, join(dir, 'bin', 'codex.js')] },
  claude_code: { program: 'claude', packageName: '@anthropic-ai/claude-code', version: '2.1.328', launcher: (dir) => [join(dir, 'bin', 'claude.exe')] },
};

/** The installed package's CLI (beside coo, or anywhere node resolves packages from here), or null. */
export function installedAgentCommand(kind: ExecutorName): string[] | null {
  const cli = AGENT_CLIS[kind];
  let manifest: string;
  try {
    manifest = createRequire(import.meta.url).resolve(`${cli.packageName}/package.json`);
  } catch {
    return null;
  }
  const command = cli.launcher(dirname(manifest));
  return findExecutable(command[0]!, '') === null ? null : command;
}

/**
 * The agent's command when none was given: its program on PATH, else its installed package; when
 * neither is there, EXECUTOR_CONFIG says how to get one.
 */
export function defaultAgentCommand(kind: ExecutorName, path: string | undefined, label: string): string[] {
  const cli = AGENT_CLIS[kind];
  const onPath = findExecutable(cli.program, path ?? '');
  if (onPath !== null) {
    // Found on PATH is not yet startable: a launcher script whose interpreter is missing fails every attempt it is claimed for.
    const problem = startProblem(onPath, executorPath(onPath));
    if (problem !== null) throw new CooError('EXECUTOR_CONFIG', `${label}: ${problem}`);
    return [onPath];
  }
  const installed = installedAgentCommand(kind);
  if (installed !== null) return installed;
  throw new CooError(
    'EXECUTOR_CONFIG',
    `${label}: ${cli.program} is not on PATH and ${cli.packageName} is not installed: install it (npm install -g ${cli.packageName}@${cli.version}), or give its path with --ea-command`,
  );
}

const TITLES: Record<ExecutorName, string> = { codex: 'Codex', claude_code: 'Claude Code' };

/**
 * The command `--ea-command` gives an execution agent of `kind`, resolved (resolveCommand). The one
 * flag names the program of every execution agent: one that is another agent's CLI, by its name or
 * the package it is in (`--ea-command $(which codex)` on a runner that may dispatch to
 * ea.claude_code too), would be started with this agent's arguments, each dispatch to it claimed and
 * failed, blamed on the work. It is refused here, at start, and that agent's dispatches wait.
 */
export function givenAgentCommand(kind: ExecutorName, command: readonly string[], path: string | undefined, label: string): string[] {
  const resolved = resolveCommand(command, path, label);
  const program = resolved[0]!;
  const seen = [program];
  try {
    seen.push(realpathSync(program));
  } catch {
    // resolveCommand found it: a link that is gone since is the start's own failure to find.
  }
  const other = agentOf(seen);
  if (other !== null && other !== kind) {
    const cli = AGENT_CLIS[other];
    throw new CooError(
      'EXECUTOR_CONFIG',
      `${label}: --ea-command ${program} is ${TITLES[other]}'s CLI (${cli.program}), not ${TITLES[kind]}'s: --ea-command names the program of every execution agent, and each dispatch to ${label} would start it with ${TITLES[kind]}'s arguments and fail; leave --ea-command out to find each agent's own CLI (${AGENT_CLIS[kind].program} on PATH, or ${AGENT_CLIS[kind].packageName} installed), or run a runner for each agent`,
    );
  }
  return resolved;
}

/**
 * Whose CLI a program is, from the paths it was found at (as given, then the link's target), or
 * null: the package a path is in proves it, whatever the link is named (a link named `codex` into
 * @anthropic-ai/claude-code is Claude Code's CLI); only when no path is in an agent's package does
 * a name tell, the link target's first.
 */
function agentOf(seen: readonly string[]): ExecutorName | null {
  const agents = Object.entries(AGENT_CLIS) as Array<[ExecutorName, AgentCli]>;
  const proofs: Array<(path: string, cli: AgentCli) => boolean> = [(path, cli) => path.includes(`/node_modules/${cli.packageName}/`), (path, cli) => basename(path).replace(/\.(js|mjs|cjs|exe)$/, '') === cli.program];
  // The link's target before the name given, in each proof.
  for (const proves of proofs) {
    for (const path of [...seen].reverse()) {
      const found = agents.find(([, cli]) => proves(path, cli));
      if (found !== undefined) return found[0];
    }
  }
  return null;
}
