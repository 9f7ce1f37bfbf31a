import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { CooError } from '../errors.js';
import { findExecutable, startProblem } from '../util/executable.js';
import { executorPath } from './process.js';
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
