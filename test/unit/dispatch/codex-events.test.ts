import { describe, expect, it } from 'vitest';
import { codexStreamState, parseCodexStream } from '../../../src/dispatch/codex-events.js';

const lines = (...events: unknown[]): string => events.map((event) => `${JSON.stringify(event)}\n`).join('');

const OK = lines(
  { type: 'thread.started', thread_id: 't-1' },
  { type: 'item.completed', item: { id: 'item_0', type: 'error', message: 'Model metadata for `mock-model` not found.' } },
  { type: 'turn.started' },
  { type: 'item.started', item: { id: 'item_1', type: 'command_execution', command: "/bin/bash -lc 'exit 3'", aggregated_output: '', exit_code: null, status: 'in_progress' } },
  { type: 'item.completed', item: { id: 'item_1', type: 'command_execution', command: "/bin/bash -lc 'exit 3'", aggregated_output: 'out\n', exit_code: 3, status: 'failed' } },
  { type: 'item.completed', item: { id: 'item_2', type: 'file_change', changes: [{ path: '/w/b.txt', kind: 'add' }], status: 'completed' } },
  { type: 'item.completed', item: { id: 'item_3', type: 'file_change', changes: [{ path: '/w/c.txt', kind: 'add' }], status: 'failed' } },
  { type: 'item.completed', item: { id: 'item_4', type: 'agent_message', text: 'done' } },
  { type: 'turn.completed', usage: { input_tokens: 800, cached_input_tokens: 100, output_tokens: 80, reasoning_output_tokens: 5 } },
);

describe('the Codex event parser', () => {
  it('reads commands with exit codes, applied file changes, the final message and usage', () => {
    const facts = parseCodexStream(OK);
    expect(facts).toMatchObject({
      executor: 'codex',
      sessionId: 't-1',
      commands: [{ command: "/bin/bash -lc 'exit 3'", exitCode: 3 }],
      fileChanges: [{ path: '/w/b.txt', kind: 'add' }],
      finalMessage: 'done',
      terminal: 'completed',
      usage: { inputTokens: 800, cachedInputTokens: 100, outputTokens: 80, reasoningTokens: 5, costUsd: null },
      malformedLines: 0,
      truncated: false,
      afterTerminal: 0,
    });
    expect(facts.errors).toHaveLength(1);
  });

  it('gives the same facts fed in arbitrary chunks', () => {
    const state = codexStreamState();
    for (let i = 0; i < OK.length; i += 7) state.feed(OK.slice(i, i + 7));
    expect(state.finish()).toEqual(parseCodexStream(OK));
  });

  it('reports a failed turn as terminal failed with its error', () => {
    const facts = parseCodexStream(lines({ type: 'thread.started', thread_id: 't' }, { type: 'turn.started' }, { type: 'turn.failed', error: { message: 'stream disconnected before completion' } }));
    expect(facts.terminal).toBe('failed');
    expect(facts.errors).toEqual(['stream disconnected before completion']);
  });

  it('reports no terminal event when the stream stops early', () => {
    expect(parseCodexStream(lines({ type: 'thread.started', thread_id: 't' }, { type: 'turn.started' })).terminal).toBeNull();
  });

  it('counts lines that are not events as malformed', () => {
    for (const bad of ['not json', '[]', '42', 'null', '{"no":"type"}', '{"type":"turn.exploded"}', '{"type":"turn.completed"}', '{"type":"item.completed","item":{"type":"command_execution"}}']) {
      expect(parseCodexStream(`${bad}\n`).malformedLines, bad).toBe(1);
    }
  });

  it('keeps the first thread as the run\'s: a thread.started naming another is not applied and counts as malformed', () => {
    const facts = parseCodexStream(lines({ type: 'thread.started', thread_id: 't-own' }, { type: 'thread.started', thread_id: 't-own' }, { type: 'thread.started', thread_id: 't-other' }));
    expect(facts).toMatchObject({ sessionId: 't-own', malformedLines: 1 });
  });

  it('marks a stream cut off mid-event as truncated', () => {
    const cut = OK.slice(0, OK.length - 20);
    const facts = parseCodexStream(cut);
    expect(facts.truncated).toBe(true);
    expect(facts.malformedLines).toBe(1);
    expect(facts.terminal).toBeNull();
  });

  it('counts events after the first terminal one and never applies them', () => {
    const facts = parseCodexStream(lines({ type: 'turn.failed', error: { message: 'x' } }, { type: 'item.completed', item: { id: 'i', type: 'agent_message', text: 'all good' } }, { type: 'turn.completed', usage: {} }));
    expect(facts).toMatchObject({ terminal: 'failed', afterTerminal: 2, finalMessage: null, usage: null });
  });

  it('records a declined command as a permission denial by its status, never by text', () => {
    const facts = parseCodexStream(lines({ type: 'item.completed', item: { id: 'i', type: 'command_execution', command: 'git push', exit_code: null, status: 'declined' } }, { type: 'item.completed', item: { id: 'j', type: 'command_execution', command: 'echo permission denied', aggregated_output: 'permission denied', exit_code: 1, status: 'failed' } }));
    expect(facts.denials).toEqual([{ code: 'command_declined', tool: 'exec_command' }]);
    expect(facts.commands.map((command) => command.exitCode)).toEqual([null, 1]);
  });
});
