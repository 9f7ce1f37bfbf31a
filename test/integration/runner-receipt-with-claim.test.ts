import { readdirSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadPrivateKey } from '../../src/cli/common.js';
import { attemptIdOf } from '../../src/authority/runnable.js';
import { folderOf } from '../../src/authority/state.js';
import { claimPath } from '../../src/ledger/layout.js';
import type { RunnerEvent, RunnerRemote } from '../../src/runner/runner.js';
import { toYaml } from '../../src/schema/strict-yaml.js';
import { sessionSlugFor } from '../../src/util/ids.js';
import { isoSeconds } from '../../src/util/time.js';
import { coo } from '../helpers/cli.js';
import { wrapHook } from '../helpers/remote-ledger.js';
import { makeCase, remoteReceipts, types, type Case, type Machine } from '../helpers/remote-runners.js';
import { tempDir } from '../helpers/tmp.js';

const dir = tempDir('coo-receipt-with-claim-');
const closers: Array<() => Promise<void> | void> = [];

afterAll(async () => {
  for (const close of closers.reverse()) await close();
});

const newCase = (): Promise<Case> => makeCase(dir, closers);

/** The machine's remote, with every write it publishes (its summary) noted. */
function noting(machine: Machine): { remote: RunnerRemote; writes: string[] } {
  const writes: string[] = [];
  const remote: RunnerRemote = {
    url: machine.remote.url,
    sync: () => machine.remote.sync(),
    append: (options) => {
      writes.push(options.summary);
      return machine.remote.append(options);
    },
  };
  return { remote, writes };
}

/** The message of the first claim a runner made. */
function firstClaimed(events: readonly RunnerEvent[]): string {
  return (events.find((event) => event.type === 'claimed') as { messageId: string }).messageId;
}

