import { describe, expect, it, vi } from 'vitest';
import { executorFactory } from '../../src/dispatch/executors.js';
import type * as Worktree from '../../src/dispatch/worktree.js';
import { CooError } from '../../src/errors.js';
import { agentScript, codesOf, dispatchTo, hostilePlaces, receiptsFor } from '../helpers/hostile-agent.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * An attempt whose worktree was made but whose sandbox's copy of the repository's configuration
 * could not be written (dispatch/worktree.ts writeSandboxConfig): its receipt says what failed, not
 * that there was no worktree.
 */
vi.mock('../../src/dispatch/worktree.js', async (original) => ({
  ...(await original<typeof Worktree>()),
  writeSandboxConfig: () => Promise.reject(new CooError('IO_ERROR', 'the disk is full')),
}));

const places = hostilePlaces(tempDir('sandbox-config-failure'), 'f');

describe("an attempt whose sandbox's repository configuration cannot be written", () => {
  it('ends in a receipt that says the worktree was made and the configuration was not', async () => {
    const place = await places('config');
    const { messageId } = await dispatchTo(place, 'config');
    const executors = executorFactory({ command: [agentScript(place.world.dir, 'exit 0')], hide: [place.world.gitdir], env: { PATH: process.env['PATH'], OPENAI_API_KEY: 'sk-test-key' } });
    await place.world.runner({ repo: place.repo, executors }).runOnce();
    const [receipt] = await receiptsFor(place, messageId);
    expect(codesOf(receipt)).toEqual(['config_error']);
    const detail = ((receipt?.['blockers'] ?? []) as Array<{ detail: string }>)[0]?.detail ?? '';
    expect(detail).toMatch(/^the worktree for \S+ was made, but not the copy of the repository's configuration its sandbox reads \(.*\): the disk is full$/);
    expect(detail).not.toContain('no worktree');
  }, 120_000);
});
