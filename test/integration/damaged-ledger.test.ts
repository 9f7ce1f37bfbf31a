import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { folderOf } from '../../src/authority/state.js';
import { receiptPath } from '../../src/ledger/layout.js';
import { toYaml } from '../../src/schema/strict-yaml.js';
import { forgedReceipt } from '../helpers/forged.js';
import { addMalformedTree, bypassCommit, cooBounded, headOf, startBounded, until, watchArgs, writeKey, type BoundedResult } from '../helpers/damage.js';
import { worlds } from '../helpers/lane.js';
import { FIXTURE_TASK, fixtureEnvelope } from '../helpers/stock.js';
import { git, tempDir } from '../helpers/tmp.js';

const dir = tempDir();
const fresh = worlds(dir);

interface Findings {
  findings: Array<{ code: string; commit?: string; path?: string }>;
}

describe('a ledger with a malformed tree behind the hook', () => {
  it('verify reports the symbolic link as a finding of its commit, goes on to every later finding, and exits 3, with or without --json', async () => {
    const world = await fresh();
    const { malformed, last } = addMalformedTree(world.gitdir, 200, 200);
    const plain = cooBounded(['verify', '--ledger', world.gitdir, '--no-checkpoint']);
    expect(plain.status).toBe(3);
    expect(plain.stdout).toMatch(/^FAILED: \d+ finding\(s\)/);
    const result = cooBounded(['verify', '--ledger', world.gitdir, '--no-checkpoint', '--json']);
    expect(result.status).toBe(3);
    const findings = (JSON.parse(result.stdout) as Findings).findings;
    expect(findings.filter((finding) => finding.code === 'TREE_MALFORMED')).toEqual([expect.objectContaining({ commit: malformed, path: 'messages' })]);
    // Every commit by hand is unsigned: the last one's finding is listed too.
    expect(findings).toContainEqual(expect.objectContaining({ code: 'COMMIT_UNSIGNED', commit: last }));
  });

  it('every verb ends with its status, none is left waiting', async () => {
    const world = await fresh();
    const ceo = writeKey(world.dir, 'ceo', world.actors.ceo);
    const coo = writeKey(world.dir, 'coo', world.actors.coo);
    addMalformedTree(world.gitdir, 200, 200);
    const ledger = ['--ledger', world.gitdir];
    const runs: Array<[string[], number]> = [
      [['verify', ...ledger], 3],
      [['verify', ...ledger, '--full', '--json'], 3],
      [['log', ...ledger, '-n', '3'], 0],
      [['show', ...ledger, 'README.md'], 0],
      [['report', ...ledger, '--html', join(world.dir, 'report.html')], 3],
      [['cite', ...ledger, 'msg_01M8NQFJ01J7CG66HWNDDJ8480'], 1],
      [['allowed-signers', ...ledger], 0],
      [['kill-switch', 'on', '--reason', 'damaged', ...ledger, '--key', ceo], 3],
      [['watch', '--once', ...ledger, '--key', coo, '--repo', world.target, '--state-dir', join(world.dir, 'state')], 3],
    ];
    for (const [args, status] of runs) {
      const result = cooBounded(args);
      expect({ args, status: result.status }).toEqual({ args, status });
    }
  });
});

