import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadPrivateKey } from '../../src/cli/common.js';
import { enqueueConsult } from '../../src/consult/enqueue.js';
import { OracleCli } from '../../src/consult/oracle.js';
import { Ledger } from '../../src/ledger/ledger.js';
import { startFakeModelServer, type FakeModelServer } from '../../src/offline/fake-model-server.js';
import { RemoteLedger } from '../../src/remote/publish.js';
import { Runner, type RunnerErrorEvent, type RunnerEvent, type RunnerOptions } from '../../src/runner/runner.js';
import { watchRemote } from '../../src/runner/watch.js';
import { serveGitHttp, startGitHttp } from '../helpers/git-http.js';
import { makeServedLedger, makeWriter, removeHook, type ServedLedger } from '../helpers/remote-ledger.js';
import { holdAnswers, remoteReceipts, types } from '../helpers/remote-runners.js';
import { git, tempDir } from '../helpers/tmp.js';

/**
 * A hookless remote that lies about pushes, over smart HTTP on 127.0.0.1: it reads a push whole and
 * answers it with a server error, or holds it past the runner's time limit, and leaves its main
 * where it was. A push that got no answer is a fault on the way, never a refusal: the runner says
 * so, keeps what it paid for in its journal, and goes on, where a refusal would stop it.
 */

const dir = tempDir('machines-redteam-19');
const closers: Array<() => Promise<void> | void> = [];

afterAll(async () => {
  for (const close of closers.reverse()) await close();
});

/** What the remote does with one push (a POST to git-receive-pack): serves it, or reads it whole and answers 502 without taking it. */
type PushPlan = 'serve' | 'fail';

interface LyingCase extends Machine {
  readonly served: ServedLedger;
  readonly url: string;
  readonly model: FakeModelServer;
  /** What the next pushes meet, in order; once spent, pushes are served. */
  readonly plan: PushPlan[];
  /** While set, a folder holding an older copy of the repository, from which every fetch is answered (a cache in front of the forge). */
  readonly stale: { root: string | null };
  /** The fetches (upload-pack POSTs) served so far; the stale copy answers only those after the first `staleAfter`. */
  readonly fetches: { count: number; staleAfter: number };
}

let cases = 0;

