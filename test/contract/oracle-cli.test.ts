import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { judgeAnswer } from '../../src/consult/answer.js';
import { startFakeModelServer, type FakeMode, type FakeModelServer } from '../../src/offline/fake-model-server.js';
import { OracleCli, type OracleConfig } from '../../src/consult/oracle.js';
import { judgeRun, type OracleRun } from '../../src/consult/outcome.js';
import { renderConsultPrompt } from '../../src/consult/prompt.js';
import { classifyFor } from '../../src/consult/providers/routes.js';
import { createSandbox, sandboxFor } from '../../src/consult/sandbox.js';
import type { AaTransportEntry } from '../../src/schema/registry.js';
import { requireBubblewrap } from '../helpers/bubblewrap.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * The real @steipete/oracle CLI (the pinned version, under this Node) against a loopback model
 * speaking each provider's own API: OpenAI's Chat Completions (--base-url) and Responses API
 * (--azure-endpoint), Anthropic's Messages API through Oracle's own Claude client (its host,
 * api.anthropic.com, resolved to 127.0.0.1 by a hosts file bubblewrap binds over /etc/hosts), and
 * the Gemini API through the real @google/genai (GOOGLE_GEMINI_BASE_URL).
 */
const dir = tempDir();
let server: FakeModelServer;
let n = 0;

beforeAll(async () => {
  server = await startFakeModelServer();
});
afterAll(async () => {
  await server.close();
});

interface Provider {
  readonly name: string;
  readonly entry: AaTransportEntry;
  readonly config: () => OracleConfig;
  /** Dollars per token in and out, as Oracle's own table prices the model. */
  readonly price: readonly [number, number];
}

const oracleEntry = (model: string, key: AaTransportEntry['provider_key_env'], route: AaTransportEntry['route']): AaTransportEntry => ({ kind: 'oracle', engine: 'api', model, provider_key_env: key, route });

const providers: Provider[] = [
  { name: 'OpenAI Chat Completions (--base-url)', entry: oracleEntry('gpt-5.5', 'OPENAI_API_KEY', 'openai'), config: () => ({ route: { baseUrl: `${server.url}/v1` } }), price: [5e-6, 30e-6] },
  { name: 'OpenAI Responses (--azure-endpoint)', entry: oracleEntry('gpt-5.5', 'OPENAI_API_KEY', 'openai'), config: () => ({ route: { azure: { endpoint: server.url, deployment: 'fake-deploy' } } }), price: [5e-6, 30e-6] },
  {
    name: "Anthropic Messages (Oracle's Claude client, api.anthropic.com pinned to 127.0.0.1)",
    entry: oracleEntry('claude-4.6-sonnet', 'ANTHROPIC_API_KEY', 'anthropic'),
    config: () => ({ endpoints: { anthropic: `http://api.anthropic.com:${server.port}/v1/messages`, hosts: [{ name: 'api.anthropic.com', address: '127.0.0.1' }] } }),
    price: [3e-6, 15e-6],
  },
  { name: 'the Gemini API (@google/genai, GOOGLE_GEMINI_BASE_URL)', entry: oracleEntry('gemini-3.1-pro', 'GEMINI_API_KEY', 'google'), config: () => ({ endpoints: { google: server.url } }), price: [2e-6, 12e-6] },
];

async function consult(provider: Provider, mode: FakeMode, runtimeSeconds = 30): Promise<{ run: OracleRun; canary: string; cap: number }> {
  requireBubblewrap('running Oracle');
  n += 1;
  server.setModes([mode]);
  const canary = `canary-contract${n}`;
  const sandbox = sandboxFor(dir, `aa_attempt_contract_${n}`);
  const prompt = renderConsultPrompt({ question: 'Review add().', canary, repoCommit: 'a'.repeat(40), files: ['src/add.ts'] });
  const cli = new OracleCli({ ...provider.config(), env: { [provider.entry.provider_key_env]: 'sk-contract-key-000' } });
  const route = cli.plan(provider.entry);
  const cap = route.fixedOutputTokens ?? 1000;
  createSandbox(sandbox, [{ path: 'src/add.ts', sha256: 'sha256:x', bytes: Buffer.from('export const add = (a: number, b: number) => a + b;\n') }], prompt, {
    attempt_id: `aa_attempt_contract_${n}`,
    canary,
    slug: `coo-contract-run-a${n}`,
    model: provider.entry.model,
    max_output_tokens: cap,
    runtime_seconds: runtimeSeconds,
    started_at: new Date().toISOString(),
  });
  const run = await cli.run({ sandbox, model: provider.entry.model, slug: `coo-contract-run-a${n}`, files: ['src/add.ts'], maxOutputTokens: cap, runtimeSeconds, route });
  return { run, canary, cap };
}

const judge = (provider: Provider, run: OracleRun): ReturnType<typeof judgeRun> => judgeRun(run, classifyFor(provider.entry.route ?? null));

