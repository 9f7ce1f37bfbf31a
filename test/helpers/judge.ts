import { expect } from 'vitest';
import { judgeAnswer } from '../../src/consult/answer.js';
import { judgeProposals } from '../../src/consult/proposals.js';

/** The canary the judged answers carry. */
export const CANARY = 'canary-0123456789abcdef';

/** 'stripped' when the one proposal was stripped, 'kept' when it stands. */
export function judgeOne(proposal: Record<string, unknown>): string {
  const judged = judgeProposals([proposal]);
  expect(judged.kept.length + judged.stripped.length).toBe(1);
  return judged.stripped.length === 1 ? 'stripped' : 'kept';
}

/** 'accepted' when an answer recommending `recommendation` passes the judge, else its blocker. */
export function answerProse(recommendation: string): string {
  const answer = { schema_version: 'aa_answer.v0', verdict: 'approve_with_changes', summary: 'Reviewed.', findings: [], recommendations: [recommendation], objections: [], confidence: 0.6, canary: CANARY };
  const judged = judgeAnswer({ text: `\`\`\`aa_answer\n${JSON.stringify(answer)}\n\`\`\`\n`, canary: CANARY, steering: [] });
  return judged.status === 'pass' ? 'accepted' : judged.blocker;
}
