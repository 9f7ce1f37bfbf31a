import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { formatPrivateKey, generatePrivateKey, parsePrivateKey } from '../../src/crypto/keys.js';
import { Ledger } from '../../src/ledger/ledger.js';
import { appendTrustVersion } from '../../src/ledger/trust-update.js';
import { cooAsync, json } from '../helpers/cli.js';
import { runPushWorkflow, type WorkflowRun } from '../helpers/github-workflow.js';
import { startNpmRegistry, type NpmRegistry } from '../helpers/npm-registry.js';
import { stockCommit } from '../helpers/stock.js';
import { consultArgs, consultThrough, makeServedLedger, makeWriter, removeHook, type ServedLedger, type Writer } from '../helpers/remote-ledger.js';
import { git, tempDir } from '../helpers/tmp.js';

const WORKFLOW = '.github/workflows/coo-verify.yml';
const ZERO = '0'.repeat(40);
const dir = tempDir('coo-lies-56-');
let served: ServedLedger;
let ceo: Writer;
let cooWriter: Writer;

beforeAll(async () => {
  served = await makeServedLedger(join(dir, 'forge'));
  // The forge: a bare repository that runs no pre-receive hook.
  removeHook(served);
  ceo = await makeWriter(dir, 'ceo', served, served.gitdir);
  cooWriter = await makeWriter(dir, 'coo', served, served.gitdir);
}, 180_000);

let runs = 0;

/** The check GitHub would run for a push that moved main from `before` to `after`; npm reaches nothing (a closed loopback port), and no step here needs it. */
function check(before: string, after: string): Promise<WorkflowRun> {
  runs += 1;
  return runPushWorkflow({
    remote: served.gitdir,
    before,
    after,
    workflowPath: WORKFLOW,
    dir: join(dir, `run-${runs}`),
    machineEnv: { npm_config_registry: 'http://127.0.0.1:9/', npm_config_offline: 'true', npm_config_cache: join(dir, 'npm-cache'), npm_config_update_notifier: 'false', GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: '/dev/null' },
  });
}

describe("a hookless forge whose main is deleted, then pushed again with an older history that holds the check (a deletion runs no workflow)", { timeout: 180_000 }, () => {
  it("the check run for the push that makes main again fails before it installs anything, saying main was made anew and that what it held is not seen; the writers refuse the rolled-back remote", async () => {
    const laid = await cooAsync(['forge', 'github', '--ledger', ceo.gitdir, '--remote', ceo.url, '--ceo-key', served.keys.ceo, '--package', '/nonexistent/coo-commons-0.1.0.tgz', '--trust-root', served.ceoKeyId, '--json'], { env: ceo.env });
    expect(laid.status, laid.stderr).toBe(0);
    const withCheck = served.head();
    const consulted = await consultThrough(cooWriter, served);
    expect(consulted.status, consulted.stderr).toBe(0);
    const paid = served.head();
    expect(paid).not.toBe(withCheck);

    // Deleted (GitHub runs no workflow for it), then made again at the commit that laid the check: the consult's receipt is gone.
    git(['--git-dir', served.gitdir, 'update-ref', '-d', 'refs/heads/main']);
    git(['--git-dir', served.gitdir, 'update-ref', 'refs/heads/main', withCheck]);

    const run = await check(ZERO, withCheck);

    expect(run.ok).toBe(false);
    expect(run.steps.map((item) => [item.name, item.status])).toEqual([
      ['Check out the pushed commit with its history', 0],
      ['Set up Node.js', 0],
      ['Check that main only moved forward', 1],
    ]);
    expect(run.steps[2]!.stdout).toMatch(new RegExp(`^::error title=main was made anew::main was made at ${withCheck} by a push that names no head before it: either main was deleted and pushed again \\(a deletion runs no check, and what main held before is not seen here`));

    // It says what to check, and excuses nothing: a first push with the check laid looks the same to it.
    expect(run.steps[2]!.stdout).toContain('this check cannot tell the two apart, so check main: in a writer\'s clone, git fetch origin main, then git merge-base --is-ancestor refs/coo/remote-verified FETCH_HEAD must succeed');
    expect(run.steps[2]!.stdout).not.toMatch(/nothing is amiss|next push passes/);

    // The clients were never the check's to protect: the writer that saw the receipt refuses the remote as rolled back.
    const refused = await consultThrough(cooWriter, served);
    expect(refused.status).toBe(3);
    expect(refused.stderr).toMatch(/^coo: REMOTE_UNVERIFIED: /);
    expect(git(['--git-dir', cooWriter.gitdir, 'rev-parse', 'main']).trim()).toBe(paid);
  });
});

