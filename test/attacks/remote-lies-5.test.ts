import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createServer, request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { loadPrivateKey } from '../../src/cli/common.js';
import { enqueueConsult } from '../../src/consult/enqueue.js';
import { OracleCli } from '../../src/consult/oracle.js';
import { Ledger } from '../../src/ledger/ledger.js';
import { startFakeModelServer } from '../../src/offline/fake-model-server.js';
import { RemoteLedger } from '../../src/remote/publish.js';
import { Runner, type RunnerEvent } from '../../src/runner/runner.js';
import { startGitHttp } from '../helpers/git-http.js';
import { makeServedLedger, makeWriter, removeHook } from '../helpers/remote-ledger.js';
import { holdingRunner, makeCase, remoteReceipts, types, type Case } from '../helpers/remote-runners.js';
import { coo } from '../helpers/cli.js';
import { git, tempDir } from '../helpers/tmp.js';

/**
 * A remote that lies without a hook to stop it (a forge), round 5: what a runner has seen of it
 * (its own claims among it) is kept where a clone made again from that remote cannot take it away.
 */

const dir = tempDir('coo-attack-remote-lies-5-');
const closers: Array<() => Promise<void> | void> = [];

afterAll(async () => {
  for (const close of closers.reverse()) await close();
});

const newCase = (): Promise<Case> => makeCase(dir, closers);

// Each case serves a ledger through git http-backend and clones it two or three times: on a loaded two-core machine one takes up to a minute.
describe('a remote that withholds a claim a runner is paying for, and a clone made again from it', { timeout: 180_000 }, () => {
  it("the runner on the new clone with the same state folder refuses the ledger as not holding the head its claim landed on: nothing is claimed or paid again", async () => {
    const world = await newCase();
    const messageId = await world.consult();
    const queued = world.served.head();
    const first = await world.machine('first');
    // The runner's claim landed and was confirmed; its call is paid and its answer held (a machine that goes down mid-call).
    const held = await holdingRunner(world, first);
    expect(types(first.events)).toContain('claimed');
    expect(existsSync(join(first.stateDir, 'ledger-head.json'))).toBe(true);
    expect(world.model.requests).toHaveLength(1);

    // The remote withholds the claim (main back at the queued message), and the operator clones it again for the same runner.
    git(['--git-dir', world.served.gitdir, 'update-ref', 'refs/heads/main', queued]);
    const again = await world.machine('again');
    await expect(again.runner({ stateDir: first.stateDir }).runOnce()).rejects.toMatchObject({
      code: 'HISTORY_FORK',
      message: expect.stringMatching(/does not hold [0-9a-f]{40} \(Ledger-Seq \d+\), which this runner saw before \(its own claims among what it saw\).*nothing was claimed/),
    });
    expect(types(again.events)).not.toContain('claimed');
    expect(world.model.requests).toHaveLength(1);
    expect(git(['--git-dir', world.served.gitdir, 'rev-parse', 'refs/heads/main']).trim()).toBe(queued);

    // The first clone still holds the claim: its runner, its answer released, refuses the remote as rolled back and keeps what it paid for.
    held.release();
    await expect(held.running).rejects.toMatchObject({ code: 'REMOTE_UNVERIFIED', message: expect.stringMatching(/rolled back/) });
    expect(await remoteReceipts(world.served, messageId)).toEqual([]);
    expect(world.model.requests).toHaveLength(1);
  });
});

