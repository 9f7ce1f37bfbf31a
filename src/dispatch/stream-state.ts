import { readFigure } from '../lane/usage-figure.js';
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
  /** A figure of usage was stated as no honest stream states one (figure), or a line stated a key twice: what the stream says it spent cannot be taken. */
  implausibleUsage = false;
  /** Tool uses waiting for their results, by id (Claude Code's stream). */
  readonly toolUses = new Map<string, { readonly name: string; readonly input: Record<string, unknown> }>();
  /** Denials already counted, by tool and id: one refusal reported twice counts once. */
  readonly denialKeys = new Set<string>();
  /** The tokens each model call the stream reports used, by the call's key (spentBy). */
  private readonly calls = new Map<string, Tokens>();
  private spent: Tokens = NO_TOKENS;
  /** The most any terminal event stated in all (tokens, and the executor's own cost), the first one or a later one. */
  private stated: { tokens: Tokens; costUsd: number | null } | null = null;
  private pending = '';

  constructor(
    readonly executor: ExecutorName,
    private readonly onEvent: (state: StreamState, event: Record<string, unknown>) => boolean,
    /** Notes the tokens an event says a model call used (spentBy), wherever it stands: after the terminal event too. */
    private readonly onSpend: (state: StreamState, event: Record<string, unknown>) => void = () => undefined,
  ) {}

  /**
   * The tokens one model call used, as an event states them: a call reported again (one message per
   * content block) counts once, at the most it states. `key` names the call; null, a call of its own.
   */
  spentBy(key: string | null, tokens: Tokens): void {
    const id = key ?? `\u0000${this.calls.size}`;
    const before = this.calls.get(id) ?? NO_TOKENS;
    const after = widest(before, tokens);
    this.calls.set(id, after);
    this.spent = {
      uncached: tokenSum(this.spent.uncached - before.uncached, after.uncached),
      cached: tokenSum(this.spent.cached - before.cached, after.cached),
      output: tokenSum(this.spent.output - before.output, after.output),
      reasoning: tokenSum(this.spent.reasoning - before.reasoning, after.reasoning),
    };
  }

  /**
   * What a terminal event states the whole run used: the first one decides the turn, and the most
   * any of them states is a floor under what the run is charged.
   */
  statedTotal(usage: StreamUsage): void {
    const costUsd = usage.costUsd === null ? (this.stated?.costUsd ?? null) : Math.max(usage.costUsd, this.stated?.costUsd ?? 0);
    this.stated = { tokens: widest(this.stated?.tokens ?? NO_TOKENS, tokensOf(usage)), costUsd };
  }

  /** What the stream's own model calls state they used so far; null when none stated any. */
  get observed(): StreamUsage | null {
    return this.calls.size === 0 ? null : usageOf(this.spent, null);
  }

  /** The least the run has used by what the stream said so far: its model calls and every terminal event; null when nothing stated any. */
  get floor(): StreamUsage | null {
    const stated = this.stated === null ? null : usageOf(this.stated.tokens, this.stated.costUsd);
    const observed = this.observed;
    return observed === null ? stated : atLeast(observed, stated);
  }

  /**
   * The session an event names (Codex's thread, Claude Code's session): the first one the stream
   * states is the run's, and an event naming another is not this run's (a stream spliced from
   * another session's, or one claiming another dispatch's thread). False for such an event: it is
   * not applied, and the stream is not clean (malformedLines).
   */
  session(id: string): boolean {
    this.sessionId ??= id;
    return this.sessionId === id;
  }

  /** A figure of usage an event states (lane/usage-figure.ts): one that is not plain makes the run's usage implausible. */
  figure(value: unknown, kind: 'count' | 'usd' = 'count'): number | null {
    const figure = readFigure(value, kind);
    if (!figure.plain) this.implausibleUsage = true;
    return figure.value;
  }

  /** A token count an event states (figure): 0 when it states none. */
  count(value: unknown): number {
    return this.figure(value) ?? 0;
  }

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
    // JSON.parse keeps the last of a key stated twice; the first may be what the run spent.
    if (repeatsAKey(text)) this.implausibleUsage = true;
    // What a model call used counts wherever it is said: spent is spent.
    this.onSpend(this, event as Record<string, unknown>);
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

  /** Drops the line waiting for its newline: a stream cut at its bound is kept, and parsed, up to its last whole line. */
  dropPartial(): void {
    this.pending = '';
  }

  finish(): StreamFacts {
    const truncated = this.pending.trim() !== '';
    if (truncated) this.line(this.pending);
    this.pending = '';
    const stated = this.stated === null ? null : usageOf(this.stated.tokens, this.stated.costUsd);
    return {
      executor: this.executor,
      sessionId: this.sessionId,
      commands: [...this.commands],
      fileChanges: [...this.fileChanges],
      denials: [...this.denials],
      // The terminal event's usage, never below what the stream's own model calls state, nor what a later terminal event states.
      usage: this.usage === null ? null : atLeast(atLeast(this.usage, this.observed), stated),
      // With no terminal usage, what the model calls and any later terminal event stated is still a floor.
      observedUsage: this.floor,
      implausibleUsage: this.implausibleUsage,
      finalMessage: this.finalMessage,
      errors: [...this.errors],
      terminal: this.terminal,
      afterTerminal: this.afterTerminal,
      malformedLines: this.malformedLines,
      truncated,
    };
  }
}

