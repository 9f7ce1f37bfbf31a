import { startFakeModelServer, type FakeMode, type FakeModelServer } from './fake-model-server.js';
import { startScriptedResponsesServer, type ScriptTurn, type ScriptedModelServer } from './fake-responses-server.js';

/**
 * The built-in offline model, on 127.0.0.1: what `coo demo` runs both lanes against and what
 * `coo model serve` exposes, so the README's walk-throughs run with nothing leaving the machine.
 * Consults get answers that follow the aa_consult_v0 template, on each provider's own API (OpenAI's
 * Chat Completions with `--oracle-base-url`, Anthropic's Messages API, the Gemini API); Codex gets the Responses API, scripted to fix the demo repository's one bug
 * (`--ea-base-url`). It knows that one task: any other dispatch gets the same patch, which fails
 * where there is no `src/mean.js` to fix, as an honest receipt shows.
 */

/** The key the offline model is given: it checks none, and no provider ever sees this one. */
export const OFFLINE_PROVIDER_KEY = 'sk-offline-built-in-model';

/** What the built-in model tells Codex to do: fix mean() in the demo repository with a patch, then report. */
export const DEMO_DISPATCH_SCRIPT: readonly ScriptTurn[] = [
  {
    kind: 'patch',
    patch: '*** Update File: src/mean.js\n@@\n-export const mean = (xs) => xs.reduce((sum, x) => sum + x, 0) / (xs.length + 1);\n+export const mean = (xs) => xs.reduce((sum, x) => sum + x, 0) / xs.length;',
  },
  { kind: 'message', text: 'mean() divided by one too many; it now divides by the number of values. `node --test` should pass.' },
];

export interface BuiltinModel {
  /** For Oracle's OpenAI route (`--oracle-base-url`, `$COO_ORACLE_BASE_URL`). */
  readonly consultBaseUrl: string;
  /**
   * For Oracle's Anthropic route (`--oracle-anthropic-url`): the model's Messages endpoint under
   * Anthropic's own host name, which the sandbox resolves to 127.0.0.1 (`anthropicHost`): Oracle
   * uses its Claude client for api.anthropic.com only.
   */
  readonly anthropicUrl: string;
  readonly anthropicHost: { readonly name: string; readonly address: string };
  /** For Oracle's Google route (`--oracle-gemini-url`): the Gemini API's base URL. */
  readonly geminiUrl: string;
  /** For Codex (`--ea-base-url`, `$COO_EA_BASE_URL`). */
  readonly dispatchBaseUrl: string;
  /** Model calls served so far: consult requests and Codex calls. */
  counts(): { readonly consults: number; readonly dispatchCalls: number };
  close(): Promise<void>;
}

export interface BuiltinModelOptions {
  /** How successive consults are answered (the last repeats): `ok` by default. */
  readonly consultModes?: readonly FakeMode[];
}

export async function startBuiltinModel(options: BuiltinModelOptions = {}): Promise<BuiltinModel> {
  const consults: FakeModelServer = await startFakeModelServer(options.consultModes ?? ['ok']);
  let dispatch: ScriptedModelServer;
  try {
    dispatch = await startScriptedResponsesServer(DEMO_DISPATCH_SCRIPT, { perSession: true });
  } catch (error) {
    await consults.close();
    throw error;
  }
  return {
    consultBaseUrl: `${consults.url}/v1`,
    anthropicUrl: `http://api.anthropic.com:${consults.port}/v1/messages`,
    anthropicHost: { name: 'api.anthropic.com', address: '127.0.0.1' },
    geminiUrl: consults.url,
    dispatchBaseUrl: `${dispatch.url}/v1`,
    counts: () => ({ consults: consults.requests.length, dispatchCalls: dispatch.calls.length }),
    close: async () => {
      await Promise.all([consults.close(), dispatch.close()]);
    },
  };
}
