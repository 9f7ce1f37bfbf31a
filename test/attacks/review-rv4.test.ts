import { describe, expect, it } from 'vitest';
import { refusedAccess, type RemoteGitResult } from '../../src/remote/git-remote.js';

/**
 * Review of the refusals of a push to a client that may read (remote/git-remote.ts REFUSED): only
 * the forge's own line is a refusal, never a line that holds its words.
 */

const failed = (stderr: string): RemoteGitResult => ({ ok: false, stdout: '', stderr, timedOut: null });
const HUNG_UP = 'fatal: the remote end hung up unexpectedly\n';

describe('a push cut off after a hook or a proxy spoke is no answer, whatever words its lines hold', () => {
  it('is null for remote: lines that mention a read-only key, a denied permission, a push not allowed, write access, gitolite words or a file a hook could not open', () => {
    const lines = [
      'remote: note: entries/marked as read only/answer.md is kept',
      'remote: mirror: Permission to mirror.example denied to the sync job, retrying later',
      'remote: policy check: You are not allowed to push code while the nightly backup runs; try again in a minute',
      'remote: hint: Write access to repository not granted yet (replica catching up)',
      'remote: audit: branch release/DENIED by review was renamed',
      'error: RPC failed; curl 18 transfer closed with outstanding read data remaining (file DENIED by policy.md)',
      "remote: hook: cannot open '/srv/mirror/ledger.lock': Permission denied (os error 13)",
    ];
    for (const line of lines) expect(refusedAccess(failed(`${line}\n${HUNG_UP}`)), line).toBeNull();
  });

  it('still names the forge refusals themselves', () => {
    expect(refusedAccess(failed(`ERROR: Permission to owner/ledger.git denied to deploy-bot.\n${HUNG_UP}`))).toBe('ERROR: Permission to owner/ledger.git denied to deploy-bot.');
    expect(refusedAccess(failed(`remote: Permission to owner/ledger.git denied to someone.\n${HUNG_UP}`))).toBe('remote: Permission to owner/ledger.git denied to someone.');
    expect(refusedAccess(failed(`FATAL: W any ledger coo DENIED by fallthru\n${HUNG_UP}`))).toBe('FATAL: W any ledger coo DENIED by fallthru');
    expect(refusedAccess(failed(`coo@127.0.0.1: Permission denied (publickey,keyboard-interactive).\n${HUNG_UP}`))).toBe('coo@127.0.0.1: Permission denied (publickey,keyboard-interactive).');
    expect(refusedAccess(failed(`Permission denied (publickey).\n${HUNG_UP}`))).toBe('Permission denied (publickey).');
  });
});
