import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { formatPrivateKey } from '../../src/crypto/keys.js';
import { executorFactory } from '../../src/dispatch/executors.js';
import type { EaDispatchMessage } from '../../src/schema/message.js';
import { coo } from '../helpers/cli.js';
import { agentScript, codesOf } from '../helpers/hostile-agent.js';
import { dispatchEnvelope, messageFiles } from '../helpers/ledger.js';
import { receiptsOf, worlds } from '../helpers/lane.js';
import { call, rawSession, refusal } from '../helpers/mcp-raw.js';
import { git, tempDir } from '../helpers/tmp.js';

/**
 * `coo mcp` against a client that puts a NUL (`\u0000`, valid JSON and valid UTF-8) where an
 * execution agent's one argument is built from it: the task, an acceptance criterion, a verification
 * command. No argument of a process can carry one, so such a dispatch was signed, claimed and failed
 * as the runner's own INTERNAL error when the agent was to start: it is refused before anything is
 * signed, on every route that writes a dispatch, and one already in a ledger ends with a coded receipt before its agent starts.
 */
const fresh = worlds(tempDir('mcp-redteam-6-'));

describe('coo mcp asked for a dispatch whose task, criteria or commands hold a NUL', () => {
  it('refuses each with a coded tool error naming the NUL, writes nothing, and takes the same dispatch without it', async () => {
    const w = await fresh();
    const session = await rawSession(w);
    const head = w.ledger.head();
    try {
      const dispatch = (id: number, fields: Record<string, unknown>): string => call(id, 'dispatch', { to: 'ea.codex', task: 'Fix add().', scope: ['src/**'], accept: ['add(1, 2) is 3'], verify: ['true'], ...fields });
      const cases: ReadonlyArray<readonly [string, Record<string, unknown>]> = [
        ['the task', { task: 'Fix add().\u0000 Then stop.' }],
        ['an acceptance criterion', { accept: ['add(1, 2) is 3', 'no \u0000 here'] }],
        ['a verification command', { verify: ['true', 'tr\u0000ue'] }],
      ];
      let id = 0;
      for (const [where, fields] of cases) {
        id += 1;
        const found = await session.ask(dispatch(id, fields), id);
        expect([where, refusal(found)]).toEqual([where, 'tool error USAGE']);
        expect(found.result?.content?.[0]?.text).toContain('holds a NUL character (U+0000), which no argument of a process can carry');
      }
      expect(w.ledger.head()).toBe(head);
      const taken = await session.ask(dispatch(10, {}), 10);
      expect(taken.result?.structuredContent?.['message_id']).toMatch(/^msg_/);
    } finally {
      await session.close();
    }
  });

  it('coo dispatch --task-file refuses a task holding a NUL the same way, and writes nothing', async () => {
    const w = await fresh();
    const keyFile = join(w.dir, 'coo.key');
    writeFileSync(keyFile, formatPrivateKey(w.actors.coo), { mode: 0o600 });
    const taskFile = join(w.dir, 'task.md');
    writeFileSync(taskFile, 'Fix add().\0\n');
    const head = w.ledger.head();
    const result = coo(['dispatch', '--ledger', w.gitdir, '--key', keyFile, '--repo', w.target, '--to', 'ea.codex', '--task-file', taskFile, '--scope', 'src/**', '--accept', 'ok', '--verify', 'true']);
    expect(result.status).not.toBe(0);
    expect(result.stderr).toMatch(/USAGE: .*holds a NUL character \(U\+0000\)/);
    expect(result.stderr).not.toMatch(/\n\s+at /);
    expect(w.ledger.head()).toBe(head);
  });
});

describe('a dispatch holding a NUL that is already in the ledger', () => {
  it('ends with a config_error receipt written with its claim, before its agent starts', async () => {
    const w = await fresh();
    const base = git(['rev-parse', 'HEAD'], { cwd: w.target }).trim();
    // Signed past the enqueue's rule, as an older coo or a hand-written envelope would be.
    const message = dispatchEnvelope({}, new Date()) as EaDispatchMessage;
    const envelope = { ...message, dispatch: { ...message.dispatch, base_ref: base, verification_commands: ['tr\u0000ue'] } } as EaDispatchMessage;
    await w.ledger.append({ files: messageFiles(envelope), key: w.actors.coo, summary: 'dispatch', now: new Date() });
    const started = join(w.dir, 'agent-started');
    const executors = executorFactory({ command: [agentScript(w.dir, `touch ${started}`)], hide: [w.gitdir], env: { PATH: process.env['PATH'], OPENAI_API_KEY: 'sk-test' } });
    await w.runner({ executors }).runOnce();
    const [receipt, ...more] = await receiptsOf(w, envelope.message_id);
    expect(more).toEqual([]);
    expect([receipt?.['status'], codesOf(receipt)]).toEqual(['failed', ['config_error']]);
    expect(JSON.stringify(receipt?.['blockers'])).toContain('holds a NUL character (U+0000)');
    // The claim lands with the receipt, in one commit (the runner's stop before an attempt): nothing ran.
    expect(w.events.map((event) => event.type)).not.toContain('executor_started');
    expect(existsSync(started)).toBe(false);
  });
});
