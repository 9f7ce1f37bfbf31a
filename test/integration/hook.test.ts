import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { loadPrivateKey } from '../../src/cli/common.js';
import { checkpointPath, loadCheckpoint } from '../../src/ledger/checkpoint.js';
import { Ledger } from '../../src/ledger/ledger.js';
import { COO, coo } from '../helpers/cli.js';
import { fixtureEnvelope, fixtureFiles, push, stockCommit } from '../helpers/stock.js';
import { git, gitEnv, tempDir } from '../helpers/tmp.js';

const dir = tempDir();
const ledger = join(dir, 'ledger.git');
const keys = join(dir, 'keys');
const key = (actor: string): string => join(keys, `${actor}.key`);
let clones = 0;

function freshClone(): string {
  clones += 1;
  const work = join(dir, `work${clones}`);
  git(['clone', '-q', ledger, work]);
  return work;
}

const head = (): string => git(['--git-dir', ledger, 'rev-parse', 'main']).trim();
const seq = (): number => Number(/Ledger-Seq: (\d+)/.exec(git(['--git-dir', ledger, 'log', '-1', '--format=%B', 'main']))![1]);
/** Crockford's base32, the alphabet of a ULID. */
const ULID_CHARS = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
const folder = (id: string): string => `messages/2026-11/30/07/${id}/envelope.yaml`;

beforeAll(() => {
  for (const actor of ['ceo', 'coo.hermes', 'ea.codex']) expect(coo(['keygen', '--actor', actor, '--out', keys]).status).toBe(0);
  expect(coo(['init', '--ledger', ledger, '--ceo-key', key('ceo'), '--actor', `coo.hermes=${join(keys, 'coo.hermes.pub')}`, '--actor', `ea.codex=${join(keys, 'ea.codex.pub')}`]).status).toBe(0);
  expect(coo(['keygen', '--actor', 'intruder', '--out', keys]).status).toBe(0);
});

