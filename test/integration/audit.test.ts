import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { COO, coo, cooAsync, json } from '../helpers/cli.js';
import { startFakeGitHub, type FakeGitHub } from '../helpers/fake-github.js';
import { git, gitEnv, run, tempDir } from '../helpers/tmp.js';

const dir = tempDir();
const demo = join(dir, 'demo');
const ledger = join(demo, 'ledger.git');
const stateDir = join(dir, 'verified');
let succeeded = '';
let injected = '';

beforeAll(() => {
  const result = coo(['demo', '--dir', demo]);
  expect(result.status).toBe(0);
  succeeded = /(msg_\w+): succeeded/.exec(result.stdout)![1]!;
  injected = /(msg_\w+): failed/.exec(result.stdout)![1]!;
});

/** Adds a commit to the ledger behind the hook's back, as anyone with write access to the files could. */
function bypass(files: Record<string, string>, seq: number, key: string): void {
  const work = join(dir, `bypass-${seq}-${Math.random().toString(36).slice(2)}`);
  git(['clone', '-q', ledger, work]);
  for (const [path, content] of Object.entries(files)) {
    mkdirSync(join(work, path, '..'), { recursive: true });
    writeFileSync(join(work, path), content);
  }
  git(['add', '-A'], { cwd: work });
  git(['-c', 'gpg.format=ssh', '-c', `user.signingkey=${key}`, 'commit', '-q', '-S', '-m', 'bypass', '-m', `Ledger-Seq: ${seq}`], { cwd: work, env: gitEnv() });
  git(['--git-dir', ledger, 'fetch', '-q', work, 'main:refs/heads/main']);
}

describe('auditing with stock tools, following the ledger README', () => {
  it('gets Good signatures on every commit with the commands the README gives', () => {
    const readme = git(['--git-dir', ledger, 'show', 'main:README.md']);
    const blocks = [...readme.matchAll(/```sh\n([\s\S]*?)```/g)].map((match) => match[1]!.replace(/\\\n\s*/g, ' ').trim());
    const signers = blocks.find((block) => block.startsWith('coo allowed-signers'))!;
    const log = blocks.find((block) => block.includes('--show-signature'))!;
    // Run the README's commands as written, through a shell, with `coo` on the PATH.
    const bin = join(dir, 'bin');
    mkdirSync(bin, { recursive: true });
    writeFileSync(join(bin, 'coo'), `#!/bin/sh\nexec "${process.execPath}" "${COO}" "$@"\n`, { mode: 0o755 });
    const shell = (command: string) => run('sh', ['-c', command], { cwd: demo, env: { ...gitEnv(), PATH: `${bin}:${process.env['PATH'] ?? ''}` } });
    expect(shell(signers).status).toBe(0);
    const result = shell(log);
    expect(result.status).toBe(0);
    const statuses = result.stdout.split('\n').filter((line) => /^[0-9a-f]{40} /.test(line)).map((line) => line.split(' ').slice(1, 3).join(' '));
    expect(statuses.length).toBe(10);
    expect(statuses.every((status) => status === 'G coo.hermes' || status === 'G ceo')).toBe(true);
  });
});

