import { describe, expect, it } from 'vitest';
import type { MessageRecord } from '../../../src/authority/state.js';
import { nextAttemptAt, planPanel, preflight, type PreflightFacts } from '../../../src/consult/lane.js';
import { nextWork } from '../../../src/authority/runnable.js';
import { judgeRun, type OracleRun } from '../../../src/consult/outcome.js';
import { defaultPolicy, defaultRegistry } from '../../../src/ledger/init.js';
import type { AaConsultMessage } from '../../../src/schema/message.js';

const now = new Date('2026-11-30T08:00:00Z');
const message = {
  message_id: 'msg_01M8NQFJ01J7CG66HWNDDJ8485',
  source_actor: 'coo.hermes',
  principal: 'coo.hermes',
  target_actor: 'aa.chatgpt',
  intent: 'aa_consult',
  hop_count: 0,
  max_hops: 3,
  expires_at: '2026-11-30T09:00:00Z',
  deadline_at: '2026-11-30T09:10:00Z',
  budget: { max_cost_usd: 2, max_runtime_seconds: 300, correlation_budget_remaining_usd: null },
} as unknown as AaConsultMessage;
const facts: PreflightFacts = { now, message, attempt: 1, killSwitch: null, signerRevoked: null, earlier: [], registry: defaultRegistry(), policy: defaultPolicy(), spentOnMessageUsd: 0, spentOnCorrelationUsd: 0, spentTodayUsd: 0, inputTokens: 3000, fixedOutputTokens: null, answered: new Map() };
const record = (attempts: MessageRecord['attempts']): MessageRecord => ({ id: message.message_id, intent: 'aa_consult', duplicateOf: null, attempts } as unknown as MessageRecord);
const failedAttempt = (n: number, code: string, next: string | null) => ({ number: n, attemptId: `a${n}`, claim: null, receipt: { path: '', status: 'failed' as const, blockers: [code as never], costUsd: 0, nextAttemptAt: next, createdAt: '', seq: n } });

describe('pre-flight', () => {
  it('runs a consult that fits, with the model, key and runtime the registry and budget allow', () => {
    expect(preflight(facts)).toMatchObject({ kind: 'run', model: 'gpt-5.5', providerKeyEnv: 'OPENAI_API_KEY', runtimeSeconds: 300 });
  });

  it.each([
    ['the kill switch', { killSwitch: { schema_version: 'kill_switch.v0', version: 1, state: 'on', reason: 'stop', set_by: 'ceo', created_at: '' } }, 'blocked', 'kill_switch'],
    ['an envelope whose key a registry revoked since', { signerRevoked: { what: "its envelope's key", revocation: { seq: 7, by: 'trust/registry/000002.yaml', reason: 'laptop stolen' } } }, 'blocked', 'policy_denied'],
    ['expiry, for a first attempt', { now: new Date('2026-11-30T09:00:00Z') }, 'blocked', 'expired'],
    ['the deadline, for a retry', { now: new Date('2026-11-30T09:10:00Z'), attempt: 2 }, 'blocked', 'deadline_passed'],
    ['the hop limit', { message: { ...message, hop_count: 3 } }, 'blocked', 'hop_limit'],
    ['a hop limit the policy in force lowered since the envelope was written', { message: { ...message, hop_count: 1 }, policy: { ...defaultPolicy(), limits: { ...defaultPolicy().limits, max_hops: 1 } } }, 'blocked', 'hop_limit'],
    ['a policy without the edge', { policy: { ...defaultPolicy(), edges: [] } }, 'blocked', 'policy_denied'],
    ['a model without a price', { policy: { ...defaultPolicy(), models: {} } }, 'failed', 'config_error'],
    ['a spent correlation', { spentOnCorrelationUsd: 20 }, 'blocked', 'correlation_budget_exhausted'],
    ['a spent day', { spentTodayUsd: 50 }, 'blocked', 'daily_cap_reached'],
  ])('stops on %s', (_name, change, status, blocker) => {
    expect(preflight({ ...facts, ...(change as Partial<PreflightFacts>) })).toMatchObject({ kind: 'stop', status, blocker });
  });

  it('stops a cross-check whose challenger the registry has since made the author\'s model', () => {
    const policy = { ...defaultPolicy(), edges: [...defaultPolicy().edges, { from: 'aa.*', to: 'aa.*', intents: ['cross_check' as const], requires: [] }] };
    const crossCheck = { ...message, intent: 'cross_check', source_actor: 'aa.chatgpt', target_actor: 'aa.claude' } as unknown as AaConsultMessage;
    expect(preflight({ ...facts, message: crossCheck, policy })).toMatchObject({ kind: 'run' });
    const registry = defaultRegistry();
    const chatgpt = registry.actors.find((actor) => actor.id === 'aa.chatgpt')!;
    const twin = { ...registry, actors: registry.actors.map((actor) => (actor.id === 'aa.claude' ? { ...actor, transport: chatgpt.transport } : actor)) };
    expect(preflight({ ...facts, message: crossCheck, policy, registry: twin })).toMatchObject({ kind: 'stop', status: 'blocked', blocker: 'policy_denied' });
  });

  it("bounds a retry's output by what the message's budget has left after its earlier attempts", () => {
    const fresh = preflight({ ...facts, attempt: 2 });
    const spent = preflight({ ...facts, attempt: 2, spentOnMessageUsd: 1.9 });
    expect(fresh).toMatchObject({ kind: 'run', budgetLimitUsd: 2 });
    expect(spent.kind === 'run' && spent.budgetLimitUsd).toBeCloseTo(0.1, 9);
    expect(spent.kind === 'run' && fresh.kind === 'run' && spent.maxOutputTokens < fresh.maxOutputTokens).toBe(true);
    expect(preflight({ ...facts, attempt: 2, spentOnMessageUsd: 2 })).toMatchObject({ kind: 'stop', status: 'blocked', blocker: 'budget_preflight' });
  });

  it('lets a retry start after expires_at while the deadline holds', () => {
    expect(preflight({ ...facts, now: new Date('2026-11-30T09:05:00Z'), attempt: 2 })).toMatchObject({ kind: 'run', runtimeSeconds: 300 });
  });

  it('never lets a runtime outlast the deadline', () => {
    expect(preflight({ ...facts, now: new Date('2026-11-30T09:08:00Z'), attempt: 2 })).toMatchObject({ kind: 'run', runtimeSeconds: 120 });
  });
});

