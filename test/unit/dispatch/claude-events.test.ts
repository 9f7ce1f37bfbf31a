import { describe, expect, it } from 'vitest';
import { parseClaudeStream } from '../../../src/dispatch/claude-events.js';

const lines = (...events: unknown[]): string => events.map((event) => `${JSON.stringify(event)}\n`).join('');
const toolUse = (id: string, name: string, input: Record<string, unknown>) => ({ type: 'assistant', message: { role: 'assistant', content: [{ type: 'tool_use', id, name, input }] } });
const toolResult = (id: string, content: string, isError = false) => ({ type: 'user', message: { role: 'user', content: [{ type: 'tool_result', tool_use_id: id, content, is_error: isError }] } });
const result = (over: Record<string, unknown> = {}) => ({ type: 'result', subtype: 'success', is_error: false, result: 'done', total_cost_usd: 0.006, usage: { input_tokens: 1000, cache_read_input_tokens: 10, output_tokens: 100 }, permission_denials: [], ...over });

describe('the Claude Code event parser', () => {
  it('reads Bash commands with exit codes, edits, the result, usage and cost', () => {
    const facts = parseClaudeStream(
      lines(
        { type: 'system', subtype: 'init', session_id: 's-1' },
        toolUse('t1', 'Bash', { command: 'echo hi; exit 3' }),
        toolResult('t1', 'Exit code 3\nhi', true),
        toolUse('t2', 'Write', { file_path: '/w/b.txt', content: 'x' }),
        toolResult('t2', 'File created successfully'),
        toolUse('t3', 'Bash', { command: 'sh test.sh' }),
        toolResult('t3', 'ok'),
        toolUse('t4', 'Edit', { file_path: '/w/c.txt', old_string: 'a', new_string: 'b' }),
        toolResult('t4', 'File has not been read yet', true),
        { type: 'assistant', message: { role: 'assistant', content: [{ type: 'text', text: 'done' }] } },
        result(),
      ),
    );
    expect(facts).toMatchObject({
      executor: 'claude_code',
      sessionId: 's-1',
      commands: [
        { command: 'echo hi; exit 3', exitCode: 3 },
        { command: 'sh test.sh', exitCode: 0 },
      ],
      fileChanges: [{ path: '/w/b.txt', kind: 'write' }],
      terminal: 'completed',
      finalMessage: 'done',
      usage: { inputTokens: 1010, cachedInputTokens: 10, outputTokens: 100, costUsd: 0.006 },
      malformedLines: 0,
      truncated: false,
    });
  });

  it('gives a Bash error without an exit line no exit code', () => {
    const facts = parseClaudeStream(lines(toolUse('t1', 'Bash', { command: 'curl x' }), toolResult('t1', 'This command requires approval', true), result()));
    expect(facts.commands).toEqual([{ command: 'curl x', exitCode: null }]);
  });

  it('takes denials from the structured events and the result list, each once', () => {
    const facts = parseClaudeStream(
      lines(
        toolUse('t1', 'Bash', { command: 'curl x' }),
        { type: 'system', subtype: 'permission_denied', tool_name: 'Bash', tool_use_id: 't1', message: 'anything' },
        toolResult('t1', 'This command requires approval', true),
        toolUse('t2', 'Bash', { command: 'echo permission denied' }),
        toolResult('t2', 'permission denied'),
        result({ permission_denials: [{ tool_name: 'Bash', tool_use_id: 't1', tool_input: {} }, { tool_name: 'WebFetch', tool_use_id: 't9', tool_input: {} }] }),
      ),
    );
    expect(facts.denials).toEqual([
      { code: 'tool_denied', tool: 'Bash' },
      { code: 'tool_denied', tool: 'WebFetch' },
    ]);
  });

  it('reports an error result as a failed turn', () => {
    for (const over of [{ subtype: 'error_during_execution' }, { subtype: 'error_max_turns' }, { is_error: true, result: 'API Error: 400' }]) {
      expect(parseClaudeStream(lines(result(over))).terminal).toBe('failed');
    }
  });

  it('reports no terminal event when the result never came, and a cut-off line as truncated', () => {
    const text = lines({ type: 'system', subtype: 'init', session_id: 's' }, toolUse('t1', 'Bash', { command: 'sleep 100' }));
    expect(parseClaudeStream(text).terminal).toBeNull();
    const cut = parseClaudeStream(text + JSON.stringify(result()).slice(0, 50));
    expect(cut).toMatchObject({ terminal: null, truncated: true, malformedLines: 1 });
  });

  it('counts lines that are not events as malformed', () => {
    for (const bad of ['not json', '[]', '"x"', '{"type":"mystery"}', '{"type":"assistant","message":{}}', '{"type":"assistant","message":{"content":[{"type":"tool_use","name":"Bash"}]}}']) {
      expect(parseClaudeStream(`${bad}\n`).malformedLines, bad).toBe(1);
    }
  });

  it('takes the first session an event names as the run\'s: an event naming another is not applied and counts as malformed', () => {
    const facts = parseClaudeStream(lines({ type: 'system', subtype: 'init', session_id: 's-own' }, { ...toolUse('t1', 'Bash', { command: 'true' }), session_id: 's-own' }, result({ session_id: 's-other' }), { type: 'system', subtype: 'init', session_id: 's-other' }));
    expect(facts).toMatchObject({ sessionId: 's-own', malformedLines: 2, terminal: null });
  });

  it('takes the cost its modelUsage states when the total is below it, and an honest total as it is', () => {
    const models = { a: { costUSD: 0.1 }, b: { costUSD: 0.2 } };
    // 0.1 + 0.2 is 0.30000000000000004: an honest total of 0.3 stands, as stated.
    expect(parseClaudeStream(lines(result({ total_cost_usd: 0.3, modelUsage: models }))).usage?.costUsd).toBe(0.3);
    expect(parseClaudeStream(lines(result({ total_cost_usd: 0.3, modelUsage: models }))).implausibleUsage).toBe(false);
    const low = parseClaudeStream(lines(result({ total_cost_usd: 0.01, modelUsage: models })));
    expect(low).toMatchObject({ implausibleUsage: true, usage: { costUsd: 0.1 + 0.2 } });
    expect(parseClaudeStream(lines(result({ total_cost_usd: undefined, modelUsage: models }))).usage?.costUsd).toBe(0.1 + 0.2);
    expect(parseClaudeStream(lines(result({ modelUsage: 'a lot' }))).implausibleUsage).toBe(true);
  });

  it('never applies a result after the first one', () => {
    const facts = parseClaudeStream(lines(result({ subtype: 'error_during_execution', is_error: true, result: 'failed' }), result()));
    expect(facts).toMatchObject({ terminal: 'failed', afterTerminal: 1 });
  });
});
