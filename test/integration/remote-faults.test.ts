import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { formatPrivateKey, generatePrivateKey } from '../../src/crypto/keys.js';
import { coo, cooAsync, json, type CliResult } from '../helpers/cli.js';
import { startGitHttp, type GitHttpServer } from '../helpers/git-http.js';
import {
  advanceBeforeEachPush,
  consultArgs,
  consultThrough,
  makeServedLedger,
  makeWriter,
  publishedJson,
  removeHook,
  type ServedLedger,
  type Writer,
} from '../helpers/remote-ledger.js';
import { startSshd, type SshServer } from '../helpers/sshd.js';
import { stockCommit } from '../helpers/stock.js';
import { git, tempDir } from '../helpers/tmp.js';

const dir = tempDir('coo-remote-faults-');
let sshd: SshServer;
const https: GitHttpServer[] = [];

beforeAll(async () => {
  sshd = await startSshd(join(dir, 'sshd'));
});

afterAll(async () => {
  await sshd?.close();
  for (const server of https) await server.close();
});

let cases = 0;

/** A served ledger of its own for one case, and its URL over ssh:// or git http-backend. */
async function served(transport: 'ssh' | 'http'): Promise<{ served: ServedLedger; url: string; env: NodeJS.ProcessEnv; caseDir: string }> {
  cases += 1;
  const caseDir = join(dir, `case-${cases}`);
  const ledger = await makeServedLedger(caseDir);
  if (transport === 'ssh') return { served: ledger, url: sshd.url(ledger.gitdir), env: sshd.env, caseDir };
  const server = await startGitHttp(ledger.root);
  https.push(server);
  return { served: ledger, url: server.url(ledger.name), env: {}, caseDir };
}

/**
 * Competing commits another COO made on its own clone, on top of the remote's head, whose objects
 * are then copied into the remote without moving its main (as a push whose ref update is still
 * to come): what `advanceBeforeEachPush` moves main along.
 */
async function competingChain(caseDir: string, ledger: ServedLedger, url: string, env: NodeJS.ProcessEnv, count: number, extra: readonly string[] = []): Promise<string[]> {
  const rival = await makeWriter(caseDir, 'rival', ledger, url, env);
  // Written on the rival's copy alone: a clone refuses a write without --remote, so the copy forgets its origin first.
  git(['--git-dir', rival.gitdir, 'remote', 'remove', 'origin']);
  for (let index = 0; index < count; index += 1) {
    const args = consultArgs(rival, ledger, extra).filter((arg, at, all) => arg !== '--remote' && all[at - 1] !== '--remote');
    const written = await cooAsync(args, { env: rival.env });
    expect(written.status, written.stderr).toBe(0);
  }
  git(['--git-dir', ledger.gitdir, 'fetch', '-q', rival.gitdir, 'main']);
  return git(['--git-dir', rival.gitdir, 'rev-list', '--reverse', `${ledger.head()}..main`]).trim().split('\n');
}

/** The coded error of a --json run that failed: nothing reported written. */
function failure(result: CliResult): { code: string; message: string } {
  const parsed = json<{ ok: boolean; error: { code: string; message: string } }>(result);
  expect(parsed.ok).toBe(false);
  expect(result.stderr).toBe(`coo: ${parsed.error.code}: ${parsed.error.message}\n`);
  return parsed.error;
}

function state(writer: Writer): { main: string; origin: string } {
  return { main: writer.head(), origin: git(['--git-dir', writer.gitdir, 'rev-parse', 'refs/remotes/origin/main']).trim() };
}