/** A served ledger without its hook behind a lying smart-HTTP server, the loopback model, and one runner's machine; `timeoutMs` is its remote's time limit. */
async function lyingCase(timeoutMs?: number): Promise<LyingCase> {
  cases += 1;
  const caseDir = join(dir, `case-${cases}`);
  const served = await makeServedLedger(caseDir);
  removeHook(served);
  const plan: PushPlan[] = [];
  const stale: { root: string | null } = { root: null };
  const fetches = { count: 0, staleAfter: 0 };
  const server = createServer((request: IncomingMessage, response: ServerResponse) => {
    if (request.method === 'POST' && (request.url ?? '').endsWith('/git-receive-pack') && plan.shift() === 'fail') {
      request.resume();
      request.on('end', () => {
        response.writeHead(502);
        response.end();
      });
      return;
    }
    // A fetch (upload-pack) is answered from the stale copy while there is one; a push always reaches the repository itself.
    const fetching = (request.url ?? '').includes('upload-pack');
    if (fetching && request.method === 'POST') fetches.count += 1;
    serveGitHttp(request, response, fetching && fetches.count > fetches.staleAfter ? (stale.root ?? served.root) : served.root);
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
  const machine = await machineOn(caseDir, served, url, model, 'runner-1', timeoutMs);
  return { served, url, model, plan, stale, fetches, ...machine };
}

interface Machine {
  /** Its clone's way to the remote. */
  readonly remote: RemoteLedger;
  readonly gitdir: string;
  readonly events: RunnerEvent[];
  readonly stateDir: string;
  runner(options?: Partial<RunnerOptions>): Runner;
  /** The COO enqueues one consult through this machine's remote; its message id. */
  consult(): Promise<string>;
}

/** One machine: its own HOME, a coo clone of `url`, a state folder, and runners through that remote against the loopback model. */
async function machineOn(caseDir: string, served: ServedLedger, url: string, model: FakeModelServer, name: string, timeoutMs?: number): Promise<Machine> {
  const writer = await makeWriter(caseDir, name, served, url);
  const ledger = Ledger.open(writer.gitdir);
  closers.push(() => ledger.close());
  const remote = new RemoteLedger(ledger, { remote: url, ...(timeoutMs === undefined ? {} : { timeoutMs }) });
  const key = loadPrivateKey(served.keys.coo);
  const events: RunnerEvent[] = [];
  const stateDir = join(writer.home, 'state');
  return {
    remote,
    gitdir: writer.gitdir,
    events,
    stateDir,
    runner: (options = {}) => {
      const transport = new OracleCli({ route: { baseUrl: `${model.url}/v1` }, env: { OPENAI_API_KEY: 'sk-test-key' }, hide: [writer.gitdir] });
      const runner = new Runner({ ledger, key, repo: served.target, stateDir, transport, remote, onEvent: (event) => events.push(event), ...options });
      closers.push(() => runner.close());
      return runner;
    },
    consult: async () =>
      (
        await remote.write((on) =>
          enqueueConsult({ ledger: on, key, now: new Date(), target: 'aa.chatgpt', repo: served.target, patterns: ['README.md'], question: 'Is add() correct for NaN?', maxRuntimeSeconds: 60 }),
        )
      ).result.messageId,
  };
}

const errors = (events: readonly RunnerEvent[]): RunnerErrorEvent[] => events.filter((event): event is RunnerErrorEvent => event.type === 'error');

describe('a hookless remote that answers a push with a server error, its main unmoved', { timeout: 180_000 }, () => {
  it("a claim's push: said as a push that got no answer (REMOTE_UNREACHABLE, the runner cut off), never as a refusal; the next pass claims it and the call is paid once", async () => {
    const world = await lyingCase();
    const messageId = await world.consult();
    const runner = world.runner();
    world.plan.push('fail');

    await runner.runOnce();

    expect(errors(world.events)).toEqual([expect.objectContaining({ messageId, code: 'REMOTE_UNREACHABLE', message: expect.stringMatching(/the push to \S+ got no answer: .*whether the remote takes the write later is unknown/) })]);
    expect(world.events.map((event) => JSON.stringify(event)).join('\n')).not.toMatch(/refused/);
    expect(types(world.events)).toContain('cut_off');
    expect(types(world.events)).not.toContain('claimed');
    expect(world.model.requests).toHaveLength(0);

    await runner.runOnce();
    expect(types(world.events)).toEqual(expect.arrayContaining(['reconnected', 'claimed', 'receipt']));
    expect(await remoteReceipts(world.served, messageId)).toEqual([{ attempt: 1, status: 'succeeded', blockers: [] }]);
    expect(world.model.requests).toHaveLength(1);
  });

  it("a paid call's receipt push: the receipt waits in the journal (never kept as refused, never said as an error) and is published from there; nothing is paid again", async () => {
    const world = await lyingCase();
    const messageId = await world.consult();
    const runner = world.runner();
    // The claim lands; the receipt's push meets the server error.
    world.plan.push('serve', 'fail');

    await runner.runOnce();
    await runner.runOnce();

    const seen = types(world.events);
    expect(seen).toEqual(expect.arrayContaining(['claimed', 'journaled', 'receipt']));
    expect(seen.indexOf('journaled')).toBeLessThan(seen.indexOf('receipt'));
    expect(seen).not.toContain('result_kept');
    expect(errors(world.events)).toEqual([]);
    expect(await remoteReceipts(world.served, messageId)).toEqual([{ attempt: 1, status: 'succeeded', blockers: [] }]);
    expect(seen.filter((type) => type === 'claimed')).toHaveLength(1);
    expect(world.model.requests).toHaveLength(1);
  });
});

describe('a hookless remote that holds a heartbeat\'s push past the runner\'s time limit, its main unmoved', { timeout: 180_000 }, () => {
  it('the watch says the heartbeat was not written (REMOTE_UNREACHABLE) and goes on: the consult is claimed, paid once and receipted', async () => {
    const world = await lyingCase(5_000);
    const messageId = await world.consult();
    // A stand-in for the forge's own slowness, chosen by what is pushed: it holds a heartbeat's push
    // while the file is there, then drops it; every other push passes, unjudged.
    const hold = join(world.served.root, 'hold-heartbeats');
    writeFileSync(hold, '');
    closers.push(() => rmSync(hold, { force: true }));
    writeFileSync(
      join(world.served.gitdir, 'hooks', 'pre-receive'),
      `#!/bin/sh
# Test fixture: holds a heartbeat's push while ${hold} exists, then drops it; passes every other push.
while read old new ref; do
  case "$(git log -1 --format=%s "$new")" in
    "heartbeat from "*) while [ -e "${hold}" ]; do sleep 0.05; done; exit 1 ;;
  esac
done
exit 0
`,
      { mode: 0o755 },
    );
    const stop = new AbortController();
    const reported: RunnerErrorEvent[] = [];
    const runner = world.runner({
      onEvent: (event) => {
        world.events.push(event);
        if (event.type === 'receipt') stop.abort();
      },
    });

    await watchRemote(runner, {
      remote: world.remote,
      heartbeatSeconds: 1,
      pollSeconds: 0.1,
      signal: stop.signal,
      onError: (event) => {
        reported.push(event);
        rmSync(hold, { force: true });
      },
    });

    expect(reported[0]).toMatchObject({ code: 'REMOTE_UNREACHABLE', message: expect.stringMatching(/^the heartbeat was not written: the push to \S+ got no answer: git push did not finish within 5 s/) });
    expect(await remoteReceipts(world.served, messageId)).toEqual([{ attempt: 1, status: 'succeeded', blockers: [] }]);
    expect(world.model.requests).toHaveLength(1);
  });
});

describe('a forge that shows two runners two histories (a fork), each valid, then one of them to both', { timeout: 180_000 }, () => {
  it('each runner pays once on its own side (what no client can see); the runner whose side is dropped refuses the remote, names the commits it alone holds, and its advice lists them', async () => {
    cases += 1;
    const caseDir = join(dir, `case-${cases}`);
    const served = await makeServedLedger(caseDir);
    removeHook(served);
    const model = await startFakeModelServer(['ok']);
    closers.push(() => model.close());
    const one = await startGitHttp(served.root);
    closers.push(() => one.close());
    const coo = await machineOn(caseDir, served, one.url(served.name), model, 'coo');
    const messageId = await coo.consult();
    // The forge's second face: a copy of the same repository, served to the second runner alone.
    const otherRoot = join(caseDir, 'served-other');
    mkdirSync(otherRoot);
    git(['clone', '-q', '--bare', served.gitdir, join(otherRoot, served.name)]);
    const other = await startGitHttp(otherRoot);
    closers.push(() => other.close());
    const first = await machineOn(caseDir, served, one.url(served.name), model, 'runner-1');
    const second = await machineOn(caseDir, served, other.url(served.name), model, 'runner-2');

    await first.runner().runOnce();
    await second.runner().runOnce();
    // Each saw its own claim on the remote before it paid: one message, paid for twice.
    for (const machine of [first, second]) expect(types(machine.events)).toEqual(expect.arrayContaining(['claimed', 'receipt']));
    expect(model.requests).toHaveLength(2);

    // The forge settles on the first runner's side and shows it to both.
    const otherGitdir = join(otherRoot, served.name);
    git(['--git-dir', otherGitdir, 'fetch', '-q', served.gitdir, `+main:refs/heads/main`]);
    const refused = (await second.runner().runOnce().catch((error: unknown) => error)) as { code: string; message: string };

    expect(refused).toMatchObject({ code: 'REMOTE_UNVERIFIED', message: expect.stringMatching(/does not descend from the head this clone verified/) });
    expect(refused.message).toMatch(/the 2 commits this clone verified after the last one they share \([0-9a-f]{12}\) are not in that main and may be in no other clone/);
    const listed = /\(git --git-dir (\S+) log ([0-9a-f]{40})\.\.([0-9a-f]{40})\)/.exec(refused.message);
    expect(listed).not.toBeNull();
    const log = git(['--git-dir', listed![1]!, 'log', '--format=%s', `${listed![2]}..${listed![3]}`]);
    expect(log).toMatch(new RegExp(`claim ${messageId} attempt 1`));
    expect(log).toMatch(/receipt/);
    expect(model.requests).toHaveLength(2);
  });
});

/**
 * One consult whose call is paid while a cache starts serving the head from before its claim: its
 * runner's pass, which ends refusing the remote (its result kept).
 */
async function paidBehindStaleCache(): Promise<{ world: LyingCase; messageId: string; running: Promise<unknown> }> {
  const world = await lyingCase();
  const messageId = await world.consult();
  const cached = join(dir, `case-${cases}`, 'cached');
  mkdirSync(cached);
  git(['clone', '-q', '--bare', world.served.gitdir, join(cached, world.served.name)]);
  const held = holdAnswers(new OracleCli({ route: { baseUrl: `${world.model.url}/v1` }, env: { OPENAI_API_KEY: 'sk-test-key' }, hide: [world.gitdir] }));
  const running = world.runner({ transport: held.transport }).runOnce().catch((error: unknown) => error);
  await held.paid;
  world.stale.root = cached;
  held.release();
  return { world, messageId, running };
}

describe('a cache in front of a hookless remote that serves one runner, mid-attempt, the head from before its claim', { timeout: 180_000 }, () => {
  it('the receipt is refused as a rollback and kept, the runner stops; restarted once the cache serves the real head, it publishes the kept receipt at once, never after its own claim\'s lease: nothing lost, nothing paid again', async () => {
    const { world, messageId, running } = await paidBehindStaleCache();

    expect(await running).toMatchObject({ code: 'REMOTE_UNVERIFIED', message: expect.stringMatching(/rolled back/) });
    expect(types(world.events)).toEqual(expect.arrayContaining(['claimed', 'result_kept']));
    expect(await remoteReceipts(world.served, messageId)).toEqual([]);

    world.stale.root = null;
    // Restarted: a new runner id on the same state folder, whose claim a lease would hold for 15 minutes.
    await world.runner().runOnce();
    expect(await remoteReceipts(world.served, messageId)).toEqual([{ attempt: 1, status: 'succeeded', blockers: [] }]);
    expect(types(world.events).filter((type) => type === 'claimed')).toHaveLength(1);
    expect(world.model.requests).toHaveLength(1);
  });
});

describe('the same cache turning stale again between a restarted runner\'s sync and its publishing of the kept receipt', { timeout: 180_000 }, () => {
  it('the kept paid result stays kept (the remote said nothing of it), never replaced by a receipt of the attempt interrupted; published once the remote serves the real head', async () => {
    const { world, messageId, running } = await paidBehindStaleCache();
    expect(await running).toMatchObject({ code: 'REMOTE_UNVERIFIED' });
    const keptDir = join(world.stateDir, 'kept-results');
    const kept = readdirSync(keptDir).map((name) => readFileSync(join(keptDir, name), 'utf8'));
    expect(kept).toHaveLength(1);

    // Restarted: its first fetch (the pass's sync) is served the real head, every later one the stale copy.
    world.fetches.staleAfter = world.fetches.count + 1;
    expect(await world.runner().runOnce().catch((error: unknown) => error)).toMatchObject({ code: 'REMOTE_UNVERIFIED' });
    expect(readdirSync(keptDir).map((name) => readFileSync(join(keptDir, name), 'utf8'))).toEqual(kept);
    expect(await remoteReceipts(world.served, messageId)).toEqual([]);

    world.stale.root = null;
    await world.runner().runOnce();
    expect(await remoteReceipts(world.served, messageId)).toEqual([{ attempt: 1, status: 'succeeded', blockers: [] }]);
    expect(world.model.requests).toHaveLength(1);
  });
});