describe('a hookless remote that takes a push and answers it with a server error', { timeout: 180_000 }, () => {
  it("the claim's push: the runner finds its claim on the remote's main, pays once and publishes the receipt (a guard: this held before)", async () => {
    const caseDir = join(dir, 'took-and-failed');
    const served = await makeServedLedger(caseDir);
    removeHook(served);
    const real = await startGitHttp(served.root);
    closers.push(() => real.close());
    const upstream = new URL(real.url(served.name));
    // Test fixture: a forge whose front answers 502 to the next pushes after the repository behind it took them.
    let lies = 0;
    const server = createServer((incoming, answer) => {
      const lie = incoming.method === 'POST' && (incoming.url ?? '').endsWith('/git-receive-pack') && lies > 0;
      if (lie) lies -= 1;
      const out = httpRequest({ host: '127.0.0.1', port: upstream.port, path: incoming.url, method: incoming.method, headers: incoming.headers }, (reply) => {
        if (lie) {
          reply.resume();
          reply.on('end', () => {
            answer.writeHead(502);
            answer.end();
          });
          return;
        }
        answer.writeHead(reply.statusCode ?? 502, reply.headers);
        reply.pipe(answer);
      });
      incoming.pipe(out);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    closers.push(
      () =>
        new Promise<void>((resolve) => {
          server.close(() => resolve());
          server.closeAllConnections();
        }),
    );
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/${served.name}`;
    const model = await startFakeModelServer(['ok']);
    closers.push(() => model.close());
    const writer = await makeWriter(caseDir, 'runner', served, url);
    const ledger = Ledger.open(writer.gitdir);
    closers.push(() => ledger.close());
    const remote = new RemoteLedger(ledger, { remote: url });
    const key = loadPrivateKey(served.keys.coo);
    const messageId = (
      await remote.write((on) => enqueueConsult({ ledger: on, key, now: new Date(), target: 'aa.chatgpt', repo: served.target, patterns: ['README.md'], question: 'Is add() correct for NaN?', maxRuntimeSeconds: 60 }))
    ).result.messageId;
    const events: RunnerEvent[] = [];
    const transport = new OracleCli({ route: { baseUrl: `${model.url}/v1` }, env: { OPENAI_API_KEY: 'sk-test-key' }, hide: [writer.gitdir] });
    const runner = new Runner({ ledger, key, repo: served.target, stateDir: join(writer.home, 'state'), transport, remote, onEvent: (event) => events.push(event) });
    closers.push(() => runner.close());

    lies = 1;
    await runner.runOnce();
    expect(lies).toBe(0);
    expect(types(events)).toEqual(expect.arrayContaining(['claimed', 'receipt']));
    expect(types(events)).not.toContain('cut_off');
    expect(model.requests).toHaveLength(1);
    expect(await remoteReceipts(served, messageId)).toEqual([{ attempt: 1, status: 'succeeded', blockers: [] }]);
  });
});

describe('coo verify on a clone whose main no longer holds what it verified on its remote', { timeout: 180_000 }, () => {
  it("a remote rolled back past the runner's paid call and the clone's main moved back to it with stock git: verify judges main and names the head the clone verified, and the commits only the clone may hold", async () => {
    const world = await newCase();
    const messageId = await world.consult();
    const queued = world.served.head();
    const machine = await world.machine('runner');
    await machine.runner().runOnce();
    expect(await remoteReceipts(world.served, messageId)).toEqual([{ attempt: 1, status: 'succeeded', blockers: [] }]);
    const verified = machine.ledger.head()!;

    git(['--git-dir', world.served.gitdir, 'update-ref', 'refs/heads/main', queued]);
    // Asynchronously: the remote is served by this process.
    await promisify(execFile)('git', ['--git-dir', machine.gitdir, 'fetch', '-q', 'origin']);
    git(['--git-dir', machine.gitdir, 'update-ref', 'refs/heads/main', 'refs/remotes/origin/main']);

    const checked = coo(['verify', '--ledger', machine.gitdir, '--no-checkpoint']);
    expect(checked.status).toBe(0);
    expect(checked.stdout).toMatch(new RegExp(`^ok: .*head ${queued}`));
    expect(checked.stderr).toContain(`note: main (${queued.slice(0, 12)}) is behind refs/coo/remote-verified (${verified.slice(0, 12)}), the head this clone last verified or pushed on its remote`);
    expect(checked.stderr).toContain(`git --git-dir ${machine.gitdir} log refs/heads/main..refs/coo/remote-verified`);
    // The command it names lists the claim and the receipt of the paid call.
    expect(git(['--git-dir', machine.gitdir, 'log', '--format=%s', 'refs/heads/main..refs/coo/remote-verified'])).toMatch(/claim/);

    // Verify on the remote itself (no clone) says nothing of the kind.
    expect(coo(['verify', '--ledger', world.served.gitdir, '--no-checkpoint']).stderr).not.toContain('remote-verified');
  });
});
