import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { enqueueDispatch } from '../../src/dispatch/enqueue.js';
import { startScriptedResponsesServer } from '../../src/offline/fake-responses-server.js';
import { httpOracle, processesUnder, startBounded, until, watchArgs, writeKey } from '../helpers/damage.js';
import { laneState } from '../helpers/startup.js';
import { blockersOf, receiptsOf, worlds } from '../helpers/lane.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * Ctrl-C on a runner: the processes of the attempt in flight end with it, the attempt is receipted
 * `interrupted` before the runner exits, and one line says what becomes of it.
 */

const dir = tempDir('cli-stop-');
const fresh = worlds(dir);
const env = { OPENAI_API_KEY: 'sk-test-key' };

describe('Ctrl-C on coo watch', () => {
  it('ends Oracle, receipts the consult interrupted, says in one line that the next run retries it, exits 130, and the next run does', async () => {
    const world = await fresh({ modes: ['hang'] });
    const { messageId } = await world.consult();
    const state = join(world.dir, 'watch-state');
    const args = watchArgs(world, writeKey(world.dir, 'coo', world.actors.coo), state, httpOracle(world.dir));
    const runner = startBounded([...args, '--once'], env);
    await until('Oracle started', () => runner.stderr().includes(`consulting for ${messageId} attempt 1`) && world.server.requests.length === 1);
    runner.child.kill('SIGINT');
    const ended = await runner.ended;
    expect(ended.status).toBe(130);
    const lines = ended.stderr.trimEnd().split('\n');
    expect(lines.at(-1)).toMatch(
      new RegExp(`^coo watch: stopped by SIGINT: ${messageId} attempt 1 was cut short, its processes ended, and it is receipted failed \\(interrupted\\); the next coo watch runs attempt 2 from \\S+$`),
    );
    expect(processesUnder(state)).toEqual([]);
    const [receipt] = await receiptsOf(world, messageId);
    expect(blockersOf(receipt!)).toEqual(['interrupted']);
    expect(String((receipt!['blockers'] as Array<{ detail: string }>)[0]!.detail)).toMatch(/^the runner was stopped \(SIGINT\) while Oracle ran/);

    world.server.setModes(['ok']);
    const again = await startBounded([...args, '--once'], env).ended;
    expect(again.status).toBe(0);
    expect(laneState(world, messageId)).toBe('succeeded');
  });

  it('ends Codex, receipts the dispatch interrupted, and says that it runs again only with the CEO approval', async () => {
    const world = await fresh();
    const model = await startScriptedResponsesServer([{ kind: 'hang' }]);
    try {
      const { messageId } = await enqueueDispatch({ ledger: world.ledger, key: world.actors.coo, now: new Date(), target: 'ea.codex', repo: world.target, task: 'Fix add().', scope: ['src/**'], accept: ['add works'], verify: ['true'], timeoutSeconds: 120, maxRuntimeSeconds: 120 });
      const state = join(world.dir, 'watch-state');
      const runner = startBounded([...watchArgs(world, writeKey(world.dir, 'coo', world.actors.coo), state), '--ea-base-url', `${model.url}/v1`], env);
      await until('Codex called the model', () => model.calls.length === 1);
      runner.child.kill('SIGINT');
      const ended = await runner.ended;
      expect(ended.status).toBe(130);
      expect(ended.stderr.trimEnd().split('\n').at(-1)).toBe(
        `coo watch: stopped by SIGINT: ${messageId} attempt 1 was cut short, its processes ended, and it is receipted failed (interrupted); a dispatch runs again only when the CEO approves it (coo approve ${messageId} --ceo-key CEO.key --reason ...)`,
      );
      expect(processesUnder(state)).toEqual([]);
      const [receipt] = await receiptsOf(world, messageId);
      expect(blockersOf(receipt!)).toEqual(['interrupted']);
    } finally {
      await model.close();
    }
  });

  it('says so, and exits 0, when no attempt was in flight', async () => {
    const world = await fresh();
    const runner = startBounded(watchArgs(world, writeKey(world.dir, 'coo', world.actors.coo), join(world.dir, 'watch-state')), env);
    await until('watching', () => runner.stderr().includes('(Ctrl-C stops)'));
    runner.child.kill('SIGINT');
    const ended = await runner.ended;
    expect(ended.status).toBe(0);
    expect(ended.stderr.trimEnd().split('\n').at(-1)).toBe('coo watch: stopped by SIGINT; no attempt was in flight');
  });
});
