import type { StreamFacts } from './executor.js';
import { StreamState, isRecord, text } from './stream-state.js';

/**
 * `codex exec --json` (0.169): `thread.started`, `turn.started`, `item.started|updated|completed`,
 * then `turn.completed` (usage) or `turn.failed` (error), or a top-level `error`. Items that count:
 * `command_execution` (command, exit_code, status completed|failed|declined), `file_change`,
 * `agent_message`, `error`. Pure.
 */

const KNOWN = new Set(['thread.started', 'turn.started', 'item.started', 'item.updated', 'item.completed', 'turn.completed', 'turn.failed', 'error']);

function onItem(state: StreamState, item: Record<string, unknown>): boolean {
  switch (item['type']) {
    case 'command_execution': {
      const command = text(item['command']);
      if (command === null) return false;
      const exit = item['exit_code'];
      if (item['status'] === 'declined') state.denials.push({ code: 'command_declined', tool: 'exec_command' });
      state.commands.push({ command, exitCode: typeof exit === 'number' && Number.isInteger(exit) ? exit : null });
      return true;
    }
    case 'file_change': {
      const changes = item['changes'];
      if (!Array.isArray(changes)) return false;
      // Only applied patches count; a failed one changed nothing the agent can claim.
      if (item['status'] !== 'completed') return true;
      for (const change of changes) {
        if (!isRecord(change) || text(change['path']) === null) return false;
        state.fileChanges.push({ path: change['path'] as string, kind: text(change['kind']) ?? 'unknown' });
      }
      return true;
    }
    case 'agent_message': {
      const message = text(item['text']);
      if (message === null) return false;
      state.finalMessage = message;
      return true;
    }
    case 'error':
      state.addError(item['message']);
      return true;
    default:
      // reasoning, todo_list, web_search, mcp_tool_call: facts the lane does not use.
      return typeof item['type'] === 'string';
  }
}

function onEvent(state: StreamState, event: Record<string, unknown>): boolean {
  const type = event['type'] as string;
  if (!KNOWN.has(type)) return false;
  switch (type) {
    case 'thread.started': {
      const thread = text(event['thread_id']);
      return thread !== null && state.session(thread);
    }
    case 'item.completed': {
      const item = event['item'];
      return isRecord(item) && onItem(state, item);
    }
    case 'item.started':
    case 'item.updated':
      return isRecord(event['item']);
    case 'turn.completed': {
      const usage = event['usage'];
      if (!isRecord(usage)) return false;
      state.usage = {
        inputTokens: state.count(usage['input_tokens']),
        cachedInputTokens: state.count(usage['cached_input_tokens']),
        outputTokens: state.count(usage['output_tokens']),
        reasoningTokens: state.count(usage['reasoning_output_tokens']),
        costUsd: null,
      };
      state.terminal = 'completed';
      return true;
    }
    case 'turn.failed': {
      const error = event['error'];
      state.addError(isRecord(error) ? error['message'] : null);
      state.terminal = 'failed';
      return true;
    }
    case 'error':
      state.addError(event['message']);
      return true;
    default:
      return true;
  }
}

/** What each turn used, as its `turn.completed` states it: a turn after the first one still spent. */
function onSpend(state: StreamState, event: Record<string, unknown>): void {
  const usage = event['usage'];
  if (event['type'] !== 'turn.completed') return;
  // A turn that states its usage as anything but an object states nothing it can be charged by.
  if (!isRecord(usage)) {
    state.implausibleUsage = true;
    return;
  }
  const count = (value: unknown): number => state.count(value);
  const cached = count(usage['cached_input_tokens']);
  // Cached input is part of the input: more of it than the whole says one of the two is false.
  if (cached > count(usage['input_tokens'])) state.implausibleUsage = true;
  state.spentBy(null, { uncached: Math.max(0, count(usage['input_tokens']) - cached), cached, output: count(usage['output_tokens']), reasoning: count(usage['reasoning_output_tokens']) });
}

export function codexStreamState(): StreamState {
  return new StreamState('codex', onEvent, onSpend);
}

/** The facts of a whole kept stream. */
export function parseCodexStream(bytes: Buffer | string): StreamFacts {
  const state = codexStreamState();
  state.feed(typeof bytes === 'string' ? bytes : bytes.toString('utf8'));
  return state.finish();
}