describe('publishing through a remote, when it goes wrong', () => {
  it('refuses to act on a fetched history that holds a forged commit (a hookless remote standing in for a forge), and coo verify on a fresh clone finds it', async () => {
    const { served: ledger, url, env, caseDir } = await served('ssh');
    const writer = await makeWriter(caseDir, 'coo', ledger, url, env);
    const before = state(writer);
    // The forge: no pre-receive hook, and a push signed by a key the ledger never trusted.
    removeHook(ledger);
    const intruder = join(caseDir, 'intruder.key');
    writeFileSync(intruder, formatPrivateKey(generatePrivateKey('intruder')), { mode: 0o600 });
    const work = join(caseDir, 'forger');
    git(['clone', '-q', url, work], { env });
    stockCommit(work, { 'notes/forged.yaml': 'x: 1\n' }, { key: intruder, seq: ledger.seq() + 1 });
    git(['push', '-q', 'origin', 'main'], { cwd: work, env });
    const forged = ledger.head();

    const result = await consultThrough(writer, ledger);

    expect(result.status).toBe(3);
    const error = failure(result);
    expect(error.code).toBe('REMOTE_UNVERIFIED');
    expect(error.message).toMatch(new RegExp(`^what .* holds does not verify \\(\\d+ finding\\(s\\), first SIGNER_UNKNOWN at ${forged.slice(0, 12)}: .*; nothing was acted on`));
    // Nothing acted on: the local main and the remote's head it last verified are as they were, and the remote got nothing.
    expect(state(writer)).toEqual(before);
    expect(ledger.head()).toBe(forged);
    const fresh = join(caseDir, 'auditor.git');
    git(['clone', '-q', '--bare', url, fresh], { env });
    const verified = coo(['verify', '--ledger', fresh, '--no-checkpoint', '--json']);
    expect(verified.status).toBe(3);
    expect(json<{ findings: Array<{ commit?: string }> }>(verified).findings.map((finding) => finding.commit)).toContain(forged);
  }, 120_000);

  it('refuses a remote whose main went back from the head this clone verified (a rollback)', async () => {
    const { served: ledger, url, env, caseDir } = await served('ssh');
    const writer = await makeWriter(caseDir, 'coo', ledger, url, env);
    expect(publishedJson(await consultThrough(writer, ledger)).remote.tries).toBe(1);
    const before = state(writer);
    git(['--git-dir', ledger.gitdir, 'update-ref', 'refs/heads/main', 'main~1']);

    const result = await consultThrough(writer, ledger);

    expect(result.status).toBe(3);
    const error = failure(result);
    expect(error.code).toBe('REMOTE_UNVERIFIED');
    expect(error.message).toMatch(/^the main of .* went back from [0-9a-f]{12}, which this clone verified/);
    expect(state(writer)).toEqual(before);
  }, 120_000);

  it('refuses a remote whose main was rewritten (the same first commit, not descended from the head this clone verified), and tells it from another ledger', async () => {
    const { served: ledger, url, env, caseDir } = await served('ssh');
    const writer = await makeWriter(caseDir, 'coo', ledger, url, env);
    expect(publishedJson(await consultThrough(writer, ledger)).remote.tries).toBe(1);
    const before = state(writer);
    const rewritten = git(['--git-dir', ledger.gitdir, 'commit-tree', 'main^{tree}', '-p', 'main~1', '-m', 'rewritten']).trim();
    git(['--git-dir', ledger.gitdir, 'update-ref', 'refs/heads/main', rewritten]);

    const result = await consultThrough(writer, ledger);

    expect(result.status).toBe(3);
    const error = failure(result);
    expect(error.code).toBe('REMOTE_UNVERIFIED');
    expect(error.message).toMatch(new RegExp(`^the main of .* \\(${rewritten.slice(0, 12)}\\) does not descend from the head this clone verified .*: its history was rewritten`));
    expect(state(writer)).toEqual(before);
  }, 120_000);

  it('gives REMOTE_UNREACHABLE for a remote that is down, leaves the local ledger as it was, and reports nothing written', async () => {
    const { served: ledger, caseDir } = await served('ssh');
    const own = await startSshd(join(caseDir, 'sshd'));
    const writer = await makeWriter(caseDir, 'coo', ledger, own.url(ledger.gitdir), own.env);
    const before = state(writer);
    const remoteBefore = ledger.head();
    await own.close();

    const result = await consultThrough(writer, ledger);

    expect(result.status).toBe(1);
    const error = failure(result);
    expect(error.code).toBe('REMOTE_UNREACHABLE');
    expect(error.message).toMatch(/^cannot fetch from ssh:\/\/.*; nothing was written/);
    expect(state(writer)).toEqual(before);
    expect(ledger.head()).toBe(remoteBefore);
  });

  it('gives REMOTE_CONFLICT when every try meets a competing push (a scripted stream of them), and leaves the local main at the remote head', async () => {
    const { served: ledger, url, env, caseDir } = await served('http');
    const writer = await makeWriter(caseDir, 'coo', ledger, url, env);
    const chain = await competingChain(caseDir, ledger, url, env, 8);
    advanceBeforeEachPush(ledger, caseDir, chain);

    const result = await consultThrough(writer, ledger);

    expect(result.status).toBe(1);
    const error = failure(result);
    expect(error.code).toBe('REMOTE_CONFLICT');
    expect(error.message).toMatch(/ moved under 8 tries in a row .*nothing was written/);
    expect(ledger.head()).toBe(chain[7]);
    expect(state(writer)).toEqual({ main: chain[7], origin: chain[7] });
  }, 120_000);

  it('rebuilds the write on each new head and lands after three competing pushes, saying so', async () => {
    const { served: ledger, url, env, caseDir } = await served('http');
    const writer = await makeWriter(caseDir, 'coo', ledger, url, env);
    const chain = await competingChain(caseDir, ledger, url, env, 3);
    advanceBeforeEachPush(ledger, caseDir, chain);

    const result = publishedJson(await consultThrough(writer, ledger));

    expect(result).toMatchObject({ existing: false, remote: { url, tries: 4, conflicts: 3 } });
    expect(ledger.head()).toBe(result.commit);
    expect(git(['--git-dir', ledger.gitdir, 'rev-parse', `${result.commit}~1`]).trim()).toBe(chain[2]);
    expect(coo(['verify', '--ledger', ledger.gitdir, '--no-checkpoint']).status).toBe(0);
  }, 120_000);

  it('returns the existing message for an idempotent consult re-run after a conflict, rather than writing twice', async () => {
    const { served: ledger, url, env, caseDir } = await served('http');
    const writer = await makeWriter(caseDir, 'coo', ledger, url, env);
    // Another COO enqueued the same consult under the same idempotency key, and its push lands first.
    const chain = await competingChain(caseDir, ledger, url, env, 1, ['--idempotency-key', 'weekly-review']);
    const theirs = git(['--git-dir', ledger.gitdir, 'show', '--name-only', '--format=', chain[0]!]);
    advanceBeforeEachPush(ledger, caseDir, chain);

    const result = publishedJson(await consultThrough(writer, ledger, ['--idempotency-key', 'weekly-review']));

    expect(result).toMatchObject({ existing: true, commit: null, remote: { tries: 2, conflicts: 1 } });
    expect(theirs).toContain(result.message_id);
    expect(ledger.head()).toBe(chain[0]);
    expect(state(writer)).toEqual({ main: chain[0], origin: chain[0] });
  }, 120_000);

  it('reports a write whose push the remote took as written, once, when the answer is lost on the way back', async () => {
    const { served: ledger, url, env, caseDir } = await served('ssh');
    const writer = await makeWriter(caseDir, 'coo', ledger, url, env);
    const before = ledger.seq();
    writeFileSync(join(ledger.gitdir, 'hooks', 'post-receive'), '#!/bin/sh\n# Test fixture: main has moved; the connection drops before the client hears so.\ncat >/dev/null\nkill -9 $PPID\n', { mode: 0o755 });

    const result = publishedJson(await consultThrough(writer, ledger));

    expect(result).toMatchObject({ existing: false, remote: { tries: 1, conflicts: 0 } });
    expect(ledger.head()).toBe(result.commit);
    expect(ledger.seq()).toBe(before + 1);
    expect(state(writer)).toEqual({ main: result.commit, origin: result.commit });
  }, 120_000);

  it('a writer killed after the remote took its push and before its own main moved leaves nothing unpublished: run again, it returns what landed', async () => {
    const { served: ledger, url, env, caseDir } = await served('ssh');
    const writer = await makeWriter(caseDir, 'coo', ledger, url, env);
    const before = ledger.seq();
    const key = ['--idempotency-key', 'killed-mid-write'];

    const killed = await cooAsync(consultArgs(writer, ledger, key), { env: { ...writer.env, COO_FAILPOINT: 'ref-update' } });

    expect(killed.status).toBeNull();
    expect(ledger.seq()).toBe(before + 1);
    const again = publishedJson(await consultThrough(writer, ledger, key));
    expect(again).toMatchObject({ existing: true });
    expect(ledger.seq()).toBe(before + 1);
    expect(state(writer)).toEqual({ main: ledger.head(), origin: ledger.head() });
  }, 120_000);

  it('gives REMOTE_REJECTED when the remote refuses the write without moving, and leaves the local ledger as it was', async () => {
    const { served: ledger, url, env, caseDir } = await served('http');
    const writer = await makeWriter(caseDir, 'coo', ledger, url, env);
    const before = state(writer);
    writeFileSync(join(ledger.gitdir, 'hooks', 'pre-receive'), '#!/bin/sh\n# Test fixture: a remote that refuses every push.\necho "closed for maintenance" >&2\nexit 1\n', { mode: 0o755 });

    const result = await consultThrough(writer, ledger);

    expect(result.status).toBe(3);
    const error = failure(result);
    expect(error.code).toBe('REMOTE_REJECTED');
    expect(error.message).toMatch(/ refused the write: closed for maintenance \(\[remote rejected\] \(pre-receive hook declined\)\); nothing was written/);
    expect(state(writer)).toEqual(before);
  });

  it('refuses a --remote that is not the origin of the clone, before anything is fetched', async () => {
    const { served: ledger, url, env, caseDir } = await served('http');
    const writer = await makeWriter(caseDir, 'coo', ledger, url, env);
    const args = consultArgs(writer, ledger).map((arg) => (arg === url ? 'ssh://elsewhere.invalid/ledger.git' : arg));

    const result = await cooAsync(args, { env: writer.env });

    expect(result.status).toBe(2);
    const error = failure(result);
    expect(error.code).toBe('USAGE');
    expect(error.message).toMatch(/^--remote ssh:\/\/elsewhere\.invalid\/ledger\.git is not the origin of /);
  });
});
