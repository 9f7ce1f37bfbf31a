import { afterEach, describe, expect, it } from 'vitest';
import { STOP_SIGNALS, stopOnSignal, type StopOnSignal } from '../../../src/cli/stop.js';

/**
 * The stop rule of coo watch, coo mcp and coo model serve: the first signal, of any kind, stops the
 * verb, and a second, of any kind, ends the process at once. The listeners are called as the process
 * calls them on a signal, never by raising one: the test's own process (and its runner's) listen too.
 */
const counts = (): number[] => STOP_SIGNALS.map((signal) => process.listenerCount(signal));

/** The listener `stop` added for `signal`, as the process holds it. */
function added(signal: NodeJS.Signals, before: readonly unknown[]): (signal: NodeJS.Signals) => void {
  const ours = process.rawListeners(signal).filter((listener) => !before.includes(listener));
  expect(ours).toHaveLength(1);
  return ours[0] as (signal: NodeJS.Signals) => void;
}

let stop: StopOnSignal | null = null;
afterEach(() => stop?.dispose());

describe('stopOnSignal', () => {
  it.each([
    ['SIGINT', 'SIGTERM'],
    ['SIGHUP', 'SIGINT'],
    ['SIGTERM', 'SIGHUP'],
  ] as const)('stops on %s and leaves no listener, so %s next ends the process (its default action)', (first, second) => {
    const before = counts();
    const held = new Map(STOP_SIGNALS.map((signal) => [signal, process.rawListeners(signal)] as const));
    const interrupted: string[] = [];
    let stops = 0;
    stop = stopOnSignal({ interrupt: (reason) => void interrupted.push(reason) }, () => (stops += 1));
    expect(counts()).toEqual(before.map((count) => count + 1));
    const listener = added(first, held.get(first)!);
    added(second, held.get(second)!);
    listener(first);
    expect([stop.signal(), interrupted, stops]).toEqual([first, [first], 1]);
    // Before, each signal had a listener of its own: the second, of another kind, ran the stop again and the process waited on.
    expect(counts()).toEqual(before);
    expect(process.rawListeners(second)).toEqual(held.get(second));
  });
});