describe('retries', () => {
  const policy = { ...defaultPolicy(), retries: { transient_max_attempts: 3, malformed_output_max_attempts: 2, backoff_base_seconds: 2, backoff_max_seconds: 5 } };
  it('backs off exponentially up to the cap for transient failures, within the limit', () => {
    expect(nextAttemptAt({ now, blocker: 'aa_unavailable:rate_limited', record: record([]), message, policy })).toBe('2026-11-30T08:00:02Z');
    expect(nextAttemptAt({ now, blocker: 'aa_unavailable:transport', record: record([failedAttempt(1, 'aa_unavailable:rate_limited', 'x')]), message, policy })).toBe('2026-11-30T08:00:04Z');
    expect(nextAttemptAt({ now, blocker: 'interrupted', record: record([failedAttempt(1, 'aa_unavailable:rate_limited', 'x'), failedAttempt(2, 'aa_unavailable:timeout', 'x')]), message, policy })).toBeNull();
  });

  it('starts a retry the last receipt set only while the policy in force still allows it', () => {
    const once = [failedAttempt(1, 'aa_unavailable:rate_limited', '2026-11-30T08:00:02Z')];
    expect(preflight({ ...facts, attempt: 2, earlier: once, policy })).toMatchObject({ kind: 'run' });
    const lowered = { ...policy, retries: { ...policy.retries, transient_max_attempts: 1 } };
    expect(preflight({ ...facts, attempt: 2, earlier: once, policy: lowered })).toMatchObject({ kind: 'stop', status: 'blocked', blocker: 'policy_denied' });
    // Another class's limit is not this failure's.
    expect(preflight({ ...facts, attempt: 2, earlier: once, policy: { ...policy, retries: { ...policy.retries, malformed_output_max_attempts: 1 } } })).toMatchObject({ kind: 'run' });
  });

  it('retries malformed output within its own limit and never retries what cannot change', () => {
    expect(nextAttemptAt({ now, blocker: 'output_invalid', record: record([]), message, policy })).not.toBeNull();
    expect(nextAttemptAt({ now, blocker: 'output_invalid', record: record([failedAttempt(1, 'output_invalid', 'x')]), message, policy })).toBeNull();
    for (const blocker of ['aa_unavailable:quota', 'aa_unavailable:auth', 'output_injection', 'budget_runtime_breach', 'stale_context', 'kill_switch'] as const) {
      expect(nextAttemptAt({ now, blocker, record: record([]), message, policy })).toBeNull();
    }
  });

  it('does not schedule a retry past the deadline', () => {
    expect(nextAttemptAt({ now: new Date('2026-11-30T09:09:59Z'), blocker: 'aa_unavailable:rate_limited', record: record([]), message, policy })).toBeNull();
  });
});

