import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { L_PLUS } from '../helpers/malleate.js';
import { FIXTURE_TASK, fixtureEnvelope } from '../helpers/stock.js';
import { coo, json } from '../helpers/cli.js';
import { git, gitEnv, run, tempDir } from '../helpers/tmp.js';

const dir = tempDir();
const ledger = join(dir, 'ledger.git');
const keys = join(dir, 'keys');
const allowed = join(dir, 'allowed_signers');

const envelope = fixtureEnvelope;

beforeAll(() => {
  for (const actor of ['ceo', 'coo.hermes', 'ea.codex']) expect(coo(['keygen', '--actor', actor, '--out', keys]).status).toBe(0);
  expect(coo(['init', '--ledger', ledger, '--ceo-key', join(keys, 'ceo.key'), '--actor', `coo.hermes=${join(keys, 'coo.hermes.pub')}`, '--actor', `ea.codex=${join(keys, 'ea.codex.pub')}`]).status).toBe(0);
  writeFileSync(join(dir, 'e1.yaml'), envelope('msg_01M8NQFJ01J7CG66HWNDDJ8485', 'k1'));
  writeFileSync(join(dir, 'prompt.md'), FIXTURE_TASK);
  expect(coo(['append', '--ledger', ledger, '--key', join(keys, 'coo.hermes.key'), join(dir, 'e1.yaml'), join(dir, 'prompt.md')]).status).toBe(0);
  const printed = coo(['allowed-signers', '--ledger', ledger]);
  expect(printed.status).toBe(0);
  writeFileSync(allowed, printed.stdout);
});

const gitVerify = (oid: string) => run('git', ['--git-dir', ledger, '-c', 'gpg.format=ssh', '-c', `gpg.ssh.allowedSignersFile=${allowed}`, 'verify-commit', oid], { env: gitEnv() });

describe('auditing with stock git and ssh-keygen', () => {
  it('git verify-commit and git log --show-signature see Good signatures on every commit', () => {
    const log = run('git', ['--git-dir', ledger, '-c', 'gpg.format=ssh', '-c', `gpg.ssh.allowedSignersFile=${allowed}`, 'log', '--show-signature', '--format=%H %G? %GS'], { env: gitEnv() });
    expect(log.status).toBe(0);
    expect(log.stdout.match(/Good "git" signature for (\S+)/g)).toEqual(['Good "git" signature for coo.hermes', 'Good "git" signature for ceo']);
    for (const oid of git(['--git-dir', ledger, 'rev-list', 'main']).trim().split('\n')) expect(gitVerify(oid).status).toBe(0);
  });

  it('ssh-keygen -Y verify accepts an entry and its .sig checked out of the ledger', () => {
    const path = 'messages/2026-11/30/07/msg_01M8NQFJ01J7CG66HWNDDJ8485/envelope.yaml';
    const entry = git(['--git-dir', ledger, 'show', `main:${path}`]);
    writeFileSync(join(dir, 'entry.sig'), git(['--git-dir', ledger, 'show', `main:${path}.sig`]));
    const verified = run('ssh-keygen', ['-Y', 'verify', '-f', allowed, '-I', 'coo.hermes', '-n', 'coo-commons.entry.v0', '-s', join(dir, 'entry.sig')], { input: entry });
    expect(verified.status).toBe(0);
    expect(verified.stdout).toContain('Good "coo-commons.entry.v0" signature for coo.hermes');
  });
});

describe('malleations stock git accepts and coo verify refuses', () => {
  const head = (): string => git(['--git-dir', ledger, 'rev-parse', 'main']).trim();
  const rawHead = (): string => git(['--git-dir', ledger, 'cat-file', 'commit', 'main']);

  /** Writes a variant of the head commit (same tree and parent), points main at it, and restores main after. */
  function withVariant(variant: string, check: (oid: string) => void): void {
    const original = head();
    const oid = execFileSync('git', ['--git-dir', ledger, 'hash-object', '-w', '-t', 'commit', '--literally', '--stdin'], { input: variant, encoding: 'utf8' }).trim();
    expect(oid).not.toBe(original);
    git(['--git-dir', ledger, 'update-ref', 'refs/heads/main', oid]);
    try {
      check(oid);
    } finally {
      git(['--git-dir', ledger, 'update-ref', 'refs/heads/main', original]);
    }
  }

  const cases: Array<[string, (raw: string) => string, string]> = [
    ['an extra gpgsig-sha256 header', (raw) => raw.replace('gpgsig ', 'gpgsig-sha256 junk\ngpgsig '), 'COMMIT_MALFORMED'],
    ['a duplicated gpgsig header', (raw) => raw.replace(/(gpgsig [\s\S]*?-----END SSH SIGNATURE-----\n)/, '$1$1'), 'COMMIT_MALFORMED'],
    ['a signature rewritten as S+L', L_PLUS, 'SIG_INVALID'],
  ];
  for (const [name, mutate, code] of cases) {
    it(`finds ${name} (${code}) that git verify-commit calls Good`, () => {
      withVariant(mutate(rawHead()), (oid) => {
        expect(gitVerify(oid).status).toBe(0);
        const result = coo(['verify', '--ledger', ledger, '--json']);
        expect(result.status).toBe(3);
        const report = json<{ findings: Array<{ code: string; commit: string }> }>(result);
        expect(report.findings.map((finding) => finding.code)).toContain(code);
        expect(report.findings.every((finding) => finding.commit === oid)).toBe(true);
      });
    });
  }

  it('verifies clean again once main is restored', () => {
    expect(coo(['verify', '--ledger', ledger]).status).toBe(0);
  });
});

