import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { cooBounded, headOf, httpOracle, startBounded, watchArgs, writeKey, type BoundedResult } from '../helpers/damage.js';
import { worlds, type World } from '../helpers/lane.js';
import { tempDir } from '../helpers/tmp.js';

const dir = tempDir();
const fresh = worlds(dir);
const env = { OPENAI_API_KEY: 'sk-test-key' };

/** `coo watch --once`, asynchronously: the runner's model is a server in this process. */
function watchOnce(world: World, oracle: string, extraEnv: NodeJS.ProcessEnv = {}): Promise<BoundedResult> {
  return startBounded([...watchArgs(world, writeKey(world.dir, 'coo', world.actors.coo), join(world.dir, 'watch-state'), oracle), '--once'], { ...env, ...extraEnv }).ended;
}

function laneState(world: World, messageId: string): string {
  return (JSON.parse(cooBounded(['show', messageId, '--ledger', world.gitdir, '--json']).stdout) as { lane_state: string }).lane_state;
}

describe('coo watch with an Oracle that cannot be started', () => {
  it('exits 2 with one line before claiming anything when the command is missing, not executable or not on PATH; the consult stays queued and completes once Oracle is back', async () => {
    const world = await fresh();
    const { messageId } = await world.consult();
    const plain = join(world.dir, 'oracle-not-executable.sh');
    writeFileSync(plain, '#!/bin/sh\nexit 0\n', { mode: 0o644 });
    const before = headOf(world.gitdir);
    for (const [oracle, says] of [
      [join(world.dir, 'no-such-oracle'), 'no such file'],
      [plain, 'is not executable'],
      ['no-such-oracle-on-path', 'no executable of that name on PATH'],
    ] as const) {
      const result = await watchOnce(world, oracle);
      expect({ oracle, status: result.status }).toEqual({ oracle, status: 2 });
      expect(result.stderr.trimEnd().split('\n')).toEqual([expect.stringMatching(new RegExp(`^coo: ORACLE_CONFIG: --oracle-command ${oracle}.*${says}`))]);
    }
    expect(headOf(world.gitdir)).toBe(before);
    expect(laneState(world, messageId)).toBe('queued');
    expect((await watchOnce(world, httpOracle(world.dir))).status).toBe(0);
    expect(laneState(world, messageId)).toBe('succeeded');
    expect(world.server.requests).toHaveLength(1);
  });

  it('exits 2 with one line before claiming anything when bubblewrap cannot start Oracle', async () => {
    const world = await fresh();
    const { messageId } = await world.consult();
    const bin = join(world.dir, 'bin');
    mkdirSync(bin);
    writeFileSync(join(bin, 'bwrap'), '#!/bin/sh\necho "bwrap: No permissions to create new namespace" >&2\nexit 1\n', { mode: 0o755 });
    const before = headOf(world.gitdir);
    const result = await watchOnce(world, httpOracle(world.dir), { PATH: `${bin}:${process.env['PATH'] ?? ''}` });
    expect(result.status).toBe(2);
    expect(result.stderr.trimEnd().split('\n')).toEqual([expect.stringMatching(/^coo: SANDBOX_UNAVAILABLE: bubblewrap cannot start .*No permissions to create new namespace.*--isolation none to run without it$/)]);
    expect(headOf(world.gitdir)).toBe(before);
    expect(laneState(world, messageId)).toBe('queued');
  });
});

describe('coo watch on a ledger that is also pushed to a backup', () => {
  it('runs on its own: a coo init ledger with an origin added by git remote add is not a clone, and its consult is answered', async () => {
    const world = await fresh();
    const { messageId } = await world.consult();
    const backup = join(world.dir, 'backup.git');
    execFileSync('git', ['init', '-q', '--bare', backup]);
    execFileSync('git', ['--git-dir', world.gitdir, 'remote', 'add', 'origin', backup]);
    execFileSync('git', ['--git-dir', world.gitdir, 'push', '-q', 'origin', 'main']);
    const result = await watchOnce(world, httpOracle(world.dir));
    expect({ status: result.status, stderr: result.stderr }).toMatchObject({ status: 0 });
    expect(laneState(world, messageId)).toBe('succeeded');
    expect(world.server.requests).toHaveLength(1);
  });
});

describe('relative paths', () => {
  it('work in every verb: keys, ledger, repository, state folders, Oracle command and output files, from the command line and from the environment', async () => {
    const world = await fresh();
    const cwd = join(world.dir, 'ops');
    mkdirSync(cwd);
    const here = (args: readonly string[], extra: NodeJS.ProcessEnv = {}): BoundedResult => cooBounded(args, { cwd, env: extra });
    const ok = (args: readonly string[], extra: NodeJS.ProcessEnv = {}): string => {
      const result = here(args, extra);
      expect({ args, status: result.status, stderr: result.stderr }).toMatchObject({ args, status: 0 });
      return result.stdout;
    };
    ok(['keygen', '--actor', 'ceo', '--out', 'keys']);
    ok(['keygen', '--actor', 'coo.hermes', '--out', 'keys']);
    ok(['init', '--ledger', 'ledger.git', '--ceo-key', 'keys/ceo.key', '--actor', 'coo.hermes=keys/coo.hermes.pub']);
    const repo = relative(cwd, world.target);
    writeFileSync(join(cwd, 'question.txt'), 'Is add() correct for NaN?\n');
    httpOracle(cwd);
    const consult = (key: string): string =>
      ok(['consult', '--ledger', 'ledger.git', '--key', 'keys/coo.hermes.key', '--to', 'aa.chatgpt', '--repo', repo, '--file', 'src/add.ts', '--prompt-file', 'question.txt', '--max-cost', '0.5', '--idempotency-key', key]).trim();
    for (const isolation of ['none', 'auto']) {
      const messageId = consult(`relative-${isolation}`);
      const args = ['watch', '--once', '--ledger', 'ledger.git', '--key', 'keys/coo.hermes.key', '--repo', repo, '--state-dir', 'state', '--oracle-command', './oracle-http.sh', '--oracle-base-url', `${world.server.url}/v1`, '--isolation', isolation];
      const child = startBounded(args, { ...env }, cwd);
      const ran = await child.ended;
      expect({ isolation, status: ran.status, stderr: ran.stderr }).toMatchObject({ isolation, status: 0 });
      expect(JSON.parse(ok(['show', messageId, '--ledger', 'ledger.git', '--json']))).toMatchObject({ lane_state: 'succeeded' });
    }
    // One model call for each consult: nothing was paid for twice.
    expect(world.server.requests).toHaveLength(2);
    ok(['verify', '--ledger', 'ledger.git', '--state-dir', 'audit', '--trust-root', 'keys/ceo.pub']);
    ok(['verify'], { COO_LEDGER: 'ledger.git', XDG_STATE_HOME: 'xdg' });
    ok(['log', '-n', '2'], { COO_LEDGER: 'ledger.git' });
    ok(['allowed-signers', '--ledger', 'ledger.git']);
    ok(['report', '--ledger', 'ledger.git', '--html', 'report.html']);
    expect(existsSync(join(cwd, 'report.html'))).toBe(true);
    ok(['schemas', '--out', 'schemas']);
    ok(['kill-switch', 'on', '--reason', 'relative paths'], { COO_LEDGER: 'ledger.git', COO_KEY: 'keys/ceo.key' });
  });
});
