import type { CommandFact, ExecutorName, FileChangeFact, PermissionDenial, StreamFacts, StreamUsage } from './executor.js';

/**
 * What the two event parsers share: a reducer over the lines of a JSONL stream, fed line by line
 * while the executor runs (so the adapter can stop it on a breach) or all at once from the kept
 * bytes. Pure: no I/O.
 */

const MAX_ERRORS = 20;
const MAX_TEXT = 2000;

export class StreamState {
  sessionId: string | null = null;
  readonly commands: CommandFact[] = [];
  readonly fileChanges: FileChangeFact[] = [];
  readonly denials: PermissionDenial[] = [];
  usage: StreamUsage | null = null;
  finalMessage: string | null = null;
  readonly errors: string[] = [];
  terminal: 'completed' | 'failed' | null = null;
  afterTerminal = 0;
  malformedLines = 0;
  /** Tool uses waiting for their results, by id (Claude Code's stream). */
  readonly toolUses = new Map<string, { readonly name: string; readonly input: Record<string, unknown> }>();
  /** Denials already counted, by tool and id: one refusal reported twice counts once. */
  readonly denialKeys = new Set<string>();
  private pending = '';

  constructor(
    readonly executor: ExecutorName,
    private readonly onEvent: (state: StreamState, event: Record<string, unknown>) => boolean,
  ) {}

  addError(message: unknown): void {
    if (this.errors.length < MAX_ERRORS) this.errors.push(typeof message === 'string' ? message.slice(0, MAX_TEXT) : 'error without a message');
  }

  /** One line of the stream, without its newline. */
  line(text: string): void {
    if (text.trim() === '') return;
    let event: unknown;
    try {
      event = JSON.parse(text);
    } catch {
      this.malformedLines += 1;
      return;
    }
    if (event === null || typeof event !== 'object' || Array.isArray(event) || typeof (event as { type?: unknown }).type !== 'string') {
      this.malformedLines += 1;
      return;
    }
    // The first terminal event decides; anything after it is counted and never applied.
    if (this.terminal !== null) {
      this.afterTerminal += 1;
      return;
    }
    if (!this.onEvent(this, event as Record<string, unknown>)) this.malformedLines += 1;
  }

  /** Raw bytes as they arrive; complete lines are parsed, the rest waits for its newline. */
  feed(chunk: string): void {
    const text = this.pending + chunk;
    const lines = text.split('\n');
    this.pending = lines.pop() ?? '';
    for (const line of lines) this.line(line);
  }

  finish(): StreamFacts {
    const truncated = this.pending.trim() !== '';
    if (truncated) this.line(this.pending);
    this.pending = '';
    return {
      executor: this.executor,
      sessionId: this.sessionId,
      commands: [...this.commands],
      fileChanges: [...this.fileChanges],
      denials: [...this.denials],
      usage: this.usage,
      finalMessage: this.finalMessage,
      errors: [...this.errors],
      terminal: this.terminal,
      afterTerminal: this.afterTerminal,
      malformedLines: this.malformedLines,
      truncated,
    };
  }
}

export const isRecord = (value: unknown): value is Record<string, unknown> => value !== null && typeof value === 'object' && !Array.isArray(value);
/** A count as a stream states it: whole, not negative, within the largest safe integer; anything else is 0. */
export const count = (value: unknown): number => (typeof value === 'number' && Number.isFinite(value) && value >= 0 ? Math.min(Number.MAX_SAFE_INTEGER, Math.floor(value)) : 0);

/** Token counts added up, within the largest safe integer (a receipt holds no more). */
export const tokenSum = (...values: readonly number[]): number => Math.min(Number.MAX_SAFE_INTEGER, values.reduce((sum, value) => sum + value, 0));
export const text = (value: unknown): string | null => (typeof value === 'string' ? value : null);
