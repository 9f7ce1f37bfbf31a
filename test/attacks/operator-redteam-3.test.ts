import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, chownSync, existsSync, lchownSync, mkdirSync, readdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadPrivateKey } from '../../src/cli/common.js';
import { enqueueConsult } from '../../src/consult/enqueue.js';
import { errorClassOf } from '../../src/errors.js';
import { Ledger } from '../../src/ledger/ledger.js';
import { watchRemote } from '../../src/runner/watch.js';
import { coo } from '../helpers/cli.js';
import { cooBounded, refusal, headOf, startBounded, watchArgs, writeKey } from '../helpers/damage.js';
import { worlds } from '../helpers/lane.js';
import { nothingClaimed, queued } from '../helpers/startup.js';
import { makeServedLedger, type ServedLedger } from '../helpers/remote-ledger.js';
import { makeCase, remoteReceipts } from '../helpers/remote-runners.js';
import { git, tempDir } from '../helpers/tmp.js';

/**
 * A careless operator, round 3: clocks, start-up and the folders a runner makes. Each mistake is
 * found before anything is claimed or paid for, and said as one coded line that says what to do.
 */

const dir = tempDir('operator-redteam-3-');
const HOUR = 3600_000;
const fresh = worlds(join(dir, 'worlds'));
const env = { OPENAI_API_KEY: 'sk-test-key' };

describe('a runner whose clock runs half an hour ahead of the remote it works through', () => {
  const closers: Array<() => Promise<void> | void> = [];
  afterAll(async () => {
    for (const close of closers.reverse()) await close();
  });

  it('stops at its first refused claim (CLOCK_AHEAD, exit 2) saying its clock is ahead of the remote and to set it right, having claimed and paid nothing', async () => {
    const world = await makeCase(join(dir, 'ahead'), closers);
    const messageId = await world.consult();
    const fast = await world.machine('fast');
    const error = await fast.runner({ clock: () => new Date(Date.now() + HOUR / 2) }).runOnce().then(
      () => null,
      (failure: unknown) => failure,
    );
    expect(error).toMatchObject({ code: 'CLOCK_AHEAD', message: expect.stringMatching(/refused the write: CLOCK_SKEW .*claimed_at .*this machine's clock runs ahead of the remote's .*set the wrong clock right \(NTP\)/) });
    expect(errorClassOf('CLOCK_AHEAD')).toBe('usage');
    expect(fast.events.filter((event) => event.type === 'claimed')).toEqual([]);
    expect(await remoteReceipts(world.served, messageId)).toEqual([]);
    expect(world.model.requests).toHaveLength(0);
    const right = await world.machine('right');
    await right.runner().runOnce();
    expect(await remoteReceipts(world.served, messageId)).toEqual([{ attempt: 1, status: 'succeeded', blockers: [] }]);
  });

  it('a watch through the remote ends with CLOCK_AHEAD, from its heartbeat or its pass, never retrying each poll', async () => {
    const world = await makeCase(join(dir, 'ahead-watch'), closers);
    const messageId = await world.consult();
    const fast = await world.machine('fast');
    const runner = fast.runner({ clock: () => new Date(Date.now() + HOUR / 2) });
    const errors: unknown[] = [];
    const ended = await watchRemote(runner, { remote: fast.remote, pollSeconds: 0.05, maxPollSeconds: 0.1, heartbeatSeconds: 3600, onError: (error) => errors.push(error) }).then(
      () => null,
      (failure: unknown) => failure,
    );
    expect(ended).toMatchObject({ code: 'CLOCK_AHEAD' });
    expect(errors).toEqual([]);
    expect(await remoteReceipts(world.served, messageId)).toEqual([]);
    expect(world.model.requests).toHaveLength(0);
  });
});

