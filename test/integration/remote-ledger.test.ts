import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parsePrivateKey } from '../../src/crypto/keys.js';
import { isCooError } from '../../src/errors.js';
import { Ledger } from '../../src/ledger/ledger.js';
import { RemoteLedger } from '../../src/remote/publish.js';
import { startGitHttp, type GitHttpServer } from '../helpers/git-http.js';
import { dispatchEnvelope, envelopeFile } from '../helpers/ledger.js';
import { advanceBeforeEachPush, makeServedLedger, makeWriter } from '../helpers/remote-ledger.js';
import { git, tempDir } from '../helpers/tmp.js';

const dir = tempDir('coo-remote-ledger-');
const https: GitHttpServer[] = [];

afterAll(async () => {
  for (const server of https) await server.close();
});

describe('RemoteLedger', () => {
  it('counts a write only once the remote took it: a precheck that finds the entry another writer landed first skips, and nothing is written twice', async () => {
    const served = await makeServedLedger(dir);
    const server = await startGitHttp(served.root);
    https.push(server);
    const url = server.url(served.name);
    const mine = await makeWriter(dir, 'mine', served, url);
    const rival = await makeWriter(dir, 'rival', served, url);
    const key = parsePrivateKey(readFileSync(served.keys.coo, 'utf8'));
    const envelope = dispatchEnvelope({}, new Date());
    const file = envelopeFile(envelope);
    // The rival writes the same entry on its clone; its commit reaches the remote between my fetch and my push.
    const theirs = Ledger.open(rival.gitdir);
    const landed = await theirs.append({ files: [file], key, summary: 'rival', now: new Date() });
    theirs.close();
    if ('skipped' in landed) throw new Error('the rival skipped');
    git(['--git-dir', served.gitdir, 'fetch', '-q', rival.gitdir, 'main']);
    advanceBeforeEachPush(served, dir, [landed.commit]);

    const ledger = Ledger.open(mine.gitdir);
    try {
      const remote = new RemoteLedger(ledger, { remote: url, backoffMs: () => 0 });
      const published = await remote.append({ files: [file], key, summary: 'mine', now: new Date(), precheck: (state) => (state.messages.has(envelope.message_id) ? 'taken' : undefined) });

      expect(published).toEqual({ result: { skipped: 'taken' }, commit: null, report: { url, tries: 2, conflicts: 1 } });
      expect(served.head()).toBe(landed.commit);
      expect(ledger.head()).toBe(landed.commit);
      expect((await ledger.state()).messages.has(envelope.message_id)).toBe(true);
    } finally {
      ledger.close();
    }
  });

  it('syncs: fetches, verifies and moves the local main to the remote head, and refuses a remote it cannot reach with a coded error', async () => {
    const served = await makeServedLedger(join(dir, 'sync'));
    const server = await startGitHttp(served.root);
    https.push(server);
    const url = server.url(served.name);
    const mine = await makeWriter(join(dir, 'sync'), 'mine', served, url);
    const other = await makeWriter(join(dir, 'sync'), 'other', served, url);
    const key = parsePrivateKey(readFileSync(served.keys.coo, 'utf8'));
    const otherLedger = Ledger.open(other.gitdir);
    const written = await new RemoteLedger(otherLedger, { remote: url }).append({ files: [envelopeFile(dispatchEnvelope({}, new Date()))], key, summary: 'other', now: new Date() });
    otherLedger.close();

    const ledger = Ledger.open(mine.gitdir);
    try {
      const remote = new RemoteLedger(ledger, { remote: url });
      expect(await remote.sync()).toEqual({ head: written.commit, arrived: 1 });
      expect(ledger.head()).toBe(written.commit);
      await server.close();
      const error = await remote.sync().catch((caught: unknown) => caught);
      expect(isCooError(error) && error.code).toBe('REMOTE_UNREACHABLE');
      expect(ledger.head()).toBe(written.commit);
    } finally {
      ledger.close();
    }
  });
});
