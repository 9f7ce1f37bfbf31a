import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { COO, cooAsync, json, type CliResult } from '../helpers/cli.js';
import { startGitHttpServer, type GitHttpServer } from '../helpers/git-http-server.js';
import { consultArgs, makeServedLedger, makeWriter, type ServedLedger, type Writer } from '../helpers/remote-ledger.js';
import { startFakeModelServer } from '../../src/offline/fake-model-server.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * A remote whose URL carries a token (`http://x-access-token:TOKEN@host/ledger.git`, as a forge's
 * push URL does): the token is used and never shown, by any verb, in any output.
 */
const dir = tempDir('coo-remote-credentials-');
const TOKEN = 'ghs_RemoteUrlToken0123456789SECRET';
const servers: GitHttpServer[] = [];

afterAll(async () => {
  for (const server of servers) await server.close().catch(() => undefined);
});

interface Case {
  readonly served: ServedLedger;
  readonly server: GitHttpServer;
  readonly url: string;
  readonly shown: string;
  readonly writer: Writer;
}

async function makeCase(name: string): Promise<Case> {
  const served = await makeServedLedger(join(dir, name));
  const server = await startGitHttpServer({ projectRoot: served.root, token: TOKEN });
  servers.push(server);
  const shown = `${server.url}/${served.name}`;
  const url = shown.replace('http://', `http://x-access-token:${TOKEN}@`);
  const writer = await makeWriter(join(dir, name), 'coo', served, url);
  return { served, server, url, shown, writer };
}

function neverShows(result: CliResult): void {
  expect(result.stdout).not.toContain(TOKEN);
  expect(result.stderr).not.toContain(TOKEN);
  expect(result.stdout + result.stderr).not.toContain('x-access-token');
}

describe('a remote URL that carries credentials', () => {
  it('is never printed by coo clone, in its human or --json output', async () => {
    const world = await makeCase('clone');
    for (const [name, extra] of [['human.git', []], ['json.git', ['--json']]] as const) {
      const result = await cooAsync(['clone', world.url, join(dir, 'clone', name), '--trust-root', world.served.ceoKeyId, ...extra], { env: world.writer.env });
      expect(result.status, result.stderr).toBe(0);
      neverShows(result);
      expect(result.stdout).toContain(world.shown);
    }
  });

  it("is never printed by a published write's human or --json output: remote.url is the URL without its user info", async () => {
    const world = await makeCase('write');
    const human = await cooAsync(consultArgs(world.writer, world.served).filter((arg) => arg !== '--json'), { env: world.writer.env });
    expect(human.status, human.stderr).toBe(0);
    neverShows(human);
    const machine = await cooAsync(consultArgs(world.writer, world.served, ['--idempotency-key', 'second']), { env: world.writer.env });
    expect(machine.status, machine.stderr).toBe(0);
    neverShows(machine);
    expect(json<{ remote: { url: string } }>(machine).remote.url).toBe(world.shown);
  });

  it('is never printed in the error line when the remote is down, nor in the cut_off event of coo watch --remote', async () => {
    const world = await makeCase('down');
    await world.server.close();
    const written = await cooAsync(consultArgs(world.writer, world.served), { env: world.writer.env });
    expect(written.status).toBe(1);
    expect(written.stderr).toMatch(/^coo: REMOTE_UNREACHABLE: /);
    neverShows(written);

    const model = await startFakeModelServer(['ok']);
    try {
      const watched = await cooAsync(
        ['watch', '--once', '--json', '--remote', world.url, '--ledger', world.writer.gitdir, '--key', world.served.keys.coo, '--repo', world.served.target, '--state-dir', join(dir, 'down', 'state'), '--oracle-base-url', `${model.url}/v1`],
        { env: { ...world.writer.env, OPENAI_API_KEY: 'sk-test-key' } },
      );
      neverShows(watched);
      const events = watched.stdout.trim().split('\n').filter(Boolean).map((line) => JSON.parse(line) as Record<string, unknown>);
      expect(events).toContainEqual(expect.objectContaining({ type: 'cut_off', url: world.shown }));
    } finally {
      await model.close();
    }
  });

  it('is never printed in the log of coo mcp --remote', async () => {
    const world = await makeCase('mcp');
    const child = spawn(process.execPath, [COO, 'mcp', '--remote', world.url, '--ledger', world.writer.gitdir, '--key', world.served.keys.coo, '--repo', world.served.target], {
      env: { ...process.env, ...world.writer.env, COO_LEDGER: '', COO_KEY: '' },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stderr = '';
    const serving = new Promise<void>((resolve) => {
      child.stderr.on('data', (chunk: Buffer) => {
        stderr += chunk.toString('utf8');
        if (stderr.includes('serving')) resolve();
      });
    });
    await serving;
    child.stdin.end();
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
    expect(code).toBe(0);
    expect(stderr).toContain(`through ${world.shown}`);
    expect(stderr).not.toContain(TOKEN);
  });
});
