import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { requireBubblewrap } from '../helpers/bubblewrap.js';
import { COO } from '../helpers/cli.js';
import { addMalformedTree, cooBounded, headOf, HUNG_MS, refusal, writeKey } from '../helpers/damage.js';
import { worlds } from '../helpers/lane.js';
import { agentScript, dispatchTo, hostilePlaces, receiptsFor, watchOnce } from '../helpers/hostile-agent.js';
import { laneState } from '../helpers/startup.js';
import { fixtureFiles } from '../helpers/stock.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * A careless operator, round 26: a program built for another machine given as the executor or as
 * Oracle (a macOS or Windows build, an ELF binary of another architecture), or a download of it that
 * failed (an empty file, the web page the server sent); a path given with the
 * line end a `$(cat file)` or a copied line kept; `coo mcp` serving without a runner on a ledger it
 * cannot write, or one whose history holds an invalid commit. Each is said at start, in one coded line, before anything is claimed or written.
 */

const dir = tempDir('operator-redteam-26-');

/** The first bytes of a program built for another machine than this one (enough for the kernel to refuse it, and for the runner to tell which), or of a download that failed. */
function foreignBinaries(): Array<[string, Buffer, RegExp]> {
  const elf = (machine: number): Buffer => {
    const header = Buffer.alloc(64);
    header.write('\x7fELF', 0, 'latin1');
    header[4] = 2; // 64-bit
    header[5] = 1; // little-endian
    header[6] = 1;
    header.writeUInt16LE(2, 16); // an executable
    header.writeUInt16LE(machine, 18);
    return header;
  };
  // Another architecture than this machine's: aarch64 on x86-64, x86-64 elsewhere.
  const other = process.arch === 'x64' ? 183 : 62;
  const macho = Buffer.concat([Buffer.from([0xcf, 0xfa, 0xed, 0xfe, 0x0c, 0x00, 0x00, 0x01]), Buffer.alloc(56)]);
  // `MZ`, and at the offset at 0x3c the PE header.
  const pe = Buffer.alloc(128);
  pe.write('MZ', 0, 'latin1');
  pe.writeUInt32LE(64, 0x3c);
  pe.write('PE\0\0', 64, 'latin1');
  return [
    ['an ELF binary of another architecture', elf(other), /is an ELF program for another machine \(\S+\), not this one's \(\S+\)/],
    ['a macOS build (Mach-O)', macho, /is a macOS program \(Mach-O\)/],
    ['a Windows build (an .exe)', pe, /is a Windows program \(\.exe\)/],
    // A download that failed: nothing, or the web page the server sent in the program's place.
    ['an empty file', Buffer.alloc(0), /is empty, no program/],
    ['a web page', Buffer.from('<!DOCTYPE html>\n<html><body>404 Not Found</body></html>\n'), /is a web page \(HTML\), no program/],
  ];
}

describe('an --ea-command or --oracle-command built for another machine, or a download of it that failed', () => {
  const places = hostilePlaces(join(dir, 'places'), 'foreign');

  it('leaves the dispatch queued and unclaimed, said at start, never claimed and receipted as the work\'s failure; Oracle\'s command is judged by the same rule', async () => {
    const place = await places('start');
    const { messageId } = await dispatchTo(place, 'foreign-start');
    const before = headOf(place.world.gitdir);
    for (const [what, bytes, said] of foreignBinaries()) {
      const agent = join(place.world.dir, `agent-${what.replace(/\W+/g, '-')}`);
      writeFileSync(agent, bytes, { mode: 0o755 });
      const run = watchOnce(place, agent, { isolation: 'none' });
      expect(run.status, `${what}: ${run.stderr}`).toBe(0);
      expect(run.stderr, what).toMatch(new RegExp(`dispatches to ea\\.codex wait, queued and unclaimed: .*${said.source}`));
      expect(run.stdout, what).not.toContain('"claimed"');
      expect(laneState(place.world, messageId), what).toBe('queued');
      expect(await receiptsFor(place, messageId), what).toEqual([]);
    }
    expect(headOf(place.world.gitdir)).toBe(before);
    const [, macho] = foreignBinaries()[1]!;
    const oracle = join(place.world.dir, 'oracle-macos');
    writeFileSync(oracle, macho, { mode: 0o755 });
    const foreign = join(place.world.dir, 'agent-macos');
    writeFileSync(foreign, macho, { mode: 0o755 });
    const refused = refusal(cooBounded(['watch', '--once', '--ledger', place.world.gitdir, '--key', place.keyFile, '--repo', place.repo, '--state-dir', place.stateDir, '--isolation', 'none', '--oracle-command', oracle, '--ea-command', foreign], { env: { OPENAI_API_KEY: 'sk-test-key' } }));
    expect(refused).toMatch(/^coo: ORACLE_CONFIG: no lane can run here, so nothing is claimed: consults to aa\.chatgpt: Oracle cannot be started: \S+oracle-macos is a macOS program \(Mach-O\)/);
    expect(headOf(place.world.gitdir)).toBe(before);
    // A program that can start is run as ever.
    const run = watchOnce(place, agentScript(place.world.dir, 'true'), { isolation: 'none' });
    expect(run.stdout, run.stderr).toContain('"claimed"');
  });
});

describe('a path given with a line end at its end', () => {
  const fresh = worlds(join(dir, 'worlds'));

  it('is refused in one coded line that shows the line end as \\u000a, never a line split in two with the code on one half; in JSON the path is as given; nothing is written', async () => {
    const world = await fresh();
    const key = writeKey(world.dir, 'coo', world.actors.coo);
    const envelope = join(world.dir, 'envelope.yaml');
    const id = 'msg_01M8NQFJ01J7CG66HWNDDJ8600';
    writeFileSync(envelope, Object.entries(fixtureFiles(id, 'line-end'))[0]![1]);
    const before = headOf(world.gitdir);
    const cases: Array<[string[], RegExp]> = [
      [['append', '--ledger', `${world.gitdir}\n`, '--key', key, envelope], /^coo: LEDGER_NOT_FOUND: \S+ledger\.git\\u000a is not a ledger/],
      [['log', '--ledger', `${world.gitdir}\r\n`], /^coo: LEDGER_NOT_FOUND: \S+ledger\.git\\u000d\\u000a is not a ledger/],
      [['append', '--ledger', world.gitdir, '--key', `${key}\n`, envelope], /^coo: USAGE: cannot read key file \S+coo\.key\\u000a \(ENOENT\)/],
      [['watch', '--once', '--ledger', world.gitdir, '--key', `${key}\n`, '--repo', world.target, '--state-dir', join(world.dir, 'state')], /^coo: USAGE: cannot read key file \S+coo\.key\\u000a \(ENOENT\)/],
    ];
    for (const [args, said] of cases) {
      expect(refusal(cooBounded(args)), args.join(' ')).toMatch(said);
      const asJson = cooBounded([...args, '--json']);
      expect(asJson.status).toBe(2);
      const error = (JSON.parse(asJson.stdout) as { error: { code: string; message: string } }).error;
      expect(error.code).toBe(said.source.match(/coo: (\w+):/)![1]);
      expect(error.message).toMatch(/\n /);
    }
    expect(headOf(world.gitdir)).toBe(before);
  });
});

describe('coo verify given a file as its --state-dir', () => {
  const fresh = worlds(join(dir, 'verify-worlds'));

  it('is refused as the path it is (USAGE, exit 2), at the file itself or at a folder above the one named, never as a checkpoint to put back; a folder still to be made and --no-checkpoint still verify', async () => {
    const world = await fresh();
    const file = join(world.dir, 'not-a-folder');
    writeFileSync(file, 'x');
    for (const stateDir of [file, join(file, 'verified')]) {
      expect(refusal(cooBounded(['verify', '--ledger', world.gitdir, '--state-dir', stateDir])), stateDir).toMatch(/^coo: USAGE: --state-dir \S+: \S+not-a-folder is not a folder: give the folder where coo verify keeps the head it last verified/);
      const asJson = cooBounded(['verify', '--ledger', world.gitdir, '--state-dir', stateDir, '--json']);
      expect(asJson.status).toBe(2);
      expect((JSON.parse(asJson.stdout) as { error: { code: string } }).error.code).toBe('USAGE');
    }
    expect(cooBounded(['verify', '--ledger', world.gitdir, '--state-dir', file, '--no-checkpoint']).status).toBe(0);
    expect(cooBounded(['verify', '--ledger', world.gitdir, '--state-dir', join(world.dir, 'to-be-made', 'verified')]).status).toBe(0);
  });
});

describe('coo mcp serving without a runner, on a ledger it cannot write', () => {
  const fresh = worlds(join(dir, 'mcp-worlds'));

  it('is refused at start (RUNNER_CONFIG, exit 2) naming the folder, as coo mcp --run and coo watch are, never a server whose every write fails after it started; writable, it serves', async () => {
    const world = await fresh();
    const key = writeKey(world.dir, 'coo', world.actors.coo);
    const before = headOf(world.gitdir);
    const serve = (extra: string[], readOnly: boolean | string) => {
      // The ledger (or one folder of it) mounted read-only for this one command (bubblewrap: a read-only bind), as on a read-only volume.
      const bound = readOnly === true ? world.gitdir : readOnly === false ? null : join(world.gitdir, readOnly);
      const mount = ['--bind', '/', '/', '--dev', '/dev', '--proc', '/proc', ...(bound === null ? [] : ['--ro-bind', bound, bound]), '--'];
      const args = ['mcp', '--ledger', world.gitdir, '--key', key, '--repo', world.target, ...extra];
      // Standard input ends at once: a server that started says it serves, and ends with status 0.
      const ran = spawnSync(requireBubblewrap('a read-only ledger'), [...mount, process.execPath, COO, ...args], {
        env: { ...process.env, OPENAI_API_KEY: 'sk-test-key', COO_LEDGER: '', COO_KEY: '', XDG_STATE_HOME: join(world.dir, 'xdg') },
        encoding: 'utf8',
        input: '',
        timeout: HUNG_MS,
      });
      return { status: ran.status, stdout: ran.stdout, stderr: ran.stderr };
    };
    expect(refusal(serve([], true))).toBe(`coo: RUNNER_CONFIG: cannot write in ${world.gitdir}/objects, the ledger's folder of objects (EROFS): the server commits what the agent asks for in the ledger; run it where the ledger is writable (a clone of it with --remote, coo clone)`);
    // With a runner, the runner's own check says it, as before.
    expect(refusal(serve(['--run', '--isolation', 'none', '--state-dir', join(world.dir, 'state')], true))).toMatch(/^coo: RUNNER_CONFIG: cannot write in \S+\/coo\/runners, the ledger's folder of runners \(EROFS\)/);
    // Its folder of branches alone read-only: every commit moves main through a lock file there.
    expect(refusal(serve([], 'refs'))).toBe(`coo: RUNNER_CONFIG: cannot write in ${world.gitdir}/refs/heads, the ledger's folder of branches (EROFS): the server commits what the agent asks for in the ledger; run it where the ledger is writable (a clone of it with --remote, coo clone)`);
    expect(refusal(serve(['--run', '--isolation', 'none', '--state-dir', join(world.dir, 'state')], 'refs'))).toMatch(/^coo: RUNNER_CONFIG: cannot write in \S+\/refs\/heads, the ledger's folder of branches \(EROFS\): the runner commits its claims and receipts/);
    expect(headOf(world.gitdir)).toBe(before);
    const served = serve([], false);
    expect({ status: served.status, stderr: served.stderr }).toEqual({ status: 0, stderr: 'coo mcp: serving without a runner (run coo watch beside it) on stdio\n' });
  });
});

describe('coo mcp serving without a runner, on a ledger whose history holds an invalid commit', () => {
  const fresh = worlds(join(dir, 'damaged-worlds'));

  it('is refused at start with the line coo watch says (exit 3), never a server started on a head no writer may build on', async () => {
    const world = await fresh();
    const key = writeKey(world.dir, 'coo', world.actors.coo);
    addMalformedTree(world.gitdir, 1, 1);
    const before = headOf(world.gitdir);
    const watch = cooBounded(['watch', '--once', '--ledger', world.gitdir, '--key', key, '--repo', world.target, '--state-dir', join(world.dir, 'state'), '--isolation', 'none'], { env: { OPENAI_API_KEY: 'sk-test-key' } });
    const said = watch.stderr;
    expect({ status: watch.status, stdout: watch.stdout }).toEqual({ status: 3, stdout: '' });
    expect(said).toMatch(/^coo: COMMIT_UNSIGNED: the ledger's history holds an invalid commit [0-9a-f]{40} .*: nothing acts on it or builds on it; run coo verify\n$/);
    // Standard input ends at once: a server that started would say it serves, and end with status 0.
    const served = cooBounded(['mcp', '--ledger', world.gitdir, '--key', key, '--repo', world.target]);
    expect({ status: served.status, stdout: served.stdout, stderr: served.stderr }).toEqual({ status: 3, stdout: '', stderr: said });
    expect(headOf(world.gitdir)).toBe(before);
  });
});
