import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { formatPrivateKey } from '../../src/crypto/keys.js';
import { Ledger } from '../../src/ledger/ledger.js';
import { coo } from '../helpers/cli.js';
import { makeLedger } from '../helpers/ledger.js';
import { git, tempDir } from '../helpers/tmp.js';

const dir = tempDir();

function worker(args: string[]): Promise<number | null> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [join(import.meta.dirname, '..', 'helpers', 'append-worker.mjs'), ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
    child.on('exit', (code) => resolve(code));
  });
}

describe('concurrent writers', () => {
  it('lands all 200 envelopes from 4 processes appending 50 each, in one linear history', async () => {
    const { gitdir, actors, ledger } = await makeLedger(dir);
    ledger.close();
    const keyFile = join(dir, 'coo.key');
    writeFileSync(keyFile, formatPrivateKey(actors.coo), { mode: 0o600 });
    const codes = await Promise.all([1, 2, 3, 4].map((n) => worker([gitdir, keyFile, String(n), '50'])));
    expect(codes).toEqual([0, 0, 0, 0]);
    expect(git(['--git-dir', gitdir, 'rev-list', '--count', 'main']).trim()).toBe('201');
    expect(git(['--git-dir', gitdir, 'rev-list', '--merges', 'main']).trim()).toBe('');
    const fresh = Ledger.open(gitdir, { checkpoints: false });
    const state = await fresh.state();
    fresh.close();
    expect(state.messages.size).toBe(200);
    expect(state.seq).toBe(201);
    expect(coo(['verify', '--ledger', gitdir]).status).toBe(0);
  });
});
