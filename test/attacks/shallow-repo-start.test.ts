import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { startBounded, watchArgs, writeKey } from '../helpers/damage.js';
import { worlds } from '../helpers/lane.js';
import { laneState } from '../helpers/startup.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * A shallow clone is what a CI checkout gives (fetch-depth 1): one that holds every commit the
 * queued work pins runs it as a full clone does. Only one cut off before a commit queued work pins is
 * refused at start (operator-redteam-20.test.ts).
 */

const dir = tempDir('shallow-repo-start-');
const fresh = worlds(join(dir, 'worlds'));
const env = { OPENAI_API_KEY: 'sk-test-key' };

function git(args: readonly string[]): string {
  const ran = spawnSync('git', args, { encoding: 'utf8' });
  expect(ran.status, ran.stderr).toBe(0);
  return ran.stdout.trim();
}

describe('a --repo that is a shallow clone', () => {
  it('holding the commit a queued consult pins (a depth-1 checkout of it) starts coo watch --once, and the consult is answered, never refused as a shallow clone', async () => {
    const world = await fresh();
    const { messageId } = await world.consult();
    const shallow = join(world.dir, 'shallow');
    git(['clone', '-q', '--depth', '1', `file://${world.target}`, shallow]);
    expect(git(['-C', shallow, 'rev-parse', '--is-shallow-repository'])).toBe('true');
    const watch = [...watchArgs(world, writeKey(world.dir, 'coo', world.actors.coo), join(world.dir, 'state')), '--once', '--isolation', 'none'];
    watch[watch.indexOf('--repo') + 1] = shallow;
    const ended = await startBounded(watch, env).ended;
    expect(ended.status, ended.stderr).toBe(0);
    expect(laneState(world, messageId)).toBe('succeeded');
  });

  it('cut off before the commit an answered consult pinned starts coo watch --once and answers the queued one: only queued work is asked of it', async () => {
    const world = await fresh();
    const first = (await world.consult()).messageId;
    const key = writeKey(world.dir, 'coo', world.actors.coo);
    const watch = (repo: string): string[] => {
      const args = [...watchArgs(world, key, join(world.dir, 'state')), '--once', '--isolation', 'none'];
      args[args.indexOf('--repo') + 1] = repo;
      return args;
    };
    const answered = await startBounded(watch(world.target), env).ended;
    expect(answered.status, answered.stderr).toBe(0);
    expect(laneState(world, first)).toBe('succeeded');
    const pinned = git(['-C', world.target, 'rev-parse', 'HEAD']);
    git(['-C', world.target, 'commit', '-q', '--allow-empty', '-m', 'later']);
    const { messageId } = await world.consult({ question: 'Is add() correct for Infinity?' });
    const shallow = join(world.dir, 'shallow');
    git(['clone', '-q', '--depth', '1', `file://${world.target}`, shallow]);
    expect(spawnSync('git', ['-C', shallow, 'cat-file', '-e', `${pinned}^{commit}`]).status).not.toBe(0);
    const ended = await startBounded(watch(shallow), env).ended;
    expect(ended.status, ended.stderr).toBe(0);
    expect(laneState(world, messageId)).toBe('succeeded');
  });
});
