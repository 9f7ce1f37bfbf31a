import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Ajv2020 from 'ajv/dist/2020.js';
import { beforeAll, describe, expect, it } from 'vitest';
import { PREDICATE_TYPE, STATEMENT_TYPE } from '../../src/audit/attest.js';
import { coo, json } from '../helpers/cli.js';
import { statementOf, verifyDsse, type Dsse } from '../helpers/dsse.js';
import { tempDir } from '../helpers/tmp.js';

const REPO = join(import.meta.dirname, '..', '..');
const scratch = tempDir('coo-evidence-');
const demo = join(scratch, 'demo');
const ledger = join(demo, 'ledger.git');
let succeeded = '';
let failed = '';

beforeAll(() => {
  expect(coo(['demo', '--dir', demo]).status).toBe(0);
  const log = json<Array<{ summary: string }>>(coo(['log', '--ledger', ledger, '--json']));
  for (const entry of log) {
    const m = /^receipt (msg_\w+) attempt \d+: (\w+)/.exec(entry.summary);
    if (m?.[2] === 'succeeded') succeeded = m[1]!;
    if (m?.[2] === 'failed') failed = m[1]!;
  }
  expect(succeeded).not.toBe('');
  expect(failed).not.toBe('');
}, 120_000);

function bundleOf(messageId: string): Buffer {
  const out = join(scratch, `${messageId}.tar`);
  const cite = coo(['cite', messageId, '--ledger', ledger, '--bundle', out]);
  expect(cite.status).toBe(0);
  return readFileSync(out);
}

describe('coo cite --bundle and coo verify-bundle', () => {
  it('writes a bundle that verify-bundle accepts with no ledger, pinned to the CEO key, for a succeeded and a failed consult', () => {
    for (const id of [succeeded, failed]) {
      bundleOf(id);
      const result = coo(['verify-bundle', join(scratch, `${id}.tar`), '--trust-root', join(demo, 'keys', 'ceo.pub'), '--json']);
      expect(result.status).toBe(0);
      expect(json(result)).toMatchObject({ ok: true, messageId: id, pinned: true, signer: { actor: 'coo.hermes' } });
    }
  });

  it('refuses a bundle whose trust root is not the pinned key (exit 3, TRUST_ROOT_MISMATCH)', () => {
    const result = coo(['verify-bundle', join(scratch, `${succeeded}.tar`), '--trust-root', join(demo, 'keys', 'coo.hermes.pub')]);
    expect(result.status).toBe(3);
    expect(result.stderr).toMatch(/^coo: TRUST_ROOT_MISMATCH: /);
  });

  it('still verifies a bundle written before bundles named their ledger, pinned to its CEO key, and will not hold it to a genesis', () => {
    const legacy = join(REPO, 'test', 'fixtures', 'legacy-bundles');
    const bundle = join(legacy, 'coo_evidence_bundle.v0--consult.tar');
    const result = coo(['verify-bundle', bundle, '--trust-root', join(legacy, 'ceo.pub'), '--json']);
    expect(result.stderr).toBe('');
    expect(json(result)).toMatchObject({ ok: true, status: 'succeeded', pinned: true, ledger: null });
    const pinned = coo(['verify-bundle', bundle, '--genesis', '6cf05e2a157dc53317192a1333465e1fad14a881']);
    expect(pinned.status).toBe(3);
    expect(pinned.stderr).toMatch(/^coo: LEDGER_MISMATCH: the bundle names no ledger/);
  });

  it('names the ledger it comes from, and verify-bundle holds it to the genesis commit an auditor pins', () => {
    const genesis = json<{ genesis: string }>(coo(['verify', '--ledger', ledger, '--no-checkpoint', '--json'])).genesis;
    expect(genesis).toMatch(/^[0-9a-f]{40}$/);
    const file = join(scratch, `${succeeded}.tar`);
    expect(json(coo(['verify-bundle', file, '--genesis', genesis, '--json']))).toMatchObject({ ok: true, ledger: genesis, ledgerPinned: true });
    const other = coo(['verify-bundle', file, '--genesis', 'f'.repeat(40)]);
    expect(other.status).toBe(3);
    expect(other.stderr).toMatch(/^coo: LEDGER_MISMATCH: /);
  });

  it('follows the README procedure with tar, git and ssh-keygen alone, and the procedure catches a changed answer', () => {
    const readme = readFileSync(join(REPO, 'README.md'), 'utf8');
    const section = readme.slice(readme.indexOf('### Checking a bundle with git and ssh-keygen'));
    const block = /```sh\n([\s\S]*?)```/.exec(section)?.[1];
    expect(block).toBeDefined();
    const run = (bundle: Buffer, name: string): { status: number | null; stdout: string; stderr: string } => {
      const dir = join(scratch, name);
      mkdirSync(dir);
      writeFileSync(join(dir, 'evidence.tar'), bundle);
      return spawnSync('/bin/sh', ['-c', block!], { cwd: dir, encoding: 'utf8', env: { PATH: process.env['PATH'], HOME: dir, GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: '/dev/null' } });
    };
    const good = run(bundleOf(succeeded), 'stock-good');
    expect(good.stderr).not.toMatch(/BAD OBJECT|NOT IN COMMIT|ANOTHER LEDGER|Could not verify/);
    expect(good.stdout).toMatch(/Good "git" signature for coo.hermes/);
    expect(good.stdout.match(/Good "coo-commons.entry.v0" signature/g)?.length).toBeGreaterThanOrEqual(4);
    expect(good.status).toBe(0);

    // The same bundle with one byte of the answer changed: the procedure says which file is not in the commit.
    const bytes = bundleOf(succeeded);
    const at = bytes.indexOf(Buffer.from('```aa_answer'));
    expect(at).toBeGreaterThan(0);
    bytes[at + 3] = 'b'.charCodeAt(0);
    const bad = run(bytes, 'stock-bad');
    expect(bad.stderr).toMatch(/NOT IN COMMIT .*answer\.md/);
  });
});

