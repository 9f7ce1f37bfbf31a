import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadPrivateKey } from '../../src/cli/common.js';
import { enqueueConsult } from '../../src/consult/enqueue.js';
import { Ledger } from '../../src/ledger/ledger.js';
import { refusedAccess, type RemoteGitResult } from '../../src/remote/git-remote.js';
import { RemoteLedger } from '../../src/remote/publish.js';
import { serveGitHttp } from '../helpers/git-http.js';
import { makeServedLedger, makeWriter, removeHook } from '../helpers/remote-ledger.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * Review of the refusals of a push to a client that may read (remote/git-remote.ts REFUSED): only
 * the forge's own line is a refusal, never a line that holds its words.
 */

const dir = tempDir('refusal-lines-');
const closers: Array<() => Promise<void> | void> = [];
afterAll(async () => {
  for (const close of closers.reverse()) await close();
});

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

/** One pkt-line of side band 2 (what git prints as `remote: ...`). */
const progress = (text: string): Buffer => {
  const data = Buffer.concat([Buffer.from([2]), Buffer.from(`${text}\n`)]);
  return Buffer.concat([Buffer.from((data.length + 4).toString(16).padStart(4, '0')), data]);
};

describe('a push whose connection is cut after a hook spoke, its main unmoved', { timeout: 60_000 }, () => {
  it("is a push that got no answer (REMOTE_UNREACHABLE), never a refusal, when the hook's line holds 'Permission denied (os error 13)' or 'DENIED by'", async () => {
    const served = await makeServedLedger(join(dir, 'cut'));
    removeHook(served);
    let cut: string | null = null;
    const server = createServer((request, response) => {
      const said = cut;
      if (said !== null && request.method === 'POST' && (request.url ?? '').endsWith('/git-receive-pack')) {
        cut = null;
        request.resume();
        request.on('end', () => {
          response.writeHead(200, { 'Content-Type': 'application/x-git-receive-pack-result' });
          // A hook speaks, and the connection drops before any status of the ref.
          response.write(progress(said), () => request.socket.destroy());
        });
        return;
      }
      serveGitHttp(request, response, served.root);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    closers.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/${served.name}`;
    const writer = await makeWriter(join(dir, 'cut'), 'writer', served, url);
    const ledger = Ledger.open(writer.gitdir);
    closers.push(() => ledger.close());
    const remote = new RemoteLedger(ledger, { remote: url, timeoutMs: 20_000 });
    const key = loadPrivateKey(served.keys.coo);
    const before = served.head();
    for (const line of ["hook: cannot open '/srv/mirror/ledger.lock': Permission denied (os error 13)", 'audit: branch release/DENIED by review was renamed']) {
      cut = line;
      const error = await remote
        .write((on) => enqueueConsult({ ledger: on, key, now: new Date(), target: 'aa.chatgpt', repo: served.target, patterns: ['README.md'], question: 'Is add() correct for NaN?', maxRuntimeSeconds: 60 }))
        .catch((caught: unknown) => caught);
      expect(error, line).toMatchObject({ code: 'REMOTE_UNREACHABLE', message: expect.stringMatching(/got no answer: fatal: the remote end hung up/) });
      expect(served.head()).toBe(before);
    }
  });
});
