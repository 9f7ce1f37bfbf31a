import type { Readable, Writable } from 'node:stream';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type * as SdkTypes from '@modelcontextprotocol/sdk/types.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { CooError } from '../errors.js';
import { LIMITS } from '../limits.js';
import { importPackage } from '../util/import-package.js';
import { decodeLine, INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, WIRE_CODE, type WireRefusal, type WireSchemas } from './wire.js';
import { inertJson } from '../util/invisible.js';
import { LineBuffer } from './line-buffer.js';

/**
 * `coo mcp`'s stdio transport: one JSON-RPC message per line, each read by wire.ts before the
 * server sees it, and every line the server cannot take answered with a coded JSON-RPC error
 * rather than dropped. It also holds the session to the protocol's order: nothing but initialize
 * and ping before initialize, initialize once, and no request under an id a request the server is
 * not done with holds. A request is held from its line until it is answered or, cancelled (the SDK
 * answers no cancelled request), its handler has settled (`settled`, which server.ts's
 * `serveStdio` calls): most handlers do not stop when cancelled, so a client that sent a call and
 * cancelled it, again and again, had handlers running without bound while each id stayed held
 * for good. A cancellation naming no request held is not passed on: the SDK, handling it after
 * the lines read with it, would land it on a new request under that id and leave that unanswered.
 * A line over `maxLineBytes` ends the session (nothing more is read; the requests read before it
 * are answered first, stopReading), and `overLimit` keeps why: each verb that serves on
 * this transport (`coo mcp`, `coo consult-relay`) ends with that coded error and a non-zero exit,
 * never a silent 0 (the relay ended so, and its agent's executor saw its tool vanish unexplained).
 * What it holds for the client is bounded too: a line read so far is one buffer at most twice its
 * size however many reads it came in (line-buffer.ts), no further line is read while the client leaves the
 * answers unread (its end of stdout is full), and a request past LIMITS.mcpRequestsInFlight held is
 * refused with a coded error. A client that sent and never read, or sent thousands of calls at
 * once, grew the server's memory (and its runner's) without bound.
 */

/** Methods a client may send before the session is initialized (the MCP lifecycle). */
const BEFORE_INITIALIZE = new Set(['initialize', 'ping']);

export async function loadWireSchemas(): Promise<WireSchemas> {
  const types = await importPackage<typeof SdkTypes>('@modelcontextprotocol/sdk/types.js');
  const requests = new Map(types.ClientRequestSchema.options.map((schema) => [schema.shape.method.value as string, schema] as const));
  return { message: types.JSONRPCMessageSchema, requests };
}

/** What the client sent, as a refusal names it: short, whatever its length. */
function shown(value: string | number): string {
  const text = typeof value === 'string' ? value : String(value);
  return text.length > 80 ? `${text.slice(0, 79)}…` : text;
}

/**
 * An error answer of the SDK's own (a method this server does not serve, a resource it does not
 * have) with a code first and what to do, as every other refusal: the SDK says `Method not found`
 * or `MCP error -32602: Resource … not found`. An answer whose message starts with a code is kept.
 */
function codedError<T extends { error: { code: number; message: string } }>(message: T, method: string | undefined): T {
  if (/^[A-Z][A-Z_]+: /.test(message.error.message)) return message;
  const words = message.error.message.replace(/^MCP error -?\d+: /, '');
  const coded =
    message.error.code === METHOD_NOT_FOUND
      ? `USAGE: ${method === undefined ? 'the method' : shown(method)} is not served here: tools/list lists the tools, resources/templates/list the resources`
      : message.error.code === INVALID_PARAMS || message.error.code === INVALID_REQUEST
        ? `USAGE: ${words}: tools/list lists the tools, resources/templates/list the resources (coo://messages/<msg_...>/envelope, receipt or answer)`
        : `INTERNAL: ${words}: report it to the operator`;
  return { ...message, error: { ...message.error, message: coded } };
}

/**
 * Whether a line holds nothing but JSON's whitespace (space, tab, carriage return), which is skipped
 * unanswered. Read as Latin-1 and trimmed, a line of bytes JSON never takes (0xA0, a vertical tab, a
 * form feed) was skipped too: the client waited for an answer to what it sent, and none came.
 */
function isBlank(bytes: Uint8Array): boolean {
  return bytes.every((byte) => byte === 0x20 || byte === 0x09 || byte === 0x0d);
}

function idKey(id: string | number): string {
  return `${typeof id}:${id}`;
}

