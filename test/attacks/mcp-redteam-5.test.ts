import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { createConnection, type Socket } from 'node:net';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { formatPrivateKey } from '../../src/crypto/keys.js';
import { callConsultBridge, openConsultBridge, type BridgeReply } from '../../src/dispatch/consult-bridge.js';
import { LIMITS } from '../../src/limits.js';
import { Scrubber } from '../../src/util/scrub.js';
import { COO, coo } from '../helpers/cli.js';
import { worlds, type World } from '../helpers/lane.js';
import { answersOf, call, INITIALIZE, line, rawSession, refusal } from '../helpers/mcp-raw.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * `coo mcp` against a client that keeps a session as no SDK would (capabilities of the wrong types,
 * a protocol version from nowhere, initialized twice, methods of the protocol this server does not
 * serve, a progress token of an odd type, a ping while a call waits), two servers on one ledger
 * asked the same consult at once, and the runner's consult socket against peers no relay would be:
 * one that never speaks, one that stops mid-line, one that ends its side after its call, one that
 * holds its connection after its answer.
 */
const fresh = worlds(tempDir('mcp-redteam-5-'));

describe('coo mcp against a session no SDK keeps', () => {
  it('refuses capabilities of the wrong types unread, answers an unknown protocol version with its own, takes initialized twice, and answers every method it does not serve coded', async () => {
    const w = await fresh();
    const session = await rawSession(w, { initialize: false });
    const head = w.ledger.head();
    try {
      const wrong = await session.ask(line({ ...INITIALIZE, params: { ...INITIALIZE.params, capabilities: { roots: 'yes', sampling: 5 } } }), 0);
      expect(refusal(wrong)).toBe('-32602 MCP_MESSAGE_INVALID');
      expect(wrong.error?.message).toMatch(/the params of initialize do not fit the method at params\.capabilities\.(roots|sampling): /);
      // The refused initialize initialized nothing.
      expect(refusal(await session.ask(line({ id: 1, method: 'tools/list' }), 1))).toBe('-32600 MCP_MESSAGE_INVALID');
      const unknown = await session.ask(line({ id: 2, method: 'initialize', params: { ...INITIALIZE.params, protocolVersion: '1999-01-01' } }), 2);
      expect(unknown.result?.['protocolVersion']).toMatch(/^20\d\d-\d\d-\d\d$/);
      expect(unknown.result?.['protocolVersion']).not.toBe('1999-01-01');
      session.stdin.write(line({ method: 'notifications/initialized' }).repeat(2));
      const unserved: ReadonlyArray<readonly [string, Record<string, unknown> | undefined]> = [
        ['prompts/list', undefined],
        ['prompts/get', { name: 'x' }],
        ['logging/setLevel', { level: 'debug' }],
        ['completion/complete', { ref: { type: 'ref/resource', uri: 'coo://messages/{message_id}/{part}' }, argument: { name: 'part', value: 'e' } }],
        ['completion/complete', { ref: { type: 'ref/prompt', name: 'x' }, argument: { name: 'a', value: 'b' } }],
        ['resources/subscribe', { uri: 'coo://messages/msg_01ARZ3NDEKTSV4RRFFQ69G5FAV/envelope' }],
        ['roots/list', undefined],
        ['sampling/createMessage', {}],
        ['elicitation/create', {}],
        ['tasks/list', undefined],
      ];
      let id = 10;
      for (const [method, params] of unserved) {
        id += 1;
        const found = await session.ask(line({ id, method, ...(params === undefined ? {} : { params }) }), id);
        expect([method, refusal(found)]).toEqual([method, '-32601 USAGE']);
        expect(found.error?.message).toContain(`${method} is not served here`);
      }
      expect((await session.ask(line({ id: 30, method: 'resources/list' }), 30)).result).toEqual({ resources: [] });
      expect(w.ledger.head()).toBe(head);
    } finally {
      await session.close();
    }
  });

  it('refuses a progress token of an odd type naming the field, serves on, and takes one that is a string or an integer', async () => {
    const w = await fresh();
    const session = await rawSession(w);
    try {
      const verify = (id: number, token: unknown): string => call(id, 'verify', {}, { _meta: { progressToken: token } });
      // Refused as "not a JSON-RPC 2.0 request ... params an object" when params was an object: the field at fault went unnamed.
      const odd: ReadonlyArray<readonly [number, unknown]> = [
        [1, { a: 1 }],
        [2, 1.5],
        [3, true],
        [4, null],
        [5, ['p']],
      ];
      for (const [id, token] of odd) {
        const found = await session.ask(verify(id, token), id);
        expect([token, refusal(found)]).toEqual([token, '-32600 MCP_MESSAGE_INVALID']);
        expect(found.error?.message).toMatch(/ at params\._meta\.progressToken: /);
      }
      const pinged = await session.ask(line({ id: 6, method: 'ping', params: { _meta: { progressToken: {} } } }), 6);
      expect(pinged.error?.message).toMatch(/ at params\._meta\.progressToken: /);
      for (const [id, token] of [[7, 'p'], [8, 8]] as const) expect([token, refusal(await session.ask(verify(id, token), id))]).toEqual([token, 'answered']);
    } finally {
      await session.close();
    }
  });

  it('answers a ping while a wait is in hand, and frees the wait once it is cancelled', async () => {
    const w = await fresh();
    const queued = await w.consult();
    const session = await rawSession(w);
    try {
      const from = session.answers.length;
      session.stdin.write(call(1, 'wait', { message_id: queued.messageId, timeout_seconds: 600 }));
      expect((await session.ask(line({ id: 2, method: 'ping' }), 2)).result).toEqual({});
      expect(session.answers.slice(from).map((found) => found.id)).toEqual([2]);
      session.stdin.write(line({ method: 'notifications/cancelled', params: { requestId: 1, reason: 'done waiting' } }));
      // The id is free once the wait stopped: the same id is taken again, and answered.
      for (let turn = 0; turn < 200; turn += 1) {
        const again = await session.ask(line({ id: 1, method: 'ping' }), 1);
        if (again.error === undefined) {
          expect(again.result).toEqual({});
          return;
        }
        expect(again.error.message).toMatch(/is held by a request the server is not done with/);
      }
      throw new Error('the cancelled wait never let its id go');
    } finally {
      await session.close();
    }
  });
});

