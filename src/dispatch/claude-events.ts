import type { StreamFacts, StreamUsage } from './executor.js';
import { StreamState, isRecord, text, tokenSum } from './stream-state.js';

/**
 * `claude -p --output-format stream-json --verbose` (2.1.328): `system` (`init`, `permission_denied`),
 * `assistant` messages whose `tool_use` blocks name the tool and its input, `user` messages whose
 * `tool_result` blocks answer them (`is_error`), and one `result` (`subtype` `success` and
 * `is_error` false for a completed turn; `total_cost_usd`, `usage`, `permission_denials`). Pure.
 */

const KNOWN = new Set(['system', 'assistant', 'user', 'result', 'stream_event', 'rate_limit_event']);
const EDIT_TOOLS = new Set(['Write', 'Edit', 'MultiEdit', 'NotebookEdit']);
/** Claude Code reports a failed Bash command as an error result whose first line is `Exit code N`. */
const EXIT_LINE = /^Exit code (-?\d{1,3})(?:\n|$)/;

function resultText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) return content.map((part) => (isRecord(part) && typeof part['text'] === 'string' ? part['text'] : '')).join('');
  return '';
}

function onToolResult(state: StreamState, block: Record<string, unknown>): boolean {
  const id = text(block['tool_use_id']);
  if (id === null) return false;
  const use = state.toolUses.get(id);
  if (use === undefined) return true;
  state.toolUses.delete(id);
  const failed = block['is_error'] === true;
  if (use.name === 'Bash') {
    const command = text(use.input['command']) ?? '';
    const exit = failed ? EXIT_LINE.exec(resultText(block['content'])) : null;
    state.commands.push({ command, exitCode: failed ? (exit === null ? null : Number(exit[1])) : 0 });
  } else if (EDIT_TOOLS.has(use.name) && !failed) {
    const path = text(use.input['file_path']) ?? text(use.input['notebook_path']);
    if (path !== null) state.fileChanges.push({ path, kind: use.name === 'Write' ? 'write' : 'edit' });
  }
  return true;
}

function denied(state: StreamState, tool: unknown, id: unknown): void {
  const key = `${String(tool)}\u0000${String(id)}`;
  if (state.denialKeys.has(key)) return;
  state.denialKeys.add(key);
  state.denials.push({ code: 'tool_denied', tool: typeof tool === 'string' ? tool.slice(0, 100) : 'unknown' });
}

/**
 * What a `result`'s `modelUsage` states each model cost (`costUSD`), added up; null when it states none.
 * Its tokens are not taken: each model has its own price, and the policy's is the dispatch model's.
 */
function modelsCostUsd(state: StreamState, stated: unknown): number | null {
  if (stated === undefined || stated === null) return null;
  // A modelUsage that is not an object of objects says nothing a run can be charged by.
  if (!isRecord(stated)) {
    state.implausibleUsage = true;
    return null;
  }
  let total: number | null = null;
  for (const model of Object.values(stated)) {
    if (!isRecord(model)) {
      state.implausibleUsage = true;
      continue;
    }
    const cost = state.figure(model['costUSD'], 'usd');
    if (cost !== null) total = (total ?? 0) + cost;
  }
  return total;
}

/**
 * What a `result` states the run used; a cost stated without a usage object is still the executor's
 * own figure, with no tokens. The cost is never below what its `modelUsage` states the models cost:
 * Claude Code's total is their sum, and a total below it (past rounding: the sum is added up in
 * another order) is a figure no honest stream states.
 */
