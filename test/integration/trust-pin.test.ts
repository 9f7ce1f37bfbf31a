import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { coo, json } from '../helpers/cli.js';
import { run, tempDir } from '../helpers/tmp.js';

/**
 * An auditor pinning a key is told what that key is: the CEO key the ledger started from and has
 * since rotated out or revoked anchors the history and is named as such; the current CEO key of a
 * rotated ledger, or a revoked one, is refused with the reason and the key to pin instead.
 */
const dir = tempDir('coo-trust-pin-');
const ledger = join(dir, 'ledger.git');
const keys = join(dir, 'keys');
const keyIdOf = (name: string): string => /(SHA256:\S+)/.exec(run('ssh-keygen', ['-l', '-f', join(keys, `${name}.pub`)]).stdout)![1]!;

function keygen(name: string): void {
  const out = join(keys, name);
  expect(coo(['keygen', '--actor', 'ceo', '--out', out]).status).toBe(0);
  writeFileSync(join(keys, `${name}.key`), readFileSync(join(out, 'ceo.key')), { mode: 0o600 });
  writeFileSync(join(keys, `${name}.pub`), readFileSync(join(out, 'ceo.pub')));
}

function rootFile(name: string): string {
  const file = join(dir, `root-${name}.yaml`);
  const line = readFileSync(join(keys, `${name}.pub`), 'utf8').trim().split(' ').slice(0, 2).join(' ');
  writeFileSync(file, `schema_version: trust_root.v0\nauthorities:\n  - actor: ceo\n    key_id: "${keyIdOf(name)}"\n    public_key: "${line}"\n`);
  return file;
}

beforeAll(() => {
  for (const name of ['ceo1', 'ceo2', 'ceo3']) keygen(name);
  expect(coo(['keygen', '--actor', 'coo.hermes', '--out', keys]).status).toBe(0);
  expect(coo(['init', '--ledger', ledger, '--ceo-key', join(keys, 'ceo1.key'), '--actor', `coo.hermes=${join(keys, 'coo.hermes.pub')}`]).status).toBe(0);
  // ceo1 -> ceo2 (a rotation), then ceo2 -> ceo3 with ceo2 revoked (a compromise).
  const rotated = coo(['trust', '--ledger', ledger, '--ceo-key', join(keys, 'ceo1.key'), '--root', rootFile('ceo2')]);
  expect(rotated.stderr).toBe('');
  const revoked = coo(['trust', '--ledger', ledger, '--ceo-key', join(keys, 'ceo2.key'), '--root', rootFile('ceo3'), '--revoke', `${keyIdOf('ceo2')}=laptop stolen`]);
  expect(revoked.stderr).toBe('');
});

describe('coo verify --trust-root and coo clone --trust-root with a key that is no longer the CEO', () => {
  it('accepts the first root key rotated out since, and says what it is now and which key the root names', () => {
    const result = coo(['verify', '--ledger', ledger, '--no-checkpoint', '--trust-root', join(keys, 'ceo1.pub')]);
    expect(result.status).toBe(0);
    expect(result.stderr).toContain(`note: the pinned key ${keyIdOf('ceo1')} is the ledger's first trust root, and the history verifies from it; it is now a key of ceo retired (rotated out) at Ledger-Seq 2`);
    expect(result.stderr).toContain(`the trust root in force names ${keyIdOf('ceo3')}`);
    const cloned = coo(['clone', ledger, join(dir, 'clone-ceo1'), '--trust-root', join(keys, 'ceo1.pub'), '--json']);
    expect(cloned.status).toBe(0);
    expect(json<{ trust_root_note: string }>(cloned).trust_root_note).toMatch(/retired \(rotated out\) at Ledger-Seq 2/);
  });

  it('refuses the current CEO key of the rotated ledger, explaining why it is not the first root and which key to pin', () => {
    const result = coo(['verify', '--ledger', ledger, '--no-checkpoint', '--json', '--trust-root', join(keys, 'ceo3.pub')]);
    expect(result.status).toBe(3);
    const finding = json<{ findings: Array<{ code: string; message: string }> }>(result).findings.find((item) => item.code === 'TRUST_ROOT_MISMATCH')!;
    expect(finding.message).toContain(`does not name the pinned key ${keyIdOf('ceo3')}, a trust-root key the chain reached after genesis, in force, a trust-root authority of ceo`);
    expect(finding.message).toContain(`pin the key the ledger started from, ${keyIdOf('ceo1')}`);
    const cloned = coo(['clone', ledger, join(dir, 'clone-ceo3'), '--trust-root', keyIdOf('ceo3')]);
    expect(cloned.status).toBe(3);
    expect(cloned.stderr).toMatch(/^coo: TRUST_ROOT_MISMATCH: .*a trust-root key the chain reached after genesis.*pin the key the ledger started from/);
  });

  it('refuses a revoked CEO key that was never the first root, naming its revocation', () => {
    const result = coo(['verify', '--ledger', ledger, '--no-checkpoint', '--json', '--trust-root', join(keys, 'ceo2.pub')]);
    expect(result.status).toBe(3);
    const finding = json<{ findings: Array<{ code: string; message: string }> }>(result).findings.find((item) => item.code === 'TRUST_ROOT_MISMATCH')!;
    expect(finding.message).toContain('revoked at Ledger-Seq 3 by trust/registry/');
    expect(finding.message).toContain('"laptop stolen"');
  });

  it('refuses the COO key as a trust root, saying whose key it is', () => {
    const result = coo(['verify', '--ledger', ledger, '--no-checkpoint', '--json', '--trust-root', join(keys, 'coo.hermes.pub')]);
    expect(result.status).toBe(3);
    expect(json<{ findings: Array<{ code: string; message: string }> }>(result).findings.map((item) => item.message).join('\n')).toContain('not a trust-root key but in force, a key of coo.hermes');
  });
});
