import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { enqueueDispatch } from '../../src/dispatch/enqueue.js';
import { requireBubblewrap } from '../helpers/bubblewrap.js';
import { COO } from '../helpers/cli.js';
import { cooBounded, headOf, httpOracle, refusal, startBounded, watchArgs, writeKey } from '../helpers/damage.js';
import { FAKE_ORACLE, worlds } from '../helpers/lane.js';
import { laneState, nothingClaimed, queued } from '../helpers/startup.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * A careless operator, round 19: a provider key pasted with its quotes, and a flag given the empty
 * value of an unset shell variable. Each is found before anything is claimed or paid for, and said
 * as one coded line (exit 2) that says what to do.
 */

const dir = tempDir('operator-redteam-19-');
const fresh = worlds(join(dir, 'worlds'));
const env = { OPENAI_API_KEY: 'sk-test-key' };

describe('a provider key pasted with the quotes of a shell or .env line', () => {
  it('is refused at start by coo watch and coo mcp --run (ORACLE_CONFIG, exit 2) for every lane it serves, the value never shown; nothing is claimed or paid', async () => {
    const world = await fresh();
    const ids = await queued(world);
    const before = headOf(world.gitdir);
    const key = writeKey(world.dir, 'coo', world.actors.coo);
    const state = join(world.dir, 'state');
    const watch = [...watchArgs(world, key, state), '--once', '--isolation', 'none'];
    const mcp = ['mcp', '--run', '--ledger', world.gitdir, '--key', key, '--repo', world.target, '--state-dir', state, '--oracle-base-url', `${world.server.url}/v1`, '--isolation', 'none'];
    for (const pasted of ['"sk-quoted-value"', "'sk-quoted-value'", '`sk-quoted-value`', 'sk-quoted-value"']) {
      for (const args of [watch, mcp]) {
        const line = refusal(await startBounded(args, { OPENAI_API_KEY: pasted }).ended);
        expect(line, `${args[0]} ${pasted}`).toMatch(
          /^coo: ORACLE_CONFIG: no lane can run here, so nothing is claimed: consults to aa\.chatgpt: OPENAI_API_KEY holds a quote mark, which no provider key has \(pasted with the quotes of a shell or \.env line\?\): set it to the key alone, without quotes; .*dispatches to ea\.codex: OPENAI_API_KEY holds a quote mark/,
        );
        expect(line).not.toContain('sk-quoted-value');
      }
    }
    await nothingClaimed(world, before, ids);
  });
});

describe('a forge token pasted with its quotes, or with its line end', () => {
  it('is no token: an --open-pr dispatch waits, queued and unclaimed, said once at start, never claimed, run and refused at its push; the token never shown', async () => {
    const world = await fresh();
    const { messageId } = await enqueueDispatch({ ledger: world.ledger, key: world.actors.coo, now: new Date(), target: 'ea.codex', repo: world.target, task: 'Fix add().', scope: ['src/**'], accept: ['add works'], verify: ['true'], timeoutSeconds: 60, maxRuntimeSeconds: 60, openPr: 'acme/work' });
    const agent = join(world.dir, 'agent.sh');
    writeFileSync(agent, '#!/bin/sh\nexit 1\n', { mode: 0o755 });
    const args = [...watchArgs(world, writeKey(world.dir, 'coo', world.actors.coo), join(world.dir, 'state')), '--once', '--isolation', 'none', '--ea-command', agent];
    for (const token of ['"ghp_quotedtoken0123"', 'ghp_quotedtoken0123\n']) {
      const ran = await startBounded(args, { ...env, GITHUB_TOKEN: token }).ended;
      expect(ran.status, ran.stderr).toBe(0);
      expect(laneState(world, messageId)).toBe('queued');
      expect(ran.stderr).toMatch(/^coo watch: --open-pr dispatches wait, queued and unclaimed: the forge token is unusable: GITHUB_TOKEN holds a (quote mark|space, a line end)/m);
      expect(ran.stderr).toContain(`${messageId} asks for a pull request on acme/work and this runner has no forge token: it stays queued, unclaimed`);
      expect(ran.stderr).not.toContain('ghp_quotedtoken0123');
    }
  });
});

