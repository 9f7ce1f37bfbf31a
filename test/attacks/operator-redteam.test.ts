import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { formatPublicKeyLine, generatePrivateKey } from '../../src/crypto/keys.js';
import { appendTrustVersion } from '../../src/ledger/trust-update.js';
import { COO } from '../helpers/cli.js';
import { requireBubblewrap } from '../helpers/bubblewrap.js';
import { cooBounded, refusal, HUNG_MS, until, headOf, startBounded, watchArgs, writeKey, type BoundedResult } from '../helpers/damage.js';
import { makeTargetRepo, worlds } from '../helpers/lane.js';
import { nothingClaimed, queued } from '../helpers/startup.js';
import { git, tempDir } from '../helpers/tmp.js';

/**
 * A careless operator and a real deployment: a mistake in how the runner was started is found
 * before anything is claimed (exit 2, one coded line), never in the middle of an attempt it would
 * leave claimed and unrun, burning a consult's attempt or a dispatch the CEO must approve again.
 */

const dir = tempDir('operator-redteam-');
const fresh = worlds(dir);
const env = { OPENAI_API_KEY: 'sk-test-key' };

describe('coo watch started in a broken environment refuses at start, claiming nothing', () => {
  it('with --json, the refusal is one JSON line on standard output, as each event of coo watch --json is', async () => {
    const world = await fresh();
    const ids = await queued(world);
    const before = headOf(world.gitdir);
    const args = watchArgs(world, writeKey(world.dir, 'coo', world.actors.coo), join(world.dir, 'state'));
    const missing = join(world.dir, 'no-such-tmp');
    const refused = await startBounded([...args, '--once', '--json'], { ...env, TMPDIR: missing }).ended;
    expect(refused.status).toBe(2);
    const lines = refused.stdout.trimEnd().split('\n');
    expect(lines).toHaveLength(1);
    expect(JSON.parse(lines[0]!)).toMatchObject({ ok: false, error: { code: 'RUNNER_CONFIG', message: expect.stringContaining(`cannot make ${missing}/coo-sockets-`) } });
    await nothingClaimed(world, before, ids);
  });

  it('refuses a TMPDIR that names no folder (the runner keeps its sockets there) before a claim', async () => {
    const world = await fresh();
    const ids = await queued(world);
    const before = headOf(world.gitdir);
    const missing = join(world.dir, 'no-such-tmp');
    const args = watchArgs(world, writeKey(world.dir, 'coo', world.actors.coo), join(world.dir, 'state'));
    const line = refusal(await startBounded([...args, '--once'], { ...env, TMPDIR: missing }).ended);
    expect(line).toBe(`coo: RUNNER_CONFIG: cannot make ${missing}/coo-sockets-${process.getuid!()}, the runner's private folder for its sockets (ENOENT): set TMPDIR to a folder that exists and this user may write, or unset it`);
    await nothingClaimed(world, before, ids);
  });

  it('refuses a --state-dir it cannot make or write (a file in the way) before a claim', async () => {
    const world = await fresh();
    const ids = await queued(world);
    const before = headOf(world.gitdir);
    const file = join(world.dir, 'a-file');
    writeFileSync(file, 'not a folder\n');
    const stateDir = join(file, 'state');
    const args = watchArgs(world, writeKey(world.dir, 'coo', world.actors.coo), stateDir);
    const line = refusal(await startBounded([...args, '--once'], env).ended);
    expect(line).toBe(`coo: RUNNER_CONFIG: cannot write in ${stateDir}, the runner's state folder (ENOTDIR): every attempt's sandbox and worktree is made there; give a writable --state-dir on a file system with room`);
    await nothingClaimed(world, before, ids);
    // coo mcp --run runs the same start-up checks.
    const mcp = cooBounded(['mcp', '--run', '--ledger', world.gitdir, '--key', writeKey(world.dir, 'coo', world.actors.coo), '--repo', world.target, '--state-dir', stateDir], { env });
    expect(refusal(mcp)).toBe(line);
    await nothingClaimed(world, before, ids);
  });

  it('refuses a ledger on a read-only file system with a coded line, not an internal error, before a claim', async () => {
    const world = await fresh();
    const ids = await queued(world);
    const before = headOf(world.gitdir);
    const args = watchArgs(world, writeKey(world.dir, 'coo', world.actors.coo), join(world.dir, 'state'));
    // The ledger mounted read-only for this one command (bubblewrap: a read-only bind), as on a read-only volume.
    const mount = ['--bind', '/', '/', '--dev', '/dev', '--proc', '/proc', '--ro-bind', world.gitdir, world.gitdir, '--'];
    const ran = spawnSync(requireBubblewrap('a read-only ledger'), [...mount, process.execPath, COO, ...args, '--once', '--isolation', 'none'], {
      env: { ...process.env, ...env, COO_LEDGER: '', COO_KEY: '', XDG_STATE_HOME: join(world.dir, 'xdg') },
      encoding: 'utf8',
      timeout: HUNG_MS,
    });
    const line = refusal({ status: ran.status, stdout: ran.stdout, stderr: ran.stderr });
    expect(line).toBe(`coo: RUNNER_CONFIG: cannot write in ${world.gitdir}/coo/runners, the ledger's folder of runners (EROFS): the runner commits its claims and receipts in the ledger; run it where the ledger is writable (a clone of it with --remote, coo clone)`);
    await nothingClaimed(world, before, ids);
  });
});