describe('key rotation is decided by the chain, never by timestamps', () => {
  it('refuses a back-dated commit from a retired COO key that git accepts with valid-before', () => {
    const registry = git(['--git-dir', ledger, 'show', 'main:trust/registry/000001.yaml']).replace(/^version: 1$/m, 'version: 2');
    writeFileSync(join(dir, 'registry2.yaml'), registry);
    expect(coo(['keygen', '--actor', 'coo.hermes', '--out', join(dir, 'new')]).status).toBe(0);
    const rotated = coo(['trust', '--ledger', ledger, '--ceo-key', join(keys, 'ceo.key'), '--registry', join(dir, 'registry2.yaml'), '--actor', `coo.hermes=${join(dir, 'new', 'coo.hermes.pub')}`]);
    expect(rotated.stderr).toBe('');
    expect(rotated.status).toBe(0);

    const work = join(dir, 'work');
    git(['clone', '-q', ledger, work]);
    const folder = join(work, 'messages/2019-01/01/00/msg_01M8NQFJ01J7CG66HWNDDJ8499');
    mkdirSync(folder, { recursive: true });
    writeFileSync(join(folder, 'envelope.yaml'), envelope('msg_01M8NQFJ01J7CG66HWNDDJ8499', 'k-backdated').replace(/2026-11-30T07:00:00Z/, '2019-01-01T00:00:00Z').replace(/2026-11-30T2/g, '2019-01-01T0'));
    expect(run('ssh-keygen', ['-Y', 'sign', '-n', 'coo-commons.entry.v0', '-f', join(keys, 'coo.hermes.key'), join(folder, 'envelope.yaml')]).status).toBe(0);
    const env = { ...gitEnv(), GIT_COMMITTER_DATE: '2019-01-01T00:00:00Z', GIT_AUTHOR_DATE: '2019-01-01T00:00:00Z' };
    git(['add', '-A'], { cwd: work });
    git(['-c', 'gpg.format=ssh', '-c', `user.signingkey=${join(keys, 'coo.hermes.key')}`, 'commit', '-q', '-S', '-m', 'back-dated', '-m', 'Ledger-Seq: 4'], { cwd: work, env });
    const pushed = run('git', ['push', 'origin', 'main'], { cwd: work, env: gitEnv() });
    expect(pushed.status).not.toBe(0);
    expect(pushed.stderr).toContain('SIGNER_RETIRED');

    // Bypass the hook (as anyone with file access could), then audit.
    git(['--git-dir', ledger, 'fetch', '-q', work, 'main:refs/heads/main']);
    const oldKey = readFileSync(join(keys, 'coo.hermes.pub'), 'utf8').split(' ').slice(0, 2).join(' ');
    const retiredAllowed = join(dir, 'allowed_retired');
    writeFileSync(retiredAllowed, `coo.hermes namespaces="git",valid-before="20200101" ${oldKey}\n`);
    const stock = run('git', ['--git-dir', ledger, '-c', 'gpg.format=ssh', '-c', `gpg.ssh.allowedSignersFile=${retiredAllowed}`, 'verify-commit', 'main'], { env: gitEnv() });
    expect(stock.status).toBe(0);
    const audit = coo(['verify', '--ledger', ledger, '--json']);
    expect(audit.status).toBe(3);
    expect(json<{ findings: Array<{ code: string }> }>(audit).findings.map((finding) => finding.code)).toContain('SIGNER_RETIRED');
  });
});
