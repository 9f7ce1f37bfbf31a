import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { formatPrivateKey, generatePrivateKey } from '../../src/crypto/keys.js';
import { cooAsync, json } from '../helpers/cli.js';
import { runPushWorkflow, workflowAt, type WorkflowRun } from '../helpers/github-workflow.js';
import { startNpmRegistry, type NpmRegistry } from '../helpers/npm-registry.js';
import { consultThrough, makeServedLedger, makeWriter, removeHook, type ServedLedger, type Writer } from '../helpers/remote-ledger.js';
import { stockCommit } from '../helpers/stock.js';
import { git, tempDir } from '../helpers/tmp.js';

const REPO = join(import.meta.dirname, '..', '..');
const WORKFLOW = '.github/workflows/coo-verify.yml';
const dir = tempDir('coo-forge-');
let registry: NpmRegistry;
let tarball: string;
let served: ServedLedger;
let ceo: Writer;
let cooWriter: Writer;

beforeAll(async () => {
  registry = await startNpmRegistry(REPO);
  // What a release publishes: the packed checkout (npm test builds dist/ first).
  const packed = spawnSync('npm', ['pack', REPO, '--pack-destination', dir, '--silent'], { encoding: 'utf8' });
  expect(packed.status, packed.stderr).toBe(0);
  tarball = join(dir, packed.stdout.trim().split('\n').pop()!);
  served = await makeServedLedger(join(dir, 'forge'));
  // The forge: a bare repository that runs no pre-receive hook.
  removeHook(served);
  ceo = await makeWriter(dir, 'ceo', served, served.gitdir);
  cooWriter = await makeWriter(dir, 'coo', served, served.gitdir);
}, 180_000);

afterAll(async () => {
  await registry?.close();
});

let runs = 0;

/** The check GitHub would run for a push that moved main from `before` to `after`. */
function check(before: string, after: string): Promise<WorkflowRun> {
  runs += 1;
  return runPushWorkflow({
    remote: served.gitdir,
    before,
    after,
    workflowPath: WORKFLOW,
    dir: join(dir, `run-${runs}`),
    // The hosted runner's registry is npm's own; here it is the loopback one, and git reads no config of this machine.
    machineEnv: { npm_config_registry: registry.url, npm_config_cache: join(dir, 'npm-cache'), npm_config_update_notifier: 'false', GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: '/dev/null' },
  });
}

function step(run: WorkflowRun, name: string): { status: number | null; stdout: string; stderr: string } {
  const found = run.steps.find((item) => item.name === name);
  if (found === undefined) throw new Error(`no step ${name} ran: ${run.steps.map((item) => item.name).join(', ')}`);
  return found;
}

/** A forger's push straight to the forge: a clone, a commit made with stock git, a push no hook refuses. */
function forgedPush(name: string, files: Record<string, string>, options: { key: string; sign?: readonly string[] }): string {
  const work = join(dir, name);
  git(['clone', '-q', served.gitdir, work]);
  stockCommit(work, files, { key: options.key, seq: served.seq() + 1, ...(options.sign === undefined ? {} : { sign: options.sign }) });
  git(['push', '-q', 'origin', 'main'], { cwd: work });
  return served.head();
}

/** An administrator moves main back to the last valid commit (with branch protection lifted for it). */
function restore(commit: string): void {
  git(['--git-dir', served.gitdir, 'update-ref', 'refs/heads/main', commit]);
}

