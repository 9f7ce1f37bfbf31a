import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { formatPrivateKey, formatPublicKeyLine } from '../../src/crypto/keys.js';
import { coo, json } from '../helpers/cli.js';
import { makeLedger } from '../helpers/ledger.js';
import { git, tempDir } from '../helpers/tmp.js';

const dir = tempDir('coo-forge-lay-');
const WORKFLOW = '.github/workflows/coo-verify.yml';
let cases = 0;

/** A ledger made by `coo init`'s library call, and its CEO and COO key files. */
async function ledgerWithKeys(): Promise<{ gitdir: string; ceoKey: string; cooKey: string; ceoPub: string; ceoKeyId: string }> {
  cases += 1;
  const caseDir = join(dir, `case-${cases}`);
  const { gitdir, actors, ledger } = await makeLedger(caseDir);
  ledger.close();
  const ceoKey = join(caseDir, 'ceo.key');
  const cooKey = join(caseDir, 'coo.key');
  const ceoPub = join(caseDir, 'ceo.pub');
  writeFileSync(ceoKey, formatPrivateKey(actors.ceo), { mode: 0o600 });
  writeFileSync(cooKey, formatPrivateKey(actors.coo), { mode: 0o600 });
  writeFileSync(ceoPub, `${formatPublicKeyLine(actors.ceo.publicKey)}\n`);
  return { gitdir, ceoKey, cooKey, ceoPub, ceoKeyId: actors.ceo.publicKey.keyId };
}

const head = (gitdir: string): string => git(['--git-dir', gitdir, 'rev-parse', 'main']).trim();

describe('coo forge github', () => {
  it('lays the check signed by the CEO, pinned to this coo and the CEO key by default, and writes nothing when it is laid again', async () => {
    const { gitdir, ceoKey, ceoKeyId } = await ledgerWithKeys();
    const first = coo(['forge', 'github', '--ledger', gitdir, '--ceo-key', ceoKey, '--json']);
    expect(first.status, first.stderr).toBe(0);
    const { version } = JSON.parse(readFileSync(join(import.meta.dirname, '..', '..', 'package.json'), 'utf8')) as { version: string };
    expect(json(first)).toMatchObject({ path: WORKFLOW, changed: true, seq: 2, package: `coo-commons@${version}`, trust_root: ceoKeyId });
    const laid = head(gitdir);
    expect(git(['--git-dir', gitdir, 'show', '--format=', '--name-status', laid]).trim().split('\n')).toEqual([`A\t${WORKFLOW}`, `A\t${WORKFLOW}.sig`]);

    const again = coo(['forge', 'github', '--ledger', gitdir, '--ceo-key', ceoKey]);

    expect(again.status, again.stderr).toBe(0);
    expect(again.stdout).toBe(`${WORKFLOW} is already this version (head ${laid}, Ledger-Seq 2); nothing written\n`);
    expect(head(gitdir)).toBe(laid);
  });

  it('replaces the check when a pin changes, as one commit that changes the file and its signature, which coo verify and stock git accept', async () => {
    const { gitdir, ceoKey, ceoPub } = await ledgerWithKeys();
    expect(coo(['forge', 'github', '--ledger', gitdir, '--ceo-key', ceoKey]).status).toBe(0);

    const replaced = coo(['forge', 'github', '--ledger', gitdir, '--ceo-key', ceoKey, '--package', 'coo-commons@9.9.9', '--json']);

    expect(replaced.status, replaced.stderr).toBe(0);
    expect(json(replaced)).toMatchObject({ changed: true, seq: 3, package: 'coo-commons@9.9.9' });
    expect(git(['--git-dir', gitdir, 'show', '--format=', '--name-status', 'main']).trim().split('\n')).toEqual([`M\t${WORKFLOW}`, `M\t${WORKFLOW}.sig`]);
    expect(git(['--git-dir', gitdir, 'show', `main:${WORKFLOW}`])).toContain('COO_PACKAGE: "coo-commons@9.9.9"');
    const verified = coo(['verify', '--ledger', gitdir, '--trust-root', ceoPub, '--no-checkpoint']);
    expect(verified.status, verified.stdout).toBe(0);
    expect(verified.stdout).toMatch(/^ok: 3 commits from genesis/);
    // Stock tools check this version's signature as they check any entry's: by the CEO, in the entry namespace.
    const signers = join(dir, `signers-${cases}`);
    writeFileSync(signers, coo(['allowed-signers', '--ledger', gitdir]).stdout);
    const sig = join(dir, `workflow-${cases}.yml.sig`);
    writeFileSync(sig, git(['--git-dir', gitdir, 'show', `main:${WORKFLOW}.sig`]));
    const checked = execFileSync('ssh-keygen', ['-Y', 'verify', '-f', signers, '-I', 'ceo', '-n', 'coo-commons.entry.v0', '-s', sig], { input: git(['--git-dir', gitdir, 'show', `main:${WORKFLOW}`]), encoding: 'utf8' });
    expect(checked).toMatch(/^Good "coo-commons.entry.v0" signature for ceo /);
  });

  it('refuses a key that is not the trust root, and a trust root pin that genesis does not name, writing nothing', async () => {
    const { gitdir, ceoKey, cooKey } = await ledgerWithKeys();
    const before = head(gitdir);

    const byCoo = coo(['forge', 'github', '--ledger', gitdir, '--ceo-key', cooKey]);
    const otherRoot = coo(['forge', 'github', '--ledger', gitdir, '--ceo-key', ceoKey, '--trust-root', 'SHA256:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA']);
    const range = coo(['forge', 'github', '--ledger', gitdir, '--ceo-key', ceoKey, '--package', 'coo-commons@^0.1.0']);
    const otherForge = coo(['forge', 'gitlab', '--ledger', gitdir, '--ceo-key', ceoKey]);

    expect([byCoo.status, byCoo.stderr]).toEqual([3, expect.stringMatching(/^coo: TRUST_AUTHORITY: key SHA256:\S+ is not a trust-root authority in force/)]);
    expect([otherRoot.status, otherRoot.stderr]).toEqual([3, expect.stringMatching(/^coo: TRUST_ROOT_MISMATCH: the ledger's first trust root does not name SHA256:A{43}, so a check pinned to it would fail on every push/)]);
    expect([range.status, range.stderr]).toEqual([2, expect.stringMatching(/^coo: USAGE: package "coo-commons@\^0.1.0" does not pin one version/)]);
    expect([otherForge.status, otherForge.stderr]).toEqual([2, 'coo: USAGE: forge takes github, got "gitlab"\n']);
    expect(head(gitdir)).toBe(before);
  });
});

describe('coo verify --trust-root', () => {
  it('takes the SHA256 fingerprint as coo clone does, and finds a ledger whose first trust root does not name it', async () => {
    const { gitdir, ceoKeyId } = await ledgerWithKeys();
    expect(coo(['verify', '--ledger', gitdir, '--trust-root', ceoKeyId, '--no-checkpoint']).status).toBe(0);
    const other = coo(['verify', '--ledger', gitdir, '--trust-root', 'SHA256:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA', '--no-checkpoint', '--json']);
    expect(other.status).toBe(3);
    expect(json<{ findings: Array<{ code: string }> }>(other).findings.map((finding) => finding.code)).toEqual(['TRUST_ROOT_MISMATCH']);
  });
});
