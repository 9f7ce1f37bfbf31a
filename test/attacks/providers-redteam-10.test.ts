import { createServer, type ServerResponse } from 'node:http';
import { describe, expect, it } from 'vitest';
import { viewPanel } from '../../src/audit/panel-view.js';
import { enqueuePanel } from '../../src/consult/enqueue.js';
import { defaultPolicy } from '../../src/ledger/init.js';
import { listenLoopback, readBody, type Listening } from '../../src/offline/loopback-server.js';
import { blockersOf, offlineEndpoints, receiptsOf, worlds, type World } from '../helpers/lane.js';
import { git, tempDir } from '../helpers/tmp.js';

/**
 * A hostile or broken provider on each route Oracle takes, scripted by a loopback server speaking
 * that route's own wire: what the COO-signed receipt then says was answered and paid.
 */
const fresh = worlds(tempDir());

interface Seen {
  readonly path: string;
  readonly prompt: string;
  /** The output cap the request asked for. */
  readonly cap: number;
  /** The key the request carried, in whichever header its route sends it. */
  readonly key: string;
}

interface Hostile extends Listening {
  readonly requests: Seen[];
}

/** A well-formed aa_answer that echoes the prompt's canary, as an honest model writes it. */
function answerText(prompt: string): string {
  const canary = /"canary" value must be exactly (canary-[a-z0-9-]+)/.exec(prompt)?.[1] ?? 'canary-missing';
  const answer = {
    schema_version: 'aa_answer.v0',
    verdict: 'approve_with_changes',
    summary: 'The change is reasonable; one edge case needs a test.',
    findings: [{ severity: 'medium', title: 'Untested edge case', detail: 'Non-finite inputs are not covered by a test.', refs: [] }],
    recommendations: ['Add a test for NaN inputs before merging.'],
    objections: [],
    confidence: 0.7,
    canary,
  };
  return `Review.\n\n\`\`\`aa_answer\n${JSON.stringify(answer)}\n\`\`\`\n`;
}

/** Prompt text of a Gemini, Messages or Chat Completions body. */
function promptOf(body: Record<string, unknown>): string {
  const parts = (value: unknown): string => (Array.isArray(value) ? value.map((part) => String((part as { text?: unknown }).text ?? '')).join('') : typeof value === 'string' ? value : '');
  const contents = (body['contents'] ?? body['messages'] ?? []) as Array<{ parts?: unknown; content?: unknown }>;
  return contents.map((item) => parts(item.parts ?? item.content)).join('\n');
}

/** A loopback provider whose every answer `reply` writes, given the request's path and prompt. */
async function hostile(reply: (res: ServerResponse, seen: Seen) => void): Promise<Hostile> {
  const requests: Seen[] = [];
  const server = createServer((req, res) => {
    void (async () => {
      const body = JSON.parse((await readBody(req)) || '{}') as Record<string, unknown>;
      const generation = body['generationConfig'] as { maxOutputTokens?: number } | undefined;
      const cap = Number(body['max_tokens'] ?? generation?.maxOutputTokens ?? 0);
      const key = String(req.headers['x-api-key'] ?? req.headers['x-goog-api-key'] ?? String(req.headers['authorization'] ?? '').replace(/^Bearer /, ''));
      const seen = { path: new URL(req.url ?? '/', 'http://127.0.0.1').pathname, prompt: promptOf(body), cap, key };
      requests.push(seen);
      reply(res, seen);
    })();
  });
  return { ...(await listenLoopback(server, 0, new Set())), requests };
}

function sse(res: ServerResponse, events: readonly unknown[]): void {
  res.writeHead(200, { 'content-type': 'text/event-stream' });
  for (const event of events) res.write(`data: ${JSON.stringify(event)}\n\n`);
  res.end();
}

/** One consult to `target` through the real Oracle, pointed at `server` on every route; its receipts. */
async function consultThrough(w: World, server: Hostile, target: string, maxCostUsd = 1, maxRuntimeSeconds = 60): Promise<Array<Record<string, unknown>>> {
  const transport = w.transport({ route: { baseUrl: `${server.url}/v1` }, endpoints: offlineEndpoints(server) });
  const { messageId } = await w.consult({ target, maxCostUsd, maxRuntimeSeconds, idempotencyKey: `${target}-${maxCostUsd}` });
  await w.runner({ transport }).runOnce();
  return receiptsOf(w, messageId);
}