export class GuardedStdioTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;

  /** The line read so far, whatever the number of reads it came in (line-buffer.ts). */
  private readonly pending: LineBuffer;
  private initialized = false;
  private closed = false;
  /** The ids of requests the server is not done with, with the method each asked. */
  private readonly inFlight = new Map<string, string>();
  /** What was read of stdin and not yet taken, while the client leaves its answers unread. */
  private rest: Buffer | null = null;
  /** Why the session ended, when it was a message over the limit: the verb's own error once the server has closed. */
  overLimit: CooError | null = null;
  private ended = false;
  private readonly outputController = new AbortController();
  /**
   * Aborted once the client closed its end of stdout: nothing more is written, and work whose only
   * outcome is an answer (the relay's consults not yet sent, each charged) is not started.
   */
  readonly outputClosed: AbortSignal = this.outputController.signal;
  /** The server ended the session (stopReading): no further line is read, and it closes once the requests in hand are done. */
  private stopped = false;
  private readonly endedController = new AbortController();
  /**
   * Aborted once the session ends (the client closed stdin, a line over the limit, the client's end of stdout
   * closed, or `end`: the operator's signal): a call still waiting (wait_seconds, the wait tool) answers with what it has now.
   */
  readonly inputEnded: AbortSignal = this.endedController.signal;
  private done: () => void = () => undefined;
  /** Resolved once the session ended (as `inputEnded` says) and every request read before is answered (or, cancelled, its handler settled), or the session closed. */
  readonly finished = new Promise<void>((resolve) => (this.done = resolve));

  constructor(
    private readonly stdin: Readable,
    private readonly stdout: Writable,
    private readonly schemas: WireSchemas,
    private readonly maxLineBytes: number,
  ) {
    this.pending = new LineBuffer(maxLineBytes);
  }

  private readonly onData = (chunk: Buffer): void => this.feed(chunk);

  /** Takes the lines of `chunk`; once the client's end of stdout is full, keeps the rest and reads nothing more until it drains. */
  private feed(chunk: Buffer): void {
    let start = 0;
    for (let newline = chunk.indexOf(0x0a); newline !== -1 && !this.closed; newline = chunk.indexOf(0x0a, start)) {
      if (this.stdout.writableNeedDrain) {
        this.rest = chunk.subarray(start);
        this.stdin.pause();
        return;
      }
      if (!this.take(chunk.subarray(start, newline))) return;
      const line = this.pending.take();
      this.line(line[line.length - 1] === 0x0d ? line.subarray(0, -1) : line);
      start = newline + 1;
    }
    if (!this.closed && start < chunk.length) this.take(chunk.subarray(start));
  }

  /** The client read its answers: what was kept is taken, and stdin read again. */
  private readonly onDrain = (): void => {
    if (this.closed || this.rest === null) return;
    const rest = this.rest;
    this.rest = null;
    this.feed(rest);
    // A line over the limit among what was kept ended the session (stopReading): stdin stays paused, read by no one.
    if (this.rest === null && !this.closed && !this.stopped) this.stdin.resume();
    this.finishInput();
  };

  private readonly onEnd = (): void => {
    this.ended = true;
    this.endedController.abort();
    this.finishInput();
  };

  /**
   * Once stdin has ended and all it held is taken: a last line without its newline is read as a
   * line (answered, or refused as half a message), and the session finishes once every request is
   * done. Closing stdin is how a client ends the session; a client that piped its requests in and
   * closed had none of them answered, the session closing as soon as stdin ended.
   */
  private finishInput(): void {
    if (!this.ended || this.rest !== null || this.closed) return;
    if (this.pending.length > 0) {
      const line = this.pending.take();
      this.line(line[line.length - 1] === 0x0d ? line.subarray(0, -1) : line);
    }
    this.finishWhenDone();
  }

  private finishWhenDone(): void {
    if (!this.ended || this.rest !== null || this.inFlight.size > 0) return;
    this.done();
    // Ended by the server (stopReading), not by the client closing stdin: closed once done, as it was at once before.
    if (this.stopped) void this.close();
  }

  private readonly onStreamError = (error: Error): void => this.onerror?.(error);

  /** A client that closed its end of our stdout has left: the session ends, and a write error never throws (it stays listened to). */
  private readonly onWriteError = (error: Error): void => {
    if (this.closed || this.outputClosed.aborted) return;
    this.outputController.abort();
    this.onerror?.(new CooError('IO_ERROR', `the client's end of stdout is closed (${(error as NodeJS.ErrnoException).code ?? error.message}): the session ends`));
    this.stopReading();
  };

  /**
   * The session ends (a line over the limit, the client's end of stdout closed, `end`): no further line is
   * read, a call still waiting answers with what it has now, and the session finishes (`finished`)
   * once every request already read is done, as when the client closes stdin. Closed at once, a
   * call in hand was cut wherever it stood: `coo mcp` exited in the middle of its write, its
   * answer unsent, the calls after it never written, and the ledger's ref lock left behind.
   */
  private stopReading(): void {
    if (this.stopped) return;
    this.stopped = true;
    this.stopListening();
    this.ended = true;
    this.endedController.abort();
    this.finishWhenDone();
  }

  /** Reads nothing more: stdin is left (paused, unless another reads it) and what was read of it and not taken is dropped. */
  private stopListening(): void {
    this.stdin.off('data', this.onData);
    this.stdin.off('end', this.onEnd);
    this.stdout.off('drain', this.onDrain);
    if (this.stdin.listenerCount('data') === 0) this.stdin.pause();
    this.pending.clear();
    this.rest = null;
  }

  /** Adds part of a line; false (and the session ends) once the line is over the limit. */
  private take(part: Buffer): boolean {
    if (!this.pending.add(part)) {
      this.overLimit = new CooError('MCP_MESSAGE_TOO_LARGE', `a message from the client was over the ${this.maxLineBytes}-byte limit of one MCP message (one line of the stdio transport); the session ended without reading it`);
      this.onerror?.(this.overLimit);
      this.stopReading();
      return false;
    }
    return true;
  }

  private line(bytes: Buffer): void {
    if (isBlank(bytes)) return;
    const decoded = decodeLine(bytes, this.schemas);
    if (!decoded.ok) return this.answer(decoded.refusal);
    const message = decoded.message;
    if ('method' in message && 'id' in message) {
      if (!this.initialized && !BEFORE_INITIALIZE.has(message.method)) {
        return this.answer({ id: message.id, code: INVALID_REQUEST, message: `${WIRE_CODE}: ${shown(message.method)} before initialize: initialize the session first` });
      }
      if (this.initialized && message.method === 'initialize') {
        return this.answer({ id: message.id, code: INVALID_REQUEST, message: `${WIRE_CODE}: the session is initialized already: initialize once, at its start` });
      }
      if (this.inFlight.has(idKey(message.id))) {
        return this.answer({ id: message.id, code: INVALID_REQUEST, message: `${WIRE_CODE}: the id ${shown(message.id)} is held by a request the server is not done with (answered, or cancelled and stopped): give each request an id of its own` });
      }
      if (this.inFlight.size >= LIMITS.mcpRequestsInFlight) {
        return this.answer({ id: message.id, code: INVALID_REQUEST, message: `${WIRE_CODE}: ${LIMITS.mcpRequestsInFlight} requests are in hand (a cancelled one until its work stops): wait for an answer before sending another` });
      }
      this.inFlight.set(idKey(message.id), message.method);
      if (message.method === 'initialize') this.initialized = true;
    } else if ('method' in message && message.method === 'notifications/cancelled') {
      // A cancelled request stays held until its handler settles (`settled`); one naming no request held is dropped.
      const cancelled = (message.params as { requestId?: unknown } | undefined)?.requestId;
      if ((typeof cancelled !== 'string' && typeof cancelled !== 'number') || !this.inFlight.has(idKey(cancelled))) return;
    }
    this.onmessage?.(message);
  }

  private answer(refusal: WireRefusal): void {
    this.onerror?.(new Error(refusal.message));
    void this.write({ jsonrpc: '2.0', id: refusal.id, error: { code: refusal.code, message: refusal.message } });
  }

  start(): Promise<void> {
    this.stdin.on('data', this.onData);
    this.stdin.on('error', this.onStreamError);
    this.stdin.once('end', this.onEnd);
    this.stdout.on('error', this.onWriteError);
    this.stdout.on('drain', this.onDrain);
    return Promise.resolve();
  }

  /**
   * Ends the session from the server's side (the operator's Ctrl-C or SIGTERM, the stdio shutdown's
   * last step): as a line over the limit does, nothing more is read and the session closes once the
   * requests in hand are done. Closed at once, a write under way was cut where it stood.
   */
  end(): void {
    this.stopReading();
  }

  /** The server is done with the request under `id`, answered or (cancelled) not: its id is free and it no longer counts against the bound. */
  settled(id: string | number): void {
    this.inFlight.delete(idKey(id));
    this.finishWhenDone();
  }

  send(message: JSONRPCMessage): Promise<void> {
    let method: string | undefined;
    if (!('method' in message) && 'id' in message && message.id !== undefined) {
      method = this.inFlight.get(idKey(message.id));
      this.inFlight.delete(idKey(message.id));
    }
    const written = this.write('error' in message ? codedError(message, method) : message);
    this.finishWhenDone();
    return written;
  }

  private write(message: unknown): Promise<void> {
    if (this.closed || this.outputClosed.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      if (this.stdout.write(`${inertJson(message)}\n`)) resolve();
      else {
        const done = (): void => {
          this.stdout.off('drain', done);
          this.stdout.off('error', done);
          resolve();
        };
        this.stdout.on('drain', done);
        this.stdout.on('error', done);
      }
    });
  }

  close(): Promise<void> {
    if (this.closed) return Promise.resolve();
    this.closed = true;
    this.stopListening();
    this.stdin.off('error', this.onStreamError);
    this.done();
    this.onclose?.();
    return Promise.resolve();
  }
}
