import { spawn } from 'node:child_process';
import { createConnection, createServer } from 'node:net';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { callConsultBridge, openConsultBridge } from '../../src/dispatch/consult-bridge.js';
import { formatPrivateKey } from '../../src/crypto/keys.js';
import { CooError } from '../../src/errors.js';
import { sendCommand } from '../../src/inbox/ceo-messages.js';
import { LIMITS } from '../../src/limits.js';
import { Scrubber } from '../../src/util/scrub.js';
import { COO, coo } from '../helpers/cli.js';
import { worlds } from '../helpers/lane.js';
import { answersOf, call, INITIALIZE, line, rawSession, refusal } from '../helpers/mcp-raw.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * `coo mcp` and the consult relay against a raw client that sends what no SDK would (ids of every
 * JSON type, responses and notifications where requests belong, a request asking to run as a task,
 * a line past the bound), and the runner's consult socket answering a refusal that names the
 * runner's own folders: every refusal is a coded JSON-RPC error or tool error, the session serves
 * on, nothing is written, and the agent hears nothing of the runner's folders or secrets.
 */
const fresh = worlds(tempDir('mcp-redteam-4-'));

describe('coo mcp against request lines no SDK sends', () => {
  it('answers ids of every JSON type, responses, notifications with an id, a BOM, CRLF and names or keys like __proto__ with coded errors or as the protocol says, and writes nothing', async () => {
    const w = await fresh();
    const command = (await sendCommand({ ledger: w.ledger, key: w.actors.ceo, now: new Date(), text: 'Ship it.' })).messageId;
    const session = await rawSession(w);
    const head = w.ledger.head();
    try {
      const ping = (id: string): string => `{"jsonrpc":"2.0","id":${id},"method":"ping"}\n`;
      const cases: ReadonlyArray<readonly [string, string, string | number | null, string]> = [
        ['a float id', ping('1.5'), null, '-32600 MCP_MESSAGE_INVALID'],
        ['an id of 1e400 (Infinity once parsed)', ping('1e400'), null, '-32600 MCP_MESSAGE_INVALID'],
        ['an id past 2^53', ping('9007199254740993'), null, '-32600 MCP_MESSAGE_INVALID'],
        ['a boolean id', ping('true'), null, '-32600 MCP_MESSAGE_INVALID'],
        ['a null id', ping('null'), null, '-32600 MCP_MESSAGE_INVALID'],
        ['an array id', ping('[1]'), null, '-32600 MCP_MESSAGE_INVALID'],
        ['an empty string id', ping('""'), '', 'answered'],
        ['a negative id', ping('-3'), -3, 'answered'],
        ['a line that starts with a byte order mark', `\ufeff${ping('4')}`, null, '-32700 MCP_MESSAGE_INVALID'],
        ['a line that ends with CRLF', ping('5').replace('\n', '\r\n'), 5, 'answered'],
        ['a notification sent with an id', line({ id: 6, method: 'notifications/initialized' }), 6, '-32601 USAGE'],
        ['a request that also carries a result', line({ id: 7, method: 'ping', result: {} }), 7, '-32600 MCP_MESSAGE_INVALID'],
        ['params as an array', line({ id: 8, method: 'tools/list', params: [] }), 8, '-32600 MCP_MESSAGE_INVALID'],
        ['arguments whose only key is __proto__', `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"ack","arguments":{"__proto__":{"message_id":"${command}"}}}}\n`, 9, 'tool error USAGE'],
        ['arguments with a constructor key', call(10, 'ack', { message_id: command, constructor: 1 }), 10, 'tool error USAGE'],
        ['a tool named __proto__', call(12, '__proto__', {}), 12, 'tool error USAGE'],
        ['a tool named constructor', call(13, 'constructor', {}), 13, 'tool error USAGE'],
        ['a method named constructor', line({ id: 14, method: 'constructor', params: {} }), 14, '-32601 USAGE'],
        ['a number of 1e400 in the arguments', `{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"wait","arguments":{"message_id":"${command}","timeout_seconds":1e400}}}\n`, 11, 'tool error USAGE'],
      ];
      for (const [name, text, id, expected] of cases) expect([name, refusal(await session.ask(text, id))]).toEqual([name, expected]);
      // Responses to requests the server never sent are not answered (JSON-RPC answers no response), and nothing stays held for them.
      const from = session.answers.length;
      session.stdin.write(line({ id: 20, result: {} }) + line({ id: 21, error: { code: 1, message: 'x' } }) + line({ method: 'no/such/notification' }));
      expect((await session.ask(ping('22'), 22)).result).toEqual({});
      expect(session.answers.slice(from).map((found) => found.id)).toEqual([22]);
      expect(w.ledger.head()).toBe(head);
    } finally {
      await session.close();
    }
  });

  it('refuses a tool call asking to run as a task as the client\'s mistake, runs none of it and serves on', async () => {
    const w = await fresh();
    const command = (await sendCommand({ ledger: w.ledger, key: w.actors.ceo, now: new Date(), text: 'Ship it.' })).messageId;
    const session = await rawSession(w);
    const head = w.ledger.head();
    try {
      // The SDK answered it -32603 "INTERNAL: Server does not support task creation ...: report it to the operator".
      const refused = await session.ask(call(1, 'ack', { message_id: command }, { task: { ttl: 60_000 } }), 1);
      expect([refused.id, refusal(refused)]).toEqual([1, '-32602 MCP_MESSAGE_INVALID']);
      expect(refused.error?.message).toMatch(/runs no tasks .*: send it without params\.task$/);
      expect(w.ledger.head()).toBe(head);
      const inbox = await session.ask(call(2, 'inbox', {}), 2);
      expect((inbox.result?.structuredContent?.['items'] as Array<{ message_id: string }>).map((item) => item.message_id)).toEqual([command]);
    } finally {
      await session.close();
    }
  });

  it('refuses a string holding a lone surrogate, which has no UTF-8 bytes, naming where it is, and takes a whole pair escaped', async () => {
    const w = await fresh();
    const command = (await sendCommand({ ledger: w.ledger, key: w.actors.ceo, now: new Date(), text: 'Ship it.' })).messageId;
    const session = await rawSession(w);
    const head = w.ledger.head();
    try {
      const ack = (id: number, rest: string): string => `{"jsonrpc":"2.0","id":${id},"method":"tools/call","params":{"name":"ack","arguments":{"message_id":"${command}"${rest}}}}\n`;
      // Taken, a question was signed and sent with U+FFFD in its place (its prompt is UTF-8 bytes), and a note kept a half pair in the envelope that no UTF-8 reader carries.
      const cases: ReadonlyArray<readonly [string, string]> = [
        [ack(1, ',"note":"seen \\ud800"'), '\\ud800'],
        [ack(2, ',"note":"\\udc00 first"'), '\\udc00'],
        [ack(3, ',"n\\ud83Dte":"x"'), '\\ud83D'],
        [ack(4, ',"note":"\\\\\\ud800"'), '\\ud800'],
        [`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"consult","arguments":{"to":"aa.chatgpt","files":["src/add.ts"],"prompt":"\\ud83d\\ude00\\ud800\\ud800"}}}\n`, '\\ud800'],
      ];
      for (const [text, escape] of cases) {
        const id = Number(/"id":(\d+)/.exec(text)![1]);
        const refused = await session.ask(text, id);
        expect([id, refusal(refused)]).toEqual([id, '-32600 MCP_MESSAGE_INVALID']);
        expect(refused.error?.message).toContain(`MCP_MESSAGE_INVALID: the line holds the escape ${escape} (at character ${text.indexOf(escape)})`);
      }
      expect(w.ledger.head()).toBe(head);
      // A whole pair written as two escapes is one character, and a backslash before u is no escape at all.
      const taken = await session.ask(ack(10, ',"note":"\\ud83d\\ude00 and \\\\ud800"'), 10);
      expect(taken.result?.structuredContent?.['acknowledges']).toBe(command);
      const shown = await session.ask(call(11, 'show', { message_id: taken.result?.structuredContent?.['message_id'] }), 11);
      expect((shown.result?.structuredContent?.['envelope'] as { note?: string }).note).toBe('\u{1F600} and \\ud800');
    } finally {
      await session.close();
    }
  });

  it('writes one consult for three identical calls sent at once, and answers the other two with it', async () => {
    const w = await fresh();
    const session = await rawSession(w);
    try {
      const head = w.ledger.head();
      const from = session.answers.length;
      session.stdin.write([1, 2, 3].map((id) => call(id, 'consult', { to: 'aa.chatgpt', files: ['src/add.ts'], prompt: 'Is add() right for NaN?' })).join(''));
      const answers = await Promise.all([1, 2, 3].map((id) => session.answer(id, from)));
      const outcomes = answers.map((found) => [found.result?.structuredContent?.['message_id'], found.result?.structuredContent?.['existing']]);
      const id = outcomes[0]![0];
      expect(id).toMatch(/^msg_/);
      expect(outcomes.map(([messageId]) => messageId)).toEqual([id, id, id]);
      expect(outcomes.map(([, existing]) => existing).sort()).toEqual([false, true, true]);
      const state = await w.ledger.state();
      expect([...state.messages.values()].filter((record) => record.intent === 'aa_consult').map((record) => record.id)).toEqual([id]);
      expect(w.ledger.head()).not.toBe(head);
    } finally {
      await session.close();
    }
  });
});

