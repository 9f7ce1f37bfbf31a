import { describe, expect, it } from 'vitest';
import { planStartup, type TargetFacts } from '../../../src/runner/readiness.js';

const ready = (actor: string, lane: 'consult' | 'dispatch'): TargetFacts => ({ actor, lane, problems: [] });
const blocked = (actor: string, lane: 'consult' | 'dispatch', message: string): TargetFacts => ({ actor, lane, problems: [{ code: 'EXECUTOR_CONFIG', message }] });

describe('the start-up decision', () => {
  it('refuses on a problem every lane shares, whatever the targets', () => {
    expect(planStartup({ shared: [{ code: 'RUNNER_CONFIG', message: 'not a repository' }], isolation: 'bwrap', targets: [ready('aa.chatgpt', 'consult')] })).toEqual({ kind: 'refuse', code: 'RUNNER_CONFIG', message: 'not a repository' });
  });

  it('runs the targets that can run and says once why the others wait, the actor named once', () => {
    const plan = planStartup({ shared: [], isolation: 'bwrap', targets: [blocked('ea.claude_code', 'dispatch', 'ea.claude_code: claude is not on PATH'), ready('aa.chatgpt', 'consult')] });
    expect(plan).toEqual({
      kind: 'run',
      waiting: new Map([['ea.claude_code', { code: 'EXECUTOR_CONFIG', message: 'claude is not on PATH' }]]),
      notes: [{ target: 'ea.claude_code', text: 'dispatches to ea.claude_code wait, queued and unclaimed: claude is not on PATH' }],
    });
  });

  it('refuses when no target can run at all, consults named first', () => {
    const plan = planStartup({ shared: [], isolation: 'bwrap', targets: [blocked('ea.codex', 'dispatch', 'no codex'), { actor: 'aa.chatgpt', lane: 'consult', problems: [{ code: 'ORACLE_CONFIG', message: 'OPENAI_API_KEY is not set' }] }] });
    expect(plan).toEqual({ kind: 'refuse', code: 'ORACLE_CONFIG', message: 'no lane can run here, so nothing is claimed: consults to aa.chatgpt: OPENAI_API_KEY is not set; dispatches to ea.codex: no codex' });
  });

  it('says at start that --isolation none was chosen', () => {
    const plan = planStartup({ shared: [], isolation: 'none', targets: [ready('aa.chatgpt', 'consult')] });
    expect(plan.kind === 'run' && plan.notes).toEqual([{ target: null, text: expect.stringMatching(/^no OS sandbox \(--isolation none\): .*every receipt says sandbox_unenforced$/) }]);
  });

  it('runs with nothing to say when every target can run, and when the policy gives none', () => {
    expect(planStartup({ shared: [], isolation: 'bwrap', targets: [ready('aa.chatgpt', 'consult'), ready('ea.codex', 'dispatch')] })).toEqual({ kind: 'run', waiting: new Map(), notes: [] });
    expect(planStartup({ shared: [], isolation: 'bwrap', targets: [] })).toEqual({ kind: 'run', waiting: new Map(), notes: [] });
  });
});

describe('a target held by what may pass (nothing answers yet at its endpoint on this machine)', () => {
  const silent = (actor: string, lane: 'consult' | 'dispatch'): TargetFacts => ({ actor, lane, problems: [], passing: [{ code: 'ORACLE_CONFIG', message: 'nothing answers at http://127.0.0.1:9/v1' }] });

  it('holds it and refuses a single pass in which no target can run', () => {
    expect(planStartup({ shared: [], isolation: 'bwrap', targets: [silent('aa.chatgpt', 'consult')] })).toEqual({ kind: 'refuse', code: 'ORACLE_CONFIG', message: 'no lane can run here, so nothing is claimed: consults to aa.chatgpt: nothing answers at http://127.0.0.1:9/v1' });
  });

  it('refuses no runner that keeps running and looks again: the target is said to wait, not held for good', () => {
    expect(planStartup({ shared: [], isolation: 'bwrap', looksAgain: true, targets: [silent('aa.chatgpt', 'consult'), blocked('ea.codex', 'dispatch', 'no codex')] })).toEqual({
      kind: 'run',
      waiting: new Map([['ea.codex', { code: 'EXECUTOR_CONFIG', message: 'no codex' }]]),
      notes: [
        { target: 'ea.codex', text: 'dispatches to ea.codex wait, queued and unclaimed: no codex' },
        { target: 'aa.chatgpt', text: 'consults to aa.chatgpt wait, queued and unclaimed, until it answers (looked at again while they wait): nothing answers at http://127.0.0.1:9/v1' },
      ],
    });
  });
});