/** Puts a commit holding `mib` MiB of random bytes on the served main, past its hook: a remote that sends that much for main. */
function growServed(served: ServedLedger, mib: number): void {
  const blob = spawnSync('git', ['--git-dir', served.gitdir, 'hash-object', '-w', '--stdin'], { input: randomBytes(mib * 1024 * 1024) }).stdout.toString('utf8').trim();
  const tree = git(['--git-dir', served.gitdir, 'mktree'], { input: `100644 blob ${blob}\tnoise.bin\n` }).trim();
  git(['--git-dir', served.gitdir, 'update-ref', 'refs/heads/main', git(['--git-dir', served.gitdir, 'commit-tree', tree, '-p', 'main', '-m', 'noise']).trim()]);
}

describe('coo clone and coo watch --remote take --max-fetch (MiB): the bound of one fetch, 1024 MiB by default, can be raised', () => {
  it('coo clone --max-fetch 1 stops a remote that sends 3 MiB and says to raise --max-fetch; --max-fetch 8 fetches it (and the validator, not the bound, refuses it); a small ledger clones within 1 MiB', async () => {
    const place = join(dir, 'max-fetch-clone');
    const served = await makeServedLedger(place);
    const small = coo(['clone', served.gitdir, join(place, 'small.git'), '--trust-root', served.ceoKeyId, '--max-fetch', '1']);
    expect(small.status).toBe(0);
    growServed(served, 3);
    const bounded = coo(['clone', served.gitdir, join(place, 'bounded.git'), '--trust-root', served.ceoKeyId, '--max-fetch', '1']);
    expect(bounded.status).toBe(3);
    expect(bounded.stderr).toMatch(/^coo: REMOTE_UNVERIFIED: .*received more than 1 MiB, the most one fetch takes; .*nothing was cloned; a ledger that large is cloned with a higher --max-fetch \(MiB\)\n$/);
    const raised = coo(['clone', served.gitdir, join(place, 'raised.git'), '--trust-root', served.ceoKeyId, '--max-fetch', '8']);
    expect(raised.status).toBe(3);
    expect(raised.stderr).not.toMatch(/one fetch takes/);
    expect(raised.stderr).toMatch(/does not verify/);
    expect(readdirSync(place).filter((name) => name.includes('bounded') || name.includes('raised'))).toEqual([]);
  });

  it('coo watch --remote --max-fetch 1 fetches within 1 MiB at start: a remote that sends 3 MiB is stopped at it, nothing claimed', async () => {
    const place = join(dir, 'max-fetch-watch');
    const served = await makeServedLedger(place);
    const clone = join(place, 'clone.git');
    expect(coo(['clone', served.gitdir, clone, '--trust-root', served.ceoKeyId]).status).toBe(0);
    growServed(served, 3);
    const args = ['watch', '--ledger', clone, '--remote', served.gitdir, '--key', served.keys.coo, '--repo', served.target, '--state-dir', join(place, 'state'), '--isolation', 'none', '--once'];
    const bounded = coo([...args, '--max-fetch', '1']);
    expect(bounded.status).toBe(3);
    expect(bounded.stderr).toMatch(/REMOTE_UNVERIFIED: .*received more than 1 MiB, the most one fetch takes; .*higher --max-fetch/);
    const unbounded = coo(args);
    expect(unbounded.stderr).not.toMatch(/one fetch takes/);
  });

  it('refuses a --max-fetch of 0, below 0, a fraction, not a number, past 1 TiB, or without --remote, to coo clone, coo watch and coo mcp --run (USAGE, exit 2, nothing cloned)', () => {
    for (const value of ['0', '-1', '1.5', 'abc', '', '1e3', '1048577']) {
      const target = join(dir, 'never.git');
      const result = coo(['clone', join(dir, 'nowhere.git'), target, '--trust-root', 'SHA256:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA', '--max-fetch', value]);
      const said = value === '' ? '--max-fetch was given an empty value (a shell variable that is unset or empty?): give it a value, or leave the flag out for its default; nothing was done' : `--max-fetch takes a whole number of MiB from 1 to 1048576 (default 1024), got ${JSON.stringify(value)}`;
      expect({ value, status: result.status, stderr: result.stderr }).toEqual({ value, status: 2, stderr: `coo: USAGE: ${said}\n` });
      expect(existsSync(target)).toBe(false);
    }
    for (const verb of [['watch'], ['mcp', '--run']]) {
      const ran = coo([...verb, '--ledger', join(dir, 'nowhere.git'), '--key', join(dir, 'none.key'), '--repo', dir, '--max-fetch', '8']);
      expect({ verb, status: ran.status, stderr: ran.stderr }).toEqual({ verb, status: 2, stderr: 'coo: USAGE: --max-fetch goes with --remote\n' });
      const zero = coo([...verb, '--ledger', join(dir, 'nowhere.git'), '--key', join(dir, 'none.key'), '--repo', dir, '--remote', join(dir, 'nowhere.git'), '--max-fetch', '0']);
      expect({ verb, status: zero.status, stderr: zero.stderr }).toEqual({ verb, status: 2, stderr: 'coo: USAGE: --max-fetch takes a whole number of MiB from 1 to 1048576 (default 1024), got "0"\n' });
    }
  });

  it('--help of coo clone, coo watch and coo mcp says what --max-fetch bounds, in MiB, and its default', () => {
    for (const verb of ['clone', 'watch', 'mcp']) {
      const help = coo([verb, '--help']).stdout.replace(/\s+/g, ' ');
      expect(help).toMatch(/--max-fetch <MiB> .*the most one fetch of the remote's main may bring, in MiB \(default 1024\)/);
    }
  });
});

describe('coo watch started by a careless operator refuses at start (exit 2, one coded line), claiming nothing', () => {
  it('a key file that holds no usable private key (empty, garbage, an ECDSA key) is USAGE naming the file and saying which key to give, never KEY_MALFORMED (exit 3)', async () => {
    const world = await fresh();
    const ids = await queued(world);
    const before = headOf(world.gitdir);
    const ecdsa = join(world.dir, 'ecdsa.key');
    spawnSync('ssh-keygen', ['-q', '-t', 'ecdsa', '-N', '', '-f', ecdsa]);
    expect(existsSync(ecdsa)).toBe(true);
    const files = { empty: '', garbage: 'hello\n' };
    const paths = [...Object.entries(files).map(([name, text]) => {
      const path = join(world.dir, `${name}.key`);
      writeFileSync(path, text, { mode: 0o600 });
      return path;
    }), ecdsa];
    for (const path of paths) {
      const line = refusal(await startBounded([...watchArgs(world, path, join(world.dir, 'state')), '--once', '--isolation', 'none'], env).ended);
      expect(line).toMatch(new RegExp(`^coo: USAGE: the key file ${path} holds no usable private key \\(.+\\): give the unencrypted ed25519 private key coo keygen wrote \\(ID\\.key\\)$`));
    }
    await nothingClaimed(world, before, ids);
  });

  it('a provider key that is whitespace alone, or carries a line end, is refused at start as a missing one is (ORACLE_CONFIG, exit 2), the value never shown', async () => {
    const world = await fresh();
    const ids = await queued(world);
    const before = headOf(world.gitdir);
    const args = [...watchArgs(world, writeKey(world.dir, 'coo', world.actors.coo), join(world.dir, 'state')), '--once', '--isolation', 'none'];
    const blank = refusal(await startBounded(args, { OPENAI_API_KEY: '   ' }).ended);
    expect(blank).toMatch(/^coo: ORACLE_CONFIG: no lane can run here, so nothing is claimed: consults to aa\.chatgpt: OPENAI_API_KEY is set to whitespace alone in the runner's environment: set it to the provider's key; .*dispatches to ea\.codex: OPENAI_API_KEY is set to whitespace alone/);
    const newline = refusal(await startBounded(args, { OPENAI_API_KEY: 'sk-secret-value\n' }).ended);
    expect(newline).toMatch(/consults to aa\.chatgpt: OPENAI_API_KEY holds a space, a line end or another character no provider key has \(a key read from a file with its newline\?\): set it to the key alone/);
    expect(newline).not.toContain('sk-secret-value');
    await nothingClaimed(world, before, ids);
  });

  it('a --ledger that is an empty repository, holding no trust root, is RUNNER_CONFIG saying what to give, never a watch that runs and does nothing', async () => {
    const world = await fresh();
    const empty = join(world.dir, 'empty.git');
    git(['init', '-q', '--bare', empty]);
    const args = ['watch', '--ledger', empty, '--key', writeKey(world.dir, 'coo', world.actors.coo), '--repo', world.target, '--state-dir', join(world.dir, 'state'), '--oracle-base-url', `${world.server.url}/v1`, '--isolation', 'none'];
    const line = refusal(await startBounded([...args, '--once'], env).ended);
    expect(line).toBe(`coo: RUNNER_CONFIG: ${empty} holds no trust root (no commit): it is not a ledger coo init made or coo clone verified, so no key may act as its runner; give the ledger's path (--ledger or $COO_LEDGER), or make one with coo init`);
    expect(refusal(await startBounded(args, env).ended)).toBe(line);
  });

  it('coo mcp --run --poll-interval past a day (1e9 s, a timer that would fire at once) is USAGE as coo watch says it', () => {
    for (const verb of [['mcp', '--run'], ['watch']]) {
      const ran = cooBounded([...verb, '--ledger', join(dir, 'nowhere.git'), '--key', join(dir, 'none.key'), '--repo', dir, '--poll-interval', '1e9']);
      expect(refusal(ran)).toBe('coo: USAGE: --poll-interval takes a number of seconds above 0 and at most 86400, got "1e9"');
    }
  });
});

describe('a --remote on this machine that is a repository with a work tree (git clone, not coo init --bare)', () => {
  it('is refused by coo watch at start and by coo clone (USAGE, exit 2), never a claim pushed and refused on every pass', async () => {
    const place = join(dir, 'non-bare');
    const served = await makeServedLedger(place);
    const ledger = Ledger.open(served.gitdir);
    await enqueueConsult({ ledger, key: loadPrivateKey(served.keys.coo), now: new Date(), target: 'aa.chatgpt', repo: served.target, patterns: ['README.md'], question: 'Is add() correct for NaN?', maxRuntimeSeconds: 60 });
    ledger.close();
    const clone = join(place, 'clone.git');
    expect(coo(['clone', served.gitdir, clone, '--trust-root', served.ceoKeyId]).status).toBe(0);
    // The operator moves the ledger into a work tree and points the clone's origin there.
    const work = join(place, 'work');
    git(['clone', '-q', served.gitdir, work]);
    git(['--git-dir', clone, 'config', 'remote.origin.url', work]);
    const before = headOf(join(work, '.git'));
    const args = ['watch', '--ledger', clone, '--remote', work, '--key', served.keys.coo, '--repo', served.target, '--state-dir', join(place, 'state'), '--isolation', 'none', '--once', '--oracle-base-url', 'http://127.0.0.1:9/v1'];
    const line = refusal(await startBounded(args, env).ended);
    expect(line).toBe(`coo: USAGE: ${work} is a repository with a work tree, not a bare ledger: git refuses every push to its checked-out main, so a write through it could write nothing there; give the bare ledger coo init made (git init --bare and push main to it to move one), and clone that with coo clone; nothing was written or claimed`);
    expect(headOf(join(work, '.git'))).toBe(before);
    const cloned = coo(['clone', work, join(place, 'again.git'), '--trust-root', served.ceoKeyId]);
    expect({ status: cloned.status, stderr: cloned.stderr }).toEqual({ status: 2, stderr: expect.stringMatching(/^coo: USAGE: \S+ is a repository with a work tree, not a bare ledger: .*so a clone of it could write nothing there; /) });
    expect(existsSync(join(place, 'again.git'))).toBe(false);
  });
});

describe("the private folder of the runner's sockets (the ssh connection it shares, each attempt's consult socket), made first by another local user", () => {
  it('a link, a folder of another owner, or one others may write is refused (RUNNER_CONFIG, exit 2) naming what to remove, and nothing is made through it', async () => {
    const world = await fresh();
    const ids = await queued(world);
    const before = headOf(world.gitdir);
    const args = [...watchArgs(world, writeKey(world.dir, 'coo', world.actors.coo), join(world.dir, 'state')), '--once', '--isolation', 'none'];
    const uid = process.getuid!();
    const cases: Array<[string, (folder: string) => void]> = [
      ['link', (folder) => {
        mkdirSync(join(world.dir, 'theirs'));
        symlinkSync(join(world.dir, 'theirs'), folder);
      }],
      ['other owner', (folder) => {
        mkdirSync(folder, { mode: 0o700 });
        chownSync(folder, uid === 0 ? 65534 : uid, uid === 0 ? 65534 : 0);
      }],
      ['open to others', (folder) => {
        mkdirSync(folder, { mode: 0o700 });
        chmodSync(folder, 0o1777);
      }],
    ];
    for (const [name, make] of cases) {
      if (name === 'other owner' && uid !== 0) continue;
      const tmp = join(world.dir, `tmp-${name.replace(/ /g, '-')}`);
      mkdirSync(tmp);
      const folder = join(tmp, `coo-sockets-${uid}`);
      make(folder);
      const line = refusal(await startBounded(args, { ...env, TMPDIR: tmp }).ended);
      expect(line).toBe(`coo: RUNNER_CONFIG: ${folder}, the runner's private folder for its sockets, is not a folder only this user may enter (a link, another owner, or open to others): remove it, or set TMPDIR to a private folder`);
    }
    expect(readdirSync(join(world.dir, 'theirs'))).toEqual([]);
    await nothingClaimed(world, before, ids);
  });
});

describe('a --state-dir another local user made first (in /tmp, say)', () => {
  it('is refused (RUNNER_CONFIG, exit 2) when another user owns it, reaches it through a link of theirs, or every user may write in it, naming what to remove; nothing claimed', async () => {
    const world = await fresh();
    const ids = await queued(world);
    const before = headOf(world.gitdir);
    const key = writeKey(world.dir, 'coo', world.actors.coo);
    const uid = process.getuid!();
    const cases: Array<[string, string, (folder: string) => void]> = [
      ['open', 'may be written by every user', (folder) => {
        mkdirSync(folder);
        chmodSync(folder, 0o1777);
      }],
    ];
    if (uid === 0) {
      cases.push(['theirs', 'belongs to another user (uid 65534)', (folder) => {
        mkdirSync(folder);
        chownSync(folder, 65534, 65534);
      }]);
      cases.push(['their-link', 'is a link another user owns (uid 65534)', (folder) => {
        mkdirSync(`${folder}-target`, { mode: 0o700 });
        symlinkSync(`${folder}-target`, folder);
        lchownSync(folder, 65534, 65534);
      }]);
    }
    for (const [name, why, make] of cases) {
      const stateDir = join(world.dir, `state-${name}`);
      make(stateDir);
      const line = refusal(await startBounded([...watchArgs(world, key, stateDir), '--once', '--isolation', 'none'], env).ended);
      expect(line).toBe(`coo: RUNNER_CONFIG: ${stateDir}, the runner's state folder, ${why}: another user could read its work or put links in it; remove it (or give a folder of your own), and start again`);
    }
    await nothingClaimed(world, before, ids);
  });
});