describe('coo attest', () => {
  it('signs an in-toto Statement v1 in a DSSE envelope that @sigstore/verify accepts with the COO public key, and refuses with another key', () => {
    const out = join(scratch, 'attestation.json');
    const result = coo(['attest', succeeded, '--ledger', ledger, '--key', join(demo, 'keys', 'coo.hermes.key'), '--out', out]);
    expect(result.stderr).toBe('');
    expect(result.status).toBe(0);
    const dsse = JSON.parse(readFileSync(out, 'utf8')) as Dsse;
    const verifyWith = (pubFile: string): unknown => verifyDsse(dsse, readFileSync(pubFile, 'utf8'));
    expect(verifyWith(join(demo, 'keys', 'coo.hermes.pub'))).toBeDefined();
    expect(() => verifyWith(join(demo, 'keys', 'ceo.pub'))).toThrow(/signature verification failed/);

    const statement = statementOf<{ _type: string; predicateType: string; subject: Array<{ name: string; digest: { sha256: string } }>; predicate: unknown }>(dsse);
    expect(statement._type).toBe(STATEMENT_TYPE);
    expect(statement.predicateType).toBe(PREDICATE_TYPE);
    const names = statement.subject.map((subject) => subject.name);
    expect(names.some((name) => name.endsWith('/artifacts/001/answer.md'))).toBe(true);
    expect(names.some((name) => name.endsWith('/envelope.yaml'))).toBe(true);
    for (const subject of statement.subject) {
      const shown = coo(['show', subject.name, '--ledger', ledger]);
      expect(createHash('sha256').update(shown.stdout).digest('hex')).toBe(subject.digest.sha256);
    }
    const schema = JSON.parse(readFileSync(join(REPO, 'docs', 'attestation', 'agent-receipt.v0.schema.json'), 'utf8')) as object;
    const ajv = new Ajv2020.default({ strict: true, allErrors: true });
    const valid = ajv.validate(schema, statement.predicate);
    expect(ajv.errors ?? []).toEqual([]);
    expect(valid).toBe(true);
  });

  it('refuses to sign with a key that is not the active COO\'s', () => {
    const result = coo(['attest', succeeded, '--ledger', ledger, '--key', join(demo, 'keys', 'ceo.key')]);
    expect(result.status).toBe(3);
    expect(result.stderr).toMatch(/^coo: SIGNER_WRONG_ACTOR: /);
    expect(result.stdout).toBe('');
  });
});