/**
 * Whether a JSON text states one key twice in an object, by its tokens (strings, brackets, colons,
 * commas): a key is the string that opens an object's member, compared as it decodes. The text is
 * already known to parse.
 */
export function repeatsAKey(json: string): boolean {
  const frames: Array<Set<string> | null> = [];
  let expectKey = false;
  for (const [token] of json.matchAll(/"(?:[^"\\]|\\.)*"|[{}[\]:,]/g)) {
    const keys = frames[frames.length - 1];
    if (token === '{') {
      frames.push(new Set());
      expectKey = true;
    } else if (token === '[') {
      frames.push(null);
      expectKey = false;
    } else if (token === '}' || token === ']') {
      frames.pop();
      expectKey = false;
    } else if (token === ':') {
      expectKey = false;
    } else if (token === ',') {
      expectKey = keys != null;
    } else if (expectKey && keys != null) {
      const key = JSON.parse(token) as string;
      if (keys.has(key)) return true;
      keys.add(key);
    }
  }
  return false;
}

export const isRecord = (value: unknown): value is Record<string, unknown> => value !== null && typeof value === 'object' && !Array.isArray(value);
/** Token counts added up, within the largest safe integer (a receipt holds no more). */
export const tokenSum = (...values: readonly number[]): number => Math.min(Number.MAX_SAFE_INTEGER, values.reduce((sum, value) => sum + value, 0));
export const text = (value: unknown): string | null => (typeof value === 'string' ? value : null);

/** Tokens of one or more model calls: uncached and cached input, output, reasoning. */
export interface Tokens {
  readonly uncached: number;
  readonly cached: number;
  readonly output: number;
  readonly reasoning: number;
}

const NO_TOKENS: Tokens = { uncached: 0, cached: 0, output: 0, reasoning: 0 };

function tokensOf(usage: StreamUsage): Tokens {
  return { uncached: Math.max(0, usage.inputTokens - usage.cachedInputTokens), cached: usage.cachedInputTokens, output: usage.outputTokens, reasoning: usage.reasoningTokens };
}

function widest(a: Tokens, b: Tokens): Tokens {
  return { uncached: Math.max(a.uncached, b.uncached), cached: Math.max(a.cached, b.cached), output: Math.max(a.output, b.output), reasoning: Math.max(a.reasoning, b.reasoning) };
}

function usageOf(tokens: Tokens, costUsd: number | null): StreamUsage {
  return { inputTokens: tokenSum(tokens.uncached, tokens.cached), cachedInputTokens: tokens.cached, outputTokens: tokens.output, reasoningTokens: tokens.reasoning, costUsd };
}

/** `usage` with each kind of token raised to what `floor` states (its uncached input kept uncached), and its cost to the floor's, when either states one. */
export function atLeast(usage: StreamUsage, floor: StreamUsage | null): StreamUsage {
  if (floor === null) return usage;
  const costUsd = floor.costUsd === null ? usage.costUsd : Math.max(usage.costUsd ?? 0, floor.costUsd);
  return usageOf(widest(tokensOf(usage), tokensOf(floor)), costUsd);
}
