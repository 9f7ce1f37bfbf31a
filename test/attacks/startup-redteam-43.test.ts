import { execFileSync } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { cooBounded, headOf, refusal, startBounded, watchArgs, writeKey } from '../helpers/damage.js';
import { receiptsOf, worlds } from '../helpers/lane.js';
import { nothingClaimed } from '../helpers/startup.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * A runner started with one mistake in its --repo: the repository is there, but another user owns
 * it, and git works in no such repository unless safe.directory names it. The start is refused
 * (exit 2) with a line that says so and what to do, never "not a git repository" (which sent the
 * operator looking for a repository that is there); nothing is claimed or paid, and the queued
 * consult runs once the repository is this user's again. Only root can give a folder to another
 * user, so only root runs it.
 */

const dir = tempDir('startup-redteam-43-');
const fresh = worlds(dir);
const env = { OPENAI_API_KEY: 'sk-test-key' };
const root = process.geteuid?.() === 0;

describe.runIf(root)('a --repo another user owns', { timeout: 180_000 }, () => {
  it('is refused at start by coo watch and coo mcp --run (RUNNER_CONFIG, exit 2) as another user\'s repository, saying what to give, never as no repository; nothing is claimed; owned again, the consult runs once', async () => {
    const world = await fresh();
    const consult = (await world.consult()).messageId;
    const before = headOf(world.gitdir);
    const key = writeKey(world.dir, 'coo', world.actors.coo);
    const stateDir = join(world.dir, 'state');
    // Its top folder alone is enough for git to refuse it.
    execFileSync('chown', ['54321:54321', world.target]);

    const said = new RegExp(`^coo: RUNNER_CONFIG: --repo ${world.target} is a git repository of another user \\(uid 54321\\), which git refuses to work in \\(safe\\.directory\\): .*run the runner as the user who owns it, or give a clone of it this user owns .*; nothing was claimed$`);
    const watched = cooBounded([...watchArgs(world, key, stateDir), '--once', '--isolation', 'none'], { env });
    expect(refusal(watched)).toMatch(said);
    const served = cooBounded(['mcp', '--run', '--ledger', world.gitdir, '--key', key, '--repo', world.target, '--state-dir', stateDir, '--oracle-base-url', `${world.server.url}/v1`, '--isolation', 'none'], { env });
    expect(refusal(served)).toMatch(said);
    await nothingClaimed(world, before, { consult });

    execFileSync('chown', ['0:0', world.target]);
    // Asynchronously: the model answers from this process.
    const alone = await startBounded([...watchArgs(world, key, stateDir), '--once', '--isolation', 'none'], env).ended;
    expect(alone.status, alone.stderr).toBe(0);
    expect((await receiptsOf(world, consult)).map((receipt) => receipt['status'])).toEqual(['succeeded']);
    expect(world.server.requests).toHaveLength(1);
  });
});

describe.runIf(root)('a --state-dir on a file system with room for a file and not for a sandbox', { timeout: 180_000 }, () => {
  it('is refused at start by coo watch and coo mcp --run (RUNNER_CONFIG, exit 2) saying how much room there is and to make room; nothing is claimed (it claimed, and stopped at the sandbox\'s first write with the message left claimed); with room, the consult runs once', async () => {
    const world = await fresh();
    const consult = (await world.consult()).messageId;
    const before = headOf(world.gitdir);
    const key = writeKey(world.dir, 'coo', world.actors.coo);
    const mount = join(world.dir, 'small');
    mkdirSync(mount);
    // Only root may mount; a tmpfs is a file system of a known size on any machine.
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=16m', 'tmpfs', mount]);
    try {
      const stateDir = join(mount, 'state');
      // Room for the start's probe file, not for a consult's sandbox.
      writeFileSync(join(mount, 'filler'), Buffer.alloc(16 * 1024 * 1024 - 16 * 1024));

      const said = new RegExp(`^coo: RUNNER_CONFIG: ${stateDir}, the runner's state folder, is on a file system with \\d+ KiB free, less than the 10\\.0 MiB one attempt needs there: .*make room on it, or give a --state-dir on a file system with room; nothing was claimed$`);
      // Asynchronously: a runner that starts calls the model, which answers from this process.
      expect(refusal(await startBounded([...watchArgs(world, key, stateDir), '--once', '--isolation', 'none'], env).ended)).toMatch(said);
      const served = cooBounded(['mcp', '--run', '--ledger', world.gitdir, '--key', key, '--repo', world.target, '--state-dir', stateDir, '--oracle-base-url', `${world.server.url}/v1`, '--isolation', 'none'], { env });
      expect(refusal(served)).toMatch(said);
      await nothingClaimed(world, before, { consult });

      rmSync(join(mount, 'filler'));
      const alone = await startBounded([...watchArgs(world, key, stateDir), '--once', '--isolation', 'none'], env).ended;
      expect(alone.status, alone.stderr).toBe(0);
      expect((await receiptsOf(world, consult)).map((receipt) => receipt['status'])).toEqual(['succeeded']);
      expect(world.server.requests).toHaveLength(1);
    } finally {
      execFileSync('umount', [mount]);
    }
  });
});
