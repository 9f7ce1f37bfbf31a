import { describe, expect, it } from 'vitest';
import { correlationRemainingUsd, emptyState, isTerminal, laneStateOf, stateFromJson, stateToJson, type MessageRecord } from '../../../src/authority/state.js';
import type { ActorRegistry } from '../../../src/schema/registry.js';
import { defaultPolicy } from '../../../src/ledger/init.js';
import { codeOf } from '../../helpers/codes.js';

describe('derived state', () => {
  it('reads back a state it wrote, and refuses a checkpoint of an older shape (whose records lack max_hops)', () => {
    const json = JSON.parse(JSON.stringify(stateToJson(emptyState()))) as Record<string, unknown>;
    expect(stateFromJson(json)).toEqual(emptyState());
    const { shape: _shape, ...older } = json;
    expect(codeOf(() => stateFromJson(older))).toBe('INTERNAL');
  });

  it("leaves a correlation the policy's cap less what it has cost, never less than nothing", () => {
    const policy = defaultPolicy();
    const cap = policy.budgets.max_cost_usd_per_correlation;
    expect(correlationRemainingUsd(policy, 0)).toBe(cap);
    expect(correlationRemainingUsd(policy, 0.25)).toBe(cap - 0.25);
    expect(correlationRemainingUsd(policy, cap + 1)).toBe(0);
  });

  it('gives a message no runner executes a state of its own, never queued: awaiting the COO, acknowledged, or recorded', () => {
    const registry = { active_coo: 'coo.hermes' } as ActorRegistry;
    const record = (fields: Partial<MessageRecord>): MessageRecord =>
      ({ id: 'msg_x', intent: 'ceo_command', source: 'ceo', target: 'coo.hermes', correlation: 'corr_x', createdAt: '2026-12-01T00:00:00Z', chain: [], maxHops: 3, idempotencyKey: 'k', fingerprint: 'f', payloadHash: null, manifestHash: null, maxCostUsd: 0, seq: 1, duplicateOf: null, attempts: [], ...fields }) as MessageRecord;
    expect(laneStateOf(record({}), registry)).toBe('awaiting_ack');
    expect(laneStateOf(record({ intent: 'ceo_reject' }), registry)).toBe('awaiting_ack');
    expect(laneStateOf(record({ intent: 'blocker', source: 'ea.codex' }), registry)).toBe('awaiting_ack');
    expect(laneStateOf(record({ ackedBy: 'msg_ack' }), registry)).toBe('acknowledged');
    expect(laneStateOf(record({ intent: 'ack', source: 'coo.hermes', target: 'ceo', about: 'msg_x' }), registry)).toBe('recorded');
    expect(laneStateOf(record({ intent: 'status_query', source: 'coo.hermes', target: 'ea.codex' }), registry)).toBe('recorded');
    // A command to a COO the registry no longer names as active waits for no acknowledgement.
    expect(laneStateOf(record({}), { active_coo: 'coo.other' } as ActorRegistry)).toBe('recorded');
    // Work the runner executes keeps its lane state.
    expect(laneStateOf(record({ intent: 'aa_consult', source: 'coo.hermes', target: 'aa.chatgpt' }), registry)).toBe('queued');
    expect(laneStateOf(record({ intent: 'ea_dispatch', source: 'coo.hermes', target: 'ea.codex' }), registry)).toBe('queued');
    // Nothing is ever waited for of what no runner executes; a queued consult is not final.
    expect(isTerminal(record({}))).toBe(true);
    expect(isTerminal(record({ intent: 'aa_consult', source: 'coo.hermes', target: 'aa.chatgpt' }))).toBe(false);
  });
});
