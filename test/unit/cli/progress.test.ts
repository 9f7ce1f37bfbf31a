import { describe, expect, it } from 'vitest';
import { formatDuration, pace, Progress, progressMode } from '../../../src/cli/progress.js';

describe('progressMode', () => {
  it('draws a bar only on a terminal that is not dumb, outside CI', () => {
    expect(progressMode({ isTTY: true }, { TERM: 'xterm-256color' }, false)).toBe('bar');
    expect(progressMode({ isTTY: true }, { TERM: 'dumb' }, false)).toBe('plain');
    expect(progressMode({ isTTY: true }, { TERM: 'xterm', CI: '1' }, false)).toBe('plain');
    expect(progressMode({ isTTY: false }, { CI: 'true' }, false)).toBe('plain');
    expect(progressMode({ isTTY: true }, { TERM: 'xterm', CI: 'false' }, false)).toBe('bar');
    expect(progressMode({ isTTY: false }, {}, false)).toBe('none');
    expect(progressMode({ isTTY: true }, { CI: '1' }, true)).toBe('none');
  });
});

describe('pace', () => {
  it('gives the rate so far and the time left at that rate', () => {
    expect(pace(500, 2000, 2000)).toEqual({ rate: '250', eta: '6s' });
    expect(pace(3, 1000, 1000)).toEqual({ rate: '3.0', eta: '5m33s' });
    expect(pace(1, 100_000, 1000)).toEqual({ rate: '1.0', eta: '27h46m' });
  });

  it('says nothing of the rate before there is enough to judge by', () => {
    expect(pace(0, 1000, 5000)).toEqual({ rate: '--', eta: '--' });
    expect(pace(10, 1000, 100)).toEqual({ rate: '--', eta: '--' });
  });

  it('formats durations in seconds, minutes and hours', () => {
    expect([0, 0.2, 59, 60, 65, 3599, 3600, 7620].map(formatDuration)).toEqual(['0s', '1s', '59s', '1m00s', '1m05s', '59m59s', '1h00m', '2h07m']);
  });
});

describe('Progress in plain text', () => {
  it('prints one line at each tenth of the way, with the rate and the time left, and no escape sequence', () => {
    let now = 0;
    let written = '';
    const stream = { isTTY: false, write: (text: string) => ((written += text), true) } as unknown as NodeJS.WriteStream;
    const progress = new Progress({ label: 'verifying', unit: 'commits', mode: 'plain', stream, clock: () => now });
    for (let done = 1; done <= 1000; done += 1) {
      now += 10;
      progress.update(done, 1000);
    }
    progress.stop();
    const lines = written.trimEnd().split('\n');
    expect(lines).toHaveLength(10);
    expect(lines[0]).toBe('verifying: 100/1000 commits (10%), 101 commits/s, ETA 9s');
    expect(lines[9]).toBe('verifying: 1000/1000 commits (100%), 100 commits/s, ETA 0s');
    expect(written).not.toContain('\x1b');
  });

  it('shows nothing for a run too short to need it', () => {
    let written = '';
    const stream = { isTTY: false, write: (text: string) => ((written += text), true) } as unknown as NodeJS.WriteStream;
    const progress = new Progress({ label: 'verifying', unit: 'commits', mode: 'plain', stream });
    for (let done = 1; done <= 199; done += 1) progress.update(done, 199);
    expect(written).toBe('');
  });
});
