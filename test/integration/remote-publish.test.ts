import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { startFakeModelServer } from '../../src/offline/fake-model-server.js';
import { Ledger } from '../../src/ledger/ledger.js';
import { COO, coo, cooAsync } from '../helpers/cli.js';
import { FAKE_ORACLE } from '../helpers/lane.js';
import { makeTargetRepo } from '../helpers/dispatch-repo.js';
import { TASK, dispatchEnvelope } from '../helpers/ledger.js';
import { toYaml } from '../../src/schema/strict-yaml.js';
import { startGitHttp, type GitHttpServer } from '../helpers/git-http.js';
import { consultThrough, holdPushesUntil, makeServedLedger, makeWriter, publishedJson, type ServedLedger } from '../helpers/remote-ledger.js';
import { startSshd, type SshServer } from '../helpers/sshd.js';
import { git, tempDir } from '../helpers/tmp.js';

const dir = tempDir('coo-remote-publish-');
let sshd: SshServer;
const https: GitHttpServer[] = [];

beforeAll(async () => {
  sshd = await startSshd(join(dir, 'sshd'));
});

afterAll(async () => {
  await sshd?.close();
  for (const server of https) await server.close();
});

interface Transport {
  readonly name: string;
  url(served: ServedLedger): Promise<string>;
  env(): NodeJS.ProcessEnv;
}

const transports: Transport[] = [
  { name: 'ssh://', url: async (served) => sshd.url(served.gitdir), env: () => sshd.env },
  {
    name: 'git http-backend',
    url: async (served) => {
      const server = await startGitHttp(served.root);
      https.push(server);
      return server.url(served.name);
    },
    env: () => ({}),
  },
];

function isAncestor(gitdir: string, ancestor: string, descendant: string): boolean {
  try {
    git(['--git-dir', gitdir, 'merge-base', '--is-ancestor', ancestor, descendant]);
    return true;
  } catch {
    return false;
  }
}