describe('a flag given an empty value on the command line (a shell variable unset or empty)', () => {
  const said = (flag: string): string => `coo: USAGE: ${flag} was given an empty value (a shell variable that is unset or empty?): give it a value, or leave the flag out for its default; nothing was done`;

  it('is USAGE at start from coo watch and coo mcp --run (exit 2), never the current folder taken for the state folder or an executable; nothing is claimed or written', async () => {
    const world = await fresh();
    const ids = await queued(world);
    const before = headOf(world.gitdir);
    const key = writeKey(world.dir, 'coo', world.actors.coo);
    const here = join(world.dir, 'here');
    mkdirSync(here);
    const watch = ['watch', '--ledger', world.gitdir, '--key', key, '--repo', world.target, '--oracle-base-url', `${world.server.url}/v1`, '--isolation', 'none', '--once'];
    const mcp = ['mcp', '--run', '--ledger', world.gitdir, '--key', key, '--repo', world.target, '--oracle-base-url', `${world.server.url}/v1`, '--isolation', 'none'];
    const cases: Array<[readonly string[], string]> = [
      // Resolved as given, '' was the folder coo ran in: the runner held it as its state folder and made its sandboxes there.
      [[...watch, '--state-dir', ''], '--state-dir'],
      [[...mcp, '--state-dir='], '--state-dir'],
      [[...watch, '--ea-command', ''], '--ea-command'],
      [[...watch, '--oracle-command', ''], '--oracle-command'],
      [[...watch, '--oracle-arg', '--verbose', '--oracle-arg', ''], '--oracle-arg'],
      [[...watch, '--remote', ''], '--remote'],
      [[...watch, '--state-dir', join(world.dir, 'state'), '--ledger', ''], '--ledger'],
    ];
    for (const [args, flag] of cases) {
      expect(refusal(await startBounded(args, env, here).ended), args.join(' ')).toBe(said(flag));
    }
    const json = await startBounded([...watch, '--state-dir', '', '--json'], env, here).ended;
    expect(json.status).toBe(2);
    expect(JSON.parse(json.stdout)).toEqual({ ok: false, error: { code: 'USAGE', message: said('--state-dir').replace(/^coo: USAGE: /, ''), where: null, findings: [] } });
    expect(readdirSync(here)).toEqual([]);
    await nothingClaimed(world, before, ids);
  });

  it("coo verify --state-dir '' and coo clone '' DIR are refused, never a checkpoint written in the current folder or a clone tried; the same variable empty in the environment still counts as unset", async () => {
    const world = await fresh();
    const here = join(world.dir, 'here');
    mkdirSync(here);
    expect(refusal(cooBounded(['verify', '--ledger', world.gitdir, '--state-dir', ''], { cwd: here }))).toBe(said('--state-dir'));
    expect(readdirSync(here)).toEqual([]);
    const clone = join(world.dir, 'clone.git');
    expect(refusal(cooBounded(['clone', '', clone, '--trust-root', world.actors.ceo.publicKey.keyId], { cwd: here }))).toBe(
      'coo: USAGE: the argument <url> was given empty (a shell variable that is unset or empty?): give it a value; nothing was done',
    );
    expect(readdirSync(world.dir)).not.toContain('clone.git');
    // $COO_LEDGER set but empty is no --ledger, as before: said as the missing flag, not as an empty one.
    expect(refusal(cooBounded(['verify'], { cwd: here, env: { COO_LEDGER: '' } }))).toBe('coo: USAGE: --ledger is required (the ledger path or $COO_LEDGER)');
    const verified = cooBounded(['verify', '--ledger', world.gitdir, '--state-dir', join(world.dir, 'audit')], { cwd: here });
    expect(verified.status, verified.stderr).toBe(0);
    expect(readdirSync(here)).toEqual([]);
  });
});