describe('what the runner does next', () => {
  it('starts, recovers, waits or stops', () => {
    expect(nextWork(record([]), now)).toEqual({ kind: 'attempt', number: 1 });
    expect(nextWork(record([{ number: 1, attemptId: 'a', claim: { path: '', session: '', runner: '', at: '', seq: 1 }, receipt: null }]), now)).toEqual({ kind: 'recover', number: 1 });
    expect(nextWork(record([failedAttempt(1, 'aa_unavailable:rate_limited', '2026-11-30T08:05:00Z')]), now)).toEqual({ kind: 'wait', until: '2026-11-30T08:05:00Z' });
    expect(nextWork(record([failedAttempt(1, 'aa_unavailable:rate_limited', '2026-11-30T07:59:00Z')]), now)).toEqual({ kind: 'attempt', number: 2 });
    expect(nextWork(record([failedAttempt(1, 'aa_unavailable:quota', null)]), now)).toEqual({ kind: 'none' });
    expect(nextWork({ ...record([]), duplicateOf: 'msg_x' }, now)).toEqual({ kind: 'none' });
  });
});

describe("judging Oracle's exit", () => {
  const base: OracleRun = { exitCode: 0, signal: null, killedByTimer: false, elapsedMs: 10, sessionId: 's', meta: null, sessionRecord: null, answer: null, answerBytes: 0, maxOutputTokens: 1000, startError: null, stdoutTail: '', stderrTail: '' };
  const usage = (outputTokens: number) => ({ inputTokens: 10, outputTokens, reasoningTokens: 0, totalTokens: 10 + outputTokens, cost: null });
  const meta = (status: string, extra: object = {}) => ({ status, usage: null, errorMessage: null, transportReason: null, errorCategory: null, incompleteReason: null, responseId: null, ...extra });
  it.each([
    ['exit 0, completed, an answer', { meta: meta('completed'), answer: Buffer.from('x'), answerBytes: 1 }, { ok: true }],
    ['an answer over the artifact limit, never judged on a part', { meta: meta('completed'), answer: null, answerBytes: 4 * 1024 * 1024 + 1 }, { blocker: 'output_too_large', status: 'failed', detail: 'the answer is 4194305 bytes, over the 4194304-byte artifact limit' }],
    ['an answer over the output cap', { meta: meta('completed', { usage: usage(1001) }), answer: Buffer.from('x'), answerBytes: 1 }, { blocker: 'output_too_large', status: 'failed', detail: 'the answer is 1001 output tokens, over the 1000-token output cap (1 bytes)' }],
    ['an answer that reached the output cap: the provider cut it there (Claude, Gemini and Chat Completions report completion)', { meta: meta('completed', { usage: usage(1000) }), answer: Buffer.from('x'), answerBytes: 1 }, { blocker: 'output_too_large', status: 'failed', detail: 'the answer reached the 1000-token output cap and was cut there (1 bytes)' }],
    ['an answer one token under the output cap', { meta: meta('completed', { usage: usage(999) }), answer: Buffer.from('x'), answerBytes: 1 }, { ok: true }],
    ['a command that could not be started, retryable', { exitCode: null, startError: 'spawn /gone/oracle ENOENT' }, { blocker: 'aa_unavailable:transport', status: 'failed', detail: 'Oracle could not be started: spawn /gone/oracle ENOENT' }],
    ['bubblewrap unable to execute the command, retryable', { exitCode: 1, stderrTail: 'bwrap: execvp /gone/oracle: No such file or directory\n' }, { blocker: 'aa_unavailable:transport', detail: 'Oracle could not be started: bwrap: execvp /gone/oracle: No such file or directory' }],
    ['exit 0, completed, no answer', { meta: meta('completed') }, { blocker: 'output_missing' }],
    ['exit 0 without a session record', {}, { blocker: 'output_missing' }],
    ['exit 0 with session status error', { meta: meta('error') }, { blocker: 'aa_unavailable:unknown' }],
    ['a missing API key', { exitCode: 1, meta: meta('error', { errorMessage: 'Missing OPENAI_API_KEY. Set it via the environment' }) }, { blocker: 'aa_unavailable:auth' }],
    ['a client timeout', { exitCode: 1, meta: meta('error', { transportReason: 'client-timeout' }) }, { blocker: 'aa_unavailable:timeout' }],
    ['a lost connection', { exitCode: 1, meta: meta('error', { transportReason: 'connection-lost', errorMessage: 'Connection dropped' }) }, { blocker: 'aa_unavailable:transport' }],
    ['an unknown model', { exitCode: 1, meta: meta('error', { errorMessage: 'The model gpt-9 does not exist' }) }, { blocker: 'aa_unavailable:model' }],
    ['our kill timer', { exitCode: null, signal: 'SIGKILL', killedByTimer: true }, { blocker: 'budget_runtime_breach', status: 'timed_out' }],
    ['a crash with only stdout', { exitCode: 1, stdoutTail: 'ERROR: Rate limit reached for requests' }, { blocker: 'aa_unavailable:rate_limited' }],
    [
      'a redirect the endpoint answered, which Oracle did not follow (consult/no-redirects.ts), said before the 401 of its message',
      { exitCode: 1, meta: meta('error', { errorMessage: 'Connection error. 401' }), stderrTail: 'x\ncoo: https://gateway.example answered 308, a redirect, which coo does not follow: a provider key goes to the endpoint named and nowhere else\n' },
      { blocker: 'aa_unavailable:transport', status: 'failed', detail: 'coo: https://gateway.example answered 308, a redirect, which coo does not follow: a provider key goes to the endpoint named and nowhere else' },
    ],
    ['the same words inside a line of another, not at its start: no redirect was refused', { exitCode: 1, stderrTail: 'Error: 401 said coo: https://gateway.example answered 308, a redirect, which coo does not follow: a provider key goes to the endpoint named and nowhere else\n' }, { blocker: 'aa_unavailable:auth' }],
  ])('%s', (_name, run, expected) => {
    expect(judgeRun({ ...base, ...(run as Partial<OracleRun>) })).toMatchObject(expected);
  });
});

