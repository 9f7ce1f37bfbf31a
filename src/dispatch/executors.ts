import { ClaudeCodeExecutor } from './claude-code.js';
import { CodexExecutor } from './codex.js';
import { baseUrlSecrets, type ExecutorFactory } from './executor.js';
import type { Isolation } from './process.js';

export interface ExecutorFlags {
  /** `--ea-command`: the executor's command; `codex` or `claude` on PATH by default. */
  readonly command?: readonly string[];
  /** A model API base URL (a gateway, or the offline scripted model); the provider's own when absent. */
  readonly baseUrl?: string;
  readonly isolation?: Isolation;
  /** Paths the executor never sees: the ledger, the key's folder, the runner's state. */
  readonly hide: readonly string[];
  readonly env?: NodeJS.ProcessEnv;
}

/** The executors the runner starts, configured once from its flags; the registry picks one per dispatch. */
export function executorFactory(flags: ExecutorFlags): ExecutorFactory {
  const make = (spec: Parameters<ExecutorFactory>[0]) => {
    const common = {
      ...(flags.command === undefined ? {} : { command: flags.command }),
      ...(flags.baseUrl === undefined ? {} : { baseUrl: flags.baseUrl }),
      ...(flags.isolation === undefined ? {} : { isolation: flags.isolation }),
      ...(flags.env === undefined ? {} : { env: flags.env }),
      model: spec.model,
      hide: flags.hide,
    };
    return spec.kind === 'codex'
      ? new CodexExecutor({ ...common, providerKeyEnv: spec.providerKeyEnv, price: spec.price })
      : new ClaudeCodeExecutor({ ...common, providerKeyEnv: 'ANTHROPIC_API_KEY', price: spec.price });
  };
  return Object.assign(make, { handedSecrets: () => baseUrlSecrets(flags.baseUrl) });
}