describe('coo cite', () => {
  let github: FakeGitHub;
  beforeAll(async () => {
    github = await startFakeGitHub();
  });
  afterAll(async () => {
    await github.close();
  });

  it('prints Markdown marked advisory, with the verdict, hashes, ledger commit and verification', () => {
    const result = coo(['cite', succeeded, '--ledger', ledger]);
    expect(result.status).toBe(0);
    const text = result.stdout;
    expect(text).toContain('Advisory evidence, not authority');
    expect(text).toContain('**Verdict:** approve_with_changes');
    expect(text).toMatch(/\| prompt \| `sha256:[0-9a-f]{64}` \|/);
    expect(text).toMatch(/\| context \| `sha256:[0-9a-f]{64}`: 3 file\(s\) pinned at commit `[0-9a-f]{12}` \|/);
    expect(text).toMatch(/\| output \| `sha256:[0-9a-f]{64}` \|/);
    expect(text).toMatch(/in ledger commit `[0-9a-f]{12}` \(Ledger-Seq \d+\)/);
    expect(text).toContain('verified by `coo verify`');
  });

  it('cites a failed consult by its blockers, never as advice', () => {
    const text = coo(['cite', injected, '--ledger', ledger]).stdout;
    expect(text).toContain(': **failed**');
    expect(text).toContain('`output_injection`');
    expect(text).not.toContain('**Verdict:**');
    expect(text).not.toContain('curl https://evil');
  });

  it('posts once through the GitHub API and does not duplicate the comment when posted again', async () => {
    const env = { GITHUB_TOKEN: 'ghp_test_token', GITHUB_API_URL: github.url };
    const first = await cooAsync(['cite', succeeded, '--ledger', ledger, '--post', 'lifeos/calc#62', '--json'], { env });
    expect(first.status).toBe(0);
    expect(json(first)).toMatchObject({ posted: true });
    const second = await cooAsync(['cite', succeeded, '--ledger', ledger, '--post', 'lifeos/calc#62', '--json'], { env });
    expect(json(second)).toMatchObject({ posted: false });
    expect(github.comments).toHaveLength(1);
    expect(github.comments[0]!.body).toContain('Advisory evidence, not authority');
    expect(github.requests.filter((request) => request.method === 'POST')).toHaveLength(1);
    expect(github.requests.every((request) => request.authorization === 'token ghp_test_token')).toBe(true);
    expect(first.stdout + first.stderr + second.stdout + second.stderr).not.toContain('ghp_test_token');
  });

  it('refuses a token no forge takes (pasted with its quotes, read with its line end), and sends nothing', async () => {
    const before = github.requests.length;
    for (const token of ['"ghp_test_token"', 'ghp_test_token\n']) {
      const result = await cooAsync(['cite', succeeded, '--ledger', ledger, '--post', 'lifeos/calc#64', '--json'], { env: { GITHUB_TOKEN: token, GITHUB_API_URL: github.url } });
      expect(result.status).toBe(2);
      expect(json<{ error: { code: string; message: string } }>(result).error).toMatchObject({ code: 'USAGE', message: expect.stringContaining('not posting: GITHUB_TOKEN holds') });
      expect(result.stdout + result.stderr).not.toContain('ghp_test_token');
    }
    expect(github.requests.length).toBe(before);
  });

  it('refuses to post evidence that does not verify, and sends nothing', async () => {
    const keys = join(demo, 'keys');
    const state = json<Array<{ seq: number }>>(coo(['log', '--ledger', ledger, '--json', '-n', '1']));
    const promptPath = git(['--git-dir', ledger, 'ls-tree', '-r', '--name-only', 'main']).split('\n').find((path) => path.includes(succeeded) && path.endsWith('prompt.md'))!;
    const tampered = git(['--git-dir', ledger, 'show', `main:${promptPath}`]).replace('Review add()', 'Approve everything in');
    bypass({ [promptPath]: tampered }, state[0]!.seq + 1, join(keys, 'coo.hermes.key'));
    const before = github.requests.length;
    const result = await cooAsync(['cite', succeeded, '--ledger', ledger, '--post', 'lifeos/calc#63'], { env: { GITHUB_TOKEN: 'ghp_test_token', GITHUB_API_URL: github.url } });
    expect(result.status).toBe(3);
    expect(result.stderr).toContain('not posting');
    expect(github.requests.length).toBe(before);
    const cited = coo(['cite', succeeded, '--ledger', ledger]).stdout;
    expect(cited).toContain('**NOT VERIFIED**');
    // The question is read as the receipt's commit holds it, never as a later commit replaced it.
    expect(cited).not.toContain('Approve everything in');
  });
});

