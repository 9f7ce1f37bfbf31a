import { spawn } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { formatPrivateKey } from '../../src/crypto/keys.js';
import { openConsultBridge } from '../../src/dispatch/consult-bridge.js';
import { executorFactory } from '../../src/dispatch/executors.js';
import type { EaDispatchMessage } from '../../src/schema/message.js';
import { COO, coo } from '../helpers/cli.js';
import { agentScript, codesOf } from '../helpers/hostile-agent.js';
import { dispatchEnvelope, messageFiles } from '../helpers/ledger.js';
import { receiptsOf, worlds, type World } from '../helpers/lane.js';
import { answersOf, call, INITIALIZE, line, rawSession, refusal, type Answer } from '../helpers/mcp-raw.js';
import { Scrubber } from '../../src/util/scrub.js';
import { git, tempDir } from '../helpers/tmp.js';

/**
 * `coo mcp` against a client that puts a NUL (`\u0000`, valid JSON and valid UTF-8) where an
 * execution agent's one argument is built from it: the task, an acceptance criterion, a verification
 * command. No argument of a process can carry one, so such a dispatch was signed, claimed and failed
 * as the runner's own INTERNAL error when the agent was to start: it is refused before anything is
 * signed, on every route that writes a dispatch, and one already in a ledger ends with a coded receipt before its agent starts.
 * And a client that pipes its requests in and closes stdin, which had the session closed under them
 * unanswered: each is answered before `coo mcp` exits.
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

describe('coo mcp asked to pin a file or bound a scope by a path holding a NUL, or a scope that leaves the repository', () => {
  it('refuses each with words that name the NUL (not an escape), or name the scope as the caller gave it, and writes nothing', async () => {
    const w = await fresh();
    const session = await rawSession(w);
    const head = w.ledger.head();
    try {
      const dispatch = { to: 'ea.codex', task: 'Fix add().', scope: ['src/**'], accept: ['add(1, 2) is 3'], verify: ['true'] };
      const cases: ReadonlyArray<readonly [string, string, string]> = [
        [call(1, 'consult', { to: 'aa.chatgpt', files: ['src/\u0000add.ts'], prompt: 'Is add() right?' }), 'tool error CONTEXT_INVALID', 'files "src/\\u0000add.ts" holds a NUL character (U+0000), which no path can hold'],
        [call(2, 'dispatch', { ...dispatch, files: ['src/add.ts\u0000'] }), 'tool error CONTEXT_INVALID', 'files "src/add.ts\\u0000" holds a NUL character (U+0000), which no path can hold'],
        [call(3, 'dispatch', { ...dispatch, scope: ['src/**', 'te\u0000st/**'] }), 'tool error USAGE', 'scope "te\\u0000st/**" holds a NUL character (U+0000), which no path can hold'],
        [call(4, 'dispatch', { ...dispatch, scope: ['../other/**'] }), 'tool error USAGE', 'scope "../other/**" is not a path relative to the repository root'],
      ];
      for (const [index, [request, code, words]] of cases.entries()) {
        const found = await session.ask(request, index + 1);
        expect([index, refusal(found)]).toEqual([index, code]);
        const text = found.result?.content?.[0]?.text ?? '';
        expect(text).toContain(words);
        expect(text).not.toContain('escapes the repository');
      }
      expect(w.ledger.head()).toBe(head);
    } finally {
      await session.close();
    }
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

describe('coo mcp whose client pipes its requests in and closes stdin', () => {
  /** `coo mcp` run on `input` as a client that writes it all and closes stdin: its exit code, every answer, its stderr. */
  async function piped(w: World, input: string): Promise<{ code: number | null; answers: Answer[]; stderr: string }> {
    const keyPath = join(w.dir, 'coo.key');
    writeFileSync(keyPath, formatPrivateKey(w.actors.coo), { mode: 0o600 });
    const child = spawn(process.execPath, [COO, 'mcp', '--ledger', w.gitdir, '--key', keyPath, '--repo', w.target], { env: { ...process.env, COO_LEDGER: '', COO_KEY: '' }, stdio: 'pipe' });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    const { answers } = answersOf(child.stdout);
    const exited = new Promise<number | null>((resolve) => child.on('close', resolve));
    child.stdin.end(input);
    return { code: await exited, answers, stderr };
  }

  it('answers every request before it exits: a consult waiting for its receipt with what it has, and a last line without its newline', async () => {
    const w = await fresh();
    const head = w.ledger.head();
    const ask = { to: 'aa.chatgpt', files: ['src/add.ts'], prompt: 'Is add() right for NaN?' };
    // No runner serves it, so the consult stays queued: waiting 600 s for its receipt would outlast the test.
    const { code, answers, stderr } = await piped(w, line(INITIALIZE) + line({ method: 'notifications/initialized' }) + call(1, 'consult', { ...ask, wait_seconds: 600 }) + '{"jsonrpc":"2.0","id":2,"method":"ping"}');
    expect(code).toBe(0);
    expect(stderr).not.toMatch(/\n {4}at |Unhandled/);
    expect(answers.map((answer) => answer.id).sort()).toEqual([0, 1, 2]);
    const consult = answers.find((answer) => answer.id === 1)?.result?.structuredContent;
    const consults = [...(await w.ledger.state()).messages.values()].filter((record) => record.intent === 'aa_consult');
    expect(consults.map((record) => record.id)).toEqual([consult?.['message_id']]);
    expect([consult?.['state'], consult?.['terminal']]).toEqual(['queued', false]);
    expect(answers.find((answer) => answer.id === 2)?.result).toEqual({});
    expect(w.ledger.head()).not.toBe(head);
    expect(coo(['verify', '--ledger', w.gitdir]).status).toBe(0);
  }, 60_000);

  it('refuses half a message left at the end of stdin with a coded error, and exits 0', async () => {
    const w = await fresh();
    const { code, answers } = await piped(w, line(INITIALIZE) + '{"jsonrpc":"2.0","id":1,"meth');
    expect(code).toBe(0);
    expect(answers.slice(1).map((answer) => [answer.id, refusal(answer)])).toEqual([[null, '-32700 MCP_MESSAGE_INVALID']]);
  }, 60_000);
});

