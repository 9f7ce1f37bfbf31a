import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { coo, json } from '../helpers/cli.js';
import { fixtureEnvelope } from '../helpers/stock.js';
import { git, gitEnv, run, tempDir } from '../helpers/tmp.js';

/**
 * Stock git and ssh-keygen judge signer lifetimes with the allowed-signers file coo prints: across a
 * rotation of the COO key (A -> B) and a revocation (B -> C, B revoked), git must show good only what
 * the chain allowed, up to the one difference left: git trusts the commit's own timestamp.
 */
const dir = tempDir();
const ledger = join(dir, 'ledger.git');
const keys = join(dir, 'keys');
const allowed = join(dir, 'allowed_signers');
const revocations = join(dir, 'revoked_keys');
const pub = (name: string): string => readFileSync(join(keys, `${name}.pub`), 'utf8').split(' ').slice(0, 2).join(' ');
const keyIdOf = (name: string): string => /(SHA256:\S+)/.exec(run('ssh-keygen', ['-l', '-f', join(keys, `${name}.pub`)]).stdout)![1]!;
const commitTime = (rev: string): number => Number(git(['--git-dir', ledger, 'log', '-1', '--format=%ct', rev]).trim());
const stamp = (seconds: number): string => new Date(seconds * 1000).toISOString().replace(/\.000Z$/, 'Z');
const commits: Record<string, string> = {};
let printed = '';

/** `%G?` of `rev` as stock git sees it with the printed file, and with the revocation list too. */
function gitStatus(rev: string, withRevocations = false): string {
  const config = ['-c', 'gpg.format=ssh', '-c', `gpg.ssh.allowedSignersFile=${allowed}`, ...(withRevocations ? ['-c', `gpg.ssh.revocationFile=${revocations}`] : [])];
  return git(['--git-dir', ledger, ...config, 'log', '-1', '--format=%G?', rev]).trim();
}

function verifyCommit(rev: string, withRevocations = false): number | null {
  const config = ['-c', 'gpg.format=ssh', '-c', `gpg.ssh.allowedSignersFile=${allowed}`, ...(withRevocations ? ['-c', `gpg.ssh.revocationFile=${revocations}`] : [])];
  return run('git', ['--git-dir', ledger, ...config, 'verify-commit', rev], { env: gitEnv() }).status;
}

/** A commit by `key` with committer date `date`, added behind the hook's back as anyone with file access could. */
function bypass(name: string, key: string, date: string, seq: number): string {
  const work = join(dir, `work-${name}`);
  git(['clone', '-q', ledger, work]);
  const id = `msg_01M8NQFJ01J7CG66HWNDDJ84${String(seq).padStart(2, '0')}`;
  const folder = join(work, `messages/2026-11/30/07/${id}`);
  mkdirSync(folder, { recursive: true });
  writeFileSync(join(folder, 'envelope.yaml'), fixtureEnvelope(id, `k-${name}`));
  expect(run('ssh-keygen', ['-Y', 'sign', '-n', 'coo-commons.entry.v0', '-f', join(keys, `${key}.key`), join(folder, 'envelope.yaml')]).status).toBe(0);
  git(['add', '-A'], { cwd: work });
  git(['-c', 'gpg.format=ssh', '-c', `user.signingkey=${join(keys, `${key}.key`)}`, 'commit', '-q', '-S', '-m', name, '-m', `Ledger-Seq: ${seq}`], { cwd: work, env: { ...gitEnv(), GIT_COMMITTER_DATE: date, GIT_AUTHOR_DATE: date } });
  git(['--git-dir', ledger, 'fetch', '-q', work, `main:refs/heads/${name}`]);
  return git(['--git-dir', ledger, 'rev-parse', name]).trim();
}