describe("the ledger's file system filling up while the runner calls the model", () => {
  it('keeps the paid result, writes nothing half, says to run again once there is room; run again, the receipt lands without a second call', async () => {
    const world = await fresh();
    const messageId = (await world.consult()).messageId;
    const key = writeKey(world.dir, 'coo', world.actors.coo);
    // The ledger on a small file system of its own (bubblewrap: a 4 MiB tmpfs); Oracle fills it while it runs.
    const full = join(world.dir, 'full');
    mkdirSync(full);
    const copy = join(full, 'ledger.git');
    const oracle = join(world.dir, 'oracle-fill.sh');
    writeFileSync(oracle, `#!/bin/sh\nhead -c 100000000 /dev/zero > "${full}/fill" 2>/dev/null\nexec "${process.execPath}" "${FAKE_ORACLE}" --fake-mode http "$@"\n`, { mode: 0o755 });
    const state = join(world.dir, 'state');
    const watch = (oracleCommand: string): string => `"${process.execPath}" "${COO}" watch --ledger "${copy}" --key "${key}" --repo "${world.target}" --state-dir "${state}" --oracle-command "${oracleCommand}" --oracle-base-url "${world.server.url}/v1" --isolation none --once`;
    const script = [
      `cp -a "${world.gitdir}" "${copy}"`,
      `${watch(oracle)} 2>"${world.dir}/first.err"; echo "first=$?"`,
      `echo "heads=$(git --git-dir "${copy}" log --format=%s main | head -2 | tr '\\n' '|')"`,
      `rm -f "${full}/fill"`,
      `"${process.execPath}" "${COO}" verify --ledger "${copy}" --no-checkpoint >/dev/null; echo "verify=$?"`,
      `${watch(httpOracle(world.dir))} 2>"${world.dir}/second.err"; echo "second=$?"`,
      `git clone -q --bare "${copy}" "${world.dir}/after.git"`,
    ].join('; ');
    const child = spawn(requireBubblewrap('a ledger on a full file system'), ['--bind', '/', '/', '--dev', '/dev', '--proc', '/proc', '--size', String(4 * 1024 * 1024), '--tmpfs', full, '--', 'sh', '-c', script], {
      env: { ...process.env, ...env, COO_LEDGER: '', COO_KEY: '', XDG_STATE_HOME: join(world.dir, 'xdg') },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString('utf8')));
    // Asynchronously: the model answers from this process.
    await new Promise((resolve) => child.on('close', resolve));
    const first = readFileSync(join(world.dir, 'first.err'), 'utf8');
    expect(first).toContain(`coo watch: KEPT a paid result for ${messageId} attempt 1: the ledger refused its receipt (IO_ERROR: cannot create ${copy}/refs/heads/main.lock: ENOSPC`);
    expect(first).toContain('once what refused it is put right (room on the disk, a ledger this user may write, the COO\'s key), run the runner again on this state folder: it lands the kept result without calling the model again');
    expect(first).not.toMatch(/\n\s+at /);
    // A one-shot pass that kept a paid result did not go well: its status says so, with where the result is.
    expect(out).toContain('first=1');
    expect(first).toContain(`coo: RESULT_KEPT: 1 paid result(s) kept unlanded because the ledger refused their receipts (above): ${join(state, 'kept-results')}`);
    // The claim landed before the call; the receipt did not, and nothing of it was written half.
    expect(out).toContain(`heads=claim ${messageId} attempt 1|aa_consult ${messageId}`);
    expect(out).toContain('verify=0');
    expect(out).toContain('second=0');
    expect(readFileSync(join(world.dir, 'second.err'), 'utf8')).toContain(`coo watch: receipt ${messageId} attempt 1: succeeded`);
    expect(world.server.requests).toHaveLength(1);
    expect(existsSync(join(state, 'kept-results'))).toBe(true);
    expect(readdirSync(join(state, 'kept-results'))).toEqual([]);
    const landed = cooBounded(['show', messageId, '--ledger', join(world.dir, 'after.git'), '--json']);
    expect((JSON.parse(landed.stdout) as { lane_state: string }).lane_state).toBe('succeeded');
  });
});
