import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { verifyBundle } from '../../src/audit/bundle-verify.js';
import { isCooError } from '../../src/errors.js';
import { coo, json } from '../helpers/cli.js';
import { tempDir } from '../helpers/tmp.js';

const scratch = tempDir('coo-bundle-tamper-');
let bytes = Buffer.alloc(0);

beforeAll(() => {
  const demo = join(scratch, 'demo');
  expect(coo(['demo', '--dir', demo]).status).toBe(0);
  const ledger = join(demo, 'ledger.git');
  const log = json<Array<{ summary: string }>>(coo(['log', '--ledger', ledger, '--json']));
  // A consult's succeeded receipt (the demo also dispatches; cite is for consults).
  const id = log
    .map((entry) => /^receipt (msg_\w+) attempt \d+: succeeded/.exec(entry.summary)?.[1])
    .filter((found): found is string => found !== undefined)
    .find((found) => json<{ envelope: { intent: string } }>(coo(['show', found, '--ledger', ledger, '--json'])).envelope.intent === 'aa_consult')!;
  const out = join(scratch, 'evidence.tar');
  expect(coo(['cite', id, '--ledger', ledger, '--bundle', out]).status).toBe(0);
  bytes = readFileSync(out);
}, 120_000);

describe('an evidence bundle, tampered with', () => {
  it('fails when any one byte of it is changed', () => {
    expect(verifyBundle(bytes).status).toBe('succeeded');
    // Every byte at full strength; every seventh (all offsets mod 7 over the file) in the fast suite.
    const stride = process.env['COO_RELIABILITY'] === 'full' ? 1 : 7;
    let tried = 0;
    for (let at = 0; at < bytes.length; at += stride) {
      const changed = Buffer.from(bytes);
      changed[at] = changed[at]! ^ 0x01;
      let error: unknown = null;
      try {
        verifyBundle(changed);
      } catch (caught) {
        error = caught;
      }
      expect(isCooError(error), `byte ${at} changed, and the bundle still verified`).toBe(true);
      tried += 1;
    }
    expect(tried).toBeGreaterThan(1000);
  });

});
