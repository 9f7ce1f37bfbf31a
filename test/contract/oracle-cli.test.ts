import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { judgeAnswer } from '../../src/consult/answer.js';
import { startFakeModelServer, type FakeMode, type FakeModelServer } from '../../src/offline/fake-model-server.js';
import { OracleCli, type OracleRoute } from '../../src/consult/oracle.js';
import { judgeRun, type OracleRun } from '../../src/consult/outcome.js';
import { renderConsultPrompt } from '../../src/consult/prompt.js';
import { createSandbox, sandboxFor } from '../../src/consult/sandbox.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * The real @steipete/oracle CLI (the pinned version, under this Node) against a loopback model:
 * its Chat Completions route (--base-url) and its Responses route (--azure-endpoint).
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

async function consult(route: OracleRoute, mode: FakeMode, runtimeSeconds = 30): Promise<{ run: OracleRun; canary: string }> {
  n += 1;
  server.setModes([mode]);
  const canary = `canary-contract${n}`;
  const sandbox = sandboxFor(dir, `aa_attempt_contract_${n}`);
  const prompt = renderConsultPrompt({ question: 'Review add().', canary, repoCommit: 'a'.repeat(40), files: ['src/add.ts'] });
  createSandbox(sandbox, [{ path: 'src/add.ts', sha256: 'sha256:x', bytes: Buffer.from('export const add = (a: number, b: number) => a + b;\n') }], prompt, {
    attempt_id: `aa_attempt_contract_${n}`,
    canary,
    slug: `coo-contract-run-a${n}`,
    model: 'gpt-5.5',
    max_output_tokens: 1000,
    runtime_seconds: runtimeSeconds,
    started_at: new Date().toISOString(),
  });
  const cli = new OracleCli({ route, env: { OPENAI_API_KEY: 'sk-contract' } });
  const run = await cli.run({ sandbox, model: 'gpt-5.5', slug: `coo-contract-run-a${n}`, files: ['src/add.ts'], maxOutputTokens: 1000, runtimeSeconds, providerKeyEnv: 'OPENAI_API_KEY' });
  return { run, canary };
}

const routes: Array<[string, () => OracleRoute]> = [
  ['Chat Completions (--base-url)', () => ({ baseUrl: `${server.url}/v1` })],
  ['Responses (--azure-endpoint)', () => ({ azure: { endpoint: server.url, deployment: 'fake-deploy' } })],
];

describe.each(routes)('the Oracle CLI over %s', (_name, route) => {
  it('succeeds with exit 0, session status completed and an answer that passes judgement', async () => {
    const { run, canary } = await consult(route(), 'ok');
    expect(run.exitCode).toBe(0);
    expect(run.meta?.status).toBe('completed');
    expect(run.meta?.usage?.totalTokens).toBeGreaterThan(0);
    expect(judgeRun(run)).toEqual({ ok: true });
    expect(judgeAnswer({ text: run.answer!.toString('utf8'), canary, steering: [] }).status).toBe('pass');
    expect(run.stdoutTail).toContain('Saved assistant output');
  });

  it('reports quota exhaustion as aa_unavailable:quota', async () => {
    const { run } = await consult(route(), 'quota');
    expect(run.exitCode).toBe(1);
    expect(judgeRun(run)).toMatchObject({ ok: false, blocker: 'aa_unavailable:quota' });
  });

  it('reports a 401 as aa_unavailable:auth', async () => {
    const { run } = await consult(route(), 'auth');
    expect(judgeRun(run)).toMatchObject({ ok: false, blocker: 'aa_unavailable:auth' });
  });

  it('reports a 500 as aa_unavailable:transport', async () => {
    const { run } = await consult(route(), 'server-error');
    expect(judgeRun(run)).toMatchObject({ ok: false, blocker: 'aa_unavailable:transport' });
  });

  it('is killed by our own timer when the model hangs', async () => {
    const { run } = await consult(route(), 'hang', 2);
    expect(run.killedByTimer).toBe(true);
    expect(judgeRun(run)).toMatchObject({ ok: false, blocker: 'budget_runtime_breach', status: 'timed_out' });
  });

  it('reports an answer over the --max-output cap as output_too_large, from the usage Oracle records', async () => {
    const { run } = await consult(route(), 'over-cap');
    expect(run.exitCode).toBe(0);
    expect(run.meta?.usage?.outputTokens).toBe(2000);
    expect(judgeRun(run)).toMatchObject({ ok: false, blocker: 'output_too_large', status: 'failed' });
  });

  it('completes a malformed answer that judgement then refuses', async () => {
    const { run, canary } = await consult(route(), 'malformed');
    expect(judgeRun(run)).toEqual({ ok: true });
    expect(judgeAnswer({ text: run.answer!.toString('utf8'), canary, steering: [] })).toMatchObject({ status: 'fail', blocker: 'output_invalid' });
  });
});

describe('route-specific behaviour', () => {
  it('reports an incomplete Responses answer as output_missing (max_output_tokens)', async () => {
    const { run } = await consult({ azure: { endpoint: server.url, deployment: 'fake-deploy' } }, 'incomplete');
    expect(run.exitCode).toBe(1);
    expect(run.answer).toBeNull();
    expect(judgeRun(run)).toMatchObject({ ok: false, blocker: 'output_missing' });
  });

  it('records zero usage for a Chat Completions stream without a usage chunk', async () => {
    const { run } = await consult({ baseUrl: `${server.url}/v1` }, 'no-usage');
    expect(judgeRun(run)).toEqual({ ok: true });
    expect(run.meta?.usage?.totalTokens).toBe(0);
  });

  it('sends the pinned file with line numbers and the --max-output cap', async () => {
    await consult({ baseUrl: `${server.url}/v1` }, 'ok');
    const request = server.requests[server.requests.length - 1]!;
    expect(request.prompt).toContain('### File 1: src/add.ts');
    expect(request.maxTokens).toBe(1000);
    expect(request.path).toBe('/v1/chat/completions');
  });
});
