import { expect } from 'vitest';
import { enqueueDispatch } from '../../src/dispatch/enqueue.js';
import { cooBounded, headOf } from './damage.js';
import type { World } from './lane.js';

/** A message's state as `coo show --json` gives it. */
export function laneState(world: World, messageId: string): string {
  return (JSON.parse(cooBounded(['show', messageId, '--ledger', world.gitdir, '--json']).stdout) as { lane_state: string }).lane_state;
}

/** A consult and a dispatch queued in a fresh world. */
export async function queued(world: World): Promise<{ consult: string; dispatch: string }> {
  const consult = (await world.consult()).messageId;
  const dispatch = (
    await enqueueDispatch({ ledger: world.ledger, key: world.actors.coo, now: new Date(), target: 'ea.codex', repo: world.target, task: 'Fix add().', scope: ['src/**'], accept: ['add works'], verify: ['true'], timeoutSeconds: 60, maxRuntimeSeconds: 60 })
  ).messageId;
  return { consult, dispatch };
}

/** The ledger is where it was, the messages still queued, and the model was never called: a refused start claimed nothing. */
export async function nothingClaimed(world: World, before: string, ids: { consult: string; dispatch?: string }): Promise<void> {
  expect(headOf(world.gitdir)).toBe(before);
  expect(laneState(world, ids.consult)).toBe('queued');
  if (ids.dispatch !== undefined) expect(laneState(world, ids.dispatch)).toBe('queued');
  expect(world.server.requests).toHaveLength(0);
}
