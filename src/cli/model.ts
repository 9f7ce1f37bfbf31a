import { spawn } from 'node:child_process';
import type { Command } from 'commander';
import { cliEntryPoint } from '../assets.js';
import { CooError } from '../errors.js';
import { OFFLINE_PROVIDER_KEY, startBuiltinModel } from '../offline/builtin.js';
import { writeErr } from './terminal.js';
import { onStopSignal } from './stop.js';
import { inertJson } from '../util/invisible.js';

/** How long a detached model may take to say where it listens. */
const READY_MS = 30_000;

interface Served {
  readonly oracle_base_url: string;
  readonly oracle_anthropic_url: string;
  readonly oracle_gemini_url: string;
  /** `name=address`: the host the Anthropic URL names, resolved to the model inside the sandbox. */
  readonly oracle_hosts: string;
  readonly ea_base_url: string;
  readonly provider_key_env: 'OPENAI_API_KEY';
  readonly provider_key: string;
  /** The other providers' keys, which the model ignores as well. */
  readonly provider_keys: Readonly<Record<string, string>>;
  readonly pid: number;
}

/** The shell lines that point `coo watch` (and `coo mcp --run`) at the built-in model. */
function shellLines(served: Served): string {
  return [
    `export COO_ORACLE_BASE_URL=${served.oracle_base_url}`,
    `export COO_ORACLE_ANTHROPIC_URL=${served.oracle_anthropic_url}`,
    `export COO_ORACLE_GEMINI_URL=${served.oracle_gemini_url}`,
    `export COO_ORACLE_HOSTS=${served.oracle_hosts}`,
    `export COO_EA_BASE_URL=${served.ea_base_url}`,
    ...Object.entries({ [served.provider_key_env]: served.provider_key, ...served.provider_keys }).map(([name, value]) => `export ${name}=${value}`),
    `export COO_MODEL_PID=${served.pid}`,
  ].join('\n');
}

/** Starts `coo model serve` in the background and returns once it listens, with what it printed. */
function detach(): Promise<Served> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [cliEntryPoint(), 'model', 'serve', '--json'], { detached: true, stdio: ['ignore', 'pipe', 'ignore'] });
    let out = '';
    const timer = setTimeout(() => {
      child.kill('SIGTERM');
      reject(new CooError('INTERNAL', `the built-in model did not start within ${READY_MS / 1000} s`));
    }, READY_MS);
    child.on('error', (error) => {
      clearTimeout(timer);
      reject(new CooError('INTERNAL', `cannot start the built-in model: ${error.message}`));
    });
    child.on('exit', (code) => {
      clearTimeout(timer);
      reject(new CooError('INTERNAL', `the built-in model exited (${code ?? 'signal'}) before it listened`));
    });
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString('utf8');
      const end = out.indexOf('\n}\n');
      if (end < 0) return;
      clearTimeout(timer);
      child.removeAllListeners('exit');
      child.stdout.destroy();
      child.unref();
      resolve(JSON.parse(out.slice(0, end + 2)) as Served);
    });
  });
}

export function modelVerb(program: Command): void {
  const model = program.command('model').description('the built-in offline model the demo uses, for following the README offline');
  model
    .command('serve')
    .description(
      "serve the built-in offline model on 127.0.0.1 until Ctrl-C: consults to ChatGPT, Claude and Gemini, each on its provider's own API ($COO_ORACLE_BASE_URL, $COO_ORACLE_ANTHROPIC_URL with $COO_ORACLE_HOSTS, $COO_ORACLE_GEMINI_URL), and Codex dispatches ($COO_EA_BASE_URL); it prints the shell lines that set them and provider keys it ignores. Its dispatch script knows one task, the demo repository's mean() bug",
    )
    .option('--detach', 'run it in the background: print the shell lines (with COO_MODEL_PID, the process to kill when done) and return; eval "$(coo model serve --detach)"')
    .option('--json', 'print the URLs, key and pid as JSON')
    .action(async (opts: { detach?: boolean; json?: boolean }) => {
      if (opts.detach === true) {
        const served = await detach();
        process.stdout.write(opts.json === true ? `${inertJson(served, 2)}\n` : `${shellLines(served)}\n`);
        return;
      }
      const builtin = await startBuiltinModel();
      const served: Served = {
        oracle_base_url: builtin.consultBaseUrl,
        oracle_anthropic_url: builtin.anthropicUrl,
        oracle_gemini_url: builtin.geminiUrl,
        oracle_hosts: `${builtin.anthropicHost.name}=${builtin.anthropicHost.address}`,
        ea_base_url: builtin.dispatchBaseUrl,
        provider_key_env: 'OPENAI_API_KEY',
        provider_key: OFFLINE_PROVIDER_KEY,
        provider_keys: { ANTHROPIC_API_KEY: OFFLINE_PROVIDER_KEY, GEMINI_API_KEY: OFFLINE_PROVIDER_KEY },
        pid: process.pid,
      };
      process.stdout.write(opts.json === true ? `${inertJson(served, 2)}\n` : `${shellLines(served)}\n`);
      writeErr('coo model serve: the built-in offline model listens on 127.0.0.1 (Ctrl-C stops it); nothing it serves leaves this machine\n');
      await new Promise<void>((done) => {
        onStopSignal(() => done());
      });
      const counts = builtin.counts();
      await builtin.close();
      writeErr(`coo model serve: stopped after ${counts.consults} consult request(s) and ${counts.dispatchCalls} Codex call(s)\n`);
    });
}