describe('coo mcp whose client closes stdin with a consult in flight', () => {
  it('exits 0 and leaves the ledger whole: the consult landed whole, or not at all, and a retry finds it', async () => {
    const w = await fresh();
    const keyPath = join(w.dir, 'coo.key');
    writeFileSync(keyPath, formatPrivateKey(w.actors.coo), { mode: 0o600 });
    const child = spawn(process.execPath, [COO, 'mcp', '--ledger', w.gitdir, '--key', keyPath, '--repo', w.target], { env: { ...process.env, COO_LEDGER: '', COO_KEY: '' }, stdio: 'pipe' });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    const exited = new Promise<number | null>((resolve) => child.on('close', resolve));
    const { answer } = answersOf(child.stdout);
    child.stdin.write(line(INITIALIZE));
    await answer(0, 0);
    const ask = { to: 'aa.chatgpt', files: ['src/add.ts'], prompt: 'Is add() right for NaN?' };
    child.stdin.end(line({ method: 'notifications/initialized' }) + call(1, 'consult', { ...ask, wait_seconds: 60 }));
    expect(await exited).toBe(0);
    expect(stderr).not.toMatch(/\n {4}at |Unhandled/);
    expect(coo(['verify', '--ledger', w.gitdir]).status).toBe(0);
    const consults = [...(await w.ledger.state()).messages.values()].filter((record) => record.intent === 'aa_consult');
    expect(consults.length).toBeLessThanOrEqual(1);
    const session = await rawSession(w);
    try {
      const retried = (await session.ask(call(2, 'consult', ask), 2)).result?.structuredContent;
      expect(retried?.['existing']).toBe(consults.length === 1);
      if (consults.length === 1) expect(retried?.['message_id']).toBe(consults[0]!.id);
    } finally {
      await session.close();
    }
  }, 60_000);
});