describe('a script that asked for --json reads every failure as coded JSON on standard output', () => {
  it('a malformed command line (an unknown option, a missing argument) is a USAGE object, exit 2, and one coded line on stderr', () => {
    for (const [args, message] of [
      [['show', '--json', '--bogus'], "unknown option '--bogus'"],
      [['show', '--json'], "missing required argument 'target'"],
      [['watch', '--json', '--once', '--poll-interval'], "option '--poll-interval <seconds>' argument missing"],
    ] as const) {
      const result = cooBounded(args);
      expect(result.status).toBe(2);
      expect(JSON.parse(result.stdout)).toEqual({ ok: false, error: { code: 'USAGE', message, where: null, findings: [] } });
      expect(result.stderr).toBe(`coo: USAGE: ${message}\n(run with --help for usage)\n`);
    }
  });
});

describe('a private key file others may read is said, and a public key given for the private one is refused', () => {
  it('a group- or world-readable key signs with a warning that says how to close it; a public key given for the private one is refused with one coded line, claiming and writing nothing', async () => {
    const world = await fresh();
    const ids = await queued(world);
    const before = headOf(world.gitdir);
    // The public key given for the private one: a mistake in the command line (exit 2), said as one.
    const pub = join(world.dir, 'coo.pub');
    writeFileSync(pub, `${formatPublicKeyLine(world.actors.coo.publicKey, 'coo.hermes')}\n`, { mode: 0o644 });
    expect(refusal(await startBounded([...watchArgs(world, pub, join(world.dir, 'state')), '--once'], env).ended)).toBe(`coo: USAGE: the key file ${pub} holds a public key: give the private key file (coo keygen writes it as ID.key beside ID.pub)`);
    await nothingClaimed(world, before, ids);
    const ceo = writeKey(world.dir, 'loose-ceo', world.actors.ceo);
    chmodSync(ceo, 0o640);
    const command = cooBounded(['command', '--ledger', world.gitdir, '--ceo-key', ceo, '--text', 'Fix add().', '--json']);
    expect(command.status).toBe(0);
    expect(JSON.parse(command.stdout)).toMatchObject({ commit: expect.stringMatching(/^[0-9a-f]{40}$/) });
    expect(command.stderr).toBe(`coo: warning: the key file ${ceo} is open to others (mode 0640): whoever may read it may sign as its actor; run chmod 600 ${ceo}\n`);
    // The owner's alone, the same key signs without a word.
    chmodSync(ceo, 0o600);
    const quiet = cooBounded(['command', '--ledger', world.gitdir, '--ceo-key', ceo, '--text', 'Fix add() again.']);
    expect(quiet.status).toBe(0);
    expect(quiet.stderr).not.toContain('open to others');
  });
});