/** `count` commits on top of the forge's main, made with stock git (fast-import): each keeps the tree, says the next Ledger-Seq and is signed by no one. Returns the first. */
function deepForgery(forge: ServedLedger, count: number): string {
  const head = forge.head();
  const tree = git(['--git-dir', forge.gitdir, 'rev-parse', `${head}^{tree}`]).trim();
  const seq = forge.seq();
  const parts: string[] = [];
  for (let i = 1; i <= count; i += 1) {
    const message = `forged ${i}\n\nLedger-Seq: ${seq + i}\n`;
    parts.push(`commit refs/heads/main\nmark :${i}\ncommitter forger <forger> ${1_700_000_000 + i} +0000\ndata ${Buffer.byteLength(message)}\n${message}${i === 1 ? `from ${head}\n` : ''}M 040000 ${tree} \n\n`);
  }
  const imported = spawnSync('git', ['--git-dir', forge.gitdir, 'fast-import', '--quiet'], { input: parts.join(''), encoding: 'utf8' });
  expect(imported.status, imported.stderr).toBe(0);
  return git(['--git-dir', forge.gitdir, 'rev-parse', `main~${count - 1}`]).trim();
}

describe("a hookless remote whose main is very deep: 150,000 commits no one signed on top of the verified head, within what one fetch takes", { timeout: 300_000 }, () => {
  const deep = tempDir('coo-lies-56-deep-');
  let forge: ServedLedger;
  let writer: Writer;
  let first: string;
  let verified: string;
  /** A small heap: judging up to the first invalid commit needs little of it (a million such commits, judged each, took 79 s and 1 GB before). */
  const smallHeap = { NODE_OPTIONS: '--max-old-space-size=96' };

  beforeAll(async () => {
    forge = await makeServedLedger(join(deep, 'forge'));
    removeHook(forge);
    writer = await makeWriter(deep, 'coo', forge, forge.gitdir);
    verified = forge.head();
    first = deepForgery(forge, 150_000);
  }, 300_000);

  it("a write through it is refused at the first forged commit, with that commit's findings alone (REMOTE_UNVERIFIED), not each of the 150,000 judged and its finding kept; the clone's main stays at what it verified", async () => {
    const refused = await cooAsync(consultArgs(writer, forge), { env: { ...writer.env, ...smallHeap } });
    expect(refused.stderr).toMatch(new RegExp(`^coo: REMOTE_UNVERIFIED: what .* holds does not verify \\(1 finding\\(s\\), first COMMIT_UNSIGNED at ${first.slice(0, 12)}: `));
    expect(refused.status).toBe(3);
    expect(json<{ error: { findings: Array<{ code: string; commit: string }> } }>(refused).error.findings).toEqual([expect.objectContaining({ code: 'COMMIT_UNSIGNED', commit: first })]);
    expect(writer.head()).toBe(verified);
  });

  it('coo clone of it is refused at the first forged commit, and nothing is cloned', async () => {
    const into = join(deep, 'fresh.git');
    const cloned = await cooAsync(['clone', forge.gitdir, into, '--trust-root', forge.ceoKeyId, '--json'], { env: { ...writer.env, ...smallHeap } });
    expect(cloned.stderr).toMatch(new RegExp(`^coo: COMMIT_UNSIGNED: the history of .* does not verify \\(1 finding\\(s\\), first at ${first.slice(0, 12)}\\): .*; nothing was cloned`));
    expect(cloned.status).not.toBe(0);
    expect(existsSync(into)).toBe(false);
  });
});