beforeAll(() => {
  for (const actor of ['ceo', 'coo.hermes']) expect(coo(['keygen', '--actor', actor, '--out', keys]).status).toBe(0);
  for (const next of ['b', 'c']) {
    expect(coo(['keygen', '--actor', 'coo.hermes', '--out', join(keys, next)]).status).toBe(0);
    writeFileSync(join(keys, `coo.hermes.${next}.key`), readFileSync(join(keys, next, 'coo.hermes.key')), { mode: 0o600 });
    writeFileSync(join(keys, `coo.hermes.${next}.pub`), readFileSync(join(keys, next, 'coo.hermes.pub')));
  }
  expect(coo(['init', '--ledger', ledger, '--ceo-key', join(keys, 'ceo.key'), '--actor', `coo.hermes=${join(keys, 'coo.hermes.pub')}`]).status).toBe(0);
  commits['genesis'] = git(['--git-dir', ledger, 'rev-parse', 'main']).trim();
  const ks = (state: string, key: string): void => {
    expect(coo(['kill-switch', state, '--reason', `by ${key}`, '--ledger', ledger, '--key', join(keys, `${key}.key`)]).stderr).toBe('');
  };
  ks('on', 'coo.hermes');
  commits['by A'] = git(['--git-dir', ledger, 'rev-parse', 'main']).trim();
  const registry = (version: number): string => {
    const file = join(dir, `registry${version}.yaml`);
    writeFileSync(file, git(['--git-dir', ledger, 'show', `main:trust/registry/${String(version - 1).padStart(6, '0')}.yaml`]).replace(/^version: \d+$/m, `version: ${version}`));
    return file;
  };
  // Rotation: A -> B.
  expect(coo(['trust', '--ledger', ledger, '--ceo-key', join(keys, 'ceo.key'), '--registry', registry(2), '--actor', `coo.hermes=${join(keys, 'coo.hermes.b.pub')}`]).status).toBe(0);
  commits['rotation'] = git(['--git-dir', ledger, 'rev-parse', 'main']).trim();
  ks('off', 'coo.hermes.b');
  commits['by B'] = git(['--git-dir', ledger, 'rev-parse', 'main']).trim();
  // Revocation: B -> C, B revoked.
  const revoked = coo(['trust', '--ledger', ledger, '--ceo-key', join(keys, 'ceo.key'), '--registry', registry(3), '--actor', `coo.hermes=${join(keys, 'coo.hermes.c.pub')}`, '--revoke', `${keyIdOf('coo.hermes.b')}=laptop stolen`]);
  expect(revoked.stderr).toBe('');
  commits['revocation'] = git(['--git-dir', ledger, 'rev-parse', 'main']).trim();
  ks('on', 'coo.hermes.c');
  commits['by C'] = git(['--git-dir', ledger, 'rev-parse', 'main']).trim();

  const day = 86_400;
  commits['A after rotation'] = bypass('a-after', 'coo.hermes', stamp(commitTime(commits['rotation']) + day), 9);
  commits['A back-dated'] = bypass('a-backdated', 'coo.hermes', stamp(commitTime(commits['rotation'])), 9);
  commits['B after revocation'] = bypass('b-after', 'coo.hermes.b', stamp(commitTime(commits['revocation']) + day), 9);
  commits['B back-dated'] = bypass('b-backdated', 'coo.hermes.b', stamp(commitTime(commits['revocation'])), 9);
  commits['C before its grant'] = bypass('c-early', 'coo.hermes.c', stamp(commitTime(commits['revocation']) - day), 9);
  commits['A before the ledger'] = bypass('a-before-ledger', 'coo.hermes', stamp(commitTime(commits['genesis']) - day), 9);

  const result = coo(['allowed-signers', '--ledger', ledger, '--revocations', revocations]);
  expect(result.stderr).toBe('');
  expect(result.status).toBe(0);
  printed = result.stdout;
  writeFileSync(allowed, printed);
});