describe('coo report', () => {
  it('renders the timeline, states, spend, signers and the tampered entry in a real browser', async () => {
    const out = join(dir, 'report.html');
    const result = coo(['report', '--ledger', ledger, '--html', out]);
    // The ledger holds a tampered entry: the page is written, and the run says so by its status.
    expect(result.status).toBe(3);
    const html = readFileSync(out, 'utf8');
    expect(html).not.toMatch(/<script|https?:\/\/(?!www\.w3\.org)/);
    const { chromium } = await import('playwright-core');
    const browser = await chromium.launch({
      executablePath: process.env['CHROMIUM_PATH'] ?? '/usr/bin/chromium',
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    });
    try {
      const page = await browser.newPage({ viewport: { width: 1300, height: 900 } });
      await page.goto(`file://${out}`);
      await expect(page.locator('header .status').textContent()).resolves.toMatch(/verification finding/);
      const findings = await page.locator('#findings .finding').allTextContents();
      expect(findings.join(' ')).toContain('WRITE_ONCE');
      expect(await page.locator('tr.commit.tampered').count()).toBe(1);
      expect(await page.locator('tr.commit.tampered').textContent()).toContain('WRITE_ONCE');
      expect(await page.locator(`tr.message[data-state="succeeded"][data-intent="aa_consult"]`).textContent()).toContain(succeeded);
      expect(await page.locator('tr.message.tampered').textContent()).toContain(succeeded);
      expect(await page.locator(`tr.message[data-state="failed"]`).textContent()).toContain('output_injection');
      expect(await page.locator('#spend').textContent()).toContain('Per correlation');
      const dispatch = await page.locator('#dispatches tr.dispatch[data-status="succeeded"]').textContent();
      expect(dispatch).toMatch(/coo\/msg_\w+ at [0-9a-f]{10}/);
      expect(dispatch).toContain('exit 0 node --test');
      expect(dispatch).toMatch(/\$0\.\d+/);
      expect(await page.locator('#timeline tr.commit').count()).toBe(11);
      const signers = await page.locator('#timeline tr.commit td:nth-child(4)').allTextContents();
      expect(signers.some((text) => text.startsWith('ceo'))).toBe(true);
      mkdirSync(join(import.meta.dirname, '..', '..', 'test-artifacts'), { recursive: true });
      await page.screenshot({ path: join(import.meta.dirname, '..', '..', 'test-artifacts', 'report.png'), fullPage: true });
    } finally {
      await browser.close();
    }
  });
});

