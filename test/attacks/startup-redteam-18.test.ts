import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeModelServer, type FakeModelServer } from '../../src/offline/fake-model-server.js';
import { refusal } from '../helpers/damage.js';
import { startGitHttpServer, type GitHttpServer } from '../helpers/git-http-server.js';
import { makeServedLedger, makeWriter, publishedJson, consultThrough, type ServedLedger, type Writer } from '../helpers/remote-ledger.js';
import { startSshd, type SshServer } from '../helpers/sshd.js';
import { tempDir } from '../helpers/tmp.js';
import { cliEnded, holdAnswers, remoteReceipts, runnerEntryPoints, types } from '../helpers/remote-runners.js';
import { loadPrivateKey } from '../../src/cli/common.js';
import { OracleCli } from '../../src/consult/oracle.js';
import { Ledger } from '../../src/ledger/ledger.js';
import { RemoteLedger } from '../../src/remote/publish.js';
import { Runner, type RunnerEvent } from '../../src/runner/runner.js';

/**
 * A runner started through a remote that answers and refuses it: a wrong ssh key, a token the
 * server does not take, none at all. That is a mistake in the runner's configuration, not a
 * network that is down: the start is refused (exit 2) with one coded line that names the remote
 * without its credentials and says what git was told, and nothing is claimed, written or paid.
 * A remote that does not answer at all still lets the runner start cut off.
 */

const dir = tempDir('startup-redteam-18-');
const TOKEN = 'ghs_StartupRefusalToken0123456789SECRET';
const closers: Array<() => Promise<void>> = [];

afterAll(async () => {
  for (const close of closers.reverse()) await close().catch(() => undefined);
});

let model: FakeModelServer;

beforeAll(async () => {
  model = await startFakeModelServer(['ok']);
  closers.push(() => model.close());
});

const cli = cliEnded;

/** `coo watch --once` and `coo mcp --run` through `writer`'s remote. */
function runners(writer: Writer, served: ServedLedger, stateDir: string): Array<readonly string[]> {
  return runnerEntryPoints(writer, served, stateDir, model.url);
}

/** Nothing moved: the remote's main, the clone's main, the consult queued, the model never called. */
function nothingMoved(served: ServedLedger, writer: Writer, before: { remote: string; clone: string }, requests: number): void {
  expect(served.head()).toBe(before.remote);
  expect(writer.head()).toBe(before.clone);
  expect(model.requests).toHaveLength(requests);
}

