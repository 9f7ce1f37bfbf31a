import { renameSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { OracleCli } from '../../src/consult/oracle.js';
import { Ledger } from '../../src/ledger/ledger.js';
import { makeCase, remoteReceipts, types } from '../helpers/remote-runners.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * Runners on machines, round 26: a consult attempt's `interrupted` receipt goes through the one
 * receipt path, as every other receipt does: a remote that cannot take it when it is written gets
 * it from the runner's journal later, with what the runner saw, not a later guess at it.
 */

const dir = tempDir('machines-redteam-26');
const closers: Array<() => Promise<void> | void> = [];
afterAll(async () => {
  for (const close of closers.reverse()) await close();
});

describe("an interrupted consult's receipt when the remote is away", () => {
  it('is journaled, and published from the journal once the remote is back, saying why the attempt was interrupted', async () => {
    const world = await makeCase(join(dir, 'folder-gone'), closers);
    const messageId = await world.consult();
    const machine = await world.machine('runner');
    const away = `${world.served.gitdir}.away`;
    const real = new OracleCli({ route: { baseUrl: `${world.model.url}/v1` }, env: { OPENAI_API_KEY: 'sk-test-key' }, hide: [machine.gitdir] });
    // The call is paid; then the operator cleans the attempt's folder away, and the remote goes away too.
    const transport = Object.assign(Object.create(real) as OracleCli, {
      run: async (request: Parameters<OracleCli['run']>[0]) => {
        const run = await real.run(request);
        rmSync(request.sandbox.root, { recursive: true, force: true });
        renameSync(world.served.gitdir, away);
        return { ...run, exitCode: 1, meta: null };
      },
    });
    const first = machine.runner({ transport });
    await first.runOnce();
    await first.close();
    expect(types(machine.events)).toEqual(expect.arrayContaining(['claimed', 'journaled']));
    expect(machine.events.filter((event) => event.type === 'error')).toEqual([]);

    renameSync(away, world.served.gitdir);
    await machine.runner().runOnce();
    expect(await remoteReceipts(world.served, messageId)).toEqual([{ attempt: 1, status: 'failed', blockers: ['interrupted'] }]);
    const served = Ledger.open(world.served.gitdir);
    try {
      const receipt = (await served.state()).messages.get(messageId)!.attempts[0]!.receipt!;
      expect((await served.readFile(receipt.path))!.toString('utf8')).toContain("was removed from the runner's state folder while Oracle ran");
    } finally {
      served.close();
    }
    expect(world.model.requests).toHaveLength(1);
  });
});