describe('coo keygen writes whole files or says why not', () => {
  it('refuses an --out that is a file, or a key path that is a folder, with a coded line, and --force never writes through a link', () => {
    const keys = tempDir('keygen-');
    const file = join(keys, 'a-file');
    writeFileSync(file, 'not a folder\n');
    const intoFile = cooBounded(['keygen', '--actor', 'coo.hermes', '--out', file, '--json']);
    expect(intoFile.status).toBe(1);
    expect(JSON.parse(intoFile.stdout)).toMatchObject({ ok: false, error: { code: 'IO_ERROR' } });
    expect(intoFile.stderr).toBe(`coo: IO_ERROR: cannot write the key files in ${file} (EEXIST): give --out a folder this user may write, where coo.hermes.key and coo.hermes.pub are not folders\n`);
    mkdirSync(join(keys, 'coo.hermes.key'));
    expect(cooBounded(['keygen', '--actor', 'coo.hermes', '--out', keys, '--force']).stderr).toMatch(/^coo: IO_ERROR: cannot write the key files in .* \(EISDIR\)/);
    // A folder where the public key goes: --force refuses before it replaces the private key beside it.
    const pair = tempDir('keygen-pair-');
    expect(cooBounded(['keygen', '--actor', 'aa.x', '--out', pair]).status).toBe(0);
    const privateBefore = readFileSync(join(pair, 'aa.x.key'));
    rmSync(join(pair, 'aa.x.pub'));
    mkdirSync(join(pair, 'aa.x.pub'));
    expect(cooBounded(['keygen', '--actor', 'aa.x', '--out', pair, '--force']).stderr).toMatch(/^coo: IO_ERROR: cannot write the key files in .* \(EISDIR\)/);
    expect(readFileSync(join(pair, 'aa.x.key')).equals(privateBefore)).toBe(true);
    // A link where the key goes: --force replaces the link, and the place it pointed to gets no private key.
    const linked = tempDir('keygen-link-');
    const elsewhere = join(linked, 'shared-folder-file');
    symlinkSync(elsewhere, join(linked, 'ceo.key'));
    expect(cooBounded(['keygen', '--actor', 'ceo', '--out', linked, '--force']).status).toBe(0);
    expect(existsSync(elsewhere)).toBe(false);
    expect(lstatSync(join(linked, 'ceo.key')).isFile()).toBe(true);
    expect(lstatSync(join(linked, 'ceo.key')).mode & 0o777).toBe(0o600);
    expect(readdirSync(linked).sort()).toEqual(['ceo.key', 'ceo.pub']);
  });
});

describe('a path the file system refuses is a coded line, never an internal error', () => {
  it('a file given where a folder goes (schemas --out, demo --dir) is IO_ERROR naming the path, in JSON too', () => {
    const place = tempDir('paths-');
    const file = join(place, 'a-file');
    writeFileSync(file, 'not a folder\n');
    for (const [args, syscall, path, code] of [
      [['schemas', '--out', file], 'mkdir', file, 'EEXIST'],
      [['demo', '--dir', file], 'scandir', file, 'ENOTDIR'],
    ] as const) {
      const result = cooBounded([...args, '--json']);
      expect(result.status).toBe(1);
      const message = `cannot ${syscall} ${path} (${code}): check that the paths you gave exist, are folders or files as the verb's --help says, and that this user may write them`;
      expect(result.stderr).toBe(`coo: IO_ERROR: ${message}\n`);
      expect(JSON.parse(result.stdout)).toEqual({ ok: false, error: { code: 'IO_ERROR', message, where: null, findings: [] } });
    }
  });
});