describe('the ledger check on a forge with no pre-receive hook', () => {
  it('is laid by the CEO pinned to the packed coo and the CEO key, and passes on every step for a clean push', async () => {
    const genesis = served.head();
    const laid = await cooAsync(['forge', 'github', '--ledger', ceo.gitdir, '--remote', ceo.url, '--ceo-key', served.keys.ceo, '--package', tarball, '--trust-root', served.ceoKeyId, '--json'], { env: ceo.env });
    expect(laid.status, laid.stderr).toBe(0);
    expect(json<{ path: string; changed: boolean }>(laid)).toMatchObject({ path: WORKFLOW, changed: true });
    const consulted = await consultThrough(cooWriter, served);
    expect(consulted.status, consulted.stderr).toBe(0);
    const head = served.head();
    const pinned = workflowAt(served.gitdir, head, WORKFLOW) as unknown as { env: Record<string, string> };
    expect(pinned.env).toEqual({ COO_PACKAGE: tarball, COO_TRUST_ROOT: served.ceoKeyId });
    // The file is the template with its two pins written in, nothing else.
    const template = parse(readFileSync(join(REPO, 'ledger', 'github', 'coo-verify.yml'), 'utf8').replace('"@COO_PACKAGE@"', JSON.stringify(tarball)).replace('"@COO_TRUST_ROOT@"', JSON.stringify(served.ceoKeyId)));
    expect(parse(git(['--git-dir', served.gitdir, 'show', `${head}:${WORKFLOW}`]))).toEqual(template);

    const run = await check(genesis, head);

    expect(run.steps.map((item) => [item.name, item.status])).toEqual([
      ['Check out the pushed commit with its history', 0],
      ['Set up Node.js', 0],
      ['Check that main only moved forward', 0],
      ['Install coo', 0],
      ['Verify the ledger from its trust root', 0],
    ]);
    expect(run.ok).toBe(true);
    expect(step(run, 'Check that main only moved forward').stdout).toBe(`main moved forward from ${genesis} to ${head}\n`);
    expect(step(run, 'Verify the ledger from its trust root').stdout).toMatch(new RegExp(`^ok: 3 commits from genesis, head ${head} at Ledger-Seq 3;`));
  }, 240_000);

  it('fails on a forged commit pushed past the missing hook, naming the finding and the commit', async () => {
    const before = served.head();
    const intruder = join(dir, 'intruder.key');
    writeFileSync(intruder, formatPrivateKey(generatePrivateKey('intruder')), { mode: 0o600 });
    const forged = forgedPush('forger', { 'notes/forged.yaml': 'x: 1\n' }, { key: intruder });
    expect(forged).not.toBe(before);

    const run = await check(before, forged);

    expect(run.ok).toBe(false);
    const verify = step(run, 'Verify the ledger from its trust root');
    expect(verify.status).toBe(3);
    expect(verify.stdout).toMatch(/^FAILED: \d+ finding\(s\); 4 commits from genesis/);
    expect(verify.stdout).toContain(`SIGNER_UNKNOWN [${forged.slice(0, 12)} commit]`);
    expect(verify.stdout).toContain(`PATH_INVALID [${forged.slice(0, 12)} notes/forged.yaml]`);
    restore(before);
  }, 240_000);

  it('fails when main was moved back past what it held (a force push the forge let through), before it installs anything', async () => {
    const before = served.head();
    const rolledBack = git(['--git-dir', served.gitdir, 'rev-parse', 'main~1']).trim();
    restore(rolledBack);

    const run = await check(before, rolledBack);

    expect(run.ok).toBe(false);
    expect(run.steps.map((item) => item.name)).toEqual(['Check out the pushed commit with its history', 'Set up Node.js', 'Check that main only moved forward']);
    const moved = step(run, 'Check that main only moved forward');
    expect(moved.status).toBe(1);
    expect(moved.stdout).toBe(`::error title=main was rewritten::main moved from ${before} to ${rolledBack}, which does not descend from it: a force push or a rollback\n`);
    restore(before);
  }, 120_000);

  it("runs a forged commit's own check, as GitHub runs the pushed file, while coo verify and every writer refuse that commit", async () => {
    const before = served.head();
    const fake = 'on:\n  push:\n    branches: [main]\njobs:\n  verify:\n    runs-on: ubuntu-24.04\n    steps:\n      - run: echo all good\n';
    // The active COO's own key: a holder of the ledger, but not the trust root that owns the check.
    const forged = forgedPush('workflow-forger', { [WORKFLOW]: fake }, { key: served.keys.coo, sign: [WORKFLOW] });

    const run = await check(before, forged);

    expect(run.ok).toBe(true);
    expect(run.steps.map((item) => item.stdout)).toEqual(['all good\n']);
    const auditor = join(dir, 'auditor.git');
    git(['clone', '-q', '--bare', served.gitdir, auditor]);
    const verified = await cooAsync(['verify', '--ledger', auditor, '--trust-root', served.ceoKeyId, '--no-checkpoint', '--json']);
    expect(verified.status).toBe(3);
    expect(json<{ findings: Array<{ code: string; commit?: string; path?: string }> }>(verified).findings).toEqual([
      expect.objectContaining({ code: 'TRUST_AUTHORITY', commit: forged, path: WORKFLOW }),
    ]);
    const refused = await consultThrough(cooWriter, served);
    expect(refused.status).toBe(3);
    expect(refused.stderr).toMatch(new RegExp(`^coo: REMOTE_UNVERIFIED: what .* holds does not verify \\(1 finding\\(s\\), first TRUST_AUTHORITY at ${forged.slice(0, 12)}`));
    restore(before);
  }, 120_000);
});