describe("the consult relay an execution agent's agent talks to, against lines no SDK sends", () => {
  /** The relay as the executor starts it, with a runner's socket that counts the calls reaching it and answers none. */
  async function relay() {
    const folder = tempDir('mcp-redteam-4-relay-');
    const socket = join(folder, 'runner.sock');
    let calls = 0;
    const runner = createServer((connection) => {
      calls += 1;
      connection.destroy();
    });
    await new Promise<void>((resolve) => runner.listen(socket, resolve));
    const child = spawn(process.execPath, [COO, 'consult-relay', '--socket', socket], { env: { ...process.env, COO_LEDGER: '', COO_KEY: '' }, stdio: 'pipe' });
    child.stdin.on('error', () => undefined);
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    const exited = new Promise<number | null>((resolve) => child.on('close', resolve));
    const { answers, answer } = answersOf(child.stdout);
    child.stdin.write(line(INITIALIZE));
    await answer(0, 0);
    child.stdin.write(line({ method: 'notifications/initialized' }));
    return {
      child,
      answers,
      answer,
      exited,
      stderr: () => stderr,
      calls: () => calls,
      close: async () => {
        child.stdin.end();
        await exited;
        await new Promise<void>((resolve) => runner.close(() => resolve()));
      },
    };
  }

  it('refuses a consult asking to run as a task, or whose question holds a lone surrogate, before it reaches the runner, and serves on', async () => {
    const session = await relay();
    try {
      const from = session.answers.length;
      session.child.stdin.write(call(1, 'consult', { to: 'aa.chatgpt', question: 'q', files: ['src/add.ts'] }, { task: { ttl: 1000 } }));
      const refused = await session.answer(1, from);
      expect([refused.id, refusal(refused)]).toEqual([1, '-32602 MCP_MESSAGE_INVALID']);
      session.child.stdin.write(call(2, 'consult', { to: 'aa.chatgpt', question: 'Is \ud800 a character?', files: ['src/add.ts'] }));
      const lone = await session.answer(2, from);
      expect([lone.id, refusal(lone)]).toEqual([2, '-32600 MCP_MESSAGE_INVALID']);
      expect(lone.error?.message).toMatch(/^MCP_MESSAGE_INVALID: the line holds the escape \\ud800 \(at character \d+\), half of a UTF-16 surrogate pair standing alone/);
      session.child.stdin.write(line({ id: 3, method: 'ping' }));
      expect((await session.answer(3, from)).result).toEqual({});
      expect(session.calls()).toBe(0);
    } finally {
      await session.close();
    }
  });

  it('answers a tool it does not have and arguments its schema refuses coded, with the next step, as coo mcp does, and forwards none', async () => {
    const session = await relay();
    try {
      const from = session.answers.length;
      // The SDK's own words, uncoded: "MCP error -32602: Tool nope not found", "Tool __proto__ disabled".
      const cases: ReadonlyArray<readonly [number, string, unknown, RegExp]> = [
        [1, 'nope', {}, /^USAGE: Tool nope not found\nCall one of this server's tools \(tools\/list lists them\): consult\.$/],
        [2, '__proto__', {}, /^USAGE: Tool __proto__ not found\n/],
        [3, 'consult', { to: 5, question: '', files: [] }, /^USAGE: Input validation error: .*\nFix the arguments/s],
      ];
      session.child.stdin.write(cases.map(([id, name, args]) => call(id, name, args)).join(''));
      for (const [id, name, , expected] of cases) {
        const found = await session.answer(id, from);
        expect([name, found.result?.isError, found.result?.content?.[0]?.text]).toEqual([name, true, expect.stringMatching(expected)]);
      }
      expect(session.calls()).toBe(0);
    } finally {
      await session.close();
    }
  });

  it('ends a session whose agent sends a line over the bound with a coded error and a non-zero exit, never a silent 0, and forwards nothing', async () => {
    const session = await relay();
    try {
      session.child.stdin.write(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"consult","arguments":{"question":"${'x'.repeat(LIMITS.consultToolBytes)}`);
      expect(await session.exited).toBe(3);
      expect(session.stderr()).toMatch(new RegExp(`^coo: MCP_MESSAGE_TOO_LARGE: a message from the client was over the ${LIMITS.consultToolBytes}-byte limit`, 'm'));
      expect(session.stderr()).not.toMatch(/\n {4}at /);
      expect(session.calls()).toBe(0);
    } finally {
      await session.close();
    }
  }, 60_000);
});

describe("the runner's consult socket, answering a refusal that names the runner's own folders", () => {
  it('hands the agent the refusal scrubbed of the ledger\'s folder, the runner\'s state and a token it holds', async () => {
    const root = tempDir('mcp-redteam-4-runner-');
    const ledger = join(root, 'ledger.git');
    const state = join(root, 'state');
    const token = 'ghp_0123456789abcdefghijABCDEFGHIJ012345';
    // What a runner's remote says when its clone holds commits the remote does not (remote/publish.ts), with what its git said.
    const said = `the local main of ${ledger} holds commits https://example.invalid/ledger.git does not have; git said: fatal: could not lock ${state}/attempts/x with token ${token}`;
    const scrubber = new Scrubber([{ name: 'GH_TOKEN', value: token }], [
      { name: 'ledger', path: ledger },
      { name: 'runner-state', path: state },
    ]);
    const bridge = await openConsultBridge(() => Promise.reject(new CooError('REMOTE_UNVERIFIED', said)), scrubber);
    try {
      const reply = await callConsultBridge(bridge.socket, { to: 'aa.chatgpt', question: 'q', files: ['src/add.ts'] });
      expect(reply.ok).toBe(false);
      const message = reply.ok ? '' : reply.message;
      expect(reply.ok ? null : reply.code).toBe('REMOTE_UNVERIFIED');
      expect(message).toMatch(/^the local main of \[ledger\] holds commits/);
      expect(message).toContain('[runner-state]/attempts/x');
      for (const held of [ledger, state, token]) expect(message).not.toContain(held);
    } finally {
      await bridge.close();
    }
  });
});

describe("the runner's consult socket, reached without the relay", () => {
  /** Sends `bytes` as one call and returns the code of the reply, or 'accepted'. */
  function sendRaw(path: string, bytes: Buffer): Promise<string> {
    return new Promise((resolve) => {
      const socket = createConnection(path);
      const chunks: Buffer[] = [];
      socket.on('data', (chunk: Buffer) => chunks.push(chunk));
      socket.on('error', () => undefined);
      socket.on('close', () => {
        const text = Buffer.concat(chunks).toString('utf8').trim();
        const reply = text === '' ? null : (JSON.parse(text) as { ok: boolean; code?: string });
        resolve(reply === null ? 'closed' : reply.ok ? 'accepted' : reply.code!);
      });
      socket.on('connect', () => socket.write(bytes));
    });
  }

  it('refuses a call the relay would have refused (not UTF-8, a lone surrogate, a key twice) with USAGE, and hands the runner none of them', async () => {
    const seen: unknown[] = [];
    const bridge = await openConsultBridge((request) => {
      seen.push(request);
      return Promise.resolve({ ok: true, text: 'answered', result: {} });
    }, new Scrubber());
    try {
      const ask = (question: Buffer | string): Buffer => Buffer.concat([Buffer.from('{"to":"aa.chatgpt","files":["src/add.ts"],"question":"'), Buffer.from(question), Buffer.from('"}\n')]);
      // Each was signed and sent as the runner decoded it: U+FFFD for the bytes, the last key for the first.
      const cases: ReadonlyArray<readonly [string, Buffer]> = [
        ['bytes that are not UTF-8', ask(Buffer.from([0x69, 0x73, 0x20, 0xff, 0xfe]))],
        ['a lone surrogate escape', ask('is \\ud800 a character?')],
        ['a key twice', Buffer.from('{"to":"aa.chatgpt","files":["src/add.ts"],"question":"q","question":"other"}\n')],
      ];
      for (const [name, bytes] of cases) expect([name, await sendRaw(bridge.socket, bytes)]).toEqual([name, 'USAGE']);
      expect(seen).toEqual([]);
      expect(await sendRaw(bridge.socket, ask('is \\ud83d\\ude00 a character?'))).toBe('accepted');
      expect(seen).toEqual([{ to: 'aa.chatgpt', files: ['src/add.ts'], question: 'is \u{1F600} a character?' }]);
    } finally {
      await bridge.close();
    }
  });
});
