import type { ServerResponse } from 'node:http';
import { piecesOf, sendJson, sendSse, type FakeAnswer, type FakeMode } from './consult-wire.js';

/**
 * The Gemini API as @google/genai calls it for Oracle: `POST …/v1beta/models/M:streamGenerateContent?alt=sse`
 * (server-sent `GenerateContentResponse` chunks) or `:generateContent` (one), and Google's error body
 * (`{error:{code, message, status}}`) with its status.
 */

/** `models/M:streamGenerateContent` or `models/M:generateContent`: the model and whether it streams. */
export const GEMINI_PATH = /\/models\/([^/:]+):(streamGenerateContent|generateContent)$/;

/** Answers a failure mode as Google does; false when the mode is an answer. */
export function geminiFailure(res: ServerResponse, mode: FakeMode, stream: boolean): boolean {
  const error = (code: number, status: string, message: string): true => {
    sendJson(res, code, { error: { code, message, status } });
    return true;
  };
  switch (mode) {
    case 'rate-limit':
      return error(429, 'RESOURCE_EXHAUSTED', 'Resource has been exhausted (e.g. check quota).');
    case 'quota':
      return error(429, 'RESOURCE_EXHAUSTED', 'You exceeded your current quota, please check your plan and billing details.');
    case 'auth':
      return error(400, 'INVALID_ARGUMENT', 'API key not valid. Please pass a valid API key.');
    case 'server-error':
      return error(500, 'INTERNAL', 'An internal error has occurred.');
    case 'overloaded':
      return error(503, 'UNAVAILABLE', 'The model is overloaded. Please try again later.');
    case 'garbled':
      if (stream) {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.end('data: {"candidates":[{"content":{"parts":[{"text":"trunc\n\n');
      } else {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('{"candidates":[{"content":');
      }
      return true;
    default:
      return false;
  }
}

export function geminiAnswer(res: ServerResponse, model: string, stream: boolean, answer: FakeAnswer): void {
  const responseId = `gemini_fake_${Date.now()}`;
  // Google bills thinking as output; Oracle's cost leaves thoughtsTokenCount out.
  const usageMetadata = answer.withUsage ? { promptTokenCount: answer.input, candidatesTokenCount: answer.output, totalTokenCount: answer.input + answer.output + 3, thoughtsTokenCount: 3 } : undefined;
  const finishReason = answer.cut ? 'MAX_TOKENS' : 'STOP';
  const chunk = (text: string, last: boolean): Record<string, unknown> => ({
    candidates: [{ content: { role: 'model', parts: [{ text }] }, ...(last ? { finishReason } : {}), index: 0 }],
    ...(last && usageMetadata !== undefined ? { usageMetadata } : {}),
    modelVersion: model,
    responseId,
  });
  if (!stream) {
    sendJson(res, 200, chunk(answer.text, true));
    return;
  }
  const pieces = piecesOf(answer.text);
  sendSse(res, pieces.map((piece, index) => ({ data: chunk(piece, index === pieces.length - 1) })));
}