const price = (model: string): { input_usd_per_million: number; output_usd_per_million: number } => defaultPolicy().models[model]!;
const usd = (model: string, input: number, output: number): number => (input * price(model).input_usd_per_million + output * price(model).output_usd_per_million) / 1e6;

describe('usage a provider reports in part', () => {
  it("charges a Gemini answer for the thinking Google bills as output, which Oracle's record leaves out", async () => {
    const w = await fresh();
    let thoughts = 0;
    const server = await hostile((res, seen) => {
      const text = answerText(seen.prompt);
      const input = Math.ceil(seen.prompt.length / 4);
      const output = Math.ceil(text.length / 4);
      // The model thinks nearly to its cap, as Google allows: thinking counts within maxOutputTokens.
      thoughts = seen.cap - output - 10;
      sse(res, [
        {
          candidates: [{ content: { role: 'model', parts: [{ text }] }, finishReason: 'STOP', index: 0 }],
          usageMetadata: { promptTokenCount: input, candidatesTokenCount: output, thoughtsTokenCount: thoughts, totalTokenCount: input + output + thoughts },
          responseId: 'r1',
        },
      ]);
    });
    try {
      const [receipt] = await consultThrough(w, server, 'aa.gemini');
      expect(server.requests).toHaveLength(1);
      expect(receipt!['status']).toBe('succeeded');
      const input = Math.ceil(server.requests[0]!.prompt.length / 4);
      // Paid: the prompt, the answer and every thinking token at the output price.
      expect(thoughts).toBeGreaterThan(10_000);
      expect(receipt!['actual_cost_usd'] as number).toBeGreaterThanOrEqual(usd('gemini-3.1-pro', input, thoughts));
      expect((receipt!['usage'] as { reasoning_tokens: number }).reasoning_tokens).toBeGreaterThanOrEqual(thoughts);
      expect(receipt!['usage']).toMatchObject({ reported: false });
      expect(receipt!['warnings']).toContain('usage_partial');
    } finally {
      await server.close();
    }
  });

  it('charges the tokens a Chat Completions total counts beyond its prompt and completion', async () => {
    const w = await fresh();
    const hidden = 10_000;
    const server = await hostile((res, seen) => {
      const text = answerText(seen.prompt);
      const prompt = Math.ceil(seen.prompt.length / 4);
      const completion = Math.ceil(text.length / 4);
      sse(res, [
        { id: 'c1', object: 'chat.completion.chunk', choices: [{ index: 0, delta: { role: 'assistant', content: text }, finish_reason: null }] },
        { id: 'c1', object: 'chat.completion.chunk', choices: [{ index: 0, delta: {}, finish_reason: 'stop' }], usage: { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion + hidden } },
      ]);
    });
    try {
      const [receipt] = await consultThrough(w, server, 'aa.chatgpt');
      expect(server.requests).toHaveLength(1);
      expect(server.requests[0]!.path).toMatch(/chat\/completions$/);
      expect(receipt!['status']).toBe('succeeded');
      expect(receipt!['actual_cost_usd'] as number).toBeGreaterThanOrEqual(usd('gpt-5.5', 0, hidden));
      expect((receipt!['usage'] as { total_tokens: number }).total_tokens).toBeGreaterThanOrEqual(hidden);
      expect(receipt!['warnings']).toContain('usage_implausible');
    } finally {
      await server.close();
    }
  });
});

describe('a body that never ends', () => {
  it("is ended by the runner's timer, and its receipt charges all the output the model may have streamed until then", async () => {
    const w = await fresh();
    const streams = new Set<ServerResponse>();
    const server = await hostile((res) => {
      // Answer text, chunk after chunk, and never a last chunk nor its usage.
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      streams.add(res);
      const tick = setInterval(() => res.write(`data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', choices: [{ index: 0, delta: { content: 'more review text. '.repeat(50) }, finish_reason: null }] })}\n\n`), 50);
      res.on('close', () => clearInterval(tick));
    });
    try {
      // A runtime long enough that Oracle's call reaches the server before the timer on a loaded machine (3 s did not).
      const [receipt, ...more] = await consultThrough(w, server, 'aa.chatgpt', 1, 12);
      for (const res of streams) res.destroy();
      expect(more).toEqual([]);
      expect(receipt).toMatchObject({ status: 'timed_out', next_attempt_at: null, usage: { reported: false } });
      expect(blockersOf(receipt!)).toEqual(['budget_runtime_breach']);
      expect(server.requests).toHaveLength(1);
      // The provider was paid for the prompt and for output up to the cap it was asked for.
      const cap = server.requests[0]!.cap;
      expect(cap).toBeGreaterThan(0);
      expect(receipt!['actual_cost_usd'] as number).toBeGreaterThanOrEqual(usd('gpt-5.5', 0, cap));
      expect(receipt!['warnings']).toContain('usage_unreported');
    } finally {
      await server.close();
    }
  });
});

