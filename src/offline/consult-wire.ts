import type { ServerResponse } from 'node:http';

/**
 * What the offline consult model's wires share: the failures a provider can answer with, said in
 * the mode names the tests and the demo use, and the answer's text and usage. Each wire
 * (wire-openai.ts, wire-anthropic.ts, wire-gemini.ts) says them in its provider's own API.
 */

export type FakeMode =
  | 'ok'
  | 'no-usage'
  | 'malformed'
  /** A well-formed answer that disagrees: verdict reject, with an objection. */
  | 'dissent'
  | 'obey-injection'
  /** A well-formed answer with a line that reads as instructions to whoever reads it next (a cross-check's challenger). */
  | 'steer'
  | 'rate-limit'
  | 'quota'
  | 'auth'
  | 'server-error'
  /** The provider is overloaded (Anthropic's 529, Gemini's 503): transient. */
  | 'overloaded'
  /** The provider's body breaks off: not JSON, or an SSE line cut short. */
  | 'garbled'
  | 'hang'
  | 'incomplete'
  | 'slow'
  /** Reports more output tokens than the request's cap allowed (a provider that ignores the cap). */
  | 'over-cap'
  /** Stops at the request's cap, as a provider does, and says so only in its stop reason. */
  | 'cut'
  /** An answer over the artifact limit (5 MiB). */
  | 'huge'
  /** A well-formed answer after 60 KB of review notes: long, within the cap and the artifact limit. */
  | 'long'
  /** Reports eight million input tokens: a call that costs far more than any consult's budget. */
  | 'costly'
  /** Answers with a proposal: a task, its scope, acceptance and verification (the demo target's add() fix). */
  | 'propose'
  /** Answers with that proposal and four that try to carry authority: an actor, an approval, an unbounded scope, a field for a target. */
  | 'propose-authority';

/** The text and usage one answer carries, whatever the wire. */
export interface FakeAnswer {
  readonly text: string;
  readonly withUsage: boolean;
  readonly input: number;
  readonly output: number;
  /** The answer stopped at the cap (`cut`): the wire says so its own way. */
  readonly cut: boolean;
}

/** Writes server-sent events: `event:` lines when given, `data:` JSON (or a literal string). */
export function sendSse(res: ServerResponse, events: ReadonlyArray<{ readonly event?: string; readonly data: unknown }>, headers: Record<string, string> = {}): void {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', ...headers });
  for (const item of events) {
    if (item.event !== undefined) res.write(`event: ${item.event}\n`);
    res.write(`data: ${typeof item.data === 'string' ? item.data : JSON.stringify(item.data)}\n\n`);
  }
  res.end();
}

export function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify(body));
}

/** Splits a long text into pieces for a stream. */
export function piecesOf(text: string, size = 16 * 1024): string[] {
  return text.match(new RegExp(`[\\s\\S]{1,${size}}`, 'g')) ?? [''];
}
