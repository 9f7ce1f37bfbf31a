import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { assignWork, rendezvousScore } from '../../../src/runner/assignment.js';

const ids = (prefix: string, n: number): string[] => Array.from({ length: n }, (_, i) => `${prefix}_${String(i).padStart(3, '0')}`);

describe('the assignment of queued work among idle runners', () => {
  it('gives each of the first messages its own idle runner, and the rest to no one', () => {
    const messages = ids('msg', 10);
    const runners = ids('runner', 4);
    const matched = assignWork(messages, runners);
    expect([...matched.keys()]).toEqual(messages.slice(0, 4));
    expect(new Set(matched.values())).toEqual(new Set(runners));
    expect(assignWork(messages, [])).toEqual(new Map());
  });

  it('gives the first message to the runner that scores highest for it', () => {
    const runners = ids('runner', 8);
    const best = [...runners].sort((a, b) => (rendezvousScore(b, 'msg_A') > rendezvousScore(a, 'msg_A') ? 1 : -1))[0];
    expect(assignWork(['msg_A'], runners).get('msg_A')).toBe(best);
  });

  it('is the same whatever order the runners are listed in', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 12 }), fc.integer({ min: 1, max: 9 }), fc.integer(), (m, r, seed) => {
        const messages = ids(`msg${seed}`, m);
        const runners = ids(`runner${seed}`, r);
        const shuffled = [...runners].sort((a, b) => rendezvousScore(String(seed), a) > rendezvousScore(String(seed), b) ? 1 : -1);
        expect(assignWork(messages, shuffled)).toEqual(assignWork(messages, runners));
      }),
    );
  });

  it('is stable when a runner claims its message: every other pair stays as it was', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 12 }), fc.integer({ min: 1, max: 9 }), fc.integer(), fc.nat(), (m, r, seed, pick) => {
        const messages = ids(`msg${seed}`, m);
        const runners = ids(`runner${seed}`, r);
        const before = assignWork(messages, runners);
        const [claimed, claimer] = [...before.entries()][pick % before.size]!;
        const after = assignWork(messages.filter((id) => id !== claimed), runners.filter((id) => id !== claimer));
        for (const [message, runner] of after) if (before.has(message)) expect(runner).toBe(before.get(message));
        for (const [message, runner] of before) if (message !== claimed) expect(after.get(message)).toBe(runner);
      }),
    );
  });

  it('spreads messages over runners about evenly', () => {
    const counts = new Map<string, number>();
    const runners = ids('runner', 4);
    for (let i = 0; i < 4000; i += 1) {
      const owner = assignWork([`msg_${i}`], runners).get(`msg_${i}`)!;
      counts.set(owner, (counts.get(owner) ?? 0) + 1);
    }
    for (const runner of runners) expect(counts.get(runner)).toBeGreaterThan(800);
  });
});