describe("the consult relay whose agent pipes its consult in and closes stdin", () => {
  it("hands the runner's answer back before it exits, a last line without its newline among what it reads", async () => {
    let release: () => void = () => undefined;
    const held = new Promise<void>((resolve) => (release = resolve));
    const seen: unknown[] = [];
    const bridge = await openConsultBridge(async (request) => {
      seen.push(request);
      await held;
      return { ok: true, text: 'the answer', result: {} };
    }, new Scrubber());
    try {
      const child = spawn(process.execPath, [COO, 'consult-relay', '--socket', bridge.socket], { env: { ...process.env, COO_LEDGER: '', COO_KEY: '' }, stdio: 'pipe' });
      const exited = new Promise<number | null>((resolve) => child.on('close', resolve));
      const { answers, answer } = answersOf(child.stdout);
      child.stdin.end(line(INITIALIZE) + line({ method: 'notifications/initialized' }) + call(1, 'consult', { to: 'aa.chatgpt', question: 'Is add() right for NaN?', files: ['src/add.ts'] }).trimEnd());
      await answer(0, 0);
      // The runner holds its answer until the call has reached it: the relay, its stdin ended, waits for it.
      for (let turn = 0; turn < 2000 && seen.length === 0; turn += 1) await new Promise((resolve) => setTimeout(resolve, 5));
      expect(seen).toHaveLength(1);
      release();
      expect(await exited).toBe(0);
      expect(answers.map((found) => [found.id, found.result?.content?.[0]?.text ?? null])).toEqual([[0, null], [1, expect.stringContaining('the answer')]]);
    } finally {
      release();
      await bridge.close();
    }
  }, 60_000);
});