describe('a panel pre-flight', () => {
  const run = (worstCaseUsd: number) => ({ kind: 'run' as const, model: 'm', providerKeyEnv: 'K', price: { input_usd_per_million: 1, output_usd_per_million: 1, max_output_tokens: 1000 }, maxOutputTokens: 1000, runtimeSeconds: 60, budgetLimitUsd: 1, worstCaseUsd });
  it('lets members start when their worst cases together fit the correlation and the day', () => {
    expect(planPanel({ members: [{ actor: 'a', decision: run(0.1) }, { actor: 'b', decision: run(0.1) }], correlationRemainingUsd: 0.2, dailyRemainingUsd: 1 })).toBeNull();
  });
  it('stops every member when together they could cost more than the tighter of the two', () => {
    expect(planPanel({ members: [{ actor: 'a', decision: run(0.1) }, { actor: 'b', decision: run(0.1) }], correlationRemainingUsd: 0.19, dailyRemainingUsd: 1 })).toMatchObject({ blocker: 'correlation_budget_exhausted' });
    expect(planPanel({ members: [{ actor: 'a', decision: run(0.1) }, { actor: 'b', decision: run(0.1) }], correlationRemainingUsd: 1, dailyRemainingUsd: 0.15 })).toMatchObject({ blocker: 'daily_cap_reached' });
  });
  it("stops every member, with that member's blocker, when the ledger stops one of them: its budget or any other stop", () => {
    const unpaid = { kind: 'stop' as const, status: 'blocked' as const, blocker: 'budget_preflight' as const, detail: 'too little' };
    expect(planPanel({ members: [{ actor: 'a', decision: run(0.1) }, { actor: 'b', decision: unpaid }], correlationRemainingUsd: 1, dailyRemainingUsd: 1 })).toEqual({ kind: 'stop', status: 'blocked', blocker: 'budget_preflight', detail: 'panel member b cannot be paid for (too little): no member of the panel is paid' });
    const unpriced = { kind: 'stop' as const, status: 'failed' as const, blocker: 'config_error' as const, detail: 'no price' };
    expect(planPanel({ members: [{ actor: 'a', decision: run(0.1) }, { actor: 'b', decision: unpriced }], correlationRemainingUsd: 1, dailyRemainingUsd: 1 })).toMatchObject({ kind: 'stop', status: 'failed', blocker: 'config_error' });
  });
  it('claims no member while one of them cannot run on this runner or waits on open spend; a stop the ledger decides comes first', () => {
    const unreachable = { kind: 'unreachable' as const, detail: 'no key' };
    expect(planPanel({ members: [{ actor: 'a', decision: run(0.1) }, { actor: 'b', decision: unreachable }], correlationRemainingUsd: 1, dailyRemainingUsd: 1 })).toMatchObject({ kind: 'wait' });
    expect(planPanel({ members: [{ actor: 'a', decision: { kind: 'wait', detail: 'held' } }, { actor: 'b', decision: run(0.1) }], correlationRemainingUsd: 1, dailyRemainingUsd: 1 })).toMatchObject({ kind: 'wait' });
    const expired = { kind: 'stop' as const, status: 'blocked' as const, blocker: 'expired' as const, detail: 'late' };
    expect(planPanel({ members: [{ actor: 'a', decision: unreachable }, { actor: 'b', decision: expired }], correlationRemainingUsd: 1, dailyRemainingUsd: 1 })).toMatchObject({ kind: 'stop', blocker: 'expired' });
  });
});