describe("the forge's check, run as written against a hookless remote, on each push the validator refuses", { timeout: 300_000 }, () => {
  const REPO = join(import.meta.dirname, '..', '..');
  const guarded = tempDir('coo-lies-56-check-');
  let registry: NpmRegistry;
  let forge: ServedLedger;
  let runsHere = 0;

  beforeAll(async () => {
    registry = await startNpmRegistry(REPO);
    const packed = spawnSync('npm', ['pack', REPO, '--pack-destination', guarded, '--silent'], { encoding: 'utf8' });
    expect(packed.status, packed.stderr).toBe(0);
    const tarball = join(guarded, packed.stdout.trim().split('\n').pop()!);
    forge = await makeServedLedger(join(guarded, 'forge'));
    removeHook(forge);
    const chief = await makeWriter(guarded, 'ceo', forge, forge.gitdir);
    const laid = await cooAsync(['forge', 'github', '--ledger', chief.gitdir, '--remote', chief.url, '--ceo-key', forge.keys.ceo, '--package', tarball, '--trust-root', forge.ceoKeyId, '--json'], { env: chief.env });
    expect(laid.status, laid.stderr).toBe(0);
  }, 300_000);

  afterAll(async () => {
    await registry?.close();
  });

  function checkHere(before: string, after: string, schedule = false, defaultBranch?: string): Promise<WorkflowRun> {
    runsHere += 1;
    return runPushWorkflow({
      remote: forge.gitdir,
      before,
      after,
      schedule,
      ...(defaultBranch === undefined ? {} : { defaultBranch }),
      workflowPath: WORKFLOW,
      dir: join(guarded, `run-${runsHere}`),
      machineEnv: { npm_config_registry: registry.url, npm_config_cache: join(guarded, 'npm-cache'), npm_config_update_notifier: 'false', GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: '/dev/null' },
    });
  }

  /** A push straight to the forge of what `make` commits in a stock clone; returns main's head before and after. */
  function pushed(name: string, make: (work: string) => void): { before: string; after: string } {
    const before = forge.head();
    const work = join(guarded, name);
    git(['clone', '-q', forge.gitdir, work]);
    make(work);
    git(['push', '-q', 'origin', 'main'], { cwd: work });
    const after = forge.head();
    expect(after).not.toBe(before);
    return { before, after };
  }

  /** The check failed in its last step, `coo verify`, naming `code` at `commit`; main goes back to `before`, as an administrator would set it. */
  async function failsWith(before: string, after: string, code: string): Promise<void> {
    const run = await checkHere(before, after);
    expect(run.ok).toBe(false);
    expect(run.steps.map((item) => [item.name, item.status])).toEqual([
      ['Check out the pushed commit with its history', 0],
      ['Set up Node.js', 0],
      ['Check that main only moved forward', 0],
      ['Install coo', 0],
      ['Verify the ledger from its trust root', 3],
    ]);
    expect(run.steps[4]!.stdout).toContain(`${code} [${after.slice(0, 12)}`);
    git(['--git-dir', forge.gitdir, 'update-ref', 'refs/heads/main', before]);
  }

  it("a forged commit whose message says [skip ci], which GitHub runs no push check for: the daily run on main's head fails naming it, and on a clean main it passes", async () => {
    const clean = await checkHere(ZERO, forge.head(), true);
    expect(clean.steps.map((item) => [item.name, item.status])).toEqual([
      ['Check out the pushed commit with its history', 0],
      ['Set up Node.js', 0],
      ['Check that main only moved forward', 0],
      ['Install coo', 0],
      ['Verify the ledger from its trust root', 0],
    ]);
    expect(clean.steps[2]!.stdout).toBe(`the daily check of main at ${forge.head()} (a rollback is not seen here: only on the push that made it, a run GitHub skips for [skip ci] and like words)\n`);
    const intruder = join(guarded, 'intruder.key');
    writeFileSync(intruder, formatPrivateKey(generatePrivateKey('intruder')), { mode: 0o600 });
    const { before, after } = pushed('skipper', (work) => {
      stockCommit(work, { 'notes/skipped.yaml': 'x: 1\n' }, { key: intruder, seq: forge.seq() + 1, message: 'routine [skip ci]' });
    });
    const run = await checkHere(before, after, true);
    expect(run.ok).toBe(false);
    expect(run.steps.at(-1)).toMatchObject({ name: 'Verify the ledger from its trust root', status: 3 });
    expect(run.steps.at(-1)!.stdout).toContain(`SIGNER_UNKNOWN [${after.slice(0, 12)} commit]`);
    git(['--git-dir', forge.gitdir, 'update-ref', 'refs/heads/main', before]);
  });

  it("the daily run on a repository whose default branch is not main (where a forger keeps a valid history for the daily run to judge): it fails before it installs anything, naming the branch it ran on and main's head", async () => {
    const main = forge.head();
    // A branch beside main, one commit ahead of it, made the default: the daily run judges it, not main.
    const work = join(guarded, 'decoy');
    git(['clone', '-q', forge.gitdir, work]);
    stockCommit(work, { 'notes/decoy.md': 'x\n' }, { key: forge.keys.coo, seq: forge.seq() + 1 });
    git(['push', '-q', 'origin', 'main:decoy'], { cwd: work });
    const decoy = git(['--git-dir', forge.gitdir, 'rev-parse', 'refs/heads/decoy']).trim();
    try {
      const run = await checkHere(ZERO, decoy, true, 'decoy');
      expect(run.ok).toBe(false);
      expect(run.steps.map((item) => [item.name, item.status])).toEqual([
        ['Check out the pushed commit with its history', 0],
        ['Set up Node.js', 0],
        ['Check that main only moved forward', 1],
      ]);
      expect(run.steps[2]!.stdout).toBe(`::error title=main is not the default branch::the daily check runs on the default branch's head, ${decoy}, and main is at ${main}: make main the repository's default branch\n`);
      expect(forge.head()).toBe(main);
    } finally {
      git(['--git-dir', forge.gitdir, 'update-ref', '-d', 'refs/heads/decoy']);
    }
  });

  it('a merge commit, signed by the COO, whose second parent is the head main had (so main only moved forward)', async () => {
    const { before, after } = pushed('merger', (work) => {
      const head = git(['rev-parse', 'HEAD'], { cwd: work }).trim();
      const merge = git(['-c', 'gpg.format=ssh', '-c', `user.signingkey=${forge.keys.coo}`, 'commit-tree', '-S', `${head}^{tree}`, '-p', `${head}~1`, '-p', head, '-m', 'merge', '-m', `Ledger-Seq: ${forge.seq() + 1}`], { cwd: work }).trim();
      git(['update-ref', 'refs/heads/main', merge], { cwd: work });
    });
    await failsWith(before, after, 'COMMIT_MERGE');
  });

  it("a new version of the actor registry written and signed by the COO's key, not the CEO's", async () => {
    const { before, after } = pushed('registrar', (work) => {
      const current = readFileSync(join(work, 'trust', 'registry', '000001.yaml'), 'utf8');
      stockCommit(work, { 'trust/registry/000002.yaml': current.replace(/version: 1\b/, 'version: 2') }, { key: forge.keys.coo, seq: forge.seq() + 1 });
    });
    await failsWith(before, after, 'TRUST_AUTHORITY');
  });

  it("a commit signed by the COO's key after the CEO revoked it", async () => {
    const ledger = Ledger.open(forge.gitdir);
    try {
      const registry = (await ledger.state()).registry!.doc;
      const stolen = parsePrivateKey(readFileSync(forge.keys.coo, 'utf8'));
      const revoked = await appendTrustVersion(
        ledger,
        { role: 'registry', document: { ...registry, version: undefined }, actorKeys: new Map([['coo.hermes', generatePrivateKey('coo.hermes-next').publicKey]]), revoke: new Map([[stolen.publicKey.keyId, 'stolen']]) },
        parsePrivateKey(readFileSync(forge.keys.ceo, 'utf8')),
        new Date(),
      );
      expect(revoked).toBeDefined();
    } finally {
      ledger.close();
    }
    const { before, after } = pushed('thief', (work) => {
      stockCommit(work, { 'notes/by-thief.md': 'x\n' }, { key: forge.keys.coo, seq: forge.seq() + 1 });
    });
    const run = await checkHere(before, after);
    expect(run.ok).toBe(false);
    expect(run.steps.at(-1)).toMatchObject({ name: 'Verify the ledger from its trust root', status: 3 });
    expect(run.steps.at(-1)!.stdout).toMatch(new RegExp(`SIGNER_REVOKED \\[${after.slice(0, 12)} commit\\]`));
  });
});