describe('the pre-receive hook on pushes made with stock git', () => {
  it('lets a valid COO-signed envelope land', () => {
    const work = freshClone();
    stockCommit(work, fixtureFiles('msg_01M8NQFJ01J7CG66HWNDDJ8480', 'h0'), { key: key('coo.hermes'), seq: seq() + 1 });
    const result = push(work, 'main');
    expect(result.stderr).toContain('push accepted');
    expect(result.status).toBe(0);
    expect(coo(['show', '--ledger', ledger, 'msg_01M8NQFJ01J7CG66HWNDDJ8480']).stdout).toContain('ea_dispatch coo.hermes -> ea.codex: queued');
  });

  const refused: Array<[string, (work: string) => void, string]> = [
    ['an envelope and commit signed by an unknown key', (work) => stockCommit(work, { [folder('msg_01M8NQFJ01J7CG66HWNDDJ8481')]: fixtureEnvelope('msg_01M8NQFJ01J7CG66HWNDDJ8481', 'h1') }, { key: key('intruder'), seq: seq() + 1 }), 'SIGNER_UNKNOWN'],
    ['an unsigned commit', (work) => stockCommit(work, { [folder('msg_01M8NQFJ01J7CG66HWNDDJ8482')]: fixtureEnvelope('msg_01M8NQFJ01J7CG66HWNDDJ8482', 'h2') }, { key: null, entryKey: key('coo.hermes'), seq: seq() + 1 }), 'COMMIT_UNSIGNED'],
    ['an envelope without its .sig', (work) => stockCommit(work, { [folder('msg_01M8NQFJ01J7CG66HWNDDJ8483')]: fixtureEnvelope('msg_01M8NQFJ01J7CG66HWNDDJ8483', 'h3') }, { key: key('coo.hermes'), seq: seq() + 1, sign: false }), 'SIG_MISSING'],
    ['a dispatch from the EA claiming to be the COO', (work) => stockCommit(work, { [folder('msg_01M8NQFJ01J7CG66HWNDDJ8484')]: fixtureEnvelope('msg_01M8NQFJ01J7CG66HWNDDJ8484', 'h4') }, { key: key('ea.codex'), seq: seq() + 1 }), 'SIGNER_WRONG_ACTOR'],
    ['a skipped sequence number', (work) => stockCommit(work, { [folder('msg_01M8NQFJ01J7CG66HWNDDJ8486')]: fixtureEnvelope('msg_01M8NQFJ01J7CG66HWNDDJ8486', 'h6') }, { key: key('coo.hermes'), seq: seq() + 2 }), 'COMMIT_SEQ'],
    ['a change to a written file', (work) => stockCommit(work, { 'trust/policy/000001.yaml': git(['--git-dir', ledger, 'show', 'main:trust/policy/000001.yaml']).replace('daily_cost_cap_usd: 50', 'daily_cost_cap_usd: 5000') }, { key: key('coo.hermes'), seq: seq() + 1, sign: false }), 'WRITE_ONCE'],
    ['a file with no place in the layout', (work) => stockCommit(work, { 'notes.txt': 'hello\n' }, { key: key('coo.hermes'), seq: seq() + 1 }), 'PATH_INVALID'],
  ];
  for (const [name, prepare, code] of refused) {
    it(`declines ${name} (${code}) and the ledger stays where it was`, () => {
      const before = head();
      const work = freshClone();
      prepare(work);
      const result = push(work, 'main');
      expect(result.status).not.toBe(0);
      expect(result.stderr).toContain('pre-receive hook declined');
      expect(result.stderr).toContain(code);
      expect(head()).toBe(before);
    });
  }

  it('declines a force-push that rewrites history', () => {
    const before = head();
    const work = freshClone();
    git(['reset', '-q', '--hard', 'HEAD~1'], { cwd: work });
    stockCommit(work, fixtureFiles('msg_01M8NQFJ01J7CG66HWNDDJ8487', 'h7'), { key: key('coo.hermes'), seq: seq() });
    const result = push(work, '--force', 'main');
    expect(result.status).not.toBe(0);
    expect(head()).toBe(before);
  });

  it('declines other branches and the deletion of main', () => {
    const work = freshClone();
    const other = push(work, 'main:refs/heads/side');
    expect(other.status).not.toBe(0);
    expect(other.stderr).toContain('REF_FORBIDDEN');
    const deletion = push(work, ':main');
    expect(deletion.status).not.toBe(0);
  });

  it('keeps the state cache of the head it checked a push against, so the next push does not replay the history from the start', async () => {
    const written = Ledger.open(ledger, { checkpoints: false });
    const signer = loadPrivateKey(key('coo.hermes'));
    try {
      for (let i = 0; i < 40; i += 1) {
        const id = `msg_01M8NQFJ01J7CG66HWNDDJ90${ULID_CHARS[Math.floor(i / 32)]}${ULID_CHARS[i % 32]}`;
        const files = Object.entries(fixtureFiles(id, `cache-${i}`)).map(([path, text]) => ({ path, bytes: Buffer.from(text) }));
        await written.append({ files, key: signer, now: new Date(), summary: `dispatch ${i}` });
      }
    } finally {
      written.close();
    }
    rmSync(checkpointPath(ledger), { force: true });
    const before = head();
    const work = freshClone();
    stockCommit(work, fixtureFiles('msg_01M8NQFJ01J7CG66HWNDDJ8488', 'h8'), { key: key('coo.hermes'), seq: seq() + 1 });
    expect(push(work, 'main').status).toBe(0);
    expect(loadCheckpoint(ledger)?.state.head).toBe(before);
  });

  it('leaves a ledger that coo verify finds clean', () => {
    expect(coo(['verify', '--ledger', ledger]).status).toBe(0);
  });
});

