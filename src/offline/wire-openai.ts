import type { ServerResponse } from 'node:http';
import { piecesOf, sendSse, type FakeAnswer, type FakeMode } from './consult-wire.js';

/**
 * OpenAI's two wires as Oracle calls them: Chat Completions (`--base-url`, streamed, usage in a
 * last chunk when the server sends one) and the Responses API (`--azure-endpoint`, streamed events
 * ending in `response.completed` or `response.incomplete`), with OpenAI's error body.
 */

export function sendOpenAiError(res: ServerResponse, status: number, code: string, message: string): void {
  res.writeHead(status, { 'content-type': 'application/json', 'retry-after-ms': '5', 'x-request-id': `req_fake_${status}` });
  res.end(JSON.stringify({ error: { message, type: code, code, param: null } }));
}

/** Answers a failure mode as OpenAI does; false when the mode is an answer. */
export function openAiFailure(res: ServerResponse, mode: FakeMode, stream: boolean): boolean {
  switch (mode) {
    case 'rate-limit':
      sendOpenAiError(res, 429, 'rate_limit_exceeded', 'Rate limit reached for requests');
      return true;
    case 'quota':
      sendOpenAiError(res, 429, 'insufficient_quota', 'You exceeded your current quota, please check your plan and billing details.');
      return true;
    case 'auth':
      sendOpenAiError(res, 401, 'invalid_api_key', 'Incorrect API key provided: sk-fake***.');
      return true;
    case 'server-error':
      sendOpenAiError(res, 500, 'server_error', 'The server had an error while processing your request.');
      return true;
    case 'overloaded':
      sendOpenAiError(res, 503, 'overloaded', 'The server is overloaded.');
      return true;
    case 'garbled':
      res.writeHead(200, { 'content-type': stream ? 'text/event-stream' : 'application/json' });
      res.end(stream ? 'data: {"id":"chatcmpl-broken","choices":[{"index":0,"delta":{"content":"trunc\n\n' : '{"id":"chatcmpl-broken","choices":[');
      return true;
    default:
      return false;
  }
}

export function chatCompletion(res: ServerResponse, body: Record<string, unknown>, answer: FakeAnswer): void {
  const id = `chatcmpl-fake-${Date.now()}`;
  const usage = { prompt_tokens: answer.input, completion_tokens: answer.output, total_tokens: answer.input + answer.output };
  const finish = answer.cut ? 'length' : 'stop';
  if (body['stream'] !== true) {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ id, object: 'chat.completion', model: body['model'], choices: [{ index: 0, message: { role: 'assistant', content: answer.text }, finish_reason: finish }], ...(answer.withUsage ? { usage } : {}) }));
    return;
  }
  const chunk = (delta: Record<string, unknown>, finishReason: string | null = null): unknown => ({ id, object: 'chat.completion.chunk', model: body['model'], choices: [{ index: 0, delta, finish_reason: finishReason }] });
  sendSse(
    res,
    [
      { data: chunk({ role: 'assistant', content: '' }) },
      ...piecesOf(answer.text, 400).map((piece) => ({ data: chunk({ content: piece }) })),
      { data: chunk({}, finish) },
      ...(answer.withUsage ? [{ data: { id, object: 'chat.completion.chunk', choices: [], usage } }] : []),
      { data: '[DONE]' },
    ],
    { 'x-request-id': 'req_fake_1' },
  );
}

export function responsesStream(res: ServerResponse, answer: FakeAnswer, incomplete: boolean): void {
  const id = `resp_fake_${Date.now()}`;
  const base = { id, object: 'response', created_at: 0, model: 'fake', error: null, incomplete_details: null };
  const item = { id: 'msg_fake', type: 'message', role: 'assistant' };
  const shownText = incomplete ? answer.text.slice(0, 40) : answer.text;
  const final = incomplete
    ? { type: 'response.incomplete', sequence_number: 4, response: { ...base, status: 'incomplete', incomplete_details: { reason: 'max_output_tokens' }, output: [], usage: null } }
    : {
        type: 'response.completed',
        sequence_number: 4,
        response: {
          ...base,
          status: 'completed',
          output: [{ ...item, status: 'completed', content: [{ type: 'output_text', text: shownText, annotations: [] }] }],
          usage: answer.withUsage ? { input_tokens: answer.input, output_tokens: answer.output, total_tokens: answer.input + answer.output, output_tokens_details: { reasoning_tokens: 0 } } : null,
        },
      };
  sendSse(
    res,
    [
      { event: 'response.created', data: { type: 'response.created', sequence_number: 0, response: { ...base, status: 'in_progress', output: [], usage: null } } },
      { event: 'response.output_item.added', data: { type: 'response.output_item.added', sequence_number: 1, output_index: 0, item: { ...item, status: 'in_progress', content: [] } } },
      { event: 'response.content_part.added', data: { type: 'response.content_part.added', sequence_number: 2, item_id: 'msg_fake', output_index: 0, content_index: 0, part: { type: 'output_text', text: '', annotations: [] } } },
      { event: 'response.output_text.delta', data: { type: 'response.output_text.delta', sequence_number: 3, item_id: 'msg_fake', output_index: 0, content_index: 0, delta: shownText, logprobs: [] } },
      { event: final.type, data: final },
    ],
    { 'x-request-id': 'req_fake_1' },
  );
}