describe('publishing through a remote', () => {
  it.each(transports)('two COOs on two clones enqueue at the same moment, and both land (over $name, with the hook on the remote)', async (transport) => {
    const caseDir = join(dir, transport.name.replace(/\W+/g, '-'));
    const served = await makeServedLedger(caseDir);
    const url = await transport.url(served);
    const first = await makeWriter(caseDir, 'coo-1', served, url, transport.env());
    const second = await makeWriter(caseDir, 'coo-2', served, url, transport.env());
    const before = served.seq();
    // Both pushes wait in the remote's hook until both have arrived: both were built on one head.
    holdPushesUntil(served, caseDir, 2);

    const results = (await Promise.all([consultThrough(first, served), consultThrough(second, served)])).map(publishedJson);

    expect(results.map((result) => result.existing)).toEqual([false, false]);
    expect(new Set(results.map((result) => result.message_id)).size).toBe(2);
    // One push won the race; the other was refused, rebuilt on the winner's commit and pushed again.
    expect(results.map((result) => result.remote.conflicts).sort()).toEqual([0, 1]);
    expect(results.map((result) => result.remote.tries).sort()).toEqual([1, 2]);
    expect(results.every((result) => result.remote.url === url)).toBe(true);
    const head = served.head();
    expect(served.seq(head)).toBe(before + 2);
    for (const result of results) expect(isAncestor(served.gitdir, result.commit!, head)).toBe(true);
    // Each writer's local main is where its own write landed: nothing unpublished stays there.
    for (const [index, writer] of [first, second].entries()) expect(writer.head()).toBe(results[index]!.commit);
    expect(coo(['verify', '--ledger', served.gitdir, '--no-checkpoint']).status).toBe(0);
  }, 120_000);

  it('publishes kill-switch, trust, append, approve and dispatch through the remote, and their --json says how', async () => {
    const caseDir = join(dir, 'verbs');
    const served = await makeServedLedger(caseDir);
    const url = await transports[1]!.url(served);
    const ceo = await makeWriter(caseDir, 'ceo', served, url);
    const published = async (args: string[]): Promise<Record<string, unknown>> => {
      const before = served.seq();
      const result = await cooAsync([...args, '--ledger', ceo.gitdir, '--remote', url, '--json'], { env: ceo.env });
      expect(result.stderr).toBe('');
      expect(result.status).toBe(0);
      const parsed = JSON.parse(result.stdout) as Record<string, unknown>;
      expect(parsed['remote']).toEqual({ url, tries: 1, conflicts: 0 });
      expect(parsed['commit']).toBe(served.head());
      expect(served.seq()).toBe(before + 1);
      expect(ceo.head()).toBe(served.head());
      return parsed;
    };

    expect(await published(['kill-switch', 'on', '--reason', 'maintenance', '--key', served.keys.ceo])).toMatchObject({ state: 'on', set_by: 'ceo' });
    expect(await published(['kill-switch', 'off', '--reason', 'done', '--key', served.keys.ceo])).toMatchObject({ state: 'off' });
    const policy = git(['--git-dir', served.gitdir, 'show', 'main:trust/policy/000001.yaml']).replace(/^version: 1$/m, 'version: 2');
    writeFileSync(join(caseDir, 'policy2.yaml'), policy);
    expect(await published(['trust', '--policy', join(caseDir, 'policy2.yaml'), '--ceo-key', served.keys.ceo])).toMatchObject({ role: 'policy', version: 2 });
    const envelope = dispatchEnvelope({}, new Date());
    writeFileSync(join(caseDir, 'envelope.yaml'), toYaml(envelope));
    writeFileSync(join(caseDir, 'prompt.md'), TASK);
    expect(await published(['append', join(caseDir, 'envelope.yaml'), join(caseDir, 'prompt.md'), '--key', served.keys.coo])).toMatchObject({ message_id: envelope.message_id, existing: false });
    // The dispatch lane's writers publish the same way: a dispatch the policy gives to the CEO, its approval, the dispatch.
    const work = join(caseDir, 'work');
    makeTargetRepo(work);
    const request = ['--to', 'ea.claude_code', '--repo', work, '--task', 'Fix add().', '--scope', 'src/**', '--accept', 'test.sh passes', '--verify', 'sh test.sh', '--idempotency-key', 'remote-dispatch'];
    const refused = await cooAsync(['dispatch', ...request, '--ledger', ceo.gitdir, '--remote', url, '--key', served.keys.coo], { env: ceo.env });
    expect(refused.status).toBe(3);
    const hash = /--request (sha256:[0-9a-f]{64})/.exec(refused.stderr)![1]!;
    const approved = await published(['approve', '--request', hash, '--reason', 'over the remote', '--ceo-key', served.keys.ceo]);
    expect(await published(['dispatch', ...request, '--approval', approved['approval_id'] as string, '--key', served.keys.coo])).toMatchObject({ existing: false, envelope: { approval_id: approved['approval_id'] } });
  });

  it('an agent COO on its own clone consults over MCP through the remote (coo mcp --remote --run), and the receipt comes back through it', async () => {
    const caseDir = join(dir, 'mcp');
    const served = await makeServedLedger(caseDir);
    const url = sshd.url(served.gitdir);
    const agent = await makeWriter(caseDir, 'agent', served, url, sshd.env);
    const model = await startFakeModelServer(['ok']);
    const wrapper = join(agent.home, 'oracle-http.sh');
    writeFileSync(wrapper, `#!/bin/sh\nexec "${process.execPath}" "${FAKE_ORACLE}" --fake-mode http "$@"\n`, { mode: 0o755 });
    const client = new Client({ name: 'coo-test', version: '0.0.0' });
    const env: Record<string, string> = {};
    for (const [name, value] of Object.entries({ ...process.env, ...agent.env, OPENAI_API_KEY: 'sk-test-key' })) if (value !== undefined) env[name] = value;
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [COO, 'mcp', '--remote', url, '--ledger', agent.gitdir, '--key', served.keys.coo, '--repo', served.target, '--run', '--state-dir', join(agent.home, 'state'), '--oracle-command', wrapper, '--oracle-base-url', `${model.url}/v1`, '--poll-interval', '0.5'],
      env,
      stderr: 'pipe',
    });
    try {
      await client.connect(transport);
      const result = (await client.callTool({ name: 'consult', arguments: { to: 'aa.chatgpt', files: ['README.md'], prompt: 'Is add() correct for NaN?', wait_seconds: 90 } })) as CallToolResult;
      expect(result.isError).not.toBe(true);
      const outcome = result.structuredContent as { message_id: string; state: string; receipt: { status: string } | null };
      expect(outcome).toMatchObject({ state: 'succeeded', receipt: { status: 'succeeded' } });
      // The remote holds the envelope, the claim and the receipt; the model was paid once.
      const remote = Ledger.open(served.gitdir);
      try {
        const record = (await remote.state()).messages.get(outcome.message_id)!;
        expect(record.submittedVia).toBe('mcp');
        expect(record.attempts.map((attempt) => attempt.receipt?.status)).toEqual(['succeeded']);
      } finally {
        remote.close();
      }
      expect(model.requests).toHaveLength(1);
    } finally {
      await client.close();
      await model.close();
    }
  }, 180_000);
});

