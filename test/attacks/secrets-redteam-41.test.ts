import { spawnSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { formatPrivateKey } from '../../src/crypto/keys.js';
import { CooError } from '../../src/errors.js';
import { COO } from '../helpers/cli.js';
import { serveGitHttp } from '../helpers/git-http.js';
import { agentScript, dispatchTo, hostilePlaces, receiptsFor, watchOnce } from '../helpers/hostile-agent.js';
import { offlineEndpoints, worlds } from '../helpers/lane.js';
import { consultThrough, makeServedLedger, makeWriter } from '../helpers/remote-ledger.js';
import { environmentSecrets } from '../../src/util/scrub.js';
import { git, tempDir } from '../helpers/tmp.js';

/**
 * "No secret enters the ledger, the events or the errors", attacked as a careless operator: a model
 * endpoint's token given on the command line, in no variable of the runner's environment, and the
 * texts the runner prints (`coo watch --json`, `coo mcp`'s log) that name that endpoint; and as a
 * hostile remote: one whose refusal of a push says back the credential git sent it; and the
 * secrets of an ssh remote's password program and of a CI job, under names the scrubber did not read.
 */
const dir = tempDir('secrets-41-');
const fresh = worlds(dir);
const places = hostilePlaces(dir, 'p');
const TOKEN = 'QueryToken0123456789abcdefXYZ';

const ledgerOf = (gitdir: string): string => git(['--git-dir', gitdir, 'cat-file', '--batch-all-objects', '--batch']);

/** Every run of 8 characters of `whole` that `text` still holds. */
const pieces = (text: string, whole: string): string[] => Array.from({ length: whole.length - 7 }, (_, at) => whole.slice(at, at + 8)).filter((piece) => text.includes(piece));

describe("a model endpoint's token given on the command line", () => {
  it('is in no line coo watch --json or coo mcp --run prints when the endpoint relies on a host pin without bubblewrap (ORACLE_CONFIG, nothing claimed)', async () => {
    const w = await fresh();
    const { messageId } = await w.consult();
    const keyFile = join(w.dir, 'coo.key');
    writeFileSync(keyFile, formatPrivateKey(w.actors.coo), { mode: 0o600 });
    const endpoints = offlineEndpoints(w.server);
    const flags = [
      '--ledger', w.gitdir, '--key', keyFile, '--repo', w.target, '--state-dir', join(w.dir, 'state'), '--isolation', 'none',
      '--oracle-base-url', `http://gw.example:${w.server.port}/v1?api-key=${TOKEN}`, '--oracle-host', 'gw.example=127.0.0.1',
      '--oracle-anthropic-url', endpoints.anthropic!, '--oracle-gemini-url', endpoints.google!,
    ];
    const env = { ...process.env, OPENAI_API_KEY: 'sk-test-key-0123456', ANTHROPIC_API_KEY: 'sk-ant-test-key-0123', GEMINI_API_KEY: 'gemini-test-key-0123' };
    for (const args of [['watch', '--once', '--json', ...flags], ['mcp', '--run', ...flags]]) {
      // coo mcp ends when its client closes stdin: the empty input ends it once its runner has made its first pass.
      const result = spawnSync(process.execPath, [COO, ...args], { encoding: 'utf8', env, input: '', timeout: 60_000 });
      const said = `${result.stdout}${result.stderr}`;
      expect(result.status, `${args[0]}: ${said}`).toBe(0);
      expect(said, args[0]).toContain(`http://gw.example:${w.server.port}/v1?[query removed] relies on the host pin gw.example`);
      expect(pieces(said, TOKEN), `${args[0]}: ${said}`).toEqual([]);
    }
    const [event] = spawnSync(process.execPath, [COO, 'watch', '--once', '--json', ...flags], { encoding: 'utf8', env, timeout: 60_000 }).stdout.trim().split('\n').map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(event).toMatchObject({ type: 'error', messageId, code: 'ORACLE_CONFIG' });
    expect((await w.ledger.state()).messages.get(messageId)!.attempts).toEqual([]);
  }, 180_000);

  it("is removed from every event the runner prints, as a secret of its environment is: the transport's endpoints are known to the runner's scrubber", async () => {
    const w = await fresh();
    const url = `${w.server.url}/v1?key=${TOKEN}`;
    const runner = w.runner({ transport: w.transport({ route: { baseUrl: url } }) });
    const event = runner.errorEvent(new CooError('INTERNAL', `Oracle could not reach ${url}: 401 ${TOKEN} is not a key`));
    expect(event.message).toContain('[removed: endpoint credentials]');
    expect(pieces(JSON.stringify(event), TOKEN)).toEqual([]);
  });

  it("leaves no part of it in the ledger when an execution agent run without bubblewrap prints the command lines of the runner's processes", async () => {
    const place = await places('cmdline');
    const { messageId } = await dispatchTo(place, 'cmdline');
    // The agent looks for this runner's own command line: runners of other tests that run beside it name --oracle-base-url too,
    // and their lines first in the agent's bounded stderr could leave this one's out of what the receipt keeps.
    const agent = agentScript(place.world.dir, `for p in /proc/[0-9]*; do tr '\\000' ' ' < $p/cmdline 2>/dev/null; echo; done | grep -- '--oracle-base-url http://127.0.0.1:9/v1?api-key=' >&2; exit 1`);
    const result = spawnSync(
      process.execPath,
      [COO, 'watch', '--once', '--json', '--ledger', place.world.gitdir, '--key', place.keyFile, '--repo', place.repo, '--state-dir', place.stateDir, '--ea-command', agent, '--isolation', 'none', '--oracle-base-url', `http://127.0.0.1:9/v1?api-key=${TOKEN}`],
      { encoding: 'utf8', env: { ...process.env, OPENAI_API_KEY: 'sk-hostile-test-0123' }, timeout: 60_000 },
    );
    const [receipt] = await receiptsFor(place, messageId);
    expect(receipt, result.stderr).toBeDefined();
    const ledger = ledgerOf(place.world.gitdir);
    expect(ledger).toContain('[removed: endpoint credentials]');
    expect(pieces(ledger, TOKEN)).toEqual([]);
    expect(pieces(`${result.stdout}${result.stderr}`, TOKEN)).toEqual([]);
  }, 120_000);
});

describe('a remote that says back the credential git sent it when it refuses a push', () => {
  const closers: Array<() => void> = [];
  afterAll(() => {
    for (const close of closers) close();
  });

  it("is quoted without it by a writer whose token only git's credential helper knows (REMOTE_REJECTED, nothing written): not on stderr, not in --json", async () => {
    const HELPER_TOKEN = 'ghs_HelperGivenToken0123456789abcdef';
    const served = await makeServedLedger(join(dir, 'echoing-remote'));
    const basic = Buffer.from(`x-access-token:${HELPER_TOKEN}`).toString('base64');
    // Smart HTTP behind a token, as a forge serves it; git http-backend hands the hook every request header (HTTP_AUTHORIZATION).
    const server = createServer((req, res) => {
      if (req.headers.authorization !== `Basic ${basic}`) {
        req.resume();
        res.writeHead(401, { 'www-authenticate': 'Basic realm="ledger"' });
        res.end();
        return;
      }
      serveGitHttp(req, res, served.root);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    closers.push(() => {
      server.closeAllConnections();
      server.close();
    });
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/${served.name}`;
    // The writer's git gets the token from a helper in its own git configuration: in no variable, file or flag coo reads.
    const home = join(dir, 'echoing-remote', 'homes', 'w');
    mkdirSync(home, { recursive: true });
    writeFileSync(join(home, '.gitconfig'), `[credential]\n\thelper = "!f() { echo username=x-access-token; echo password=${HELPER_TOKEN}; }; f"\n`);
    const writer = await makeWriter(join(dir, 'echoing-remote'), 'w', served, url);
    const before = served.head();
    writeFileSync(join(served.gitdir, 'hooks', 'pre-receive'), `#!/bin/sh\necho "refused: $HTTP_AUTHORIZATION is read-only"\nexit 1\n`, { mode: 0o755 });
    const result = await consultThrough(writer, served);
    const said = `${result.stdout}${result.stderr}`;
    expect(result.status, said).toBe(3);
    expect(JSON.parse(result.stdout)).toMatchObject({ ok: false, error: { code: 'REMOTE_REJECTED' } });
    expect(said).toContain('[removed: git credential helper (base64)]');
    expect(said).not.toContain(basic.slice(20));
    expect(pieces(said, HELPER_TOKEN)).toEqual([]);
    expect(served.head()).toBe(before);
  }, 120_000);
});

describe("a secret of the runner's environment under a name the scrubber did not read as one, a third time", () => {
  const ENV = { SSHPASS: 'SshPassword0123456789xyz', CI_JOB_JWT_V2: 'eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJqb2IifQ.c2lnbmF0dXJlNDU2', DEPLOY_JWT: 'eyJhbGciOiJFUzI1NiJ9.eyJhdWQiOiJ2YXVsdCJ9.c2lnbmF0dXJlNzg5' };

  it("is known: the password sshpass -e reads for an ssh remote (SSHPASS), a CI job's JWT; a JWT's issuer and a COMPASS are not", () => {
    const plain = { JWT_ISSUER: 'https://gitlab.example.com', COMPASS_HOME: '/opt/compass/home', BYPASS: 'ordinary-value-1' };
    expect(environmentSecrets({ ...ENV, ...plain }).map((secret) => secret.name).sort()).toEqual(Object.keys(ENV).sort());
  });

  it("leaves no part of it in the ledger when an execution agent run without bubblewrap prints the runner's environment", async () => {
    const place = await places('env');
    const { messageId } = await dispatchTo(place, 'env');
    const watch = watchOnce(place, agentScript(place.world.dir, String.raw`tr '\0' '\n' < /proc/$PPID/environ | grep -E '^(SSHPASS|CI_JOB_JWT_V2|DEPLOY_JWT)=' >&2; exit 1`), { env: ENV, isolation: 'none' });
    const [receipt] = await receiptsFor(place, messageId);
    expect(receipt, watch.stderr).toBeDefined();
    const ledger = ledgerOf(place.world.gitdir);
    expect(ledger).toContain('SSHPASS=[removed: SSHPASS]');
    for (const [name, value] of Object.entries(ENV)) expect(pieces(ledger, value), name).toEqual([]);
  }, 120_000);
});
