import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { CooError } from '../../../src/errors.js';
import { Runner, type RunnerErrorEvent } from '../../../src/runner/runner.js';
import { watchLedger, watchRemote } from '../../../src/runner/watch.js';

/**
 * A runner whose first heartbeat fails for a passing reason and whose second lands. Runner.errorEvent is
 * the real one (coded, scrubbed of the runner's secrets), borrowed without a ledger behind it.
 */
function stalledRunner(failure: Error): { runner: Runner; beats: () => number } {
  let beats = 0;
  const runner = {
    cutOffAt: null,
    heartbeatSeconds: 30,
    printable: { value: <T>(value: T): T => value },
    errorEvent: Runner.prototype.errorEvent,
    heartbeat: (): Promise<number> => {
      beats += 1;
      return beats === 1 ? Promise.reject(failure) : Promise.resolve(beats);
    },
    runOnce: () => Promise.resolve({ receipts: 0, waiting: [], held: [] }),
    checkKillSwitch: () => Promise.resolve(),
  } as unknown as Runner;
  return { runner, beats: () => beats };
}

describe('a heartbeat that was not written', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('is reported by a watch through a remote, which goes on and beats again', async () => {
    vi.useFakeTimers();
    const { runner, beats } = stalledRunner(new CooError('REMOTE_CONFLICT', 'the remote moved under 8 tries in a row'));
    const errors: RunnerErrorEvent[] = [];
    const controller = new AbortController();
    const watching = watchRemote(runner, { remote: { remoteHead: () => Promise.resolve('a'.repeat(40)) }, signal: controller.signal, heartbeatSeconds: 30, pollSeconds: 1000, maxPollSeconds: 1000, onError: (event) => errors.push(event) });
    await vi.advanceTimersByTimeAsync(0);
    expect(errors).toEqual([{ type: 'error', messageId: null, code: 'REMOTE_CONFLICT', message: 'the heartbeat was not written: the remote moved under 8 tries in a row' }]);
    await vi.advanceTimersByTimeAsync(30_000);
    expect(beats()).toBe(2);
    expect(errors).toHaveLength(1);
    controller.abort();
    await vi.advanceTimersByTimeAsync(0);
    await watching;
  });

  it('is reported by a watch of a local ledger, which goes on', async () => {
    const gitdir = mkdtempSync(join(tmpdir(), 'coo-watch-beat-'));
    try {
      const { runner } = stalledRunner(new CooError('LEDGER_LOCKED', 'the ledger is held by another process'));
      const errors: RunnerErrorEvent[] = [];
      const controller = new AbortController();
      const watching = watchLedger(runner, gitdir, {
        signal: controller.signal,
        heartbeatSeconds: 3600,
        onError: (event) => {
          errors.push(event);
          controller.abort();
        },
      });
      await watching;
      expect(errors).toEqual([{ type: 'error', messageId: null, code: 'LEDGER_LOCKED', message: 'the heartbeat was not written: the ledger is held by another process' }]);
    } finally {
      rmSync(gitdir, { recursive: true, force: true });
    }
  });

  it('that the ledger refuses ends the watch, unreported as a passing error', async () => {
    const { runner } = stalledRunner(new CooError('HISTORY_ROLLBACK', 'main does not descend from the head this runner last saw'));
    const errors: RunnerErrorEvent[] = [];
    await expect(watchRemote(runner, { remote: { remoteHead: () => Promise.resolve('a'.repeat(40)) }, heartbeatSeconds: 30, pollSeconds: 1000, maxPollSeconds: 1000, onError: (event) => errors.push(event) })).rejects.toThrow('does not descend');
    expect(errors).toEqual([]);
  });

  it('still in flight when the watch stops is not reported: the watch has ended, and what it meets then is not said', async () => {
    let fail: (error: Error) => void = () => undefined;
    const runner = {
      ...stalledRunner(new Error('unused')).runner,
      heartbeat: (): Promise<number> => new Promise<number>((_, reject) => (fail = reject)),
    } as unknown as Runner;
    const errors: RunnerErrorEvent[] = [];
    const controller = new AbortController();
    const watching = watchRemote(runner, { remote: { remoteHead: () => Promise.resolve('a'.repeat(40)) }, signal: controller.signal, heartbeatSeconds: 30, pollSeconds: 1000, maxPollSeconds: 1000, onError: (event) => errors.push(event) });
    await new Promise((resolve) => setImmediate(resolve));
    controller.abort();
    await watching;
    fail(new CooError('LEDGER_LOCKED', 'the ledger was closed under the beat'));
    await new Promise((resolve) => setImmediate(resolve));
    expect(errors).toEqual([]);
  });
});
