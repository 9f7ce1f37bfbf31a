import type { ServerResponse } from 'node:http';
import { sendJson, type FakeAnswer, type FakeMode } from './consult-wire.js';

/**
 * Anthropic's Messages API as Oracle's Claude client calls it: one non-streamed
 * `POST …/v1/messages` answered with one JSON message, or Anthropic's error body
 * (`{type:"error", error:{type, message}}`) with its status.
 */

/** Answers a failure mode as Anthropic does; false when the mode is an answer. */
export function anthropicFailure(res: ServerResponse, mode: FakeMode): boolean {
  const error = (status: number, type: string, message: string): true => {
    sendJson(res, status, { type: 'error', error: { type, message }, request_id: `req_fake_${status}` }, { 'request-id': `req_fake_${status}` });
    return true;
  };
  switch (mode) {
    case 'rate-limit':
      return error(429, 'rate_limit_error', 'Number of request tokens has exceeded your per-minute rate limit');
    case 'quota':
      return error(400, 'invalid_request_error', 'Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits.');
    case 'auth':
      return error(401, 'authentication_error', 'invalid x-api-key');
    case 'server-error':
      return error(500, 'api_error', 'Internal server error');
    case 'overloaded':
      return error(529, 'overloaded_error', 'Overloaded');
    case 'garbled':
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"id":"msg_broken","type":"message","content":[{"type":"text","text":"trunc');
      return true;
    default:
      return false;
  }
}

export function anthropicAnswer(res: ServerResponse, body: Record<string, unknown>, answer: FakeAnswer): void {
  sendJson(
    res,
    200,
    {
      id: `msg_fake_${Date.now()}`,
      type: 'message',
      role: 'assistant',
      model: body['model'],
      content: [{ type: 'text', text: answer.text }],
      stop_reason: answer.cut ? 'max_tokens' : 'end_turn',
      stop_sequence: null,
      ...(answer.withUsage ? { usage: { input_tokens: answer.input, output_tokens: answer.output, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 } } : {}),
    },
    { 'request-id': 'req_fake_ok' },
  );
}