function resultUsage(state: StreamState, event: Record<string, unknown>): StreamUsage | null {
  const usage = isRecord(event['usage']) ? event['usage'] : {};
  // A usage that is not an object says nothing a run can be charged by.
  if (event['usage'] !== undefined && event['usage'] !== null && !isRecord(event['usage'])) state.implausibleUsage = true;
  const total = state.figure(event['total_cost_usd'], 'usd');
  const models = modelsCostUsd(state, event['modelUsage']);
  const raised = models !== null && (total === null || models > total * (1 + 1e-9));
  if (raised && total !== null) state.implausibleUsage = true;
  const costUsd = raised ? models : total;
  if (!isRecord(event['usage']) && costUsd === null) return null;
  const count = (value: unknown): number => state.count(value);
  return {
    inputTokens: tokenSum(count(usage['input_tokens']), count(usage['cache_creation_input_tokens']), count(usage['cache_read_input_tokens'])),
    cachedInputTokens: count(usage['cache_read_input_tokens']),
    outputTokens: count(usage['output_tokens']),
    reasoningTokens: 0,
    costUsd,
  };
}

function onEvent(state: StreamState, event: Record<string, unknown>): boolean {
  const type = event['type'] as string;
  if (!KNOWN.has(type)) return false;
  // Every event names its session: one naming another than the run's is not this run's.
  const session = text(event['session_id']);
  if (session !== null && !state.session(session)) return false;
  switch (type) {
    case 'system':
      if (event['subtype'] === 'permission_denied') denied(state, event['tool_name'], event['tool_use_id']);
      return true;
    case 'assistant': {
      const message = event['message'];
      if (!isRecord(message) || !Array.isArray(message['content'])) return false;
      for (const block of message['content']) {
        if (!isRecord(block)) return false;
        if (block['type'] === 'tool_use') {
          const id = text(block['id']);
          const name = text(block['name']);
          if (id === null || name === null || !isRecord(block['input'])) return false;
          state.toolUses.set(id, { name, input: block['input'] });
        } else if (block['type'] === 'text' && typeof block['text'] === 'string') {
          state.finalMessage = block['text'];
        }
      }
      return true;
    }
    case 'user': {
      const message = event['message'];
      if (!isRecord(message)) return false;
      const content = message['content'];
      if (!Array.isArray(content)) return typeof content === 'string';
      for (const block of content) {
        if (isRecord(block) && block['type'] === 'tool_result' && !onToolResult(state, block)) return false;
      }
      return true;
    }
    case 'result': {
      state.usage = resultUsage(state, event);
      const denials = event['permission_denials'];
      if (Array.isArray(denials)) for (const denial of denials) if (isRecord(denial)) denied(state, denial['tool_name'], denial['tool_use_id']);
      if (typeof event['result'] === 'string') state.finalMessage = event['result'];
      const ok = event['subtype'] === 'success' && event['is_error'] === false;
      if (!ok) state.addError(text(event['result']) ?? `result ${String(event['subtype'])}`);
      state.terminal = ok ? 'completed' : 'failed';
      return true;
    }
    default:
      return true;
  }
}

/**
 * What one model call used, as each `assistant` event states it (the API message's `usage`): a
 * message of several content blocks is reported once per block, under one message id.
 */
function onSpend(state: StreamState, event: Record<string, unknown>): void {
  if (event['type'] === 'result') {
    const usage = resultUsage(state, event);
    if (usage !== null) state.statedTotal(usage);
    return;
  }
  const message = event['message'];
  if (event['type'] !== 'assistant' || !isRecord(message)) return;
  if (message['usage'] !== undefined && message['usage'] !== null && !isRecord(message['usage'])) state.implausibleUsage = true;
  if (!isRecord(message['usage'])) return;
  const usage = message['usage'];
  const count = (value: unknown): number => state.count(value);
  state.spentBy(text(message['id']), {
    uncached: tokenSum(count(usage['input_tokens']), count(usage['cache_creation_input_tokens'])),
    cached: count(usage['cache_read_input_tokens']),
    output: count(usage['output_tokens']),
    reasoning: 0,
  });
}

export function claudeStreamState(): StreamState {
  return new StreamState('claude_code', onEvent, onSpend);
}

/** The facts of a whole kept stream. */
export function parseClaudeStream(bytes: Buffer | string): StreamFacts {
  const state = claudeStreamState();
  state.feed(typeof bytes === 'string' ? bytes : bytes.toString('utf8'));
  return state.finish();
}