describe('a receipt and the same runner\'s next claim in one push', () => {
  it('two consults in one pass: the first receipt goes out with the second claim, three pushes for two consults, each paid once', async () => {
    const world = await newCase();
    const ids = [await world.consult(), await world.consult()];
    const machine = await world.machine('runner');
    const { remote, writes } = noting(machine);

    const summary = await machine.runner({ remote }).runOnce();

    expect(summary.receipts).toBe(2);
    const a = firstClaimed(machine.events);
    const b = ids.find((id) => id !== a)!;
    expect(writes).toEqual([`claim ${a} attempt 1`, `claim ${b} attempt 1; receipt ${a} attempt 1: succeeded`, `receipt ${b} attempt 1: succeeded`]);
    // The receipt is said once it landed, before the claim it went out with; the second call starts after both.
    const said = machine.events.filter((event) => ['claimed', 'receipt', 'oracle_started'].includes(event.type)).map((event) => `${event.type} ${'messageId' in event ? event.messageId : ''}`);
    expect(said).toEqual([`claimed ${a}`, `oracle_started ${a}`, `receipt ${a}`, `claimed ${b}`, `oracle_started ${b}`, `receipt ${b}`]);
    for (const id of ids) expect(await remoteReceipts(world.served, id)).toEqual([{ attempt: 1, status: 'succeeded', blockers: [] }]);
    expect(world.model.requests).toHaveLength(2);
    expect(readdirSync(join(machine.stateDir, 'journal'))).toEqual([]);
    expect(coo(['verify', '--ledger', world.served.gitdir, '--no-checkpoint']).status).toBe(0);
  });

  it('another runner claims the next message while the push is on its way: the push loses, the receipt lands alone, and that attempt is not started', async () => {
    const world = await newCase();
    const ids = [await world.consult(), await world.consult()];
    const machine = await world.machine('runner');
    const other = await world.machine('elsewhere');
    const key = loadPrivateKey(world.served.keys.coo);
    let taken: string | null = null;
    // Built on the head it fetched, the shared push meets a main where another runner claimed the same attempt first.
    const remote: RunnerRemote = {
      url: machine.remote.url,
      sync: () => machine.remote.sync(),
      append: (options) =>
        machine.remote.write(async (ledger) => {
          const carried = /^claim (\S+) attempt 1; receipt /.exec(options.summary);
          if (carried !== null && taken === null) {
            taken = carried[1]!;
            await other.remote.sync();
            const record = (await other.ledger.state()).messages.get(taken)!;
            const at = new Date();
            const doc = { schema_version: 'claim.v0', message_id: taken, attempt_id: attemptIdOf(record, 1), attempt_number: 1, runner_id: 'run-other', transport_session_id: sessionSlugFor(taken, 1), claimed_at: isoSeconds(at) };
            await other.remote.append({ files: [{ path: claimPath(folderOf(record), 1), bytes: Buffer.from(toYaml(doc)) }], key, now: at, summary: `claim ${taken} attempt 1` });
          }
          return ledger.append(options);
        }),
    };

    await machine.runner({ remote }).runOnce();

    expect(taken).not.toBeNull();
    const first = ids.find((id) => id !== taken)!;
    expect(machine.events).toContainEqual({ type: 'skipped', messageId: taken, reason: 'attempt 1 was claimed by another runner' });
    expect(machine.events.filter((event) => event.type === 'oracle_started').map((event) => (event as { messageId: string }).messageId)).toEqual([first]);
    expect(machine.events.filter((event) => event.type === 'receipt').map((event) => (event as { messageId: string }).messageId)).toEqual([first]);
    expect(await remoteReceipts(world.served, first)).toEqual([{ attempt: 1, status: 'succeeded', blockers: [] }]);
    expect(await remoteReceipts(world.served, taken!)).toEqual([]);
    expect(world.model.requests).toHaveLength(1);
    expect(readdirSync(join(machine.stateDir, 'journal'))).toEqual([]);
  });

  it("the remote's validator refuses the claim: the receipt still lands, alone, and the refused attempt is not started", async () => {
    const world = await newCase();
    const ids = [await world.consult(), await world.consult()];
    const machine = await world.machine('runner');
    const refuse = join(world.dir, 'refuse-claim-of');
    writeFileSync(refuse, 'none\n');
    // Test fixture: the remote refuses every push holding a claim of the message named in the file (the runner's second).
    wrapHook(
      world.served,
      (ledgerHook) => `#!/bin/sh
input=$(cat)
id=$(cat "${refuse}")
for range in $(printf '%s\\n' "$input" | awk '{print $1 ".." $2}'); do
  case "$range" in 0000000000000000000000000000000000000000..*) range=\${range#*..};; esac
  if git log --format=%B "$range" | grep -q "^claim $id attempt"; then echo "POLICY_LIMIT [test fixture] a claim of $id is refused here"; exit 1; fi
done
printf '%s\\n' "$input" | "${ledgerHook}"
`,
    );
    const onEvent = (event: RunnerEvent): void => {
      machine.events.push(event);
      if (event.type === 'claimed' && machine.events.filter((item) => item.type === 'claimed').length === 1) writeFileSync(refuse, `${ids.find((id) => id !== event.messageId)!}\n`);
    };

    await machine.runner({ onEvent }).runOnce();

    const first = firstClaimed(machine.events);
    const refused = ids.find((id) => id !== first)!;
    expect(await remoteReceipts(world.served, first)).toEqual([{ attempt: 1, status: 'succeeded', blockers: [] }]);
    expect(machine.events.filter((event) => event.type === 'receipt').map((event) => (event as { messageId: string }).messageId)).toEqual([first]);
    expect(machine.events).toContainEqual(expect.objectContaining({ type: 'error', messageId: refused, code: 'REMOTE_REJECTED' }));
    expect(await remoteReceipts(world.served, refused)).toEqual([]);
    await machine.remote.sync();
    expect((await machine.ledger.state()).messages.get(refused)!.attempts).toEqual([]);
    expect(world.model.requests).toHaveLength(1);
    expect(readdirSync(join(machine.stateDir, 'journal'))).toEqual([]);
  });

  it('the remote goes away before the shared push: the receipt waits in the journal, nothing more is claimed, and it lands once the remote is back', async () => {
    const world = await newCase();
    const ids = [await world.consult(), await world.consult()];
    const machine = await world.machine('runner');
    const away = `${world.served.gitdir}.away`;
    const onEvent = (event: RunnerEvent): void => {
      machine.events.push(event);
      if (event.type === 'oracle_ended') renameSync(world.served.gitdir, away);
    };

    await machine.runner({ onEvent }).runOnce();

    const first = firstClaimed(machine.events);
    expect(types(machine.events).filter((type) => type === 'claimed')).toEqual(['claimed']);
    expect(types(machine.events)).toEqual(expect.arrayContaining(['journaled', 'cut_off']));
    expect(types(machine.events)).not.toContain('receipt');
    expect(machine.events).toContainEqual(expect.objectContaining({ type: 'journaled', messageId: first, attempt: 1 }));
    expect(readdirSync(join(machine.stateDir, 'journal'))).toHaveLength(1);
    expect(world.model.requests).toHaveLength(1);

    renameSync(away, world.served.gitdir);
    await machine.runner().runOnce();

    for (const id of ids) expect(await remoteReceipts(world.served, id)).toEqual([{ attempt: 1, status: 'succeeded', blockers: [] }]);
    expect(world.model.requests).toHaveLength(2);
    expect(readdirSync(join(machine.stateDir, 'journal'))).toEqual([]);
  });
});
