import { afterAll, describe, expect, it } from 'vitest';
import { RUNNERS_KEPT } from '../../src/authority/rules/heartbeat.js';
import { Ledger } from '../../src/ledger/ledger.js';
import { heartbeatPath } from '../../src/ledger/layout.js';
import { newRunnerId } from '../../src/runner/identity.js';
import { toYaml } from '../../src/schema/strict-yaml.js';
import { addSeconds, isoSeconds } from '../../src/util/time.js';
import { makeLedger, T0 } from '../helpers/ledger.js';
import { tempDir } from '../helpers/tmp.js';

const dir = tempDir('coo-heartbeat-prune-');
const closers: Array<() => void> = [];
afterAll(() => closers.forEach((close) => close()));

describe('the heartbeats the ledger state keeps', () => {
  it(`keep the newest of the ${RUNNERS_KEPT} runners that beat last, however many runner ids ever beat, the same from a checkpoint as from a replay`, async () => {
    const { gitdir, actors, ledger } = await makeLedger(dir);
    closers.push(() => ledger.close());
    // One runner id per start, as runners now draw them: more ids than the state keeps, then the first beats again.
    const ids = Array.from({ length: RUNNERS_KEPT + 8 }, () => newRunnerId());
    const beat = async (runner: string, n: number): Promise<void> => {
      const now = new Date(T0.getTime() + n * 1000);
      await ledger.append({
        files: (state) => {
          const doc = { schema_version: 'heartbeat.v0', runner_id: runner, ledger_seq: state.seq + 1, created_at: isoSeconds(now), expires_at: isoSeconds(addSeconds(now, 60)) };
          return [{ path: heartbeatPath(doc.created_at, state.seq + 1), bytes: Buffer.from(toYaml(doc)) }];
        },
        key: actors.coo,
        now,
        summary: `heartbeat from ${runner}`,
      });
    };
    let n = 0;
    for (const id of ids) await beat(id, (n += 1));
    await beat(ids[0]!, n + 1);

    const state = await ledger.state();
    expect(state.runnerHeartbeats.size).toBe(RUNNERS_KEPT);
    // The first id beat again and is the newest; the next eight, which beat longest ago, fell out.
    expect([...state.runnerHeartbeats.keys()]).toEqual([...ids.slice(9), ids[0]]);
    expect(state.runnerHeartbeats.get(ids[0]!)!.seq).toBe(state.seq);

    ledger.checkpoint();
    const fromCheckpoint = Ledger.open(gitdir);
    closers.push(() => fromCheckpoint.close());
    expect([...(await fromCheckpoint.state()).runnerHeartbeats]).toEqual([...state.runnerHeartbeats]);
    const replayed = Ledger.open(gitdir, { checkpoints: false });
    closers.push(() => replayed.close());
    expect([...(await replayed.state()).runnerHeartbeats]).toEqual([...state.runnerHeartbeats]);
  }, 120_000);
});