describe('coo verify over time', () => {
  it('verifies incrementally from the last verified head, and fully on --full', () => {
    const fresh = join(dir, 'fresh');
    expect(coo(['demo', '--dir', fresh]).status).toBe(0);
    const gitdir = join(fresh, 'ledger.git');
    const first = json<{ incremental: boolean; replayed: number }>(coo(['verify', '--ledger', gitdir, '--state-dir', stateDir, '--json']));
    expect(first).toMatchObject({ incremental: false, replayed: 10 });
    expect(coo(['kill-switch', 'on', '--reason', 'audit', '--ledger', gitdir, '--key', join(fresh, 'keys', 'ceo.key')]).status).toBe(0);
    const second = json<{ incremental: boolean; replayed: number; ok: boolean }>(coo(['verify', '--ledger', gitdir, '--state-dir', stateDir, '--json']));
    expect(second).toMatchObject({ ok: true, incremental: true, replayed: 1 });
    expect(json(coo(['verify', '--ledger', gitdir, '--state-dir', stateDir, '--json', '--full']))).toMatchObject({ incremental: false, replayed: 11 });
  });

  it('reports a rollback to an older head, and a fork', () => {
    const fresh = join(dir, 'rollback');
    expect(coo(['demo', '--dir', fresh]).status).toBe(0);
    const gitdir = join(fresh, 'ledger.git');
    expect(coo(['verify', '--ledger', gitdir, '--state-dir', stateDir]).status).toBe(0);
    const head = git(['--git-dir', gitdir, 'rev-parse', 'main']).trim();
    git(['--git-dir', gitdir, 'update-ref', 'refs/heads/main', 'main~2']);
    const rolled = coo(['verify', '--ledger', gitdir, '--state-dir', stateDir, '--json']);
    expect(rolled.status).toBe(3);
    expect(json<{ findings: Array<{ code: string }> }>(rolled).findings.map((finding) => finding.code)).toEqual(['HISTORY_ROLLBACK']);
    git(['--git-dir', gitdir, 'update-ref', 'refs/heads/main', head]);
    expect(coo(['verify', '--ledger', gitdir, '--state-dir', stateDir]).status).toBe(0);
    // A fork: another line of history from an earlier commit, same sequence numbers.
    const keys = join(fresh, 'keys');
    git(['--git-dir', gitdir, 'update-ref', 'refs/heads/main', 'main~1']);
    expect(coo(['kill-switch', 'on', '--reason', 'fork', '--ledger', gitdir, '--key', join(keys, 'ceo.key')]).status).toBe(0);
    const forked = coo(['verify', '--ledger', gitdir, '--state-dir', stateDir, '--json']);
    expect(json<{ findings: Array<{ code: string }> }>(forked).findings.map((finding) => finding.code)).toEqual(['HISTORY_FORK']);
  });

  it('keeps the head an older format of the checkpoint names: a rollback after an upgrade is reported, and the state is replayed in full', () => {
    const fresh = join(dir, 'upgraded');
    const own = join(dir, 'upgraded-verified');
    expect(coo(['demo', '--dir', fresh]).status).toBe(0);
    const gitdir = join(fresh, 'ledger.git');
    expect(coo(['verify', '--ledger', gitdir, '--state-dir', own]).status).toBe(0);
    const files = readdirSync(own, { recursive: true, withFileTypes: true }).filter((entry) => entry.isFile() && entry.name.endsWith('.json'));
    expect(files).toHaveLength(1);
    const file = join(files[0]!.parentPath, files[0]!.name);
    // As an earlier version of coo wrote it: another format, a state of another shape.
    writeFileSync(file, JSON.stringify({ ...(JSON.parse(readFileSync(file, 'utf8')) as object), format: 1, state: { shape: 'older' } }));
    const head = git(['--git-dir', gitdir, 'rev-parse', 'main']).trim();
    git(['--git-dir', gitdir, 'update-ref', 'refs/heads/main', 'main~2']);
    const rolled = coo(['verify', '--ledger', gitdir, '--state-dir', own, '--json']);
    expect(rolled.status).toBe(3);
    expect(json<{ findings: Array<{ code: string }> }>(rolled).findings.map((finding) => finding.code)).toEqual(['HISTORY_ROLLBACK']);
    git(['--git-dir', gitdir, 'update-ref', 'refs/heads/main', head]);
    expect(json(coo(['verify', '--ledger', gitdir, '--state-dir', own, '--json']))).toMatchObject({ ok: true, incremental: false, replayed: 10 });
  });

  it("reports a ledger whose latest heartbeat has expired, and a trust root that is not the pinned one", () => {
    const fresh = join(dir, 'heartbeat');
    expect(coo(['demo', '--dir', fresh]).status).toBe(0);
    const gitdir = join(fresh, 'ledger.git');
    const state = json<Array<{ seq: number }>>(coo(['log', '--ledger', gitdir, '--json', '-n', '1']));
    const seq = state[0]!.seq + 1;
    const hour = '2026-11/29/00';
    const beat = `schema_version: heartbeat.v0\nrunner_id: old-runner\nledger_seq: ${seq}\ncreated_at: "2026-11-29T00:00:00Z"\nexpires_at: "2026-11-29T00:15:00Z"\n`;
    const path = `heartbeats/${hour}/${String(seq).padStart(10, '0')}.yaml`;
    const work = join(dir, 'hb-work');
    git(['clone', '-q', gitdir, work]);
    mkdirSync(join(work, 'heartbeats', hour), { recursive: true });
    writeFileSync(join(work, path), beat);
    expect(run('ssh-keygen', ['-Y', 'sign', '-n', 'coo-commons.entry.v0', '-f', join(fresh, 'keys', 'coo.hermes.key'), join(work, path)]).status).toBe(0);
    git(['add', '-A'], { cwd: work });
    git(['-c', 'gpg.format=ssh', '-c', `user.signingkey=${join(fresh, 'keys', 'coo.hermes.key')}`, 'commit', '-q', '-S', '-m', 'heartbeat', '-m', `Ledger-Seq: ${seq}`], { cwd: work, env: gitEnv() });
    expect(run('git', ['push', '-q', 'origin', 'main'], { cwd: work, env: gitEnv() }).status).toBe(0);
    const expired = coo(['verify', '--ledger', gitdir, '--no-checkpoint', '--json']);
    expect(expired.status).toBe(3);
    expect(json<{ findings: Array<{ code: string }> }>(expired).findings.map((finding) => finding.code)).toEqual(['HEARTBEAT_EXPIRED']);
    const pinned = coo(['verify', '--ledger', gitdir, '--no-checkpoint', '--json', '--trust-root', join(fresh, 'keys', 'coo.hermes.pub')]);
    expect(json<{ findings: Array<{ code: string }> }>(pinned).findings.map((finding) => finding.code)).toContain('TRUST_ROOT_MISMATCH');
  });
});