describe('a remote that refuses the runner at start (a wrong key or token)', { timeout: 240_000 }, () => {
  it('over ssh, a key the server does not take: coo watch --once and coo mcp --run refuse the start (exit 2), naming the refusal; nothing is claimed', async () => {
    const served = await makeServedLedger(join(dir, 'ssh'));
    const sshd: SshServer = await startSshd(join(dir, 'ssh', 'sshd'));
    closers.push(() => sshd.close());
    const writer = await makeWriter(join(dir, 'ssh'), 'coo', served, sshd.url(served.gitdir), sshd.env);
    publishedJson(await consultThrough(writer, served));
    const before = { remote: served.head(), clone: writer.head() };
    const requests = model.requests.length;
    // Another key, made here for this test (a fixture, not a secret), that the server's authorized_keys does not hold.
    const wrong = join(dir, 'ssh', 'test-fixture-wrong-client-key');
    execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', 'coo test fixture: a key the server does not take', '-f', wrong], { stdio: 'ignore' });
    const env = { ...writer.env, GIT_SSH_COMMAND: writer.env['GIT_SSH_COMMAND']!.replace(/-i \S+/, `-i ${wrong}`) };
    for (const args of runners(writer, served, join(dir, 'ssh', 'state'))) {
      const line = refusal(await cli(args, env));
      expect(line, args[0]).toMatch(new RegExp(`^coo: RUNNER_CONFIG: ssh://\\S+@127\\.0\\.0\\.1:${sshd.port}${served.gitdir} refused this runner \\(\\S+: Permission denied \\(publickey[^)]*\\)\\.?\\): a remote that cannot be reached lets the runner start cut off, .*; give git the key or token the remote takes .*; nothing was claimed or written$`));
      nothingMoved(served, writer, before, requests);
    }
  });

  it('over http, a token the server refuses (401) or none at all: refused at start (exit 2), the token never shown; nothing is claimed', async () => {
    const served = await makeServedLedger(join(dir, 'http'));
    const server: GitHttpServer = await startGitHttpServer({ projectRoot: served.root, token: TOKEN });
    closers.push(() => server.close());
    // The token comes from a credential helper, as a forge's does; the URL carries none.
    const helper = (token: string): NodeJS.ProcessEnv => ({ GIT_CONFIG_COUNT: '1', GIT_CONFIG_KEY_0: 'credential.helper', GIT_CONFIG_VALUE_0: `!f() { echo username=x-access-token; echo password=${token}; }; f` });
    const writer = await makeWriter(join(dir, 'http'), 'coo', served, `${server.url}/${served.name}`, helper(TOKEN));
    publishedJson(await consultThrough(writer, served));
    const before = { remote: served.head(), clone: writer.head() };
    const requests = model.requests.length;
    const cases: Array<[NodeJS.ProcessEnv, RegExp]> = [
      [helper('ghs_RevokedToken0123456789abcdefSECRET'), /\(fatal: Authentication failed for '[^']+'\)/],
      [{ GIT_CONFIG_COUNT: '0' }, /\(fatal: could not read Username for '[^']+': terminal prompts disabled\)/],
      // An operator whose git speaks German (git translates this refusal): it is told apart all the same.
      [{ ...helper('ghs_RevokedToken0123456789abcdefSECRET'), LANGUAGE: 'de' }, /\(fatal: Authentication failed for '[^']+'\)/],
    ];
    for (const [transport, said] of cases) {
      for (const args of runners(writer, served, join(dir, 'http', 'state'))) {
        const ended = await cli(args, { HOME: writer.home, ...transport });
        const line = refusal(ended);
        expect(line, args[0]).toMatch(new RegExp(`^coo: RUNNER_CONFIG: ${server.url.replace(/\./g, '\\.')}/${served.name} refused this runner `));
        expect(line).toMatch(said);
        expect(ended.stderr).not.toContain('SECRET');
        nothingMoved(served, writer, before, requests);
      }
    }
  });

  it('a remote path that holds no repository (moved away on the server): refused at start (exit 2), naming the path; put back, the queued message runs once', async () => {
    const served = await makeServedLedger(join(dir, 'moved'));
    const writer = await makeWriter(join(dir, 'moved'), 'coo', served, served.gitdir);
    const messageId = publishedJson(await consultThrough(writer, served)).message_id;
    const before = { remote: served.head(), clone: writer.head() };
    const requests = model.requests.length;
    renameSync(served.gitdir, `${served.gitdir}.moved`);
    const stateDir = join(dir, 'moved', 'state');
    for (const args of runners(writer, served, stateDir)) {
      const line = refusal(await cli(args, writer.env));
      expect(line, args[0]).toBe(
        `coo: RUNNER_CONFIG: ${served.gitdir} refused this runner (fatal: '${served.gitdir}' does not appear to be a git repository): a remote that cannot be reached lets the runner start cut off, but this answer would come back on every look; give git the key or token the remote takes (GIT_SSH_COMMAND or ~/.ssh, the host's key in known_hosts, the credential helper or the token in the URL) and the URL of the ledger; nothing was claimed or written`,
      );
    }
    renameSync(`${served.gitdir}.moved`, served.gitdir);
    nothingMoved(served, writer, before, requests);
    const [watch] = runners(writer, served, stateDir);
    const ran = await cli(watch!, writer.env);
    expect(ran.status, ran.stderr).toBe(0);
    expect(await remoteReceipts(served, messageId)).toEqual([{ attempt: 1, status: 'succeeded', blockers: [] }]);
  });

  it('over ssh, a server that does not answer (stopped): the runner still starts cut off, and claims nothing', async () => {
    const served = await makeServedLedger(join(dir, 'down'));
    const sshd = await startSshd(join(dir, 'down', 'sshd'));
    const writer = await makeWriter(join(dir, 'down'), 'coo', served, sshd.url(served.gitdir), sshd.env);
    publishedJson(await consultThrough(writer, served));
    const before = { remote: served.head(), clone: writer.head() };
    const requests = model.requests.length;
    await sshd.close();
    const [watch] = runners(writer, served, join(dir, 'down', 'state'));
    const ended = await cli([...watch!, '--json'], writer.env);
    expect(ended.status, ended.stderr).toBe(0);
    const events = ended.stdout.trim().split('\n').map((line) => JSON.parse(line) as { type: string });
    expect(events.map((event) => event.type)).toContain('cut_off');
    nothingMoved(served, writer, before, requests);
  });
});

describe('a remote that serves another ledger at start (a verification failure, exit 3)', { timeout: 240_000 }, () => {
  it('coo watch --once and coo mcp --run stop with one line that says what to check, claim nothing, and leave the message for the ledger it was queued in', async () => {
    const served = await makeServedLedger(join(dir, 'swapped'));
    const writer = await makeWriter(join(dir, 'swapped'), 'coo', served, served.gitdir);
    const messageId = publishedJson(await consultThrough(writer, served)).message_id;
    const before = { remote: served.head(), clone: writer.head() };
    const requests = model.requests.length;
    // Another ledger is put where the remote was (a path or a forge's repository pointed elsewhere).
    const other = await makeServedLedger(join(dir, 'swapped-other'));
    renameSync(served.gitdir, `${served.gitdir}.away`);
    renameSync(other.gitdir, served.gitdir);
    const otherHead = served.head();
    const stateDir = join(dir, 'swapped', 'state');
    for (const args of runners(writer, served, stateDir)) {
      const ended = await cli(args, writer.env);
      expect({ status: ended.status, stdout: ended.stdout }, ended.stderr).toEqual({ status: 3, stdout: '' });
      expect(ended.stderr.trimEnd().split('\n')).toEqual([
        expect.stringMatching(new RegExp(`^coo: REMOTE_UNVERIFIED: ${served.gitdir} serves another ledger: .*; nothing was acted on; check the remote this clone names \\(git --git-dir ${writer.gitdir} remote get-url origin\\)$`)),
      ]);
      expect(served.head()).toBe(otherHead);
      expect(writer.head()).toBe(before.clone);
      expect(model.requests).toHaveLength(requests);
    }
    // The remote put back, the message queued there runs, once.
    renameSync(served.gitdir, other.gitdir);
    renameSync(`${served.gitdir}.away`, served.gitdir);
    expect(served.head()).toBe(before.remote);
    const [watch] = runners(writer, served, stateDir);
    const ran = await cli(watch!, writer.env);
    expect(ran.status, ran.stderr).toBe(0);
    expect(await remoteReceipts(served, messageId)).toEqual([{ attempt: 1, status: 'succeeded', blockers: [] }]);
    expect(model.requests).toHaveLength(requests + 1);
  });
});

describe('the same refusal in flight', { timeout: 240_000 }, () => {
  it('a key revoked on the ssh server between the paid call and its receipt: the receipt waits in the journal (cut off, naming the refusal), and lands once when the key is taken again; the model is paid once', async () => {
    const served = await makeServedLedger(join(dir, 'flight'));
    const sshdDir = join(dir, 'flight', 'sshd');
    const sshd = await startSshd(sshdDir);
    closers.push(() => sshd.close());
    const writer = await makeWriter(join(dir, 'flight'), 'coo', served, sshd.url(served.gitdir), sshd.env);
    const messageId = publishedJson(await consultThrough(writer, served)).message_id;
    const requests = model.requests.length;
    // The runner runs in this process: its git reaches the server with the fixture's ssh settings.
    const saved = { GIT_SSH_COMMAND: process.env['GIT_SSH_COMMAND'], SSH_AUTH_SOCK: process.env['SSH_AUTH_SOCK'] };
    Object.assign(process.env, sshd.env);
    const ledger = Ledger.open(writer.gitdir);
    const authorized = join(sshdDir, 'test-fixture-authorized_keys');
    const admitted = readFileSync(authorized, 'utf8');
    try {
      const remote = new RemoteLedger(ledger, { remote: writer.url });
      const held = holdAnswers(new OracleCli({ route: { baseUrl: `${model.url}/v1` }, env: { OPENAI_API_KEY: 'sk-test-key' }, hide: [writer.gitdir] }));
      const events: RunnerEvent[] = [];
      const stateDir = join(dir, 'flight', 'state');
      const runner = new Runner({ ledger, key: loadPrivateKey(served.keys.coo), repo: served.target, stateDir, transport: held.transport, remote, onEvent: (event) => events.push(event) });
      try {
        const running = runner.runOnce();
        await held.paid;
        // sshd reads the authorized keys on each login: from now on it refuses the runner's key.
        writeFileSync(authorized, '');
        held.release();
        await running;
        expect(types(events)).toEqual(expect.arrayContaining(['claimed', 'journaled', 'cut_off']));
        expect(events.find((event) => event.type === 'cut_off')).toMatchObject({ detail: expect.stringMatching(/Permission denied \(publickey/) });
        expect(readdirSync(join(stateDir, 'journal'))).toHaveLength(1);
        expect(await remoteReceipts(served, messageId)).toEqual([]);

        writeFileSync(authorized, admitted);
        await runner.runOnce();
        expect(await remoteReceipts(served, messageId)).toEqual([{ attempt: 1, status: 'succeeded', blockers: [] }]);
        expect(readdirSync(join(stateDir, 'journal'))).toHaveLength(0);
        expect(model.requests).toHaveLength(requests + 1);
      } finally {
        runner.close();
      }
    } finally {
      writeFileSync(authorized, admitted);
      ledger.close();
      for (const [name, value] of Object.entries(saved)) {
        if (value === undefined) delete process.env[name];
        else process.env[name] = value;
      }
    }
  });
});
