import { describe, expect, it } from 'vitest';
import { attemptIdOf, isRunnerIntent, withinHopLimit } from '../../../src/authority/runnable.js';

const id = 'msg_01KBAAAAAAAAAAAAAAAAAAAAAA';

describe('what the runner executes', () => {
  it('executes consults, and never a notice, a blocker or a status query', () => {
    expect(isRunnerIntent('aa_consult')).toBe(true);
    for (const notice of ['receipt_notice', 'blocker', 'status_query'] as const) expect(isRunnerIntent(notice)).toBe(false);
  });

  it('runs a message only while its hops are fewer than its max_hops', () => {
    expect(withinHopLimit({ hop_count: 0, max_hops: 1 })).toBe(true);
    expect(withinHopLimit({ hop_count: 2, max_hops: 3 })).toBe(true);
    expect(withinHopLimit({ hop_count: 3, max_hops: 3 })).toBe(false);
  });

  it('names an attempt by its lane, its message and its number', () => {
    expect(attemptIdOf({ id, intent: 'aa_consult' }, 2)).toBe('aa_attempt_01KBAAAAAAAAAAAAAAAAAAAAAA_2');
    expect(attemptIdOf({ id, intent: 'ea_dispatch' }, 1)).toBe('ea_attempt_01KBAAAAAAAAAAAAAAAAAAAAAA_1');
  });
});
