import { describe, expect, it } from 'vitest';
import { refusedAccess, type RemoteGitResult } from '../../../src/remote/git-remote.js';

const failed = (stderr: string): RemoteGitResult => ({ ok: false, stdout: '', stderr, timedOut: null });
const CANNOT_READ = 'fatal: Could not read from remote repository.\n\nPlease make sure you have the correct access rights\nand the repository exists.\n';

describe('refusedAccess: a remote that answered and refused this client, told from one that did not answer', () => {
  it('names what git said for a refused ssh key, an unknown host key, an HTTP 401 or 403, missing credentials, and no repository at the path, without the credentials of a URL', () => {
    const cases: Array<[string, string]> = [
      [`git@example.org: Permission denied (publickey).\r\n${CANNOT_READ}`, 'git@example.org: Permission denied (publickey).'],
      [`Host key verification failed.\n${CANNOT_READ}`, 'Host key verification failed.'],
      ["remote: Invalid username or password.\nfatal: Authentication failed for 'https://x-access-token:ghs_secret@forge.example/ledger.git/'\n", "fatal: Authentication failed for 'https://forge.example/ledger.git/'"],
      ["fatal: unable to access 'https://forge.example/ledger.git/': The requested URL returned error: 403\n", "fatal: unable to access 'https://forge.example/ledger.git/': The requested URL returned error: 403"],
      ["fatal: could not read Username for 'https://forge.example': terminal prompts disabled\n", "fatal: could not read Username for 'https://forge.example': terminal prompts disabled"],
      ["fatal: repository 'https://forge.example/nope.git/' not found\n", "fatal: repository 'https://forge.example/nope.git/' not found"],
      [`fatal: '/srv/nope.git' does not appear to be a git repository\n${CANNOT_READ}`, "fatal: '/srv/nope.git' does not appear to be a git repository"],
    ];
    for (const [stderr, said] of cases) expect(refusedAccess(failed(stderr)), stderr).toBe(said);
  });

  it('names a push refused to a client that may read (a read-only deploy key, no write permission, gitolite), which prints no status line for the ref', () => {
    const cases: Array<[string, string]> = [
      [`ERROR: The key you are authenticating with has been marked as read only.\n${CANNOT_READ}`, 'ERROR: The key you are authenticating with has been marked as read only.'],
      [`ERROR: Permission to owner/ledger.git denied to deploy-bot.\n${CANNOT_READ}`, 'ERROR: Permission to owner/ledger.git denied to deploy-bot.'],
      [`remote: \nremote: ========================================================================\nremote: ERROR: You are not allowed to push code to this project.\n${CANNOT_READ}`, 'remote: ERROR: You are not allowed to push code to this project.'],
      ["remote: Write access to repository not granted.\nfatal: unable to access 'https://forge.example/ledger.git/': The requested URL returned error: 403\n", 'remote: Write access to repository not granted.'],
      [`FATAL: W any ledger coo DENIED by fallthru\n(or you mis-spelled the reponame)\n${CANNOT_READ}`, 'FATAL: W any ledger coo DENIED by fallthru'],
    ];
    for (const [stderr, said] of cases) expect(refusedAccess(failed(stderr)), stderr).toBe(said);
  });

  it('names a redirect, on the first request or a later one, as one coo never follows, and never where it pointed', () => {
    const note = ' (a redirect, which coo never follows: the credentials for this URL go to it alone; give the URL the remote moved to, on GitLab the one ending in .git)';
    const cases: Array<[string, string]> = [
      ["fatal: unable to access 'https://x-access-token:ghs_secret@forge.example/ledger.git/': The requested URL returned error: 301\n", `fatal: unable to access 'https://forge.example/ledger.git/': The requested URL returned error: 301${note}`],
      ['error: RPC failed; HTTP 307 curl 22 The requested URL returned error: 307\nfatal: expected flush after ref listing\n', `error: RPC failed; HTTP 307 curl 22 The requested URL returned error: 307${note}`],
    ];
    for (const [stderr, said] of cases) expect(refusedAccess(failed(stderr)), stderr).toBe(said);
    // 304 (not modified) and 300 are no redirect git would follow.
    expect(refusedAccess(failed("fatal: unable to access 'https://forge.example/ledger.git/': The requested URL returned error: 304\n"))).toBeNull();
  });

  it('is null for a remote that did not answer (a port nobody listens on, a name that does not resolve, a time limit) and for a command that succeeded', () => {
    expect(refusedAccess(failed(`ssh: connect to host 127.0.0.1 port 1: Connection refused\n${CANNOT_READ}`))).toBeNull();
    expect(refusedAccess(failed(`ssh: Could not resolve hostname ledger.invalid: Name or service not known\n${CANNOT_READ}`))).toBeNull();
    expect(refusedAccess(failed("fatal: unable to access 'https://forge.example/ledger.git/': Failed to connect to forge.example port 443: Connection refused\n"))).toBeNull();
    expect(refusedAccess(failed("fatal: unable to access 'https://forge.example/ledger.git/': The requested URL returned error: 502\n"))).toBeNull();
    expect(refusedAccess({ ok: false, stdout: '', stderr: 'Permission denied (publickey).', timedOut: 'git ls-remote did not finish within 30 s' })).toBeNull();
    expect(refusedAccess({ ok: true, stdout: '', stderr: 'Permission denied (publickey).', timedOut: null })).toBeNull();
  });
});
