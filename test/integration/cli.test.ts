import { mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { coo, json } from '../helpers/cli.js';
import { makeTargetRepo } from '../helpers/dispatch-repo.js';
import { FIXTURE_TASK, fixtureEnvelope } from '../helpers/stock.js';
import { git, tempDir } from '../helpers/tmp.js';

const dir = tempDir();
const keys = join(dir, 'keys');
const ledger = join(dir, 'ledger.git');
const VERBS = ['keygen', 'init', 'trust', 'append', 'consult', 'dispatch', 'approve', 'watch', 'kill-switch', 'show', 'log', 'verify', 'allowed-signers', 'schemas', 'demo', 'model', 'hook'];

beforeAll(() => {
  for (const actor of ['ceo', 'coo.hermes']) expect(coo(['keygen', '--actor', actor, '--out', keys]).status).toBe(0);
  expect(coo(['init', '--ledger', ledger, '--ceo-key', join(keys, 'ceo.key'), '--actor', `coo.hermes=${join(keys, 'coo.hermes.pub')}`]).status).toBe(0);
});

describe('the coo command line', () => {
  for (const verb of VERBS) {
    it(`prints help for ${verb} and exits 0`, () => {
      const result = coo([verb, '--help']);
      expect(result.status).toBe(0);
      expect(result.stdout).toContain(`Usage: coo ${verb}`);
    });
  }

  it('lists every verb for people in its help, and not the hook git runs', () => {
    const help = coo(['--help']).stdout;
    for (const verb of VERBS.filter((name) => name !== 'hook')) expect(help).toMatch(new RegExp(`^  ${verb}\\b`, 'm'));
    expect(help).not.toMatch(/^ {2}hook\b/m);
  });

  it('takes the CEO key from $COO_CEO_KEY in every verb that needs it, and says so in their help', () => {
    for (const verb of ['init', 'trust', 'approve']) expect(coo([verb, '--help']).stdout, verb).toContain('$COO_CEO_KEY');
    const other = join(dir, 'by-env.git');
    const made = coo(['init', '--ledger', other, '--actor', `coo.hermes=${join(keys, 'coo.hermes.pub')}`], { env: { COO_CEO_KEY: join(keys, 'ceo.key') } });
    expect(made.stderr).toBe('');
    expect(made.status).toBe(0);
    const policy = join(dir, 'policy-by-env.yaml');
    writeFileSync(policy, git(['--git-dir', other, 'show', 'main:trust/policy/000001.yaml']).replace(/^version: 1$/m, 'version: 2'));
    const trusted = coo(['trust', '--ledger', other, '--policy', policy], { env: { COO_CEO_KEY: join(keys, 'ceo.key') } });
    expect(trusted.stderr).toBe('');
    expect(trusted.status).toBe(0);
  });

  it('shows an escape sequence in what an error repeats as a code point, never as a terminal command', () => {
    const result = coo(['show', 'msg_\u001b[2J\u001b]0;owned\u0007', '--ledger', ledger]);
    expect(result.status).not.toBe(0);
    expect(result.stderr).toContain('coo: NOT_FOUND: msg_\\u001b[2J\\u001b]0;owned\\u0007 is neither');
    expect([...result.stderr].filter((char) => char === '\u001b' || char === '\u0007')).toEqual([]);
  });

  it('prints allowed-signers and schemas as JSON with --json', () => {
    const signers = json<{ allowed_signers: string; signers: Array<{ actor: string; public_key: string; valid_after: string | null; valid_before: string | null }>; revoked: string[] }>(coo(['allowed-signers', '--ledger', ledger, '--json']));
    expect(signers.allowed_signers).toContain('coo.hermes namespaces=');
    expect(signers.signers.map((signer) => signer.actor).sort()).toEqual(['ceo', 'coo.hermes']);
    for (const signer of signers.signers) expect(signer).toMatchObject({ public_key: expect.stringMatching(/^ssh-ed25519 /), valid_after: expect.stringMatching(/^\d{14}Z$/), valid_before: null });
    expect(signers.revoked).toEqual([]);
    const out = join(dir, 'schemas-json');
    const written = json<{ out: string; written: string[] }>(coo(['schemas', '--out', out, '--json']));
    expect(written.written).toContain('coo_message.v0.json');
    expect(json<{ ok: boolean; drifted: string[] }>(coo(['schemas', '--out', out, '--check', '--json']))).toMatchObject({ ok: true, drifted: [] });
  });

  it('writes no schema when one of the names in --out is a folder: exit 2, one coded line, the other files as they were', () => {
    const out = join(dir, 'schemas-blocked');
    mkdirSync(join(out, 'ea_receipt.v0.json'), { recursive: true });
    writeFileSync(join(out, 'aa_receipt.v0.json'), 'old\n');
    const result = coo(['schemas', '--out', out]);
    expect(result.status).toBe(2);
    expect(result.stderr).toBe(`coo: USAGE: --out ${join(out, 'ea_receipt.v0.json')} is a directory, not a file: give --out the path of a file to write (coo replaces it whole)\n`);
    expect(readdirSync(out).sort()).toEqual(['aa_receipt.v0.json', 'ea_receipt.v0.json']);
    expect(readFileSync(join(out, 'aa_receipt.v0.json'), 'utf8')).toBe('old\n');
  });

  const table: Array<[string, string[], number, RegExp]> = [
    ['an unknown verb', ['frobnicate'], 2, /unknown command/],
    ['an unknown option', ['verify', '--frob'], 2, /unknown option/],
    ['a missing --ledger', ['verify'], 2, /USAGE: --ledger is required/],
    ['a ledger path that is not a ledger', ['verify', '--ledger', '/nonexistent'], 2, /LEDGER_NOT_FOUND/],
    ['a missing key file', ['append', '--ledger', '/x', '--key', '/nonexistent.key', 'e.yaml'], 2, /USAGE: cannot read key file \/nonexistent\.key \(ENOENT\): check the path/],
    ['a malformed --actor pair', ['init', '--ledger', '/tmp/x', '--ceo-key', '/nonexistent', '--actor', 'nonsense'], 2, /USAGE/],
    // `--version` after the verb is a flag's value like any other, never coo's own version printed and the verb skipped.
    ["--version given as a flag's value", ['consult', '--prompt', '--version'], 2, /USAGE: --ledger is required/],
    ['--version after a verb', ['verify', '--version'], 2, /USAGE: unknown option '--version'/],
  ];
  for (const [name, args, status, stderr] of table) {
    it(`exits ${status} on ${name} with one coded line`, () => {
      const result = coo(args);
      expect(result.status).toBe(status);
      expect(result.stderr).toMatch(stderr);
      expect(result.stderr).not.toMatch(/\n\s+at /);
    });
  }

  it('writes the private key with mode 0600 and refuses to overwrite it', () => {
    expect(statSync(join(keys, 'ceo.key')).mode & 0o777).toBe(0o600);
    const again = coo(['keygen', '--actor', 'ceo', '--out', keys]);
    expect(again.status).toBe(2);
    expect(again.stderr).toContain('--force');
  });

  it('takes the ledger and key from COO_LEDGER and COO_KEY', () => {
    writeFileSync(join(dir, 'env1.yaml'), fixtureEnvelope('msg_01M8NQFJ01J7CG66HWNDDJ8480', 'cli-env'));
    writeFileSync(join(dir, 'prompt.md'), FIXTURE_TASK);
    const result = coo(['append', join(dir, 'env1.yaml'), join(dir, 'prompt.md'), '--json'], { env: { COO_LEDGER: ledger, COO_KEY: join(keys, 'coo.hermes.key') } });
    expect(result.status).toBe(0);
    expect(json(result)).toMatchObject({ message_id: 'msg_01M8NQFJ01J7CG66HWNDDJ8480', existing: false });
  });

  it('exits 3 on a rejected append, prints a JSON error with --json, and leaves the ledger unchanged', () => {
    const before = git(['--git-dir', ledger, 'rev-parse', 'main']);
    writeFileSync(join(dir, 'env2.yaml'), fixtureEnvelope('msg_01M8NQFJ01J7CG66HWNDDJ8481', 'cli-env-2').replace('principal: coo.hermes', 'principal: ceo'));
    const result = coo(['append', '--ledger', ledger, '--key', join(keys, 'coo.hermes.key'), join(dir, 'env2.yaml'), '--json']);
    expect(result.status).toBe(3);
    expect(json<{ ok: boolean; error: { code: string } }>(result)).toMatchObject({ ok: false, error: { code: 'NOT_ACTIVE_COO' } });
    expect(git(['--git-dir', ledger, 'rev-parse', 'main'])).toBe(before);
  });

  it('exits 3 with the YAML error for a hostile envelope file', () => {
    writeFileSync(join(dir, 'bomb.yaml'), 'a: &a [x, x]\nb: &b [*a, *a]\n');
    const result = coo(['append', '--ledger', ledger, '--key', join(keys, 'coo.hermes.key'), join(dir, 'bomb.yaml')]);
    expect(result.status).toBe(3);
    expect(result.stderr).toMatch(/^coo: YAML_ALIAS: /);
  });

  it('shows a message and prints files, logs commits, and verifies with --json', () => {
    expect(coo(['show', '--ledger', ledger, 'msg_01M8NQFJ01J7CG66HWNDDJ8480', '--json']).stdout).toContain('"lane_state": "queued"');
    expect(coo(['show', '--ledger', ledger, 'trust/policy/000001.yaml']).stdout).toBe(git(['--git-dir', ledger, 'show', 'main:trust/policy/000001.yaml']));
    const log = json<Array<{ seq: number; signer: { actor: string } }>>(coo(['log', '--ledger', ledger, '--json']));
    expect(log.map((entry) => [entry.seq, entry.signer.actor])).toEqual([
      [2, 'coo.hermes'],
      [1, 'ceo'],
    ]);
    expect(json(coo(['verify', '--ledger', ledger, '--json']))).toMatchObject({ ok: true, seq: 2, findings: [] });
  });

  it('notes, on verify, that git has stopped packing the ledger after a failed background run, and still verifies', () => {
    expect(json(coo(['verify', '--ledger', ledger, '--no-checkpoint', '--json']))).toMatchObject({ ok: true, notes: [] });
    // What git's detached gc wrote when it failed (seen on git 2.39); while gc.log is there (up to a day), `git gc --auto` packs nothing.
    const log = join(ledger, 'gc.log');
    writeFileSync(log, "warning: There are too many unreachable loose objects; run 'git prune' to remove them.\n");
    try {
      const human = coo(['verify', '--ledger', ledger, '--no-checkpoint']);
      expect(human.status).toBe(0);
      expect(human.stdout).toMatch(/^ok: /);
      expect(human.stderr).toContain(`note: git's last background packing of this ledger failed, and git skips packing it while ${log} is there`);
      expect(human.stderr).toContain('too many unreachable loose objects');
      const report = json<{ ok: boolean; notes: string[] }>(coo(['verify', '--ledger', ledger, '--no-checkpoint', '--json']));
      expect(report.ok).toBe(true);
      expect(report.notes).toHaveLength(1);
      expect(report.notes[0]).toContain(`run "git --git-dir ${ledger} gc"`);
    } finally {
      rmSync(log);
    }
  });

  it('prints an allowed-signers file that names each actor', () => {
    const text = coo(['allowed-signers', '--ledger', ledger]).stdout;
    expect(text).toMatch(new RegExp(`ceo namespaces="git,coo-commons.entry.v0",valid-after="${'\\d'.repeat(14)}Z" ${readFileSync(join(keys, 'ceo.pub'), 'utf8').split(' ').slice(0, 2).join(' ').replace(/[+/]/g, '\\$&')}`));
    expect(text).toContain('coo.hermes namespaces=');
  });

  it('checks that schemas/ matches the source', () => {
    const result = coo(['schemas', '--check', '--out', join(import.meta.dirname, '..', '..', 'schemas')]);
    expect(result.stdout).toContain('ok: 13 schemas match');
    expect(result.status).toBe(0);
  });
});

describe('coo dispatch and coo approve', () => {
  const work = join(dir, 'dispatch-target');
  const base = makeTargetRepo(work);
  const coo_ = ['--ledger', ledger, '--key', join(keys, 'coo.hermes.key')];
  const request = ['--repo', work, '--task', 'Fix add() so that test.sh passes.', '--scope', 'src/**', '--accept', 'test.sh passes', '--verify', 'sh test.sh'];

  it('queues a dispatch pinned to the base commit, with its branch', () => {
    const result = coo(['dispatch', ...coo_, '--to', 'ea.codex', ...request, '--json']);
    expect(result.status).toBe(0);
    const out = json(result) as { message_id: string; envelope: { dispatch: { base_ref: string; branch_name: string; executor: string } } };
    expect(out.envelope.dispatch).toMatchObject({ base_ref: base, executor: 'codex', branch_name: `coo/${out.message_id}` });
  });

  it('refuses a dispatch without a scope, acceptance or verification as a usage error', () => {
    const result = coo(['dispatch', ...coo_, '--to', 'ea.codex', '--repo', work, '--task', 'x', '--scope', 'src/**', '--accept', 'y']);
    expect(result.status).toBe(2);
    expect(result.stderr).toMatch(/USAGE: give at least one --verify/);
  });

  it('refuses a dispatch the policy gives to the CEO, names the request to approve, and takes it once the CEO approved', () => {
    const refused = coo(['dispatch', ...coo_, '--to', 'ea.claude_code', ...request, '--idempotency-key', 'cli-claude']);
    expect(refused.status).toBe(3);
    const hash = /APPROVAL_REQUIRED: .*ask the CEO for `coo approve --request (sha256:[0-9a-f]{64}) --ceo-key CEO\.key --reason TEXT`/.exec(refused.stderr)?.[1];
    expect(hash).toBeDefined();
    const byCoo = coo(['approve', '--ledger', ledger, '--ceo-key', join(keys, 'coo.hermes.key'), '--request', hash!, '--reason', 'self']);
    expect(byCoo.status).toBe(3);
    expect(byCoo.stderr).toMatch(/TRUST_AUTHORITY/);
    const approved = coo(['approve', '--ledger', ledger, '--ceo-key', join(keys, 'ceo.key'), '--request', hash!, '--reason', 'Claude Code may fix add()', '--json']);
    expect(approved.status).toBe(0);
    const approvalId = (json(approved) as { approval_id: string }).approval_id;
    const accepted = coo(['dispatch', ...coo_, '--to', 'ea.claude_code', ...request, '--idempotency-key', 'cli-claude', '--approval', approvalId, '--json']);
    expect(accepted.status).toBe(0);
    expect((json(accepted) as { envelope: { approval_id: string } }).envelope.approval_id).toBe(approvalId);
  });
});