describe('two coo mcp servers on one ledger asked the same consult at once', () => {
  function serve(w: World, keyPath: string) {
    const child = spawn(process.execPath, [COO, 'mcp', '--ledger', w.gitdir, '--key', keyPath, '--repo', w.target], { env: { ...process.env, COO_LEDGER: '', COO_KEY: '' }, stdio: 'pipe' });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    const exited = new Promise<number | null>((resolve) => child.on('close', resolve));
    return { child, exited, stderr: () => stderr, ...answersOf(child.stdout) };
  }

  it('writes one envelope, and the other server answers with it', async () => {
    const w = await fresh();
    const keyPath = join(w.dir, 'coo.key');
    writeFileSync(keyPath, formatPrivateKey(w.actors.coo), { mode: 0o600 });
    const servers = [serve(w, keyPath), serve(w, keyPath)];
    try {
      for (const server of servers) server.child.stdin.write(line(INITIALIZE) + line({ method: 'notifications/initialized' }));
      await Promise.all(servers.map((server) => server.answer(0, 0)));
      const ask = { to: 'aa.chatgpt', files: ['src/add.ts'], prompt: 'Is add() right for NaN?' };
      for (const server of servers) server.child.stdin.write(call(1, 'consult', ask));
      const answers = await Promise.all(servers.map((server) => server.answer(1, 0)));
      const outcomes = answers.map((found) => [found.result?.structuredContent?.['message_id'], found.result?.structuredContent?.['existing']]);
      expect(outcomes.map(([id]) => id)).toEqual([outcomes[0]![0], outcomes[0]![0]]);
      expect(outcomes.map(([, existing]) => existing).sort()).toEqual([false, true]);
      const consults = [...(await w.ledger.state()).messages.values()].filter((record) => record.intent === 'aa_consult');
      expect(consults.map((record) => record.id)).toEqual([outcomes[0]![0]]);
    } finally {
      for (const server of servers) server.child.stdin.end();
      expect(await Promise.all(servers.map((server) => server.exited))).toEqual([0, 0]);
    }
    for (const server of servers) expect(server.stderr()).not.toMatch(/\n {4}at |Unhandled/);
    expect(coo(['verify', '--ledger', w.gitdir]).status).toBe(0);
  }, 120_000);
});