function json(res: ServerResponse, body: unknown): void {
  res.writeHead(200, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}

describe('usage figures a provider states that would price an answer low', () => {
  it('prices a Claude answer whose input is stated as cache reads by the bytes sent: the estimate, marked implausible', async () => {
    const w = await fresh();
    const server = await hostile((res, seen) => {
      const text = answerText(seen.prompt);
      const usage = { input_tokens: 5, cache_creation_input_tokens: 0, cache_read_input_tokens: Math.ceil(seen.prompt.length / 4), output_tokens: Math.ceil(text.length / 4) };
      json(res, { id: 'msg_1', type: 'message', role: 'assistant', model: 'claude-sonnet-4-6', content: [{ type: 'text', text }], stop_reason: 'end_turn', stop_sequence: null, usage });
    });
    try {
      const [receipt] = await consultThrough(w, server, 'aa.claude');
      expect(receipt!['status']).toBe('succeeded');
      expect(receipt!['warnings']).toContain('usage_implausible');
      const input = (receipt!['usage'] as { input_tokens: number }).input_tokens;
      expect(input).toBeGreaterThanOrEqual(Math.ceil(server.requests[0]!.prompt.length / 8));
    } finally {
      await server.close();
    }
  });

  it('prices a Chat Completions answer at its tokens when the provider states a cost of 0 beside them', async () => {
    const w = await fresh();
    const server = await hostile((res, seen) => {
      const text = answerText(seen.prompt);
      const usage = { prompt_tokens: 20_000, completion_tokens: 5_000, total_tokens: 25_000, cost: 0 };
      sse(res, [
        { id: 'c1', object: 'chat.completion.chunk', choices: [{ index: 0, delta: { role: 'assistant', content: text }, finish_reason: null }] },
        { id: 'c1', object: 'chat.completion.chunk', choices: [{ index: 0, delta: {}, finish_reason: 'stop' }], usage },
      ]);
    });
    try {
      const [receipt] = await consultThrough(w, server, 'aa.chatgpt');
      expect(receipt).toMatchObject({ status: 'succeeded', usage: { input_tokens: 20_000, output_tokens: 5_000, reported: true } });
      expect(receipt!['actual_cost_usd'] as number).toBeCloseTo(usd('gpt-5.5', 20_000, 5_000), 6);
    } finally {
      await server.close();
    }
  });
});

describe('answers that are not an answer', () => {
  it('fails a Gemini response blocked for SAFETY with no candidate, and charges its prompt', async () => {
    const w = await fresh();
    const server = await hostile((res, seen) => {
      sse(res, [{ promptFeedback: { blockReason: 'SAFETY' }, usageMetadata: { promptTokenCount: Math.ceil(seen.prompt.length / 4), totalTokenCount: Math.ceil(seen.prompt.length / 4) }, responseId: 'r1' }]);
    });
    try {
      const receipts = await consultThrough(w, server, 'aa.gemini');
      expect(receipts.length).toBeGreaterThanOrEqual(1);
      for (const receipt of receipts) {
        expect(receipt).toMatchObject({ status: 'failed', output_ref: null });
        expect(receipt['actual_cost_usd'] as number).toBeGreaterThan(0);
      }
      expect(server.requests).toHaveLength(receipts.length);
    } finally {
      await server.close();
    }
  });

  it('takes a Claude answer from its text block: a thinking block that reads as another answer, and a tool_use block, are neither kept nor judged', async () => {
    const w = await fresh();
    const server = await hostile((res, seen) => {
      const text = answerText(seen.prompt);
      const thinking = text.replace('approve_with_changes', 'approve');
      const content = [
        { type: 'thinking', thinking, signature: 'sig' },
        { type: 'tool_use', id: 'toolu_1', name: 'approve', input: { verdict: 'approve' } },
        { type: 'text', text },
      ];
      json(res, { id: 'msg_1', type: 'message', role: 'assistant', model: 'claude-sonnet-4-6', content, stop_reason: 'end_turn', stop_sequence: null, usage: { input_tokens: Math.ceil(seen.prompt.length / 4), output_tokens: 3 * Math.ceil(text.length / 4) } });
    });
    try {
      const [receipt] = await consultThrough(w, server, 'aa.claude');
      expect(receipt!['status']).toBe('succeeded');
      const stored = (await w.ledger.readFile(receipt!['output_ref'] as string))!.toString('utf8');
      expect(stored).toContain('"verdict":"approve_with_changes"');
      expect(stored).not.toContain('"verdict":"approve"');
    } finally {
      await server.close();
    }
  });

  it('fails a Claude response whose only block is a tool_use: no answer', async () => {
    const w = await fresh();
    const server = await hostile((res, seen) => {
      json(res, { id: 'msg_1', type: 'message', role: 'assistant', model: 'claude-sonnet-4-6', content: [{ type: 'tool_use', id: 'toolu_1', name: 'answer', input: { text: answerText(seen.prompt) } }], stop_reason: 'tool_use', stop_sequence: null, usage: { input_tokens: Math.ceil(seen.prompt.length / 4), output_tokens: 300 } });
    });
    try {
      const receipts = await consultThrough(w, server, 'aa.claude');
      expect(receipts.length).toBeGreaterThanOrEqual(1);
      for (const receipt of receipts) expect(receipt).toMatchObject({ status: 'failed', output_ref: null });
      expect(server.requests).toHaveLength(receipts.length);
    } finally {
      await server.close();
    }
  });
});

describe('a panel whose members\' routes misbehave', () => {
  it('reads a cut Claude answer as no advice, charges the Gemini member its thinking, and sums what each paid', async () => {
    const w = await fresh({ policy: (policy) => ({ ...policy, panels: [{ name: 'review', from: 'coo.*', members: ['aa.chatgpt', 'aa.claude', 'aa.gemini'] }] }) });
    let thoughts = 0;
    const server = await hostile((res, seen) => {
      const text = answerText(seen.prompt);
      const input = Math.ceil(seen.prompt.length / 4);
      const output = Math.ceil(text.length / 4);
      if (seen.path.endsWith('/v1/messages')) {
        // Stopped at the cap it was asked for: a whole-looking block, and a cut answer.
        json(res, { id: 'msg_1', type: 'message', role: 'assistant', model: 'claude-sonnet-4-6', content: [{ type: 'text', text }], stop_reason: 'max_tokens', stop_sequence: null, usage: { input_tokens: input, output_tokens: seen.cap } });
      } else if (seen.path.includes(':streamGenerateContent')) {
        thoughts = seen.cap - output - 10;
        sse(res, [{ candidates: [{ content: { role: 'model', parts: [{ text }] }, finishReason: 'STOP', index: 0 }], usageMetadata: { promptTokenCount: input, candidatesTokenCount: output, thoughtsTokenCount: thoughts, totalTokenCount: input + output + thoughts }, responseId: 'r1' }]);
      } else {
        sse(res, [
          { id: 'c1', object: 'chat.completion.chunk', choices: [{ index: 0, delta: { role: 'assistant', content: text }, finish_reason: null }] },
          { id: 'c1', object: 'chat.completion.chunk', choices: [{ index: 0, delta: {}, finish_reason: 'stop' }], usage: { prompt_tokens: input, completion_tokens: output, total_tokens: input + output } },
        ]);
      }
    });
    try {
      const transport = w.transport({ route: { baseUrl: `${server.url}/v1` }, endpoints: offlineEndpoints(server) });
      const written = await enqueuePanel({ ledger: w.ledger, key: w.actors.coo, now: new Date(), repo: w.target, patterns: ['src/add.ts', 'README.md'], question: 'Is add() correct for NaN?', maxRuntimeSeconds: 60, maxCostUsd: 1 });
      await w.runner({ transport }).runOnce();
      expect(server.requests).toHaveLength(3);
      const state = await w.ledger.state();
      const view = await viewPanel(w.ledger, state, written.panelId);
      expect(view.answered).toEqual(['aa.chatgpt', 'aa.gemini']);
      expect(view.agreement).toBe('partial');
      const claude = view.members.find((member) => member.actor === 'aa.claude')!;
      expect(claude.verdict).toBeNull();
      const [cut] = await receiptsOf(w, claude.message_id);
      expect(blockersOf(cut!)).toEqual(['output_too_large']);
      const gemini = view.members.find((member) => member.actor === 'aa.gemini')!;
      expect(thoughts).toBeGreaterThan(10_000);
      expect(gemini.cost_usd).toBeGreaterThanOrEqual(usd('gemini-3.1-pro', 0, thoughts));
      expect(view.total_cost_usd).toBeCloseTo(view.members.reduce((sum, member) => sum + member.cost_usd, 0), 6);
    } finally {
      await server.close();
    }
  });
});

describe('a provider that echoes the key it was sent', () => {
  const KEYS = { OPENAI_API_KEY: 'sk-proj-Vq3Lz8Xw1Rk5Tn7Pb2Jm9Hc4Fd6Gs0Ya', ANTHROPIC_API_KEY: 'sk-ant-api03-Q7zX9vW2kL5mN8pR4tY6uJ1hG3fD0sAe', GEMINI_API_KEY: 'AIzaSyB4kQ9wE2rT7yU1iO5pA8sD3fG6hJ0kLz' };
  /** Every run of 8 characters of `whole` that `text` holds. */
  const pieces = (text: string, whole: string): string[] => Array.from({ length: whole.length - 7 }, (_, at) => whole.slice(at, at + 8)).filter((piece) => text.includes(piece));

  it.each([
    ['aa.chatgpt', 'OPENAI_API_KEY'],
    ['aa.claude', 'ANTHROPIC_API_KEY'],
    ['aa.gemini', 'GEMINI_API_KEY'],
  ] as const)('leaves no part of it in the ledger: %s, in its answer and in its error', async (target, name) => {
    const w = await fresh();
    let calls = 0;
    const server = await hostile((res, seen) => {
      calls += 1;
      if (calls === 1) {
        res.writeHead(400, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ type: 'error', error: { type: 'invalid_request_error', message: `the key ${seen.key} is not valid here`, code: 400, status: 'INVALID_ARGUMENT' } }));
        return;
      }
      const text = `The key you sent is ${seen.key}.\n\n${answerText(seen.prompt)}`;
      const input = Math.ceil(seen.prompt.length / 4);
      const output = Math.ceil(text.length / 4);
      if (seen.path.endsWith('/v1/messages')) json(res, { id: 'msg_1', type: 'message', role: 'assistant', model: 'claude-sonnet-4-6', content: [{ type: 'text', text }], stop_reason: 'end_turn', stop_sequence: null, usage: { input_tokens: input, output_tokens: output } });
      else if (seen.path.includes(':streamGenerateContent')) sse(res, [{ candidates: [{ content: { role: 'model', parts: [{ text }] }, finishReason: 'STOP', index: 0 }], usageMetadata: { promptTokenCount: input, candidatesTokenCount: output }, responseId: 'r1' }]);
      else sse(res, [{ id: 'c1', object: 'chat.completion.chunk', choices: [{ index: 0, delta: { role: 'assistant', content: text }, finish_reason: 'stop' }], usage: { prompt_tokens: input, completion_tokens: output, total_tokens: input + output } }]);
    });
    try {
      const transport = w.transport({ route: { baseUrl: `${server.url}/v1` }, endpoints: offlineEndpoints(server), env: KEYS });
      const { messageId } = await w.consult({ target, idempotencyKey: `echo-${target}` });
      await w.runner({ transport }).runOnce();
      await w.runner({ transport }).runOnce();
      const receipts = await receiptsOf(w, messageId);
      expect(server.requests.every((request) => request.key === KEYS[name])).toBe(true);
      expect(receipts.length).toBeGreaterThanOrEqual(2);
      expect(receipts.at(-1)!['status']).toBe('succeeded');
      expect(pieces(git(['--git-dir', w.gitdir, 'cat-file', '--batch-all-objects', '--batch']), KEYS[name])).toEqual([]);
    } finally {
      await server.close();
    }
  });
});

describe('an error said with a 200', () => {
  it.each(['aa.chatgpt', 'aa.claude', 'aa.gemini'])('fails %s with no answer kept, one request for each attempt', async (target) => {
    const w = await fresh();
    const server = await hostile((res) => json(res, { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded', code: 503, status: 'UNAVAILABLE' } }));
    try {
      const receipts = await consultThrough(w, server, target);
      expect(receipts.length).toBeGreaterThanOrEqual(1);
      for (const receipt of receipts) expect(receipt).toMatchObject({ status: 'failed', output_ref: null });
      expect(server.requests).toHaveLength(receipts.length);
    } finally {
      await server.close();
    }
  });
});
