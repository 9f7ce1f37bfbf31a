import { homedir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { pinnedCodexCommand } from '../../src/dispatch/codex.js';
import { enqueueDispatch } from '../../src/dispatch/enqueue.js';
import { executorFactory } from '../../src/dispatch/executors.js';
import { startScriptedResponsesServer } from '../../src/offline/fake-responses-server.js';
import { makeTargetRepo } from '../helpers/dispatch-repo.js';
import { KEY_PLACEHOLDER, startEchoGateway } from '../helpers/echo-gateway.js';
import { receiptsOf, worlds, type World } from '../helpers/lane.js';
import { git, tempDir } from '../helpers/tmp.js';

/**
 * A gateway that repeats the provider key it was handed, in an error, in an answer and in an event
 * stream, through both lanes with the real pinned CLIs (Oracle for a consult, Codex for a
 * dispatch): the key never enters the ledger, nor do the runner's own folders (its state folder,
 * the attempt's sandbox or worktree, the user's home). Signed entries cannot be taken back.
 */
const dir = tempDir('coo-secret-scrub-');
const world = worlds(dir);
const KEY = 'sk-proj-EchoedBack0123456789abcdefSECRET';

/** Every object of the ledger (blobs, trees, commits) as text. */
function ledgerText(w: World): string {
  return git(['--git-dir', w.gitdir, 'cat-file', '--batch-all-objects', '--batch']);
}

/** The runner's own folders, none of which may be named in the ledger. */
function runnerFolders(w: World): string[] {
  return [join(w.dir, 'state'), w.dir, homedir()].filter((path) => path.length > 4);
}

function expectClean(w: World): string {
  const text = ledgerText(w);
  expect(text).not.toContain(KEY);
  expect(text).not.toContain(KEY.slice(8));
  for (const folder of runnerFolders(w)) {
    const named = [...text.matchAll(new RegExp(`.{0,60}(?<![A-Za-z0-9._~/-])${folder.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}(?![A-Za-z0-9._-]).{0,40}`, 'g'))].map((match) => match[0]);
    expect(named, folder).toEqual([]);
  }
  return text;
}

describe('what a transport echoes never reaches the ledger', () => {
  it('a consult through the real Oracle: the key in a 401 error and in a streamed answer, and the sandbox paths of the session record, are scrubbed before they are signed', async () => {
    const w = await world();
    const gateway = await startEchoGateway(w.server.url, 'reject');
    try {
      const runner = w.runner({ transport: w.transport({ route: { baseUrl: `${gateway.url}/v1` }, env: { OPENAI_API_KEY: KEY } }) });
      const rejected = await w.consult({ idempotencyKey: 'rejected' });
      await runner.runOnce();
      gateway.mode = 'echo';
      const echoed = await w.consult({ idempotencyKey: 'echoed' });
      await runner.runOnce();

      // The gateway did echo the key it was sent, in both.
      expect(gateway.keys.length).toBeGreaterThanOrEqual(2);
      expect(new Set(gateway.keys)).toEqual(new Set([KEY]));
      const [refused] = await receiptsOf(w, rejected.messageId);
      expect(refused).toMatchObject({ status: 'failed' });
      expect(JSON.stringify(refused)).toContain('[removed: OPENAI_API_KEY]');
      const [answered] = await receiptsOf(w, echoed.messageId);
      const answer = (await w.ledger.readFile(answered!['output_ref'] as string))!.toString('utf8');
      expect(answer).toContain('The key you sent is [removed: OPENAI_API_KEY].');
      const session = await w.ledger.readFile((answered!['attachments'] as Array<{ path: string }>).find((item) => item.path.endsWith('oracle-session.json'))!.path);
      expect(session!.toString('utf8')).toContain('[sandbox]');
      expect(() => JSON.parse(session!.toString('utf8')) as unknown).not.toThrow();
      expectClean(w);
    } finally {
      await gateway.close();
    }
  });

  it('a dispatch through the real Codex: the key in a command, its output, the final message and a 401 error, and the worktree paths of the event stream, are scrubbed before they are signed', async () => {
    const w = await world();
    const repo = join(w.dir, 'work');
    makeTargetRepo(repo);
    const model = await startScriptedResponsesServer([
      { kind: 'shell', cmd: `echo ${KEY_PLACEHOLDER}; pwd` },
      { kind: 'message', text: `Done. The key I was given is ${KEY_PLACEHOLDER}.` },
    ]);
    const gateway = await startEchoGateway(model.url);
    try {
      const executors = executorFactory({ command: pinnedCodexCommand(), baseUrl: `${gateway.url}/v1`, hide: [w.gitdir], env: { ...process.env, OPENAI_API_KEY: KEY } });
      const runner = w.runner({ repo, executors });
      const dispatch = (idempotencyKey: string) =>
        enqueueDispatch({ ledger: w.ledger, key: w.actors.coo, now: new Date(), target: 'ea.codex', repo, task: 'Fix add() so that test.sh passes.', scope: ['src/**'], accept: ['test.sh passes'], verify: ['sh test.sh'], timeoutSeconds: 120, maxRuntimeSeconds: 120, idempotencyKey });
      const echoed = await dispatch('echoed');
      await runner.runOnce();
      gateway.mode = 'reject';
      const rejected = await dispatch('rejected');
      await runner.runOnce();

      expect(new Set(gateway.keys)).toEqual(new Set([KEY]));
      const [first] = await receiptsOf(w, echoed.messageId);
      const files = new Map<string, string>();
      for (const item of first!['attachments'] as Array<{ path: string }>) files.set(item.path.split('/').pop()!, (await w.ledger.readFile(item.path))!.toString('utf8'));
      expect(files.get('codex-events.jsonl')).toContain('echo [removed: OPENAI_API_KEY]');
      expect(files.get('codex-events.jsonl')).toContain('[worktree]');
      expect(files.get('final-message.md')).toBe('Done. The key I was given is [removed: OPENAI_API_KEY].');
      for (const line of files.get('codex-events.jsonl')!.trim().split('\n')) expect(() => JSON.parse(line) as unknown).not.toThrow();
      const [second] = await receiptsOf(w, rejected.messageId);
      expect(second).toMatchObject({ status: 'failed' });
      const stream = (await w.ledger.readFile((second!['attachments'] as Array<{ path: string }>).find((item) => item.path.endsWith('codex-events.jsonl'))!.path))!.toString('utf8');
      expect(stream).toContain('[removed: OPENAI_API_KEY]');
      expectClean(w);
    } finally {
      await gateway.close();
      await model.close();
    }
  });
});
