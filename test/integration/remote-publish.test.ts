import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { coo, cooAsync } from '../helpers/cli.js';
import { dispatchEnvelope } from '../helpers/ledger.js';
import { toYaml } from '../../src/schema/strict-yaml.js';
import { startGitHttp, type GitHttpServer } from '../helpers/git-http.js';
import { consultThrough, holdPushesUntil, makeServedLedger, makeWriter, publishedJson, type ServedLedger } from '../helpers/remote-ledger.js';
import { startSshd, type SshServer } from '../helpers/sshd.js';
import { git, tempDir } from '../helpers/tmp.js';

const dir = tempDir('coo-remote-publish-');
let sshd: SshServer;
const https: GitHttpServer[] = [];

beforeAll(async () => {
  sshd = await startSshd(join(dir, 'sshd'));
});

afterAll(async () => {
  await sshd?.close();
  for (const server of https) await server.close();
});

interface Transport {
  readonly name: string;
  url(served: ServedLedger): Promise<string>;
  env(): NodeJS.ProcessEnv;
}

const transports: Transport[] = [
  { name: 'ssh://', url: async (served) => sshd.url(served.gitdir), env: () => sshd.env },
  {
    name: 'git http-backend',
    url: async (served) => {
      const server = await startGitHttp(served.root);
      https.push(server);
      return server.url(served.name);
    },
    env: () => ({}),
  },
];

function isAncestor(gitdir: string, ancestor: string, descendant: string): boolean {
  try {
    git(['--git-dir', gitdir, 'merge-base', '--is-ancestor', ancestor, descendant]);
    return true;
  } catch {
    return false;
  }
}

describe('publishing through a remote', () => {
  it.each(transports)('two COOs on two clones enqueue at the same moment, and both land (over $name, with the hook on the remote)', async (transport) => {
    const caseDir = join(dir, transport.name.replace(/\W+/g, '-'));
    const served = await makeServedLedger(caseDir);
    const url = await transport.url(served);
    const first = await makeWriter(caseDir, 'coo-1', served, url, transport.env());
    const second = await makeWriter(caseDir, 'coo-2', served, url, transport.env());
    const before = served.seq();
    // Both pushes wait in the remote's hook until both have arrived: both were built on one head.
    holdPushesUntil(served, caseDir, 2);

    const results = (await Promise.all([consultThrough(first, served), consultThrough(second, served)])).map(publishedJson);

    expect(results.map((result) => result.existing)).toEqual([false, false]);
    expect(new Set(results.map((result) => result.message_id)).size).toBe(2);
    // One push won the race; the other was refused, rebuilt on the winner's commit and pushed again.
    expect(results.map((result) => result.remote.conflicts).sort()).toEqual([0, 1]);
    expect(results.map((result) => result.remote.tries).sort()).toEqual([1, 2]);
    expect(results.every((result) => result.remote.url === url)).toBe(true);
    const head = served.head();
    expect(served.seq(head)).toBe(before + 2);
    for (const result of results) expect(isAncestor(served.gitdir, result.commit!, head)).toBe(true);
    // Each writer's local main is where its own write landed: nothing unpublished stays there.
    for (const [index, writer] of [first, second].entries()) expect(writer.head()).toBe(results[index]!.commit);
    expect(coo(['verify', '--ledger', served.gitdir, '--no-checkpoint']).status).toBe(0);
  });

  it('publishes kill-switch, trust and append through the remote, and their --json says how', async () => {
    const caseDir = join(dir, 'verbs');
    const served = await makeServedLedger(caseDir);
    const url = await transports[1]!.url(served);
    const ceo = await makeWriter(caseDir, 'ceo', served, url);
    const published = async (args: string[]): Promise<Record<string, unknown>> => {
      const before = served.seq();
      const result = await cooAsync([...args, '--ledger', ceo.gitdir, '--remote', url, '--json'], { env: ceo.env });
      expect(result.stderr).toBe('');
      expect(result.status).toBe(0);
      const parsed = JSON.parse(result.stdout) as Record<string, unknown>;
      expect(parsed['remote']).toEqual({ url, tries: 1, conflicts: 0 });
      expect(parsed['commit']).toBe(served.head());
      expect(served.seq()).toBe(before + 1);
      expect(ceo.head()).toBe(served.head());
      return parsed;
    };

    expect(await published(['kill-switch', 'on', '--reason', 'maintenance', '--key', served.keys.ceo])).toMatchObject({ state: 'on', set_by: 'ceo' });
    expect(await published(['kill-switch', 'off', '--reason', 'done', '--key', served.keys.ceo])).toMatchObject({ state: 'off' });
    const policy = git(['--git-dir', served.gitdir, 'show', 'main:trust/policy/000001.yaml']).replace(/^version: 1$/m, 'version: 2');
    writeFileSync(join(caseDir, 'policy2.yaml'), policy);
    expect(await published(['trust', '--policy', join(caseDir, 'policy2.yaml'), '--ceo-key', served.keys.ceo])).toMatchObject({ role: 'policy', version: 2 });
    const envelope = dispatchEnvelope({}, new Date());
    writeFileSync(join(caseDir, 'envelope.yaml'), toYaml(envelope));
    expect(await published(['append', join(caseDir, 'envelope.yaml'), '--key', served.keys.coo])).toMatchObject({ message_id: envelope.message_id, existing: false });
  });
});