describe("the runner's consult socket against peers no relay would be", () => {
  const ASK = { to: 'aa.chatgpt', question: 'Is add() right for NaN?', files: ['src/add.ts'] };
  const OK: BridgeReply = { ok: true, text: 'answered', result: {} };

  function connect(path: string, options: { allowHalfOpen?: boolean } = {}): Promise<Socket> {
    return new Promise((resolve, reject) => {
      const socket = createConnection({ path, ...options });
      socket.once('connect', () => resolve(socket));
      socket.once('error', reject);
    });
  }

  /** What the socket wrote back to `socket` until the runner ended its side. */
  function replyOf(socket: Socket): Promise<string> {
    const chunks: Buffer[] = [];
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    return new Promise((resolve) => socket.once('end', () => resolve(Buffer.concat(chunks).toString('utf8'))));
  }

  it('answers a call while one peer never speaks and another stops mid-line, and still one call at a time', async () => {
    let running = 0;
    let most = 0;
    const bridge = await openConsultBridge(async () => {
      running += 1;
      most = Math.max(most, running);
      await new Promise((resolve) => setImmediate(resolve));
      running -= 1;
      return OK;
    }, new Scrubber());
    const silent = await connect(bridge.socket);
    const halfway = await connect(bridge.socket);
    try {
      silent.on('error', () => undefined);
      halfway.on('error', () => undefined);
      halfway.write('{"to":"aa.chatgpt","question":"Is add() ri');
      // Read one connection at a time, the call waited for the silent peer's line for ever.
      const replies = await Promise.all([callConsultBridge(bridge.socket, ASK), callConsultBridge(bridge.socket, ASK), callConsultBridge(bridge.socket, ASK)]);
      expect(replies).toEqual([OK, OK, OK]);
      expect(most).toBe(1);
    } finally {
      silent.destroy();
      halfway.destroy();
      await bridge.close();
    }
  });

  it('answers a peer that ends its side once its call is sent', async () => {
    const seen: unknown[] = [];
    const bridge = await openConsultBridge((request) => {
      seen.push(request);
      return Promise.resolve(OK);
    }, new Scrubber());
    try {
      const peer = await connect(bridge.socket, { allowHalfOpen: true });
      const reply = replyOf(peer);
      peer.end(`${JSON.stringify(ASK)}\n`);
      // The runner ended its side with the peer's and ran the call unheard: the answer was lost.
      expect(JSON.parse(await reply)).toEqual(OK);
      expect(seen).toEqual([ASK]);
      const silent = await connect(bridge.socket, { allowHalfOpen: true });
      const refused = replyOf(silent);
      silent.end();
      expect(JSON.parse(await refused)).toMatchObject({ ok: false, code: 'USAGE', message: 'the consult tool closed before a whole line' });
    } finally {
      await bridge.close();
    }
  });

  it('closes, answering the call in hand, while a peer holds its connection open after its answer', async () => {
    let release: () => void = () => undefined;
    const held = new Promise<void>((resolve) => (release = resolve));
    let calls = 0;
    const bridge = await openConsultBridge(async () => {
      calls += 1;
      if (calls === 2) await held;
      return OK;
    }, new Scrubber());
    const lingering = await connect(bridge.socket, { allowHalfOpen: true });
    lingering.on('error', () => undefined);
    const first = replyOf(lingering);
    lingering.write(`${JSON.stringify(ASK)}\n`);
    expect(JSON.parse(await first)).toEqual(OK);
    // The lingering peer never ends its side. A second call is in hand when the bridge closes.
    const second = callConsultBridge(bridge.socket, ASK);
    while (calls < 2) await new Promise((resolve) => setImmediate(resolve));
    const closed = bridge.close();
    release();
    expect(await second).toEqual(OK);
    // It waited for the lingering peer to end its side, for ever: the attempt never got its receipt.
    await closed;
    // The bridge ended the lingering connection: what the peer writes now has no one to read it.
    expect(lingering.destroyed).toBe(false);
    const broken = new Promise<NodeJS.ErrnoException>((resolve) => lingering.once('error', resolve));
    lingering.write('more\n');
    expect((await broken).code).toMatch(/^(EPIPE|ECONNRESET)$/);
  });
});

