import { spawn, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { formatPrivateKey } from '../../src/crypto/keys.js';
import { COO, coo } from '../helpers/cli.js';
import { exited, until } from '../helpers/child.js';
import { enqueuePanel } from '../../src/consult/enqueue.js';
import { receiptsOf, blockersOf, offlineEndpoints, type World, worlds } from '../helpers/lane.js';
import { tempDir } from '../helpers/tmp.js';

const fresh = worlds(tempDir());

function runnerProcess(w: World, keyFile: string, state = 'state'): ChildProcess {
  // Claude's and Gemini's routes point at the offline model as the in-process runner's do (helpers/lane.ts).
  const endpoints = offlineEndpoints(w.server);
  return spawn(
    process.execPath,
    [
      COO, 'watch', '--once', '--json', '--ledger', w.gitdir, '--key', keyFile, '--repo', w.target, '--state-dir', join(w.dir, state),
      '--oracle-base-url', `${w.server.url}/v1`, '--oracle-anthropic-url', endpoints.anthropic!, '--oracle-gemini-url', endpoints.google!, '--oracle-host', 'api.anthropic.com=127.0.0.1',
    ],
    { env: { ...process.env, OPENAI_API_KEY: 'sk-test-key', ANTHROPIC_API_KEY: 'sk-ant-test-key', GEMINI_API_KEY: 'gemini-test-key' }, stdio: ['ignore', 'pipe', 'pipe'] },
  );
}

async function keyFileFor(w: World): Promise<string> {
  const { writeFileSync } = await import('node:fs');
  const path = join(w.dir, 'coo.key');
  writeFileSync(path, formatPrivateKey(w.actors.coo), { mode: 0o600 });
  return path;
}

/** A consult whose runner was killed with SIGKILL once the question reached the model. */
async function runnerDied(w: World): Promise<{ messageId: string; keyFile: string }> {
  const { messageId } = await w.consult();
  const keyFile = await keyFileFor(w);
  const first = runnerProcess(w, keyFile);
  await until(() => w.server.requests.length === 1, 'the model request');
  first.kill('SIGKILL');
  await exited(first);
  return { messageId, keyFile };
}

/** A consult whose runner and whose Oracle were both killed with SIGKILL once the question reached the model. */
async function bothDied(w: World): Promise<{ messageId: string; keyFile: string }> {
  const { messageId, keyFile } = await runnerDied(w);
  const sandbox = readdirSync(join(w.dir, 'state', 'sandboxes'))[0]!;
  const pid = Number(readFileSync(join(w.dir, 'state', 'sandboxes', sandbox, 'oracle.pid'), 'utf8').split(' ')[0]);
  process.kill(-pid, 'SIGKILL');
  return { messageId, keyFile };
}

describe('crash safety', () => {
  it('harvests a completed Oracle session after the runner is killed mid-consult, without paying twice', async () => {
    const w = await fresh({ modes: ['slow'] });
    const { messageId, keyFile } = await runnerDied(w);
    const state = await w.ledger.state();
    expect(state.messages.get(messageId)!.attempts[0]!.receipt).toBeNull();
    const second = runnerProcess(w, keyFile);
    expect(await exited(second)).toBe(0);
    const receipts = await receiptsOf(w, messageId);
    expect(receipts.map((receipt) => receipt['status'])).toEqual(['succeeded']);
    expect(w.server.requests).toHaveLength(1);
    expect(coo(['verify', '--ledger', w.gitdir]).status).toBe(0);
  });

  it('records an interrupted attempt when the runner and its Oracle both died, and runs a new attempt', async () => {
    const w = await fresh({ modes: ['hang', 'ok'] });
    const { messageId, keyFile } = await bothDied(w);
    const second = runnerProcess(w, keyFile);
    expect(await exited(second)).toBe(0);
    const receipts = await receiptsOf(w, messageId);
    expect(receipts.map((receipt) => receipt['status'])).toEqual(['failed', 'succeeded']);
    expect(blockersOf(receipts[0]!)).toEqual(['interrupted']);
    // The question the dead runner's Oracle sent is kept with the interrupted receipt, under the hash the receipt states.
    const sent = (receipts[0]!['attachments'] as Array<{ path: string; sha256: string }>).find((item) => item.path.endsWith('/prompt-sent.md'));
    expect(sent?.sha256).toBe(receipts[0]!['bundle_hash']);
    expect(w.server.requests[0]!.prompt).toContain((await w.ledger.readFile(sent!.path))!.toString('utf8').trim());
    expect(new Set(w.server.requests.map((request) => request.canary)).size).toBe(2);
    expect(coo(['verify', '--ledger', w.gitdir]).status).toBe(0);
  });
});

describe('a runner of this host that died, recovered by one with another state folder', () => {
  it("charges the dead runner's call as a taken-over one: its files are in a folder the recovering runner does not read", async () => {
    const w = await fresh({ modes: ['hang', 'ok'] });
    const { messageId, keyFile } = await bothDied(w);
    const second = runnerProcess(w, keyFile, 'other-state');
    expect(await exited(second)).toBe(0);
    const receipts = await receiptsOf(w, messageId);
    expect(receipts.map((receipt) => receipt['status'])).toEqual(['failed', 'succeeded']);
    expect(blockersOf(receipts[0]!)).toEqual(['interrupted']);
    // The question reached the model and may have been paid for: the interrupted attempt is charged, not free.
    expect(receipts[0]!['actual_cost_usd']).toBeGreaterThan(0);
    expect(JSON.stringify(receipts[0])).toContain('this state folder holds none of its files');
    expect(coo(['verify', '--ledger', w.gitdir]).status).toBe(0);
  });
});

describe('a panel under crash and retry', () => {
  it('pays each member once per attempt: killed mid-panel, the answers in flight are harvested and the lost call is bought again only as a new attempt', async () => {
    const members = ['aa.chatgpt', 'aa.claude', 'aa.gemini'];
    const w = await fresh({ policy: (policy) => ({ ...policy, panels: [{ name: 'review', from: 'coo.*', members }] }) });
    // ChatGPT and Gemini answer after the runner is gone; Claude's first call never answers, and its Oracle dies with the runner.
    w.server.setModelModes('gpt-5.5', ['slow']);
    w.server.setModelModes('gemini-3.1-pro-preview', ['slow']);
    w.server.setModelModes('claude-sonnet-4-6', ['hang', 'ok']);
    const panel = await enqueuePanel({ ledger: w.ledger, key: w.actors.coo, now: new Date(), repo: w.target, patterns: ['src/add.ts'], question: 'Is add() correct?', maxRuntimeSeconds: 60 });
    const ids = new Map(panel.members.map((member) => [member.target, member.messageId]));
    const keyFile = await keyFileFor(w);
    const first = runnerProcess(w, keyFile);
    await until(() => w.server.requests.length === 3, 'the three members\' calls');
    first.kill('SIGKILL');
    await exited(first);
    const claudeSandbox = readdirSync(join(w.dir, 'state', 'sandboxes')).find((name) => name.includes(ids.get('aa.claude')!.slice(4)))!;
    const pid = Number(readFileSync(join(w.dir, 'state', 'sandboxes', claudeSandbox, 'oracle.pid'), 'utf8').split(' ')[0]);
    process.kill(-pid, 'SIGKILL');
    const second = runnerProcess(w, keyFile);
    expect(await exited(second)).toBe(0);
    const statuses = async (actor: string): Promise<unknown[]> => (await receiptsOf(w, ids.get(actor)!)).map((receipt) => receipt['status']);
    expect(await statuses('aa.chatgpt')).toEqual(['succeeded']);
    expect(await statuses('aa.gemini')).toEqual(['succeeded']);
    const claude = await receiptsOf(w, ids.get('aa.claude')!);
    expect(claude.map((receipt) => receipt['status'])).toEqual(['failed', 'succeeded']);
    expect(blockersOf(claude[0]!)).toEqual(['interrupted']);
    // One paid call per member per attempt: every call has its own attempt's canary, and no canary was sent twice.
    const calls = (model: string): number => w.server.requests.filter((request) => request.model === model).length;
    expect([calls('gpt-5.5'), calls('claude-sonnet-4-6'), calls('gemini-3.1-pro-preview')]).toEqual([1, 2, 1]);
    const canaries = w.server.requests.map((request) => request.canary);
    expect(new Set(canaries).size).toBe(canaries.length);
    expect(coo(['verify', '--ledger', w.gitdir]).status).toBe(0);
  });
});

describe('two runners on one ledger', () => {
  it('never consult twice for one message', async () => {
    const w = await fresh();
    const ids: string[] = [];
    for (let i = 0; i < 5; i += 1) ids.push((await w.consult({ idempotencyKey: `pair-${i}` })).messageId);
    const keyFile = await keyFileFor(w);
    const runners = [runnerProcess(w, keyFile), runnerProcess(w, keyFile)];
    expect(await Promise.all(runners.map(exited))).toEqual([0, 0]);
    for (const id of ids) {
      const receipts = await receiptsOf(w, id);
      expect(receipts.map((receipt) => receipt['status'])).toEqual(['succeeded']);
    }
    expect(w.server.requests).toHaveLength(5);
    expect(new Set(w.server.requests.map((request) => request.canary)).size).toBe(5);
    expect(coo(['verify', '--ledger', w.gitdir]).status).toBe(0);
  });
});
