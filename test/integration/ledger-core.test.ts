import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { allowedSigners } from '../../src/audit/allowed-signers.js';
import { isCooError } from '../../src/errors.js';
import { git, run, tempDir } from '../helpers/tmp.js';
import { T0, dispatchEnvelope, envelopeFile, makeLedger } from '../helpers/ledger.js';

const dir = tempDir();

async function rejectionCode(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
  } catch (error) {
    if (isCooError(error)) return error.code;
    throw error;
  }
  return 'accepted';
}

describe('the signed ledger', () => {
  it('creates a ledger whose genesis stock git accepts, with Good signatures', async () => {
    const { gitdir, ledger } = await makeLedger(dir, undefined, 'genesis.git');
    const state = await ledger.state();
    expect(state.seq).toBe(1);
    expect(state.registry?.version).toBe(1);
    expect(state.policy?.version).toBe(1);
    expect(ledger.findings).toEqual([]);
    expect(git(['--git-dir', gitdir, 'fsck', '--strict'])).toBe('');
    const allowed = join(dir, 'allowed_signers');
    writeFileSync(allowed, allowedSigners(state));
    const verified = run('git', ['--git-dir', gitdir, '-c', 'gpg.format=ssh', '-c', `gpg.ssh.allowedSignersFile=${allowed}`, 'verify-commit', '-v', 'main']);
    expect(verified.status).toBe(0);
    expect(verified.stderr).toContain('Good "git" signature for ceo');
    ledger.close();
  });

  it('appends a COO-signed envelope as commit 2 and stock git sees its signature as Good', async () => {
    const { gitdir, actors, ledger } = await makeLedger(dir, undefined, 'append.git');
    const message = dispatchEnvelope();
    const result = await ledger.append({ files: [envelopeFile(message)], key: actors.coo, summary: 'dispatch', now: T0 });
    expect('commit' in result && result.seq).toBe(2);
    const state = await ledger.state();
    expect(state.messages.get(message.message_id)?.source).toBe('coo.hermes');
    const allowed = join(dir, 'allowed_signers_2');
    writeFileSync(allowed, allowedSigners(state));
    const log = run('git', ['--git-dir', gitdir, '-c', 'gpg.format=ssh', '-c', `gpg.ssh.allowedSignersFile=${allowed}`, 'log', '--format=%G? %GS %s']);
    expect(log.stdout.trim().split('\n')).toEqual([
      expect.stringMatching(/^G coo\.hermes dispatch$/),
      expect.stringMatching(/^G ceo genesis/),
    ]);
    ledger.close();
  });

  it('refuses an envelope claiming to be from the COO but signed by an EA key, and leaves the ref where it was', async () => {
    const { gitdir, actors, ledger } = await makeLedger(dir, undefined, 'spoof.git');
    const before = git(['--git-dir', gitdir, 'rev-parse', 'main']).trim();
    const code = await rejectionCode(ledger.append({ files: [envelopeFile(dispatchEnvelope())], key: actors.codex, summary: 'spoof', now: T0 }));
    expect(code).toBe('SIGNER_WRONG_ACTOR');
    expect(git(['--git-dir', gitdir, 'rev-parse', 'main']).trim()).toBe(before);
    ledger.close();
  });
});