describe('signer lifetimes in stock git', () => {
  it('prints each key with the lifetime the chain gave it, and a comment naming each retired key and why', () => {
    const seconds = (rev: string, extra = 0): string => `${new Date((commitTime(rev) + extra) * 1000).toISOString().replace(/[-:T]/g, '').slice(0, 14)}Z`;
    expect(printed).toContain(`coo.hermes namespaces="git,coo-commons.entry.v0",valid-after="${seconds(commits['genesis']!)}",valid-before="${seconds(commits['rotation']!, 1)}" ${pub('coo.hermes')}`);
    expect(printed).toContain(`coo.hermes namespaces="git,coo-commons.entry.v0",valid-after="${seconds(commits['rotation']!)}",valid-before="${seconds(commits['revocation']!, 1)}" ${pub('coo.hermes.b')}`);
    expect(printed).toContain(`coo.hermes namespaces="git,coo-commons.entry.v0",valid-after="${seconds(commits['revocation']!)}" ${pub('coo.hermes.c')}`);
    expect(printed).toContain(`ceo namespaces="git,coo-commons.entry.v0",valid-after="${seconds(commits['genesis']!)}" ${pub('ceo')}`);
    expect(printed).toMatch(new RegExp(`^# ${keyIdOf('coo.hermes').replace(/\+/g, '\\+')} of coo\\.hermes: rotated out by trust/registry/000002\\.yaml at Ledger-Seq \\d+ \\(commit ${commits['rotation']}\\)`, 'm'));
    expect(printed).toMatch(new RegExp(`^# ${keyIdOf('coo.hermes.b').replace(/\+/g, '\\+')} of coo\\.hermes: revoked \\("laptop stolen"\\) by trust/registry/000003\\.yaml`, 'm'));
  });

  it('shows good (G) for every commit the chain accepts, by every key in its lifetime', () => {
    const log = git(['--git-dir', ledger, '-c', 'gpg.format=ssh', '-c', `gpg.ssh.allowedSignersFile=${allowed}`, 'log', '--format=%G? %s', 'main']).trim().split('\n');
    expect(log.length).toBe(6);
    for (const line of log) expect(line).toMatch(/^G /);
    for (const name of ['by A', 'by B', 'by C', 'rotation', 'revocation']) expect(verifyCommit(commits[name]!), name).toBe(0);
    expect(coo(['verify', '--ledger', ledger, '--full']).status).toBe(0);
  });

  it('refuses a commit by a rotated key dated after the rotation, one by a key dated before its grant, and one by a genesis key dated before the ledger existed', () => {
    for (const name of ['A after rotation', 'B after revocation', 'C before its grant', 'A before the ledger']) {
      expect(gitStatus(commits[name]!), name).not.toBe('G');
      expect(verifyCommit(commits[name]!), name).not.toBe(0);
    }
  });

  it('writes the revoked key for gpg.ssh.revocationFile, and git then refuses every commit it signed, back-dated or not', () => {
    expect(readFileSync(revocations, 'utf8')).toBe(`${pub('coo.hermes.b')}\n`);
    for (const name of ['B back-dated', 'by B', 'B after revocation']) {
      expect(gitStatus(commits[name]!, true), name).not.toBe('G');
      expect(verifyCommit(commits[name]!, true), name).not.toBe(0);
    }
    for (const name of ['by A', 'by C', 'revocation']) expect(verifyCommit(commits[name]!, true), name).toBe(0);
  });

  it('leaves the one documented difference: git trusts a back-dated commit by a rotated key, coo refuses it by the chain', () => {
    const backdated = commits['A back-dated']!;
    expect(gitStatus(backdated)).toBe('G');
    const work = join(dir, 'audit.git');
    git(['clone', '-q', '--bare', ledger, work]);
    git(['--git-dir', work, 'update-ref', 'refs/heads/main', backdated]);
    const audit = coo(['verify', '--ledger', work, '--full', '--json']);
    expect(audit.status).toBe(3);
    expect(json<{ findings: Array<{ code: string }> }>(audit).findings.map((finding) => finding.code)).toContain('SIGNER_RETIRED');
  });

  it('refuses a revocation file it cannot write with a coded error, and prints nothing', () => {
    const result = coo(['allowed-signers', '--ledger', ledger, '--revocations', join(dir, 'missing', 'revoked_keys')]);
    expect(result.status).toBe(1);
    expect(result.stderr).toMatch(/^coo: IO_ERROR: cannot write /);
    expect(result.stdout).toBe('');
  });
});
