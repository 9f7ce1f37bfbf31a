import { describe, expect, it } from 'vitest';
import { correlationRemainingUsd, emptyState, stateFromJson, stateToJson } from '../../../src/authority/state.js';
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
});