describe("the consult relay whose agent makes many consult calls at once", () => {
  /** The relay as an executor starts it, against a runner's socket whose handler `handle` is. */
  async function relay(handle: (request: unknown) => Promise<BridgeReply>) {
    const bridge = await openConsultBridge(handle, new Scrubber());
    const child = spawn(process.execPath, [COO, 'consult-relay', '--socket', bridge.socket], { env: { ...process.env, COO_LEDGER: '', COO_KEY: '' }, stdio: 'pipe' });
    child.stdin.on('error', () => undefined);
    const exited = new Promise<number | null>((resolve) => child.on('close', resolve));
    const { answers, answer } = answersOf(child.stdout);
    child.stdin.write(line(INITIALIZE));
    await answer(0, 0);
    child.stdin.write(line({ method: 'notifications/initialized' }));
    return {
      child,
      answers,
      answer,
      close: async () => {
        child.stdin.end();
        expect(await exited).toBe(0);
        await bridge.close();
      },
    };
  }
  const ASK = { to: 'aa.chatgpt', question: 'Is add() right for NaN?', files: ['src/add.ts'] };

  it(`answers every one of more parallel calls than the runner's ${LIMITS.consultToolConnections} connections`, async () => {
    let calls = 0;
    const session = await relay(async () => {
      calls += 1;
      await new Promise((resolve) => setImmediate(resolve));
      return { ok: true, text: `answer ${calls}`, result: {} };
    });
    try {
      const ids = Array.from({ length: LIMITS.consultToolConnections * 2 }, (_, index) => index + 1);
      session.child.stdin.write(ids.map((id) => call(id, 'consult', ASK)).join(''));
      // Each call past the bound went on a connection of its own, was closed unread, and came back "INTERNAL: ... cannot be reached: write EPIPE".
      const texts = (await Promise.all(ids.map((id) => session.answer(id, 0)))).map((found) => [found.result?.isError ?? false, found.result?.content?.[0]?.text]);
      expect(texts.filter(([isError]) => isError)).toEqual([]);
      expect(new Set(texts.map(([, text]) => text)).size).toBe(ids.length);
      expect(calls).toBe(ids.length);
    } finally {
      await session.close();
    }
  }, 60_000);

  it('sends no call cancelled while it waits its turn, and serves on', async () => {
    let release: () => void = () => undefined;
    const held = new Promise<void>((resolve) => (release = resolve));
    const seen: unknown[] = [];
    const session = await relay(async (request) => {
      seen.push(request);
      if (seen.length === 1) await held;
      return { ok: true, text: `answer ${seen.length}`, result: {} };
    });
    try {
      session.child.stdin.write(call(1, 'consult', ASK));
      while (seen.length === 0) await new Promise((resolve) => setImmediate(resolve));
      session.child.stdin.write(call(2, 'consult', { ...ASK, question: 'cancelled' }));
      session.child.stdin.write(line({ method: 'notifications/cancelled', params: { requestId: 2 } }));
      // The cancellation is read before the first call is answered: a ping behind it is answered first.
      const from = session.answers.length;
      session.child.stdin.write(line({ id: 3, method: 'ping' }));
      await session.answer(3, from);
      release();
      expect((await session.answer(1, 0)).result?.content?.[0]?.text).toBe('answer 1');
      session.child.stdin.write(call(4, 'consult', { ...ASK, question: 'after' }));
      expect((await session.answer(4, 0)).result?.content?.[0]?.text).toBe('answer 2');
      expect(seen.map((request) => (request as { question: string }).question)).toEqual([ASK.question, 'after']);
      // The SDK answers no cancelled request.
      expect(session.answers.filter((found) => found.id === 2)).toEqual([]);
    } finally {
      await session.close();
    }
  }, 60_000);
});
