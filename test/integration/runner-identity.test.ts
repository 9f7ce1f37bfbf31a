import { mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { LocalRunners, newRunnerId } from '../../src/runner/identity.js';
import { hostLabel } from '../../src/util/process.js';
import { worlds } from '../helpers/lane.js';
import { holdAnswers } from '../helpers/remote-runners.js';
import { tempDir } from '../helpers/tmp.js';

const dir = tempDir('coo-runner-identity-');
const fresh = worlds(dir);

function record(gitdir: string, runnerId: string, value: Record<string, unknown>): void {
  mkdirSync(join(gitdir, 'coo', 'runners'), { recursive: true });
  writeFileSync(join(gitdir, 'coo', 'runners', `${runnerId}.json`), JSON.stringify(value));
}

describe("a runner's identity", () => {
  it('is random per start and says nothing of its host or pid', () => {
    const ids = new Set(Array.from({ length: 100 }, () => newRunnerId()));
    expect(ids.size).toBe(100);
    for (const id of ids) expect(id).toMatch(/^run-[0-9a-f]{20}$/);
    // Twenty random hex characters hold a short pid's digits now and then by chance; an id made of the pid or the host would hold them every time.
    for (const told of [String(process.pid), hostLabel()]) expect([...ids].filter((id) => id.includes(told)).length).toBeLessThan(ids.size);
  });

  it("tells a live runner of this host from a dead one by its record, and leaves any runner it cannot judge alive", () => {
    const gitdir = join(dir, 'records.git');
    const local = new LocalRunners(gitdir);
    const alive = newRunnerId();
    local.register(alive, join(dir, 'state'));
    expect(local.mayBeAlive(alive)).toBe(true);
    // Where it keeps its attempts' files: a runner of another state folder, or one that never said, finds none of them in its own.
    expect(local.keptIn(alive, join(dir, 'state'))).toBe(true);
    expect(local.keptIn(alive, join(dir, 'other-state'))).toBe(false);
    const dead = newRunnerId();
    record(gitdir, dead, { host: hostLabel(), pid: 999_999, started: null });
    expect(local.mayBeAlive(dead)).toBe(false);
    // A pid that lives on, but in a process started after the runner's: reused, so the runner is gone.
    const reused = newRunnerId();
    record(gitdir, reused, { host: hostLabel(), pid: process.pid, started: '1' });
    expect(local.mayBeAlive(reused)).toBe(false);
    const elsewhere = newRunnerId();
    record(gitdir, elsewhere, { host: `${hostLabel()}-other`, pid: 999_999, started: null });
    expect(local.mayBeAlive(elsewhere)).toBe(true);
    expect(local.mayBeAlive(newRunnerId())).toBe(true);
    // Ids of earlier versions (host and pid) are still judged by them.
    expect(local.mayBeAlive(`${hostLabel()}-p999999`)).toBe(false);
    expect(local.mayBeAlive(`${hostLabel()}-p${process.pid}`)).toBe(false);
    expect(local.mayBeAlive('far-host-p1')).toBe(true);
    // Records of runners that are gone and hold nothing are dropped; the rest stay.
    local.prune(new Set([reused]));
    expect(readdirSync(join(gitdir, 'coo', 'runners')).sort()).toEqual([alive, elsewhere, reused].map((id) => `${id}.json`).sort());
  });

  it("two runners of one host and one pid on one ledger (two containers of one image): the second leaves the first's live claim alone and pays nothing", async () => {
    const w = await fresh();
    const { messageId } = await w.consult();
    const slow = holdAnswers(w.transport());
    const first = w.runner({ transport: slow.transport });
    const running = first.runOnce();
    await slow.paid;
    const second = w.runner({ stateDir: join(w.dir, 'state-2') });
    expect(second.runnerId).not.toBe(first.runnerId);
    await second.runOnce();
    expect(w.events).toContainEqual({ type: 'skipped', messageId, reason: `attempt 1 is being run by ${first.runnerId}` });
    slow.release();
    await running;
    const record = (await w.ledger.state()).messages.get(messageId)!;
    expect(record.attempts).toHaveLength(1);
    expect(record.attempts[0]!.receipt!.status).toBe('succeeded');
    expect(w.server.requests).toHaveLength(1);
  });
});