describe.each(providers)('the Oracle CLI over $name', (provider) => {
  it('succeeds with exit 0, session status completed, an answer that passes judgement, and the usage priced as the provider prices it', async () => {
    const { run, canary } = await consult(provider, 'ok');
    expect(run.exitCode).toBe(0);
    expect(run.meta?.status).toBe('completed');
    const usage = run.meta!.usage!;
    expect(usage.inputTokens).toBeGreaterThan(0);
    expect(usage.outputTokens).toBeGreaterThan(0);
    expect(usage.cost).toBeCloseTo(usage.inputTokens * provider.price[0] + usage.outputTokens * provider.price[1], 9);
    expect(judge(provider, run)).toEqual({ ok: true });
    expect(judgeAnswer({ text: run.answer!.toString('utf8'), canary, steering: [] }).status).toBe('pass');
    expect(run.stdoutTail).toContain('Saved assistant output');
  });

  it('reports quota exhaustion as aa_unavailable:quota', async () => {
    const { run } = await consult(provider, 'quota');
    expect(run.exitCode).toBe(1);
    expect(judge(provider, run)).toMatchObject({ ok: false, blocker: 'aa_unavailable:quota' });
  });

  it('reports a rate limit as aa_unavailable:rate_limited', async () => {
    const { run } = await consult(provider, 'rate-limit');
    expect(judge(provider, run)).toMatchObject({ ok: false, blocker: 'aa_unavailable:rate_limited' });
  });

  it('reports a 5xx as aa_unavailable:transport', async () => {
    const { run } = await consult(provider, 'server-error');
    expect(judge(provider, run)).toMatchObject({ ok: false, blocker: 'aa_unavailable:transport' });
  });

  it('reports a provider body that breaks off as a failure, never an answer', async () => {
    const { run } = await consult(provider, 'garbled');
    expect(run.answer).toBeNull();
    expect(judge(provider, run)).toMatchObject({ ok: false, status: 'failed' });
  });

  it('is killed by our own timer when the model hangs', async () => {
    const { run } = await consult(provider, 'hang', 3);
    expect(run.killedByTimer).toBe(true);
    expect(judge(provider, run)).toMatchObject({ ok: false, blocker: 'budget_runtime_breach', status: 'timed_out' });
  });

  it('reports an answer that stopped at the output cap (completed, as Oracle says) as output_too_large', async () => {
    const { run, cap } = await consult(provider, 'cut');
    expect(run.exitCode).toBe(0);
    expect(run.meta?.usage?.outputTokens).toBe(cap);
    expect(judge(provider, run)).toMatchObject({ ok: false, blocker: 'output_too_large', status: 'failed' });
  });

  it('reports an answer over the artifact limit as output_too_large without reading it', async () => {
    const { run } = await consult(provider, 'huge');
    expect(run.answer).toBeNull();
    expect(run.answerBytes).toBeGreaterThan(4 * 1024 * 1024);
    expect(judge(provider, run)).toMatchObject({ ok: false, blocker: 'output_too_large' });
  });
});

describe('what each provider receives', () => {
  const [chat, azure, claude, gemini] = providers as [Provider, Provider, Provider, Provider];

  it('reports an incomplete Responses answer as output_missing (max_output_tokens)', async () => {
    const { run } = await consult(azure, 'incomplete');
    expect(run.exitCode).toBe(1);
    expect(run.answer).toBeNull();
    expect(judgeRun(run)).toMatchObject({ ok: false, blocker: 'output_missing' });
  });

  it('records zero usage for a Chat Completions stream without a usage chunk', async () => {
    const { run } = await consult(chat, 'no-usage');
    expect(judgeRun(run)).toEqual({ ok: true });
    expect(run.meta?.usage?.totalTokens).toBe(0);
  });

  it('sends the pinned file with line numbers and the --max-output cap to Chat Completions', async () => {
    await consult(chat, 'ok');
    const request = server.requests[server.requests.length - 1]!;
    expect(request.prompt).toContain('### File 1: src/add.ts');
    expect(request.maxTokens).toBe(1000);
    expect(request.path).toBe('/v1/chat/completions');
    expect(request.headers['authorization']).toBe('Bearer sk-contract-key-000');
  });

  it("sends Claude one non-streamed Messages call with x-api-key, Anthropic's version and max_tokens 2048 whatever the cap", async () => {
    await consult(claude, 'ok');
    const request = server.requests[server.requests.length - 1]!;
    expect(request.path).toBe('/v1/messages');
    expect(request.model).toBe('claude-sonnet-4-6');
    expect(request.maxTokens).toBe(2048);
    expect(request.headers['x-api-key']).toBe('sk-contract-key-000');
    expect(request.headers['anthropic-version']).toBe('2023-06-01');
    expect(request.headers['authorization']).toBeUndefined();
    expect(request.prompt).toContain('### File 1: src/add.ts');
  });

  it('sends Gemini a streamed generateContent with x-goog-api-key and the cap as maxOutputTokens', async () => {
    await consult(gemini, 'ok');
    const request = server.requests[server.requests.length - 1]!;
    expect(request.path).toBe('/v1beta/models/gemini-3.1-pro-preview:streamGenerateContent');
    expect(request.maxTokens).toBe(1000);
    expect(request.headers['x-goog-api-key']).toBe('sk-contract-key-000');
    expect(request.headers['authorization']).toBeUndefined();
    expect(request.prompt).toContain('### File 1: src/add.ts');
  });

  it('makes one request per Claude and Gemini failure: Oracle retries neither', async () => {
    for (const provider of [claude, gemini]) {
      const before = server.requests.length;
      await consult(provider, 'server-error');
      expect(server.requests.length - before).toBe(1);
    }
  });
});