describe('coo watch on a damaged ledger', () => {
  it('stops with HISTORY_ROLLBACK and exit 3 when the ledger it is watching is rolled back', async () => {
    const world = await fresh();
    const stateDir = join(world.dir, 'watch-state');
    const headFile = join(stateDir, 'ledger-head.json');
    const seen = (): string | null => (existsSync(headFile) ? (JSON.parse(readFileSync(headFile, 'utf8')) as { head: string }).head : null);
    const watcher = startBounded(watchArgs(world, writeKey(world.dir, 'coo', world.actors.coo), stateDir), { OPENAI_API_KEY: 'sk-test-key' });
    const before = headOf(world.gitdir);
    await until('the watcher to see the head', () => seen() === before);
    await world.runner().heartbeat();
    const after = headOf(world.gitdir);
    await until('the watcher to see the new head', () => seen() === after);
    git(['--git-dir', world.gitdir, 'update-ref', 'refs/heads/main', before]);
    const ended = await watcher.ended;
    expect(ended.status).toBe(3);
    expect(ended.stderr).toMatch(/^coo: HISTORY_ROLLBACK: the ledger head \S+ is behind /m);
  });

  it('stops with HISTORY_FORK and exit 3 when the head it is watching is replaced by one that does not descend from it', async () => {
    const world = await fresh();
    const stateDir = join(world.dir, 'watch-state');
    const headFile = join(stateDir, 'ledger-head.json');
    const seen = (): string | null => (existsSync(headFile) ? (JSON.parse(readFileSync(headFile, 'utf8')) as { head: string }).head : null);
    const base = headOf(world.gitdir);
    const watcher = startBounded(watchArgs(world, writeKey(world.dir, 'coo', world.actors.coo), stateDir), { OPENAI_API_KEY: 'sk-test-key' });
    await until('the watcher to see the head', () => seen() === base);
    await world.runner().heartbeat();
    const first = headOf(world.gitdir);
    await until('the watcher to see the new head', () => seen() === first);
    // Another line from the same parent, written where the watcher does not look until it lands.
    const other = `${world.dir}/other.git`;
    git(['clone', '-q', '--bare', world.gitdir, other]);
    git(['--git-dir', other, 'update-ref', 'refs/heads/main', base]);
    const { Ledger } = await import('../../src/ledger/ledger.js');
    const side = Ledger.open(other);
    try {
      // A clock of its own: made in the same second from the same parent, the side's heartbeat would be the very same commit.
      await world.runner({ ledger: side, clock: () => new Date(Date.now() + 5_000) }).heartbeat();
    } finally {
      side.close();
    }
    git(['--git-dir', world.gitdir, 'fetch', '-q', other, '+main:refs/heads/main']);
    const ended = await watcher.ended;
    expect(ended.status).toBe(3);
    expect(ended.stderr).toMatch(/^coo: HISTORY_FORK: the ledger head \S+ does not descend from /m);
  });

  it('stops with the finding and exit 3 on an invalid head commit signed by a real key, and appends nothing on top of it', async () => {
    const world = await fresh();
    const coo = writeKey(world.dir, 'coo', world.actors.coo);
    const { messageId } = await world.consult();
    const invalid = bypassCommit(world.gitdir, join(world.dir, 'clone'), { 'notes/junk.yaml': 'a: 1\n' }, coo);
    // Asynchronously: the runner's model is a server in this process.
    const once = async (): Promise<BoundedResult> => startBounded([...watchArgs(world, coo, join(world.dir, 'watch-state')), '--once'], { OPENAI_API_KEY: 'sk-test-key' }).ended;
    const result = await once();
    expect(result.status).toBe(3);
    expect(result.stderr).toMatch(new RegExp(`^coo: PATH_INVALID: the ledger's history holds an invalid commit ${invalid} `));
    expect(headOf(world.gitdir)).toBe(invalid);
    expect(world.server.requests).toHaveLength(0);
    // Once the head is put back, the consult runs.
    git(['--git-dir', world.gitdir, 'update-ref', 'refs/heads/main', `${invalid}^`]);
    expect((await once()).status).toBe(0);
    expect(JSON.parse(cooBounded(['show', messageId, '--ledger', world.gitdir, '--json']).stdout)).toMatchObject({ lane_state: 'succeeded' });
  });

  it('a watcher that is running stops with the finding and exit 3 when an invalid commit lands on the head, and appends nothing', async () => {
    const world = await fresh();
    const coo = writeKey(world.dir, 'coo', world.actors.coo);
    const stateDir = join(world.dir, 'watch-state');
    const headFile = join(stateDir, 'ledger-head.json');
    const watcher = startBounded(watchArgs(world, coo, stateDir), { OPENAI_API_KEY: 'sk-test-key' });
    await until('the watcher to be idle', () => existsSync(headFile));
    const invalid = bypassCommit(world.gitdir, join(world.dir, 'clone'), { 'notes/junk.yaml': 'a: 1\n' }, coo);
    const ended = await watcher.ended;
    expect(ended.status).toBe(3);
    expect(ended.stderr).toMatch(/^coo: PATH_INVALID: the ledger's history holds an invalid commit /m);
    expect(headOf(world.gitdir)).toBe(invalid);
  });
});

describe('coo cite on a damaged ledger', () => {
  it('says that the only receipt commit of a message is invalid, with the finding, instead of that it has no receipt yet', async () => {
    const world = await fresh();
    const coo = writeKey(world.dir, 'coo', world.actors.coo);
    const { messageId, envelope } = await world.consult();
    const record = (await world.ledger.state()).messages.get(messageId)!;
    // A receipt with no claim, signed by the COO's real key: the validator refuses its commit.
    bypassCommit(world.gitdir, join(world.dir, 'clone'), { [receiptPath(folderOf(record), 1)]: toYaml(forgedReceipt(envelope)) }, coo);
    const result = cooBounded(['cite', messageId, '--ledger', world.gitdir]);
    expect(result.status).toBe(3);
    expect(result.stderr).toMatch(new RegExp(`^coo: [A-Z_]+: ${messageId} has no valid receipt: its receipt commit [0-9a-f]{40} \\(Ledger-Seq \\d+\\) is invalid: `));
    expect(result.stderr).not.toContain('no receipt yet');
    expect(result.stderr.trimEnd().split('\n')).toHaveLength(1);
  });
});

describe('a refused write', () => {
  it('prints one line, and every finding only with --json', async () => {
    const world = await fresh();
    const coo = writeKey(world.dir, 'coo', world.actors.coo);
    const file = join(world.dir, 'envelope.yaml');
    const prompt = join(world.dir, 'prompt.md');
    const manifest = join(world.dir, 'context-manifest.yaml');
    // Two things wrong beside a valid envelope: the task is not the one it hashed, and a dispatch with no context pin references no manifest.
    writeFileSync(file, fixtureEnvelope('msg_01M8NQFJ01J7CG66HWNDDJ8481', 'two-findings'));
    writeFileSync(prompt, 'not the task the envelope hashed\n');
    writeFileSync(manifest, 'schema_version: context_manifest.v0\n');
    const before = headOf(world.gitdir);
    const plain = cooBounded(['append', '--ledger', world.gitdir, '--key', coo, file, prompt, manifest]);
    expect(plain.status).toBe(3);
    expect(plain.stderr.trimEnd().split('\n')).toEqual([expect.stringMatching(/^coo: ARTIFACT_[A-Z_]+: rejected: .*\(1 more finding\(s\)\)$/)]);
    const json = cooBounded(['append', '--ledger', world.gitdir, '--key', coo, file, prompt, manifest, '--json']);
    expect(json.status).toBe(3);
    expect((JSON.parse(json.stdout) as { error: Findings }).error.findings.map((finding) => finding.code).sort()).toEqual(['ARTIFACT_HASH_MISMATCH', 'ARTIFACT_UNREFERENCED']);
    expect(json.stderr.trimEnd().split('\n')).toHaveLength(1);
    expect(headOf(world.gitdir)).toBe(before);
  });

  it('reports a refused envelope once: its task is not a second finding', async () => {
    const world = await fresh();
    const coo = writeKey(world.dir, 'coo', world.actors.coo);
    const file = join(world.dir, 'envelope.yaml');
    const prompt = join(world.dir, 'prompt.md');
    writeFileSync(file, fixtureEnvelope('msg_01M8NQFJ01J7CG66HWNDDJ8482', 'one-finding').replace('principal: coo.hermes', 'principal: ceo'));
    writeFileSync(prompt, FIXTURE_TASK);
    const json = cooBounded(['append', '--ledger', world.gitdir, '--key', coo, file, prompt, '--json']);
    expect(json.status).toBe(3);
    expect((JSON.parse(json.stdout) as { error: Findings }).error.findings.map((finding) => finding.code)).toEqual(['NOT_ACTIVE_COO']);
  });
});

describe('coo verify on a damaged ledger', () => {
  it('names the last valid commit and what to do, and doing it leaves a ledger that verifies', async () => {
    const world = await fresh();
    await world.consult();
    const lastValid = headOf(world.gitdir);
    // Two commits behind the hook's back: one no key of the ledger signed, and one on top of it.
    const { malformed, last } = addMalformedTree(world.gitdir, 0, 1);
    expect(git(['--git-dir', world.gitdir, 'rev-parse', `${malformed}^`]).trim()).toBe(lastValid);
    const result = cooBounded(['verify', '--ledger', world.gitdir, '--no-checkpoint']);
    expect(result.status).toBe(3);
    const advice = result.stdout.trimEnd().split('\n').at(-1)!;
    expect(advice).toBe(
      `the last valid commit is ${lastValid} (Ledger-Seq 2); the 2 commit(s) after it are not the ledger's, and no coo writer builds on them. To repair: keep them for review (git --git-dir ${world.gitdir} branch damaged ${last}), move main back (git --git-dir ${world.gitdir} update-ref refs/heads/main ${lastValid} ${last}), then run coo verify again`,
    );
    expect(JSON.parse(cooBounded(['verify', '--ledger', world.gitdir, '--no-checkpoint', '--json']).stdout)).toMatchObject({ ok: false, last_valid: { commit: lastValid, seq: 2 } });
    for (const command of [...advice.matchAll(/\((git --git-dir [^)]+)\)/g)].map((match) => match[1]!)) {
      git(command.split(' ').slice(1));
    }
    expect(cooBounded(['verify', '--ledger', world.gitdir, '--no-checkpoint']).status).toBe(0);
    expect(git(['--git-dir', world.gitdir, 'rev-parse', 'damaged']).trim()).toBe(last);
  });
});
