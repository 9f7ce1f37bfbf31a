import { describe, expect, it } from 'vitest';
import { laneStateOf } from '../../src/authority/state.js';
import { git, tempDir } from '../helpers/tmp.js';
import { worlds } from '../helpers/lane.js';
import { connectMcp, structured, textOf } from '../helpers/mcp.js';
import { RunnerProblems } from '../../src/mcp/runner-problems.js';
import { TOOL_SUMMARIES } from '../../src/mcp/server.js';

const fresh = worlds(tempDir());

const ASK = { to: 'aa.chatgpt', files: ['src/add.ts', 'README.md'], prompt: 'Is add() correct for NaN?', max_runtime_seconds: 60 };

describe('coo mcp, through the SDK client in process', () => {
  it('lists the eleven tools with input and output schemas, read-only and idempotent hints, and no CEO-only operation', async () => {
    const w = await fresh();
    const mcp = await connectMcp(w);
    const { tools } = await mcp.client.listTools();
    expect(tools.map((tool) => tool.name).sort()).toEqual(['ack', 'adopt', 'cite', 'consult', 'cross_check', 'dispatch', 'inbox', 'sessions', 'show', 'verify', 'wait']);
    // coo mcp --help lists the same tools, in the same order.
    expect(tools.map((tool) => tool.name)).toEqual(TOOL_SUMMARIES.map(([name]) => name));
    for (const tool of tools) {
      expect(tool.inputSchema['additionalProperties'], tool.name).toBe(false);
      expect(tool.outputSchema, tool.name).toBeDefined();
    }
    const byName = new Map(tools.map((tool) => [tool.name, tool]));
    for (const name of ['sessions', 'show', 'verify', 'cite', 'wait', 'inbox']) expect(byName.get(name)!.annotations?.readOnlyHint, name).toBe(true);
    expect(byName.get('consult')!.annotations).toMatchObject({ idempotentHint: true, readOnlyHint: false });
    const consultProps = Object.keys(byName.get('consult')!.inputSchema.properties ?? {});
    for (const forbidden of ['repo', 'ledger', 'key', 'prompt_file', 'budget', 'authority_class']) expect(consultProps).not.toContain(forbidden);
    expect(byName.get('dispatch')!.annotations).toMatchObject({ idempotentHint: true, readOnlyHint: false });
    const dispatchProps = Object.keys(byName.get('dispatch')!.inputSchema.properties ?? {});
    for (const forbidden of ['repo', 'ledger', 'key', 'task_file', 'budget', 'authority_class', 'executor', 'base_ref', 'open_pr']) expect(dispatchProps).not.toContain(forbidden);
    expect(byName.get('adopt')!.annotations).toMatchObject({ idempotentHint: true, readOnlyHint: false });
    const adoptProps = Object.keys(byName.get('adopt')!.inputSchema.properties ?? {});
    for (const forbidden of ['repo', 'ledger', 'key', 'task_file', 'budget', 'authority_class', 'executor', 'base_ref', 'open_pr', 'sha256', 'changed']) expect(adoptProps).not.toContain(forbidden);
    await mcp.close();
  });

  it('consult queues a pinned consult, the runner answers it with one paid call, and wait, sessions, show, cite and verify read it', async () => {
    const w = await fresh();
    const mcp = await connectMcp(w);
    const queued = structured(await mcp.call('consult', ASK));
    expect(queued).toMatchObject({ state: 'queued', terminal: false, existing: false, receipt: null });
    const id = queued['message_id'] as string;
    expect((await w.runner().runOnce()).receipts).toBe(1);
    const done = structured(await mcp.call('wait', { message_id: id, timeout_seconds: 5 }));
    expect(done).toMatchObject({ message_id: id, state: 'succeeded', terminal: true, receipt: { attempt: 1, status: 'succeeded', blockers: [] } });
    expect(w.server.requests).toHaveLength(1);

    const page = structured<{ sessions: Array<Record<string, unknown>>; next_before: number | null }>(await mcp.call('sessions', { limit: 5 }));
    expect(page.sessions.map((session) => session['message_id'])).toEqual([id]);
    expect(page.sessions[0]).toMatchObject({ state: 'succeeded', target: 'aa.chatgpt', receipt: { status: 'succeeded' } });

    const shown = structured<Record<string, unknown>>(await mcp.call('show', { message_id: id }));
    expect(shown['lane_state']).toBe('succeeded');
    // The signed envelope says the request came over MCP, and the auditor's coo show names it.
    expect(shown['envelope']).toMatchObject({ submitted_via: 'mcp' });
    expect(shown['submitted_via']).toBe('mcp');
    expect(shown['answer']).toMatchObject({ advisory: true, untrusted: true });
    const answer = shown['answer'] as { text: string; notice: string; boundary: string };
    expect(answer.notice).toMatch(/^UNTRUSTED DATA/);
    expect(answer.text.startsWith(`<<<UNTRUSTED ${answer.boundary}\n`)).toBe(true);
    expect(answer.text.endsWith(`\nUNTRUSTED ${answer.boundary}>>>`)).toBe(true);

    const cited = structured<Record<string, unknown>>(await mcp.call('cite', { message_id: id }));
    expect(cited).toMatchObject({ message_id: id, advisory: true, verified: true });
    expect(cited['markdown']).toContain(id);

    const health = structured<Record<string, unknown>>(await mcp.call('verify'));
    expect(health).toMatchObject({ ok: true, findings: [], kill_switch: 'off' });

    const envelope = await mcp.client.readResource({ uri: `coo://messages/${id}/envelope` });
    expect((envelope.contents[0] as { text: string }).text).toContain(`message_id: ${id}`);
    const receipt = await mcp.client.readResource({ uri: `coo://messages/${id}/receipt` });
    expect((receipt.contents[0] as { text: string }).text).toContain('schema_version: aa_receipt.v0');
    const quoted = await mcp.client.readResource({ uri: `coo://messages/${id}/answer` });
    const resource = (quoted.contents[0] as { text: string }).text;
    const boundary = /^<<<UNTRUSTED ([0-9a-f]+)$/m.exec(resource)?.[1];
    expect(resource).toMatch(/^UNTRUSTED DATA[\s\S]*\n<<<UNTRUSTED [0-9a-f]+\n[\s\S]*\nUNTRUSTED [0-9a-f]+>>>\n$/);
    // The notice names the boundary's id but never draws a boundary line itself.
    expect(resource.split(`<<<UNTRUSTED ${boundary}`)).toHaveLength(2);
    expect(resource.split(`UNTRUSTED ${boundary}>>>`)).toHaveLength(2);
    await mcp.close();
  });

  it('a consult called again with the same request returns the same message and the runner pays once', async () => {
    const w = await fresh();
    const mcp = await connectMcp(w);
    const first = structured(await mcp.call('consult', ASK));
    const again = structured(await mcp.call('consult', ASK));
    expect(again['message_id']).toBe(first['message_id']);
    expect(again['existing']).toBe(true);
    await w.runner().runOnce();
    const third = structured(await mcp.call('consult', { ...ASK, wait_seconds: 5 }));
    expect(third).toMatchObject({ message_id: first['message_id'], existing: true, state: 'succeeded', terminal: true });
    expect(w.server.requests).toHaveLength(1);
    expect((await w.ledger.state()).messages.size).toBe(1);
    await mcp.close();
  });

  it('a new commit to pin is a new request: the derived key changes with the resolved commit', async () => {
    const w = await fresh();
    const mcp = await connectMcp(w);
    const first = structured(await mcp.call('consult', ASK));
    git(['-c', 'user.name=x', '-c', 'user.email=x@x', 'commit', '-q', '--allow-empty', '-m', 'move on'], { cwd: w.target });
    const second = structured(await mcp.call('consult', ASK));
    expect(second['message_id']).not.toBe(first['message_id']);
    expect(second['existing']).toBe(false);
    await mcp.close();
  });

  it('wait on a consult nobody runs returns its state when the time is up, and starts nothing', async () => {
    const w = await fresh();
    const mcp = await connectMcp(w);
    const id = structured(await mcp.call('consult', ASK))['message_id'] as string;
    const waited = structured(await mcp.call('wait', { message_id: id, timeout_seconds: 0.3 }));
    expect(waited).toMatchObject({ state: 'queued', terminal: false, receipt: null });
    expect(waited['next']).toContain('call wait');
    expect(w.server.requests).toHaveLength(0);
    expect(laneStateOf((await w.ledger.state()).messages.get(id)!)).toBe('queued');
    await mcp.close();
  });

  it('sessions filters by correlation and state and pages newest first', async () => {
    const w = await fresh();
    const mcp = await connectMcp(w);
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      ids.push(structured(await mcp.call('consult', { ...ASK, prompt: `question ${i}`, correlation_id: i % 2 === 0 ? 'corr_even' : 'corr_odd' }))['message_id'] as string);
    }
    const first = structured<{ sessions: Array<{ message_id: string }>; next_before: number | null }>(await mcp.call('sessions', { limit: 2 }));
    expect(first.sessions.map((s) => s.message_id)).toEqual([ids[4], ids[3]]);
    const second = structured<{ sessions: Array<{ message_id: string }>; next_before: number | null }>(await mcp.call('sessions', { limit: 2, before: first.next_before }));
    expect(second.sessions.map((s) => s.message_id)).toEqual([ids[2], ids[1]]);
    const last = structured<{ sessions: Array<{ message_id: string }>; next_before: number | null }>(await mcp.call('sessions', { limit: 2, before: second.next_before }));
    expect(last).toEqual({ sessions: [expect.objectContaining({ message_id: ids[0] })], next_before: null });
    const even = structured<{ sessions: Array<{ message_id: string }> }>(await mcp.call('sessions', { correlation_id: 'corr_even' }));
    expect(even.sessions.map((s) => s.message_id)).toEqual([ids[4], ids[2], ids[0]]);
    expect(structured<{ sessions: unknown[] }>(await mcp.call('sessions', { state: 'succeeded' })).sessions).toEqual([]);
    expect(structured<{ sessions: unknown[] }>(await mcp.call('sessions', { since: '2999-01-01T00:00:00Z' })).sessions).toEqual([]);
    await mcp.close();
  });

  it('reports a coded tool error with one line on what to do, and never the ledger or repository path', async () => {
    const w = await fresh();
    const mcp = await connectMcp(w);
    const unknown = await mcp.call('show', { message_id: 'msg_01KZZZZZZZZZZZZZZZZZZZZZZZ' });
    expect(unknown.isError).toBe(true);
    expect(textOf(unknown)).toMatch(/^MESSAGE_UNKNOWN: .*\n.+/);
    const badFile = await mcp.call('consult', { ...ASK, files: ['no/such/file.ts'] });
    expect(badFile.isError).toBe(true);
    expect(textOf(badFile)).toMatch(/^CONTEXT_INVALID: /);
    const badRev = await mcp.call('consult', { ...ASK, rev: 'nosuchbranch' });
    expect(textOf(badRev)).toMatch(/^CONTEXT_INVALID: /);
    for (const result of [unknown, badFile, badRev]) {
      expect(textOf(result)).not.toContain(w.target);
      expect(textOf(result)).not.toContain(w.gitdir);
    }
    await mcp.close();
  });

  it('dispatch queues governed work once per request, signed as coming over MCP, and refuses what the policy gives to the CEO', async () => {
    const w = await fresh();
    const mcp = await connectMcp(w);
    const ask = { to: 'ea.codex', task: 'Make add() reject NaN.', scope: ['src/**'], accept: ['add(NaN, 1) throws'], verify: ['true'] };
    const queued = structured(await mcp.call('dispatch', ask));
    expect(queued).toMatchObject({ state: 'queued', terminal: false, existing: false });
    const again = structured(await mcp.call('dispatch', ask));
    expect(again).toMatchObject({ message_id: queued['message_id'], existing: true });
    const shown = structured<Record<string, unknown>>(await mcp.call('show', { message_id: queued['message_id'] }));
    expect(shown['envelope']).toMatchObject({ intent: 'ea_dispatch', submitted_via: 'mcp', dispatch: { executor: 'codex', scope_paths: ['src/**'] } });
    const refused = await mcp.call('dispatch', { ...ask, to: 'ea.claude_code' });
    expect(refused.isError).toBe(true);
    expect(textOf(refused)).toMatch(/APPROVAL_REQUIRED.*sha256:[0-9a-f]{64}/);
    const smuggled = await mcp.call('dispatch', { ...ask, base_ref: 'b'.repeat(40) });
    expect(smuggled.isError).toBe(true);
    // The CEO's approval is passed as the tool's argument, and the error says so in those words.
    expect(textOf(refused)).toContain('call the dispatch tool again with approval_id APPROVAL_ID');
    expect(textOf(refused)).not.toContain('--approval ');
    await mcp.close();
  });

  it("names the tool's own arguments in a context error, never the CLI's flags", async () => {
    const w = await fresh();
    const mcp = await connectMcp(w);
    const missing = await mcp.call('consult', { ...ASK, files: ['nothing/**'] });
    expect(missing.isError).toBe(true);
    expect(textOf(missing)).toMatch(/^CONTEXT_INVALID: files "nothing\/\*\*" matches nothing at [0-9a-f]{12}/);
    const escaping = await mcp.call('dispatch', { to: 'ea.codex', task: 'x', scope: ['src/**'], accept: ['a'], verify: ['true'], files: ['../outside'] });
    expect(textOf(escaping)).toMatch(/^CONTEXT_INVALID: files "\.\.\/outside" escapes the repository/);
    for (const result of [missing, escaping]) expect(textOf(result)).not.toMatch(/--file|--rev/);
    await mcp.close();
  });

  it("returns a configuration problem of the server's own runner as a coded tool error from dispatch and wait, rather than an endless queued", async () => {
    const w = await fresh();
    const problems = new RunnerProblems();
    const mcp = await connectMcp(w, [], { runnerProblems: problems });
    const ask = { to: 'ea.codex', task: 'Make add() reject NaN.', scope: ['src/**'], accept: ['add(NaN, 1) throws'], verify: ['true'] };
    const queued = structured(await mcp.call('dispatch', ask));
    const id = queued['message_id'] as string;
    // The runner could not start it: its executor is missing (what coo mcp --run's runner reports).
    problems.observe({ type: 'error', messageId: id, code: 'EXECUTOR_CONFIG', message: 'ea.codex: codex is not on PATH' });
    for (const result of [await mcp.call('wait', { message_id: id, timeout_seconds: 1 }), await mcp.call('dispatch', ask)]) {
      expect(result.isError).toBe(true);
      expect(textOf(result)).toMatch(new RegExp(`^EXECUTOR_CONFIG: ${id} is queued, but the runner cannot start it: ea.codex: codex is not on PATH\\n`));
    }
    // Once the runner claims it, the message reads as it stands again.
    problems.observe({ type: 'claimed', messageId: id, attempt: 1 });
    expect(structured(await mcp.call('wait', { message_id: id, timeout_seconds: 0 }))).toMatchObject({ message_id: id, state: 'queued' });
    await mcp.close();
  });

  it('consult with a list of agents queues a panel where the policy names one, and returns every member; where none does, a coded tool error', async () => {
    const refused = await fresh();
    const none = await connectMcp(refused);
    const result = await none.call('consult', { ...ASK, to: ['aa.chatgpt', 'aa.claude'] });
    expect(result.isError).toBe(true);
    expect(textOf(result)).toMatch(/^POLICY_PANEL_NOT_ALLOWED: /);
    await none.close();

    const w = await fresh({ policy: (policy) => ({ ...policy, panels: [{ name: 'review', from: 'coo.*', members: ['aa.chatgpt', 'aa.claude', 'aa.gemini'] }] }) });
    const mcp = await connectMcp(w);
    const ask = { ...ASK, to: ['aa.chatgpt', 'aa.claude', 'aa.gemini'] };
    const queued = structured<Record<string, unknown> & { panel: { panel_id: string; name: string; members: Array<{ target: string; message_id: string; state: string }> } }>(await mcp.call('consult', ask));
    expect(queued.panel.name).toBe('review');
    expect(queued.panel.members.map((member) => [member.target, member.state])).toEqual([['aa.chatgpt', 'queued'], ['aa.claude', 'queued'], ['aa.gemini', 'queued']]);
    expect(queued['message_id']).toBe(queued.panel.members[0]!.message_id);
    await w.runner().runOnce();
    const again = structured<typeof queued>(await mcp.call('consult', { ...ask, wait_seconds: 5 }));
    expect(again['existing']).toBe(true);
    expect(again.panel.panel_id).toBe(queued.panel.panel_id);
    expect(again.panel.members.map((member) => member.state)).toEqual(['succeeded', 'succeeded', 'succeeded']);
    // The panel by its policy name asks the same members.
    const named = structured<typeof queued>(await mcp.call('consult', { ...ASK, to: undefined, panel: 'review', prompt: 'Is add() correct for Infinity?' }));
    expect(named.panel.members.map((member) => member.target)).toEqual(['aa.chatgpt', 'aa.claude', 'aa.gemini']);
    expect(w.server.requests).toHaveLength(3);
    await mcp.close();
  });

  it("cross_check puts one agent's answer to another where the policy allows it, once per request; where it does not, a coded tool error", async () => {
    const refused = await fresh();
    const none = await connectMcp(refused);
    const consult = structured<{ message_id: string }>(await none.call('consult', ASK));
    await refused.runner().runOnce();
    const result = await none.call('cross_check', { answer: consult.message_id, to: 'aa.claude' });
    expect(result.isError).toBe(true);
    expect(textOf(result)).toMatch(/^POLICY_EDGE_NOT_ALLOWED: /);
    await none.close();

    const w = await fresh({ policy: (policy) => ({ ...policy, edges: [...policy.edges, { from: 'aa.*', to: 'aa.*', intents: ['cross_check'], requires: [] }] }) });
    const mcp = await connectMcp(w);
    const asked = structured<{ message_id: string }>(await mcp.call('consult', ASK));
    await w.runner().runOnce();
    const challenge = { answer: asked.message_id, to: 'aa.gemini', prompt: 'Is the NaN claim right?' };
    const queued = structured<{ message_id: string; state: string; existing: boolean }>(await mcp.call('cross_check', challenge));
    expect(queued).toMatchObject({ state: 'queued', existing: false });
    await w.runner().runOnce();
    const again = structured<typeof queued>(await mcp.call('cross_check', { ...challenge, wait_seconds: 5 }));
    expect(again).toMatchObject({ message_id: queued.message_id, state: 'succeeded', existing: true });
    const record = (await w.ledger.state()).messages.get(queued.message_id)!;
    expect(record).toMatchObject({ intent: 'cross_check', source: 'aa.chatgpt', target: 'aa.gemini', submittedVia: 'mcp' });
    expect(w.server.requests).toHaveLength(2);
    await mcp.close();
  });
});
