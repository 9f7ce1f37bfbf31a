import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { COO } from './cli.js';

export const INSPECTOR = join(import.meta.dirname, '..', '..', 'node_modules', '.bin', 'mcp-inspector');

export interface InspectorResult {
  readonly status: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/**
 * Runs the MCP Inspector's command-line client as its own process against `coo mcp` (the built CLI),
 * as a user would from a shell: `mcp-inspector --cli node dist/cli/main.js mcp ... --method ...`.
 */
export function inspect(serverArgs: readonly string[], method: readonly string[], env: NodeJS.ProcessEnv): Promise<InspectorResult> {
  return new Promise((resolve) => {
    const child = spawn(INSPECTOR, ['--cli', process.execPath, COO, 'mcp', ...serverArgs, ...method], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    child.on('close', (status) => resolve({ status, stdout, stderr }));
  });
}

/** `--tool-arg key=value` pairs; the Inspector parses each value as JSON when it can. */
export function toolCall(name: string, args: Record<string, unknown>): string[] {
  const out = ['--method', 'tools/call', '--tool-name', name];
  for (const [key, value] of Object.entries(args)) out.push('--tool-arg', `${key}=${typeof value === 'string' ? value : JSON.stringify(value)}`);
  return out;
}
