import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { COO, coo, json, type CliResult } from '../helpers/cli.js';
import { makeActors, makeLedger } from '../helpers/ledger.js';
import { git, tempDir } from '../helpers/tmp.js';
import { verifyLedger } from '../../src/audit/verify.js';
import { verifyBundle } from '../../src/audit/bundle-verify.js';
import { parseTar, renderTar } from '../../src/audit/tar.js';
import { isCooError } from '../../src/errors.js';
import { readDocument } from '../../src/schema/documents.js';

/**
 * A careless operator in a real deployment: a shell with umask 000, two ledgers made in the same
 * second, a bundle handed to an auditor without what its receipt names.
 */
const dir = tempDir('deployment-redteam-12-');

/** Runs the built CLI from a shell whose umask is 000. */
function cooLoose(args: readonly string[], env: NodeJS.ProcessEnv = {}): CliResult {
  const result = spawnSync('sh', ['-c', 'umask 000 && exec "$0" "$@"', process.execPath, COO, ...args], {
    env: { ...process.env, COO_LEDGER: '', COO_KEY: '', ...env },
    encoding: 'utf8',
  });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

/** Every path under `root` (itself included) that the group or other users may write, links aside. */
function writableByOthers(root: string): string[] {
  const found: string[] = [];
  const walk = (path: string): void => {
    const stats = lstatSync(path);
    if (stats.isSymbolicLink()) return;
    if ((stats.mode & 0o022) !== 0) found.push(`${path} ${(stats.mode & 0o777).toString(8)}`);
    if (stats.isDirectory()) for (const name of readdirSync(path)) walk(join(path, name));
  };
  walk(root);
  return found;
}

/** The id of a consult with a succeeded receipt in a ledger `coo demo` made. */
function consultReceipt(ledger: string): string {
  const log = json<Array<{ summary: string }>>(coo(['log', '--ledger', ledger, '--json']));
  return log
    .map((entry) => /^receipt (msg_\w+) attempt \d+: succeeded/.exec(entry.summary)?.[1])
    .filter((found): found is string => found !== undefined)
    .find((found) => json<{ envelope: { intent: string } }>(coo(['show', found, '--ledger', ledger, '--json'])).envelope.intent === 'aa_consult')!;
}

describe('coo under umask 000', () => {
  it('makes no file or folder the group or other users may write, in any verb that creates one; keys stay private', () => {
    const place = join(dir, 'umask');
    const state = join(place, 'state');
    const env = { XDG_STATE_HOME: state };
    const keys = join(place, 'keys');
    expect(cooLoose(['keygen', '--actor', 'ceo', '--out', keys], env).status).toBe(0);
    expect(cooLoose(['keygen', '--actor', 'coo.hermes', '--out', keys], env).status).toBe(0);
    const ledger = join(place, 'ledger.git');
    // An empty folder made for it beforehand, under the same umask, is taken and closed.
    expect(spawnSync('sh', ['-c', 'umask 000 && mkdir "$0"', ledger]).status).toBe(0);
    const init = cooLoose(['init', '--ledger', ledger, '--ceo-key', join(keys, 'ceo.key'), '--actor', `coo.hermes=${join(keys, 'coo.hermes.pub')}`], env);
    expect(init.status, init.stderr).toBe(0);
    const clone = join(place, 'clone.git');
    const cloned = cooLoose(['clone', ledger, clone, '--trust-root', join(keys, 'ceo.pub')], env);
    expect(cloned.status, cloned.stderr).toBe(0);
    // The demo runs the runner: its state folder, its sandboxes, a consult and a dispatch, receipts.
    const demo = join(place, 'demo');
    const ran = cooLoose(['demo', '--dir', demo, '--json'], env);
    expect(ran.status, ran.stderr).toBe(0);
    const demoLedger = join(demo, 'ledger.git');
    const consult = consultReceipt(demoLedger);
    const outputs = join(place, 'outputs');
    mkdirSync(outputs, { mode: 0o755 });
    const cited = cooLoose(['cite', consult, '--ledger', demoLedger, '--bundle', join(outputs, 'evidence.tar')], env);
    expect(cited.status, cited.stderr).toBe(0);
    expect(cooLoose(['schemas', '--out', join(outputs, 'schemas')], env).status).toBe(0);
    expect(cooLoose(['report', '--ledger', demoLedger, '--html', join(outputs, 'report.html')], env).status).toBe(0);
    expect(writableByOthers(place)).toEqual([]);
    for (const key of ['ceo.key', 'coo.hermes.key']) expect(lstatSync(join(keys, key)).mode & 0o077).toBe(0);
    expect(readFileSync(join(outputs, 'evidence.tar')).length).toBeGreaterThan(0);
  }, 240_000);

  it("takes group and other write out of the umask of a program that imports the library, and keeps the rest of it", () => {
    const library = join(import.meta.dirname, '..', '..', 'dist', 'index.js');
    const script = `await import(${JSON.stringify(library)}); process.stdout.write(process.umask(0).toString(8));`;
    for (const [umask, expected] of [['000', '22'], ['027', '27'], ['077', '77']] as const) {
      const result = spawnSync('sh', ['-c', `umask ${umask} && exec "$0" --input-type=module -e "$1"`, process.execPath, script], { encoding: 'utf8' });
      expect(result.stdout, result.stderr).toBe(expected);
    }
  });
});

describe('two ledgers made in the same second with the same keys, registry and policy', () => {
  it('are two genesis commits with two first roots, each verifying from the pinned CEO key', async () => {
    const place = join(dir, 'twins');
    mkdirSync(place);
    const actors = makeActors();
    const one = await makeLedger(place, actors, 'one.git');
    const two = await makeLedger(place, actors, 'two.git');
    try {
      const [first, second] = [await one.ledger.state(), await two.ledger.state()];
      expect(first.genesis).not.toBeNull();
      expect(first.genesis).not.toBe(second.genesis);
      const roots = await Promise.all([one, two].map(async ({ ledger }) => (await ledger.readFile('trust/root/000001.yaml'))!));
      expect(roots[0]!.equals(roots[1]!)).toBe(false);
      const ids = roots.map((bytes) => readDocument('trust_root.v0', bytes, 'trust/root/000001.yaml').ledger_id);
      expect(ids[0]).toMatch(/^[0-9a-f]{32}$/);
      expect(ids[0]).not.toBe(ids[1]);
      for (const { gitdir } of [one, two]) expect((await verifyLedger(gitdir, { trustRoot: actors.ceo.publicKey })).findings).toEqual([]);
    } finally {
      one.ledger.close();
      two.ledger.close();
    }
  });
});

describe('an evidence bundle handed to an auditor', () => {
  it("carries every file its receipt names by hash, and one without an attachment is ARTIFACT_MISSING, naming it", () => {
    const place = join(dir, 'attachments');
    expect(coo(['demo', '--dir', place]).status).toBe(0);
    const ledger = join(place, 'ledger.git');
    const consult = consultReceipt(ledger);
    const out = join(place, 'evidence.tar');
    expect(coo(['cite', consult, '--ledger', ledger, '--bundle', out]).status).toBe(0);
    const bytes = readFileSync(out);
    const archive = parseTar(bytes);
    const names = archive.map((file) => file.name);
    const { receipt } = JSON.parse(archive.find((entry) => entry.name === 'bundle.json')!.content.toString('utf8')) as { receipt: string };
    const attachments = readDocument('aa_receipt.v0', archive.find((entry) => entry.name === `ledger/${receipt}`)!.content, receipt).attachments;
    expect(attachments.length).toBeGreaterThan(0);
    for (const item of attachments) expect(names).toContain(`ledger/${item.path}`);
    expect(verifyBundle(bytes).attachments).toBe(attachments.length);
    const checked = coo(['verify-bundle', out]);
    expect(checked.status, checked.stderr).toBe(0);
    expect(checked.stdout).toContain(`attachments: ${attachments.length} file(s)`);

    // The same bundle with one attachment taken out, in coo's order otherwise.
    const missing = attachments[0]!.path;
    const stripped = renderTar(parseTar(bytes).filter((file) => file.name !== `ledger/${missing}`));
    let error: unknown = null;
    try {
      verifyBundle(stripped);
    } catch (caught) {
      error = caught;
    }
    expect(isCooError(error) && error.code).toBe('ARTIFACT_MISSING');
    expect((error as Error).message).toContain(missing);
    const file = join(place, 'stripped.tar');
    writeFileSync(file, stripped);
    const refused = coo(['verify-bundle', file]);
    expect(refused.status).toBe(3);
    expect(refused.stderr).toContain('ARTIFACT_MISSING');

    // A bundle written before bundles carried attachments (v1) still verifies, and says it did not check them.
    const attachedNames = new Set(attachments.map((item) => `ledger/${item.path}`));
    const v1 = renderTar(
      archive
        .filter((entry) => !attachedNames.has(entry.name))
        .map((entry) => (entry.name === 'bundle.json' ? { ...entry, content: Buffer.from(entry.content.toString('utf8').replace('coo_evidence_bundle.v2', 'coo_evidence_bundle.v1')) } : entry)),
    );
    expect(verifyBundle(v1).attachments).toBeNull();
    writeFileSync(file, v1);
    const older = coo(['verify-bundle', file]);
    expect(older.status, older.stderr).toBe(0);
    expect(older.stdout).toContain('attachments NOT checked');
  }, 120_000);
});

describe('a ledger every local user may write (made under umask 000 before coo closed it, or opened up by hand)', () => {
  it("is refused by coo watch at start (RUNNER_CONFIG, exit 2) naming the path, for its config, main or objects; a closed one runs", () => {
    const place = join(dir, 'open-ledger');
    const keys = join(place, 'keys');
    const env = { XDG_STATE_HOME: join(place, 'state'), OPENAI_API_KEY: 'sk-test', ANTHROPIC_API_KEY: 'sk-test', GEMINI_API_KEY: 'sk-test' };
    for (const actor of ['ceo', 'coo.hermes']) expect(coo(['keygen', '--actor', actor, '--out', keys]).status).toBe(0);
    const ledger = join(place, 'ledger.git');
    expect(coo(['init', '--ledger', ledger, '--ceo-key', join(keys, 'ceo.key'), '--actor', `coo.hermes=${join(keys, 'coo.hermes.pub')}`]).status).toBe(0);
    const repo = join(place, 'repo');
    git(['init', '-q', repo]);
    git(['-C', repo, 'commit', '-q', '--allow-empty', '-m', 'start']);
    const watch = (): CliResult => coo(['watch', '--ledger', ledger, '--key', join(keys, 'coo.hermes.key'), '--repo', repo, '--state-dir', join(place, 'runner'), '--isolation', 'none', '--once'], { env });
    const closed = watch();
    expect(closed.status, closed.stderr).toBe(0);
    for (const path of ['config', 'refs/heads/main', 'objects', 'hooks/pre-receive']) {
      const full = join(ledger, path);
      expect(existsSync(full)).toBe(true);
      const mode = lstatSync(full).mode & 0o777;
      chmodSync(full, mode | 0o002);
      const refused = watch();
      expect({ path, status: refused.status }).toEqual({ path, status: 2 });
      expect(refused.stderr).toContain(`coo: RUNNER_CONFIG: ${full}, in the ledger ${ledger}, may be written by every user`);
      expect(refused.stderr).not.toMatch(/receipt\(s\) written/);
      chmodSync(full, mode);
    }
  }, 120_000);
});

describe('the ledger given as the repository the work is for', () => {
  it('is refused by coo watch at start (RUNNER_CONFIG, exit 2), the ledger or a folder in it, before any worktree or branch is made in it', () => {
    const place = join(dir, 'ledger-as-repo');
    const keys = join(place, 'keys');
    const env = { XDG_STATE_HOME: join(place, 'state'), OPENAI_API_KEY: 'sk-test', ANTHROPIC_API_KEY: 'sk-test', GEMINI_API_KEY: 'sk-test' };
    for (const actor of ['ceo', 'coo.hermes']) expect(coo(['keygen', '--actor', actor, '--out', keys]).status).toBe(0);
    const ledger = join(place, 'ledger.git');
    expect(coo(['init', '--ledger', ledger, '--ceo-key', join(keys, 'ceo.key'), '--actor', `coo.hermes=${join(keys, 'coo.hermes.pub')}`]).status).toBe(0);
    const refs = (): string => git(['--git-dir', ledger, 'for-each-ref', '--format=%(refname)']);
    const before = refs();
    for (const repo of [ledger, join(ledger, 'refs'), join(place, '.', 'ledger.git')]) {
      const refused = coo(['watch', '--ledger', ledger, '--key', join(keys, 'coo.hermes.key'), '--repo', repo, '--state-dir', join(place, 'runner'), '--isolation', 'none', '--once'], { env });
      expect({ repo, status: refused.status }).toEqual({ repo, status: 2 });
      expect(refused.stderr).toContain(`coo: RUNNER_CONFIG: --repo ${repo} is the ledger ${ledger}, not a repository the work is for`);
    }
    expect(refs()).toBe(before);
    expect(existsSync(join(ledger, 'worktrees'))).toBe(false);
  }, 60_000);
});

describe('a key file another user may replace', () => {
  it('is used with a warning naming it: a key file every user may write, or in a folder every user may write without the sticky bit; a sticky folder is left alone', () => {
    const place = join(dir, 'replaceable-keys');
    const open = join(place, 'open');
    const sticky = join(place, 'sticky');
    for (const folder of [open, sticky]) {
      expect(coo(['keygen', '--actor', 'ceo', '--out', folder]).status).toBe(0);
      expect(coo(['keygen', '--actor', 'coo.hermes', '--out', folder]).status).toBe(0);
    }
    chmodSync(open, 0o777);
    chmodSync(sticky, 0o1777);
    const init = (keys: string, name: string): CliResult =>
      coo(['init', '--ledger', join(place, name), '--ceo-key', join(keys, 'ceo.key'), '--actor', `coo.hermes=${join(keys, 'coo.hermes.pub')}`]);
    const opened = init(open, 'open.git');
    expect(opened.status, opened.stderr).toBe(0);
    expect(opened.stderr).toContain(`coo: warning: the key file ${join(open, 'ceo.key')} is in a folder every user may write (${open}): another user may have replaced the key coo signs with`);
    expect(opened.stderr).toContain(`coo: warning: the public key file ${join(open, 'coo.hermes.pub')} is in a folder every user may write (${open})`);
    const cloned = coo(['clone', join(place, 'open.git'), join(place, 'clone.git'), '--trust-root', join(open, 'ceo.pub')]);
    expect(cloned.status, cloned.stderr).toBe(0);
    expect(cloned.stderr).toContain(`coo: warning: the public key file ${join(open, 'ceo.pub')} is in a folder every user may write (${open}): another user may have replaced the key it pins or gives`);
    const quiet = init(sticky, 'sticky.git');
    expect(quiet.status, quiet.stderr).toBe(0);
    expect(quiet.stderr).not.toContain('warning');
    chmodSync(join(sticky, 'ceo.pub'), 0o666);
    const writable = coo(['clone', join(place, 'sticky.git'), join(place, 'clone2.git'), '--trust-root', join(sticky, 'ceo.pub')]);
    expect(writable.status, writable.stderr).toBe(0);
    expect(writable.stderr).toContain(`coo: warning: the public key file ${join(sticky, 'ceo.pub')} may be written by every user`);
    chmodSync(open, 0o700);
  }, 60_000);
});