describe('a write on a clone of a remote without --remote', () => {
  it('is refused (exit 2, nothing written): a kill switch, a CEO command or the MCP server on the clone alone would reach no runner', () => {
    const place = tempDir('clone-write-');
    const keys = join(place, 'keys');
    for (const actor of ['ceo', 'coo.hermes']) expect(cooBounded(['keygen', '--actor', actor, '--out', keys]).status).toBe(0);
    const origin = join(place, 'ledger.git');
    expect(cooBounded(['init', '--ledger', origin, '--ceo-key', join(keys, 'ceo.key'), '--actor', `coo.hermes=${join(keys, 'coo.hermes.pub')}`]).status).toBe(0);
    const clone = join(place, 'clone.git');
    expect(cooBounded(['clone', origin, clone, '--trust-root', join(keys, 'ceo.pub')]).status).toBe(0);
    const heads = (): string[] => [headOf(origin), headOf(clone)];
    const before = heads();
    const said = `is a clone of ${origin}: every write works through its remote (--remote ${origin}), never on the clone alone, where no runner working through the remote would ever see it (a kill switch, a revocation or a command only this copy holds) and the copy would fork from its remote; nothing was written`;
    const stop = cooBounded(['kill-switch', 'on', '--ledger', clone, '--key', join(keys, 'ceo.key'), '--reason', 'stop everything', '--json']);
    expect(stop.status).toBe(2);
    expect(JSON.parse(stop.stdout)).toEqual({ ok: false, error: { code: 'USAGE', message: `${clone} ${said}`, where: null, findings: [] } });
    const command = cooBounded(['command', '--ledger', clone, '--ceo-key', join(keys, 'ceo.key'), '--text', 'Halt.']);
    expect({ status: command.status, stderr: command.stderr }).toEqual({ status: 2, stderr: `coo: USAGE: ${clone} ${said}\n` });
    // The MCP server writes the agent's consults and acknowledgements: it refuses the clone alone too, before it serves.
    const served = cooBounded(['mcp', '--ledger', clone, '--key', join(keys, 'coo.hermes.key'), '--repo', place]);
    expect({ status: served.status, stderr: served.stderr }).toEqual({ status: 2, stderr: `coo: USAGE: ${clone} ${said.replace('every write works', 'coo mcp works')}\n` });
    expect(heads()).toEqual(before);
    // Through the remote, the same write lands on both.
    expect(cooBounded(['kill-switch', 'on', '--ledger', clone, '--key', join(keys, 'ceo.key'), '--reason', 'stop everything', '--remote', origin]).status).toBe(0);
    expect(headOf(origin)).not.toBe(before[0]);
    expect(headOf(clone)).toBe(headOf(origin));
  });
});

