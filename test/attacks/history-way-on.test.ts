import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { worlds } from '../helpers/lane.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * An honest operator whose ledger no longer holds the head a runner's state folder recorded (a backup restored,
 * a clone made again from a remote that lost the runner's claim): the runner refuses it, and the refusal names
 * the one way on (removing the state folder's record) and what that costs, or the operator is refused forever.
 */

const fresh = worlds(tempDir('history-way-on'));

describe('a runner refusing a ledger that lacks the head it saw', () => {
  it('a ledger that does not hold the recorded head: refused HISTORY_FORK naming the record to remove; once removed, the runner runs', async () => {
    const w = await fresh();
    await w.consult({ idempotencyKey: 'seen' });
    await w.runner().runOnce();
    const record = join(w.dir, 'state', 'ledger-head.json');
    expect(existsSync(record)).toBe(true);
    const saved = JSON.parse(readFileSync(record, 'utf8')) as Record<string, unknown>;
    // A head of a history this ledger never held (what a restored backup or a remote that dropped a claim shows).
    writeFileSync(record, JSON.stringify({ ...saved, head: 'ab'.repeat(20) }));
    await expect(w.runner().runOnce()).rejects.toMatchObject({ code: 'HISTORY_FORK', message: expect.stringContaining(`remove ${record}`) });
    expect(w.server.requests).toHaveLength(1);
    rmSync(record);
    await w.runner().runOnce();
    expect(existsSync(record)).toBe(true);
  });
});
