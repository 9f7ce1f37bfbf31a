import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { keyStatus } from '../../src/authority/keys.js';
import { Ledger } from '../../src/ledger/ledger.js';
import { coo, json } from '../helpers/cli.js';
import { git, tempDir } from '../helpers/tmp.js';

/**
 * A ledger the previous release wrote keeps verifying under the rules of one source of truth per
 * key: its CEO rotation was the root alone (the registry's ceo kept the old key in its next
 * version), and its COO key was rotated with the old one revoked. The fixture is a git bundle of
 * that ledger (test/fixtures/legacy-ledgers/rotations.bundle), made with `coo` before this rule.
 */
const FIXTURES = join(import.meta.dirname, '..', 'fixtures', 'legacy-ledgers');
const dir = tempDir('coo-legacy-ledger-');
const gitdir = join(dir, 'ledger.git');
const OLD_CEO = 'SHA256:R5lupiShWQhwOfDDg0BowfaDRjS2ivC7akoHWti1rdo';
const NEW_CEO = 'SHA256:Djq2twE5gRS1bdbylbLgybkWc5zQphvkY+2a9c6F2aQ';
const OLD_COO = 'SHA256:BE0yVokdkdF2Ks60oLsUK7838SLgAW5RiboWTckguxU';

beforeAll(() => {
  git(['clone', '-q', '--bare', join(FIXTURES, 'rotations.bundle'), gitdir]);
  git(['--git-dir', gitdir, 'update-ref', 'refs/heads/main', '631d3bf862ad165692ee8c320d1cbed9e9207de4']);
});

describe('a ledger written before one source of truth per key', () => {
  it('verifies in full from the CEO key it started with', () => {
    const result = coo(['verify', '--ledger', gitdir, '--no-checkpoint', '--full', '--json', '--trust-root', join(FIXTURES, 'rotations-ceo1.pub')]);
    expect(result.status).toBe(0);
    expect(json<{ ok: boolean; seq: number }>(result)).toMatchObject({ ok: true, seq: 8 });
  });

  it('retires the old CEO key at the root rotation although its next registry still lists it for ceo', async () => {
    expect(git(['--git-dir', gitdir, 'show', 'main:trust/registry/000002.yaml'])).toContain(OLD_CEO);
    const ledger = Ledger.open(gitdir);
    try {
      const state = await ledger.state();
      expect(keyStatus(state, OLD_CEO)).toMatchObject({ status: 'retired', seq: 4 });
      expect(keyStatus(state, NEW_CEO)).toMatchObject({ status: 'active', rootAuthority: true });
      expect(keyStatus(state, OLD_COO)).toMatchObject({ status: 'revoked', revocation: { seq: 7, reason: 'laptop stolen' } });
    } finally {
      ledger.close();
    }
    const printed = coo(['allowed-signers', '--ledger', gitdir]).stdout;
    expect(printed).toMatch(new RegExp(`^# ${OLD_CEO.replace(/\+/g, '\\+')} of ceo: rotated out by trust/root/000002\\.yaml at Ledger-Seq 4 `, 'm'));
  });
});
