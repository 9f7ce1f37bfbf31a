import { describe, expect, it } from 'vitest';
import { comparePanel, type MemberAdvice, type PanelMemberFacts } from '../../../src/audit/panel-comparison.js';

const advice = (verdict: MemberAdvice['verdict'], objections: string[] = []): MemberAdvice => ({ verdict, confidence: 0.5, summary: `${verdict} because`, objections, findings: { medium: 1 } });
const member = (actor: string, given: MemberAdvice | null, state: PanelMemberFacts['state'] = given === null ? 'queued' : 'succeeded'): PanelMemberFacts => ({
  actor,
  messageId: `msg_${actor}`,
  state,
  receipt: given === null && state === 'queued' ? null : { path: `r/${actor}`, attempt: 1, status: given === null ? 'failed' : 'succeeded', blockers: given === null ? ['output_invalid'] : [] },
  spentUsd: 0.01,
  advice: given,
});

describe("the runner's comparison of a panel's answers", () => {
  it.each([
    ['unanimous: every member answered with one verdict', [member('a', advice('approve')), member('b', advice('approve'))], 'unanimous'],
    ['split: the verdicts differ', [member('a', advice('approve')), member('b', advice('reject'))], 'split'],
    ['partial: those that answered agree, another gave no advice', [member('a', advice('approve')), member('b', null, 'failed')], 'partial'],
    ['none: no advice yet', [member('a', null), member('b', null)], 'none'],
  ])('%s', (_name, members, agreement) => {
    expect(comparePanel('pnl_x', 'review', members).agreement).toBe(agreement);
  });

  it('groups verdicts, most given first, sets objections side by side, and says why a member gave no advice', () => {
    const comparison = comparePanel('pnl_x', 'review', [member('a', advice('reject', ['too risky'])), member('b', advice('approve')), member('c', advice('approve')), member('d', null, 'failed')]);
    expect(comparison.verdicts).toEqual([
      { verdict: 'approve', members: ['b', 'c'] },
      { verdict: 'reject', members: ['a'] },
    ]);
    expect(comparison.objections).toEqual([{ actor: 'a', objection: 'too risky' }]);
    expect(comparison.answered).toEqual(['a', 'b', 'c']);
    expect(comparison.members[3]).toMatchObject({ actor: 'd', verdict: null, no_advice: 'failed: output_invalid' });
    expect(comparison.total_cost_usd).toBe(0.04);
  });
});