describe('the pre-receive hook of a ledger whose coo moved', () => {
  /** A ledger made by a coo at a path that no longer exists, as when its checkout was moved or deleted. */
  function movedLedger(name: string): string {
    const gitdir = join(dir, name);
    expect(coo(['init', '--ledger', gitdir, '--ceo-key', key('ceo'), '--actor', `coo.hermes=${join(keys, 'coo.hermes.pub')}`, '--actor', `ea.codex=${join(keys, 'ea.codex.pub')}`]).status).toBe(0);
    const hook = join(gitdir, 'hooks', 'pre-receive');
    const text = readFileSync(hook, 'utf8');
    expect(text).toContain(COO);
    writeFileSync(hook, text.split(COO).join(join(dir, 'moved-checkout', 'dist', 'cli', 'main.js')));
    return gitdir;
  }

  /** Pushes one valid COO-signed envelope to `gitdir` with `PATH` as the pusher's. */
  function pushEnvelope(gitdir: string, id: string, PATH: string): { status: number | null; stderr: string } {
    const work = join(dir, `work-${id}`);
    git(['clone', '-q', gitdir, work]);
    const seqOf = Number(/Ledger-Seq: (\d+)/.exec(git(['--git-dir', gitdir, 'log', '-1', '--format=%B', 'main']))![1]);
    stockCommit(work, fixtureFiles(id, id.slice(-2)), { key: key('coo.hermes'), seq: seqOf + 1 });
    const result = spawnSync('git', ['push', 'origin', 'main'], { cwd: work, env: { ...gitEnv(), PATH }, encoding: 'utf8' });
    return { status: result.status, stderr: result.stderr };
  }

  it('checks pushes with the coo on PATH', () => {
    const gitdir = movedLedger('moved-path.git');
    const bin = join(dir, 'bin-with-coo');
    mkdirSync(bin);
    writeFileSync(join(bin, 'coo'), `#!/bin/sh\nexec "${process.execPath}" "${COO}" "$@"\n`, { mode: 0o755 });
    const result = pushEnvelope(gitdir, 'msg_01M8NQFJ01J7CG66HWNDDJ84A0', `${bin}:${process.env['PATH'] ?? ''}`);
    expect(result.stderr).toContain('coo: push accepted: every commit passes the ledger validator');
    expect(result.status).toBe(0);
  });

  it('declines every push, saying what to do, when no coo can be found', () => {
    const gitdir = movedLedger('moved-none.git');
    const before = git(['--git-dir', gitdir, 'rev-parse', 'main']).trim();
    // The pusher's PATH holds git and nothing else: no coo.
    const bin = join(dir, 'bin-git-only');
    mkdirSync(bin);
    symlinkSync(execFileSync('sh', ['-c', 'command -v git'], { encoding: 'utf8' }).trim(), join(bin, 'git'));
    const result = pushEnvelope(gitdir, 'msg_01M8NQFJ01J7CG66HWNDDJ84A1', bin);
    expect(result.status).not.toBe(0);
    expect(result.stderr).toMatch(/remote: coo: push declined: this ledger's pre-receive hook cannot find coo \(it was made with \S+moved-checkout\/dist\/cli\/main\.js, which is gone, and coo is not on PATH\); put coo on PATH \(npm install -g coo-commons\)/);
    expect(git(['--git-dir', gitdir, 'rev-parse', 'main']).trim()).toBe(before);
  });
});

describe("the hook's answers to a COO writing by hand", () => {
  it('explains an id outside the alphabet, names the actors of two signers, and reports a refused envelope once, without its task as a second finding', () => {
    const before = head();
    const badId = 'msg_01M8NQFJ01J7CG66HWNDDJ84IL';
    let work = freshClone();
    stockCommit(work, { [folder(badId)]: fixtureEnvelope(badId, 'bad-id') }, { key: key('coo.hermes'), seq: seq() + 1 });
    let result = push(work, 'main');
    expect(result.status).not.toBe(0);
    expect(result.stderr).toContain(`PATH_INVALID [`);
    expect(result.stderr).toContain(`"${badId}" is not a message id: msg_ and then 26 characters of Crockford's base32 (0-9 and A-Z without I, L, O and U)`);

    work = freshClone();
    stockCommit(work, fixtureFiles('msg_01M8NQFJ01J7CG66HWNDDJ84B0', 'two-signers'), { key: key('ceo'), entryKey: key('coo.hermes'), seq: seq() + 1 });
    result = push(work, 'main');
    expect(result.status).not.toBe(0);
    expect(result.stderr).toMatch(/SIGNER_MISMATCH \[[^\]]+\]: \S+envelope\.yaml: signed by SHA256:\S+ \(coo\.hermes\) but the commit by SHA256:\S+ \(ceo\): one signer per commit/);

    work = freshClone();
    stockCommit(work, fixtureFiles('msg_01M8NQFJ01J7CG66HWNDDJ84B1', 'wrong-actor'), { key: key('ea.codex'), seq: seq() + 1 });
    result = push(work, 'main');
    expect(result.status).not.toBe(0);
    const findings = result.stderr.split('\n').filter((line) => /^remote: {3}[A-Z_]+ /.test(line));
    expect(findings).toEqual([expect.stringMatching(/^remote: {3}SIGNER_WRONG_ACTOR \[/)]);
    expect(result.stderr).not.toContain('ARTIFACT_UNREFERENCED');
    expect(head()).toBe(before);
  });
});