describe('a key revoked on the remote, run on a clone that has not fetched the change', () => {
  it('coo watch --remote refuses the revoked COO key at start (exit 2), from the remote\'s trust, not the stale clone\'s', () => {
    const place = tempDir('late-clone-');
    const keys = join(place, 'keys');
    const keyIds: Record<string, string> = {};
    for (const actor of ['ceo', 'coo.hermes', 'coo.next']) keyIds[actor] = (JSON.parse(cooBounded(['keygen', '--actor', actor, '--out', keys, '--json']).stdout) as { key_id: string }).key_id;
    const origin = join(place, 'ledger.git');
    expect(cooBounded(['init', '--ledger', origin, '--ceo-key', join(keys, 'ceo.key'), '--actor', `coo.hermes=${join(keys, 'coo.hermes.pub')}`]).status).toBe(0);
    const repo = join(place, 'repo');
    makeTargetRepo(repo);
    const [ceoDesk, lateRunner] = [join(place, 'ceo-desk.git'), join(place, 'late-runner.git')];
    for (const clone of [ceoDesk, lateRunner]) expect(cooBounded(['clone', origin, clone, '--trust-root', join(keys, 'ceo.pub')]).status).toBe(0);
    const asked = cooBounded(['consult', '--ledger', lateRunner, '--remote', origin, '--key', join(keys, 'coo.hermes.key'), '--to', 'aa.chatgpt', '--repo', repo, '--rev', 'HEAD', '--file', 'src/add.ts', '--prompt', 'Review add().', '--max-cost', '0.5']);
    expect(asked.status, asked.stderr).toBe(0);
    const messageId = asked.stdout.trim();
    // The CEO, at another desk, rotates the COO's key out and revokes it; the runner's clone has not fetched since.
    const registry = join(place, 'registry.yaml');
    writeFileSync(registry, git(['--git-dir', origin, 'show', 'main:trust/registry/000001.yaml']).replace(/^version:.*\n/m, ''));
    const revoked = cooBounded(['trust', '--ledger', ceoDesk, '--remote', origin, '--ceo-key', join(keys, 'ceo.key'), '--registry', registry, '--actor', `coo.hermes=${join(keys, 'coo.next.pub')}`, '--revoke', `${keyIds['coo.hermes']}=laptop stolen`]);
    expect(revoked.status, revoked.stderr).toBe(0);
    const before = headOf(origin);
    expect(headOf(lateRunner)).not.toBe(before);

    const watched = cooBounded(['watch', '--once', '--ledger', lateRunner, '--remote', origin, '--key', join(keys, 'coo.hermes.key'), '--repo', repo, '--state-dir', join(place, 'state')], { env: { OPENAI_API_KEY: 'sk-test-key' } });
    expect(refusal(watched)).toMatch(/^coo: RUNNER_CONFIG: .*coo\.hermes\.key \(SHA256:\S+\) is not the active COO's key: it is a key of coo\.hermes revoked at Ledger-Seq \d+ by trust\/registry\/000002\.yaml \("laptop stolen"\); give coo\.hermes's key/);
    expect(headOf(origin)).toBe(before);
    expect(JSON.parse(cooBounded(['show', messageId, '--ledger', origin, '--json']).stdout)).toMatchObject({ lane_state: 'queued' });
    // coo mcp --remote judges its key on the remote's head too: the key rotated in is taken, the revoked one refused.
    const mcpWith = (key: string): BoundedResult => cooBounded(['mcp', '--ledger', lateRunner, '--remote', origin, '--key', join(keys, key), '--repo', repo]);
    const served = mcpWith('coo.next.key');
    expect(served.status, served.stderr).toBe(0);
    expect(refusal(mcpWith('coo.hermes.key'))).toMatch(/^coo: RUNNER_CONFIG: .*coo\.hermes\.key \(SHA256:\S+\) is not the active COO's key/);
  });
});

describe('a COO key revoked while coo watch runs with it', () => {
  it('stops the runner at once with the coded line of a refused start (exit 2), claiming nothing more with it', async () => {
    const world = await fresh();
    const old = world.actors.coo;
    const watching = startBounded([...watchArgs(world, writeKey(world.dir, 'coo', old), join(world.dir, 'state'))], env);
    onTestFinished(() => void watching.child.kill('SIGKILL'));
    await until('the runner to watch', () => watching.stderr().includes('coo watch: watching '));
    const rotated = generatePrivateKey('coo.hermes');
    const registry = (await world.ledger.state()).registry!.doc;
    await appendTrustVersion(
      world.ledger,
      {
        role: 'registry',
        document: {
          ...registry,
          version: undefined,
          actors: registry.actors.map((actor) => (actor.id === 'coo.hermes' ? { ...actor, keys: [{ key_id: rotated.publicKey.keyId, public_key: formatPublicKeyLine(rotated.publicKey) }] } : actor)),
          revoked_keys: [{ key_id: old.publicKey.keyId, reason: 'laptop stolen' }],
        },
      },
      world.actors.ceo,
      new Date(),
    );
    const revokedAt = headOf(world.gitdir);
    const ended = await watching.ended;
    expect(ended.status).toBe(2);
    expect(ended.stderr.trimEnd().split('\n').at(-1)).toMatch(/^coo: RUNNER_CONFIG: the runner's key \(SHA256:\S+\) is not the active COO's key: it is a key of coo\.hermes revoked at Ledger-Seq \d+ by trust\/registry\/000002\.yaml \("laptop stolen"\); give coo\.hermes's key/);
    expect(headOf(world.gitdir)).toBe(revokedAt);
  });
});

describe('one --state-dir given to the runners of two ledgers', () => {
  it('is said as a state folder of another ledger (exit 2, nothing claimed), never as a fork of this one', async () => {
    const [first, second] = [await fresh(), await fresh()];
    const shared = join(first.dir, 'shared-state');
    const ranFirst = await startBounded([...watchArgs(first, writeKey(first.dir, 'coo', first.actors.coo), shared), '--once'], env).ended;
    expect(ranFirst.status, ranFirst.stderr).toBe(0);
    const ids = await queued(second);
    const before = headOf(second.gitdir);
    const ran = await startBounded([...watchArgs(second, writeKey(second.dir, 'coo', second.actors.coo), shared), '--once'], env).ended;
    expect(ran.status).toBe(2);
    expect(ran.stderr.trimEnd().split('\n').at(-1)).toBe(`coo: RUNNER_CONFIG: the state folder ${shared} holds what a runner saw of another ledger (${first.gitdir}), not of ${second.gitdir}: give each ledger a --state-dir of its own (the default is one per ledger); nothing was claimed`);
    await nothingClaimed(second, before, ids);
  });
});

